#!/usr/bin/env bash
# What "k means k machines" costs in what gets published (docs/privacy.md):
# a simulated fleet (tests/benchmarks/k_fleet.cc: MACHINES volunteers, DAYS
# days, Zipf-popular series, each machine its own library mix) sends its
# series over HTTPS to a real aggregator at k = K, as agents send them; the
# series published, beside what counting machine-days (before), machines
# (now) and machines on one day would publish from the same data.
# With BASE_AGG=<an older fieldprof-aggregator>, the same fleet goes to it
# too, in the same run: its own published count is "before" measured.
#
#   deploy/bench-k-fleet.sh [MACHINES] [DAYS] [K]    (defaults 1000 30 5)
#   BASE_AGG=old/fieldprof-aggregator deploy/bench-k-fleet.sh
set -euo pipefail
cd "$(dirname "$0")/.."
machines="${1:-1000}"
days="${2:-30}"
k="${3:-5}"
./deploy/build.sh fieldprof-aggregator k_fleet >/dev/null
work="$(mktemp -d /tmp/fieldprof-kfleet-XXXXXX)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
./deploy/make-cert.sh "$work/tls" ec >/dev/null
run() {  # run NAME AGGREGATOR_BINARY
  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$2" --port "$port" --db "$work/db-$1" --source_batches_per_minute 0 --k_anonymity "$k" \
    --tls_cert "$work/tls/cert.pem" --tls_key "$work/tls/key.pem" 2>"$work/agg-$1.log" &
  pids+=($!)
  for _ in $(seq 1 100); do
    curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/healthz" >/dev/null && break
    sleep 0.1
  done
  echo "== $1 ($2)"
  ./build/tests/benchmarks/k_fleet "$port" "$work/tls/cert.pem" "$machines" "$days" "$k"
}
run now build/aggregator/fieldprof-aggregator
if [[ -n "${BASE_AGG:-}" ]]; then run base "$BASE_AGG"; fi
