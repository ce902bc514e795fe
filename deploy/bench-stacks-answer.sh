#!/usr/bin/env bash
# GET /v1/stacks summed in its request (no kept answer: a first ask, or one
# kept too long) over a module of STACKS distinct field stacks.
#  1. In process (tests/benchmarks/stacks_answer): through the router on a
#     real RocksDB store, with and without the k-anonymity wrapper, just
#     after ingest and compacted, the time by step, and a bare RocksDB
#     scan of the same values as the floor.
#  2. With BASE_AGG=<another build>/fieldprof-aggregator: two real
#     aggregators over TLS on copies of one store, --answer_max_stale_s 0,
#     requests alternated between them, REQUESTS each (the answers must be
#     the same bytes).
#
#   [BASE_AGG=...] deploy/bench-stacks-answer.sh [STACKS] [ROUNDS] [REQUESTS]
#                                               (defaults 100000, 5, 15)
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
stacks="${1:-100000}"
rounds="${2:-5}"
requests="${3:-15}"
for f in build/aggregator/fieldprof-aggregator build/tests/benchmarks/stacks_post \
  build/tests/benchmarks/stacks_answer; do
  [[ -x "$f" ]] || { echo "bench-stacks-answer: $f missing (build first)" >&2; exit 2; }
done
./build/tests/benchmarks/stacks_answer "$stacks" "$rounds"
[[ -n "${BASE_AGG:-}" ]] || exit 0
[[ -x "$BASE_AGG" ]] || { echo "bench-stacks-answer: BASE_AGG $BASE_AGG is not a program" >&2; exit 2; }

work="$(mktemp -d /tmp/fieldprof-stacksanswer-XXXXXX)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
./deploy/make-cert.sh "$work/tls" ec >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
get() { curl -sf --cacert "$work/tls/cert.pem" "$@"; }
start() {  # PROGRAM DB PORT
  "$1" --port "$3" --db "$2" --source_batches_per_minute 0 --k_anonymity 1 --answer_max_stale_s 0 \
    --tls_cert "$work/tls/cert.pem" --tls_key "$work/tls/key.pem" 2>>"$work/agg.log" &
  pids+=($!)
  for _ in $(seq 1 300); do
    get "https://127.0.0.1:$3/healthz" >/dev/null && return
    sleep 0.1
  done
  echo "bench-stacks-answer: $1 did not start" >&2
  exit 1
}
port="$(free_port)"
start build/aggregator/fieldprof-aggregator "$work/db" "$port"
./build/tests/benchmarks/stacks_post "$port" "$work/tls/cert.pem" libbench.so.1 "$stacks" >/dev/null
until get "https://127.0.0.1:$port/metrics" | grep -q '^fieldprof_pending_batches 0$'; do sleep 0.1; done
kill "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
pids=()
cp -a "$work/db" "$work/db-base"
mv "$work/db" "$work/db-head"
base_port="$(free_port)"
start "$BASE_AGG" "$work/db-base" "$base_port"
head_port="$(free_port)"
start build/aggregator/fieldprof-aggregator "$work/db-head" "$head_port"
echo "== two aggregators, answers summed in each request, alternated, $requests each"
for limit in 100000 10000; do
  for _ in $(seq "$requests"); do
    for side in base head; do
      p=$base_port
      [[ $side == head ]] && p=$head_port
      t=$(get -o "$work/$side.json" -w '%{time_total}' \
        "https://127.0.0.1:$p/v1/stacks?module=libbench.so.1&limit=$limit")
      echo "$limit $side $t"
    done
  done
  cmp -s "$work/base.json" "$work/head.json" ||
    { echo "bench-stacks-answer: the two answers differ (limit=$limit)" >&2; exit 1; }
done >"$work/times"
python3 - "$work/times" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for limit in ("100000", "10000"):
    line = []
    for side in ("base", "head"):
        t = sorted(float(r[2]) * 1e3 for r in rows if r[0] == limit and r[1] == side)
        line.append(f"{side} {statistics.median(t):.1f} ms ({t[0]:.1f}-{t[-1]:.1f})")
    print(f"   limit={limit}: " + ", ".join(line) + "; the same answers")
PY
