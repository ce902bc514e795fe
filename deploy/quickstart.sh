#!/usr/bin/env bash
# The main job, end to end on the embedded defaults:
#   1. install dependencies (Debian 12) and build,
#   2. make a self-signed ECDSA certificate for loopback,
#   3. start fieldprof-aggregator on an embedded RocksDB (127.0.0.1, a free port),
#   4. send it realistic ~128 KiB batches with fieldprof-loadgen over TLS and
#      check that its sums equal what was acknowledged,
#   5. print what it holds (top APIs, one API in detail, a few metrics),
#   6. stop it with SIGTERM (graceful: in-flight requests finish, DB closed).
#
#   deploy/quickstart.sh
#   QUICKSTART_BATCHES=2000 deploy/quickstart.sh     # more load (default 400)
#   QUICKSTART_KEEP_DB=1 deploy/quickstart.sh        # keep .quickstart/db between runs
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
state="$root/.quickstart"
batches="${QUICKSTART_BATCHES:-400}"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "dependencies"
./deploy/install-deps.sh
step "build"
./deploy/build.sh fieldprof-aggregator fieldprof-loadgen fieldprof 2>&1 | grep -E "Built target|error" || true

step "certificate"
mkdir -p "$state"
./deploy/make-cert.sh "$state/tls" ec
if [[ "${QUICKSTART_KEEP_DB:-0}" != "1" ]]; then rm -rf "$state/db"; fi

step "aggregator"
log="$state/aggregator.log"
: >"$log"
./build/aggregator/fieldprof-aggregator --listen 127.0.0.1 --port 0 \
  --tls_cert "$state/tls/cert.pem" --tls_key "$state/tls/key.pem" --db "$state/db" \
  2>"$log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 100); do
  port="$(sed -n 's/.*listening on https:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")"
  [[ -n "$port" ]] && break
  kill -0 $pid 2>/dev/null || { cat "$log"; echo "quickstart: aggregator failed to start"; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$log"; echo "quickstart: aggregator did not report its port"; exit 1; }
cat "$log"
client=(--host 127.0.0.1 --port "$port" --ca "$state/tls/cert.pem")
curl -sf --cacert "$state/tls/cert.pem" "https://127.0.0.1:$port/healthz" >/dev/null
echo "healthz: ok"

step "load: $batches batches of ~128 KiB over 8 TLS connections, verified against ground truth"
./build/tools/fieldprof-loadgen "${client[@]}" --batches "$batches" --connections 8 --verify

step "what the aggregator holds: most called APIs"
./build/tools/fieldprof top "${client[@]}" --limit 12

step "one API in detail"
./build/tools/fieldprof api "${client[@]}" libsqlite3.so.0 sqlite3_prepare_v2

step "a few metrics (GET /metrics)"
curl -sf --cacert "$state/tls/cert.pem" "https://127.0.0.1:$port/metrics" |
  grep -E '^fieldprof_(batches_accepted_total|batches_duplicate_total|records_merged_total|pending_batches|apply_series_written_total|rocksdb_estimate_num_keys\{cf="data"\}|request_duration_seconds_count)'

step "graceful stop (SIGTERM)"
kill -TERM $pid
wait $pid
trap - EXIT
tail -2 "$log"
echo
echo "quickstart: done. Data in $state/db; run again with QUICKSTART_KEEP_DB=1 to add to it."
