#!/usr/bin/env bash
# A module with many distinct field stacks (default 100,000) on a real
# aggregator: GET /v1/stacks answered (as the dashboard asks: every stack,
# limit=100000; and the default limit, 10,000), p50 and p99 of REQUESTS
# requests (kept answers: the first request summed it), the same while
# another module's batches keep coming (kept answers served while the
# refresher sums the next), then the dashboard's module page in Chromium:
# the time from the answer to the drawn flame graph (docs/field-stacks.md).
#
#   deploy/bench-stacks-page.sh [STACKS] [REQUESTS]   (defaults 100000, 30)
set -euo pipefail
cd "$(dirname "$0")/.."
stacks="${1:-100000}"
requests="${2:-30}"
for f in build/aggregator/fieldprof-aggregator build/tests/benchmarks/stacks_post; do
  [[ -x "$f" ]] || { echo "bench-stacks-page: $f missing (build first)" >&2; exit 2; }
done
work="$(mktemp -d /tmp/fieldprof-stackspage-XXXXXX)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
./deploy/make-cert.sh "$work/tls" ec >/dev/null
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# k = 1: the stacks come from one simulated machine, and are to be
# published whole (behind k they would fold into [other]).
./build/aggregator/fieldprof-aggregator --port "$port" --db "$work/db" --source_batches_per_minute 0 \
  --k_anonymity 1 \
  --tls_cert "$work/tls/cert.pem" --tls_key "$work/tls/key.pem" 2>"$work/agg.log" &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.1
done
module=libbench.so.1
./build/tests/benchmarks/stacks_post "$port" "$work/tls/cert.pem" "$module" "$stacks"
until curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/metrics" |
  grep -q '^fieldprof_pending_batches 0$'; do sleep 0.1; done
# A module this big may have its usual questions answered ahead, and an
# answer kept while the batches came is served until it is rebuilt: wait
# (60 s at most) until the page's question answers the sums a question
# nobody asked before (summed in its request) does.
total_of() {
  curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/v1/stacks?module=$module&limit=$1" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["total_ns"])'
}
exact="$(total_of 99999)"
for _ in $(seq 1 600); do
  [[ "$(total_of 100000)" == "$exact" ]] && break
  sleep 0.1
done

echo "== GET /v1/stacks over $stacks stacks, $requests requests each"
for limit in 100000 10000; do
  url="https://127.0.0.1:$port/v1/stacks?module=$module&limit=$limit"
  curl -sf --cacert "$work/tls/cert.pem" "$url" >"$work/stacks.json"
  for _ in $(seq "$requests"); do
    curl -sf --cacert "$work/tls/cert.pem" -o /dev/null -w '%{time_starttransfer} %{time_total}\n' "$url"
  done | python3 -c "
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin]
first = sorted(r[0] * 1e3 for r in rows); total = sorted(r[1] * 1e3 for r in rows)
p = lambda v, q: v[min(len(v) - 1, int(q * len(v)))]
print(f'   limit={$limit}: first byte p50 {p(first, .5):.1f} ms p99 {p(first, .99):.1f} ms;'
      f' whole answer p50 {p(total, .5):.1f} ms p99 {p(total, .99):.1f} ms;'
      f' {$(wc -c <"$work/stacks.json")} bytes')"
done

echo "== the same while batches keep coming (another module's stacks, one batch at a time)"
# Every applied batch moves the store's data version: the kept answer is
# served (at most --answer_max_stale_s behind) while the refresher sums
# the next one in the background.
(for i in $(seq 0 59); do
  ./build/tests/benchmarks/stacks_post "$port" "$work/tls/cert.pem" libother.so.1 2000 \
    $((20000000 + i * 100)) >/dev/null
done) &
poster=$!
pids+=($poster)
url="https://127.0.0.1:$port/v1/stacks?module=$module&limit=100000"
for _ in $(seq "$requests"); do
  curl -sf --cacert "$work/tls/cert.pem" -o /dev/null -w '%{time_total}\n' "$url"
  sleep 0.2
done | python3 -c "
import sys
total = sorted(float(l) * 1e3 for l in sys.stdin)
p = lambda v, q: v[min(len(v) - 1, int(q * len(v)))]
print(f'   limit=100000: whole answer p50 {p(total, .5):.1f} ms p99 {p(total, .99):.1f} ms')"
kill "$poster" 2>/dev/null || true
wait "$poster" 2>/dev/null || true
curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/metrics" |
  grep -E '^fieldprof_answers_(kept|stale|built|refreshed)_total' | sed 's/^/   /'

echo "== the module page in Chromium (draw: from the answer to the drawn graph)"
total=$(python3 -c "import json; print(json.load(open('$work/stacks.json'))['total_ns'])")
python3 -c "import json; print(json.dumps({'root': '$module', 'root_ns': $total, 'frames': ['api_0'],
  'absent': [], 'zoom': 'api_0'}))" >"$work/want.json"
for _ in 1 2 3; do
  node tests/aggregator/ui/field_stacks.mjs "https://127.0.0.1:$port/ui/" "$module" "$work/want.json" \
    "$work/shots" | grep '^draw:'
done
