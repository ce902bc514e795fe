#!/usr/bin/env bash
# The test command: installs what is needed, checks the C++ formatting,
# builds, runs the batch fuzzer for a bounded time (clang + libFuzzer), then
# the whole CTest suite (real RocksDB in temp dirs, real TLS on loopback,
# real programs, packages, a ClickHouse cluster), a label at a time. At the
# end it prints how long each phase took, so that a phase that grows is
# seen the day it does.
#
#   deploy/test.sh
#   FIELDPROF_FUZZ_SECONDS=300 deploy/test.sh   # fuzz longer (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."

phases=()
failed=()

# The disks the run writes: the checkout's (the builds) and the tests'
# temporary one (their databases, package roots, the cluster), when that
# is another. Each phase's row in the closing table gives the lowest free
# space seen on them while it ran (sampled every 2 s): a run that fails
# for want of space shows where.
tmp_dir="${TMPDIR:-/tmp}"
disk_of() { df -P "$1" 2>/dev/null | awk 'NR == 2 {print $1}'; }
disks=("$PWD")
if [[ -d "$tmp_dir" && "$(disk_of "$tmp_dir")" != "$(disk_of .)" ]]; then disks+=("$tmp_dir"); fi
free_mib() { df -P -m "$1" 2>/dev/null | awk 'NR == 2 {print $4}'; }
lowest_free() {  # the least free MiB over the disks now (nothing if df answers nothing)
  local d n low=""
  for d in "${disks[@]}"; do
    n="$(free_mib "$d")"
    [[ "$n" =~ ^[0-9]+$ ]] || continue
    if [[ -z "$low" ]] || ((n < low)); then low="$n"; fi
  done
  echo "$low"
}
low_file="$(mktemp 2>/dev/null || mktemp -p /tmp)"
watch_pid=""
watch_start() {
  lowest_free >"$low_file"
  (while sleep 2; do lowest_free >>"$low_file"; done) &
  watch_pid=$!
}
watch_stop() {  # sets phase_low
  if [[ -n "$watch_pid" ]]; then kill "$watch_pid" 2>/dev/null || true; fi
  wait "$watch_pid" 2>/dev/null || true
  watch_pid=""
  lowest_free >>"$low_file"
  phase_low="$(awk '/^[0-9]+$/ && (low == "" || $1 + 0 < low) {low = $1 + 0} END {print low}' "$low_file")"
}
record() {  # record NAME SECONDS STATUS: one line of the final table
  phases+=("$(printf '%-22s %5d s  lowest free %8s MiB%s' "$1" "$2" "${phase_low:-?}" \
    "$( (($3 == 0)) || echo "  FAILED ($3)")")")
  (($3 == 0)) || failed+=("$1")
}
phase() {  # phase NAME COMMAND...: runs it, times it; a failure is kept for the end
  local name="$1" start rc=0
  shift
  start=$(date +%s)
  watch_start
  "$@" || rc=$?
  watch_stop
  record "$name" "$(($(date +%s) - start))" "$rc"
  return 0
}
report() {
  # A subshell (the sampler, killed before it ran a command) has the trap too.
  [[ "$BASHPID" == "$$" ]] || exit 0
  if [[ -n "$watch_pid" ]]; then kill "$watch_pid" 2>/dev/null || true; fi
  rm -f "$low_file"
  echo "== time of each phase (free space: the least on ${disks[*]})"
  printf '   %s\n' "${phases[@]}"
  if ((${#failed[@]})); then
    echo "test: failed: ${failed[*]}" >&2
    exit 1
  fi
}
trap report EXIT

phase installs ./deploy/install-deps.sh

# What the run needs once the packages are in: the build tree (~1.1 GB),
# the fuzz build (0.1 GB), the tests' temporary files (up to ~1.5 GB at
# once, measured), and the aggregator's reserve (--min_free_mib, 256 MiB),
# under which its tests are refused with NoSpace. Said up front: a full
# disk otherwise shows as tests failing one by one.
need_mib=3072
for dir in "${disks[@]}"; do
  free="$(free_mib "$dir")"
  if [[ "$free" =~ ^[0-9]+$ ]] && ((free < need_mib)); then
    echo "test: warning: $free MiB free on the disk holding $dir; the run needs about" \
      "$need_mib MiB, and tests that write will fail for want of space" >&2
  fi
done

# Every C++ file as clang-format (the checked-in .clang-format) writes it.
format() {
  echo "== format: clang-format --dry-run --Werror"
  git ls-files -z '*.cc' '*.h' | xargs -0 clang-format --dry-run --Werror
}
phase format format

phase build ./deploy/build.sh
((${#failed[@]} == 0)) || exit 1  # nothing to test without a build

fuzz() {
  local seconds="$1"
  echo "== fuzz: batch decoding + validation for ${seconds}s (libFuzzer, ASan, UBSan)"
  cmake -S . -B build-fuzz -DFIELDPROF_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFIELDPROF_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build build-fuzz -j"$(nproc)" --target batch_fuzz >/dev/null
  local work="build-fuzz/corpus"
  mkdir -p "$work"
  cp tests/fuzz/corpus/* "$work/"
  ./build-fuzz/tests/fuzz/batch_fuzz -max_total_time="$seconds" -max_len=262144 \
    -print_final_stats=1 "$work" 2>build-fuzz/fuzz.log || {
    tail -50 build-fuzz/fuzz.log
    echo "fuzz: FAILED (crash input saved in the current dir)"
    return 1
  }
  grep -E "stat::number_of_executed_units|Done" build-fuzz/fuzz.log | tail -2
}
fuzz_seconds="${FIELDPROF_FUZZ_SECONDS:-60}"
if [[ "$fuzz_seconds" != "0" ]]; then phase fuzz fuzz "$fuzz_seconds"; fi

# CTest a label at a time (every test has one: tests/CMakeLists.txt).
ctest_label() { (cd build && ctest -L "^$1\$" --output-on-failure -j2 --timeout 900); }
for label in unit process; do
  echo "== ctest -L $label"
  phase "ctest $label" ctest_label "$label"
done

# The package and the cluster tests each keep about one core busy (53% and
# 68% of the two, measured over their runs): they run side by side, a CTest
# each, and their output is printed when both are done. Each label's own
# time is in the table, and the two together.
side_by_side() {
  local label pids=() rc secs
  for label in "$@"; do
    (
      start=$(date +%s) status=0
      ctest_label "$label" >"build/ctest-$label.log" 2>&1 || status=$?
      echo "$status $(($(date +%s) - start))" >"build/ctest-$label.status"
    ) &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  watch_stop  # one lowest free space for the labels side by side
  for label in "$@"; do
    echo "== ctest -L $label (beside: $*)"
    cat "build/ctest-$label.log"
    read -r rc secs <"build/ctest-$label.status" || { rc=1 secs=0; }
    record "ctest $label" "$secs" "$rc"
  done
}
echo "== ctest -L package and -L cluster, side by side"
start=$(date +%s)
watch_start
side_by_side package cluster
record "  (the two, wall)" "$(($(date +%s) - start))" 0

echo "== ctest -L bench"
phase "ctest bench" ctest_label bench
