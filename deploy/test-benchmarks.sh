#!/usr/bin/env bash
# Every benchmark, run with its smallest parameters, so that a default
# changed elsewhere (a limit, a flag, a file) cannot silently break one
# whose figures docs/benchmarks.md quotes: each must end with status 0.
# The figures themselves mean nothing at these sizes. (bench-runtime-vs.sh
# is left out: it builds another revision of the whole tree first; so is
# bench-coverage.sh's baseline, for the same reason.) Each takes seconds:
# the time of each is printed, so one that grows is seen.
#
#   deploy/test-benchmarks.sh [NAME...]   (default: all of them)
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
declare -A small=(
  [agent]="50 2"
  [clock]="1"
  [coverage]="5"
  [dev-upload]="4000 2 4096"
  [ingest]="2 1,4 16"
  [ingest-defences]="100 1 4"
  [k-fleet]="50 3 2"
  [process]="2"
  [publish]="1000"
  [record]="1 200"
  [runtime]="1"
  [scale-out]=""
  [stacks]="3 2"
  [stacks-answer]="2000 2 2"
  [stacks-page]="2000 3"
)
# What a benchmark's smallest run needs beyond its arguments.
declare -A env_of=(
  [coverage]="BASELINE="
  [ingest]="ROUNDS=1"
  [scale-out]="SHARDS=1"
)
names=("$@")
((${#names[@]})) || names=(agent clock coverage dev-upload ingest ingest-defences k-fleet process
  publish record runtime scale-out stacks stacks-answer stacks-page)
failed=()
for name in "${names[@]}"; do
  [[ -v "small[$name]" ]] || { echo "test-benchmarks: no benchmark named $name" >&2; exit 2; }
  start=$(date +%s)
  log=$(mktemp)
  # shellcheck disable=SC2086
  if env FIELDPROF_BENCH_SMOKE=1 SERIES=0 BATCHES=100 CONNECTIONS=8 ${env_of[$name]:-} \
    "./deploy/bench-$name.sh" ${small[$name]} >"$log" 2>&1; then
    echo "bench-$name ${small[$name]}: ok ($(($(date +%s) - start)) s)"
  else
    echo "bench-$name ${small[$name]}: FAILED ($(($(date +%s) - start)) s); its last lines:"
    tail -5 "$log" | sed 's/^/    /'
    failed+=("$name")
  fi
  rm -f "$log"
done
((${#failed[@]} == 0)) || { echo "test-benchmarks: failed: ${failed[*]}" >&2; exit 1; }
