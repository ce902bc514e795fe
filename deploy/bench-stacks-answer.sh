#!/usr/bin/env bash
# GET /v1/stacks over a module of STACKS distinct field stacks.
#  1. Summed in its request (no kept answer), in process
#     (tests/benchmarks/stacks_answer): through the router on a real
#     RocksDB store, with and without the k-anonymity wrapper, just after
#     ingest and compacted, the time by step, and a bare RocksDB scan of
#     the same values as the floor.
#  2. Kept warm: a real aggregator over TLS with its defaults on that
#     store. How long after start its usual questions are answered (the
#     default limit, and the dashboard's limit=100000), then REQUESTS x 10
#     of each on one keep-alive connection while another client posts a
#     batch of stacks every half second (the sums keep moving): the
#     latency as the client sees it, p50/p99/max, until the answer's
#     headers are in and until its whole body is (12.5 MB over loopback
#     TLS for the dashboard's), asked plain and with Accept-Encoding: gzip
#     as browsers ask (inflated by the client, in the time), and how many
#     answers were built in a request.
#  3. With BASE_AGG=<another build>/fieldprof-aggregator: two real
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
if [[ -n "${BASE_AGG:-}" && ! -x "$BASE_AGG" ]]; then
  echo "bench-stacks-answer: BASE_AGG $BASE_AGG is not a program" >&2
  exit 2
fi

work="$(mktemp -d /tmp/fieldprof-stacksanswer-XXXXXX)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
./deploy/make-cert.sh "$work/tls" ec >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
get() { curl -sf --cacert "$work/tls/cert.pem" "$@"; }
start() {  # PROGRAM DB PORT [FLAG...]
  local program="$1" db="$2" port="$3"
  shift 3
  "$program" --port "$port" --db "$db" --source_batches_per_minute 0 --k_anonymity 1 "$@" \
    --tls_cert "$work/tls/cert.pem" --tls_key "$work/tls/key.pem" 2>>"$work/agg.log" &
  pids+=($!)
  for _ in $(seq 1 300); do
    get "https://127.0.0.1:$port/healthz" >/dev/null && return
    sleep 0.1
  done
  echo "bench-stacks-answer: $program did not start" >&2
  exit 1
}
stop_all() {
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
port="$(free_port)"
start build/aggregator/fieldprof-aggregator "$work/db" "$port" --answer_max_stale_s 0
./build/tests/benchmarks/stacks_post "$port" "$work/tls/cert.pem" libbench.so.1 "$stacks" >/dev/null
until get "https://127.0.0.1:$port/metrics" | grep -q '^fieldprof_pending_batches 0$'; do sleep 0.1; done
stop_all
cp -a "$work/db" "$work/db-warm"

echo "== kept warm: a real aggregator with its defaults, while batches keep coming"
# A module under the default mark (5,000 stacks, a small run) is warmed
# all the same: the mark is lowered to its size.
warm=()
[[ "$stacks" -lt 5000 ]] && warm=(--answer_warm_stacks "$stacks")
port="$(free_port)"
started=$(date +%s.%N)
start build/aggregator/fieldprof-aggregator "$work/db-warm" "$port" "${warm[@]}"
for i in $(seq 1 3000); do
  get "https://127.0.0.1:$port/metrics" | grep -q '^fieldprof_answers_warmed_total 2$' && break
  if [[ $i -eq 3000 ]]; then
    echo "bench-stacks-answer: the usual questions were not warmed within 60 s" >&2
    exit 1
  fi
  sleep 0.02
done
echo "   its usual questions answered $(python3 -c "import sys; print(f'{(float(sys.argv[2]) - float(sys.argv[1])) * 1e3:.0f}')" \
  "$started" "$(date +%s.%N)") ms after start (healthz answering included)"
(
  i=0
  while :; do
    ./build/tests/benchmarks/stacks_post "$port" "$work/tls/cert.pem" libbench.so.1 2000 \
      $((30000000 + i)) >/dev/null || exit 0
    i=$((i + 1))
    sleep 0.5
  done
) &
poster=$!
python3 - "$port" "$work/tls/cert.pem" "$((requests * 10))" <<'PY'
import http.client, ssl, statistics, sys, time, zlib
port, ca, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
def ask(target, gzip):
    t = time.perf_counter()
    conn.request("GET", target, headers={"Accept-Encoding": "gzip"} if gzip else {})
    r = conn.getresponse()  # its status line and headers: answered
    first = time.perf_counter()
    body = r.read()
    sent = len(body)
    if r.getheader("Content-Encoding") == "gzip":
        body = zlib.decompress(body, 31)
    if r.status != 200:
        sys.exit(f"bench-stacks-answer: {target}: {r.status}")
    return (first - t) * 1e3, (time.perf_counter() - t) * 1e3, len(body), sent
def summary(t):
    t = sorted(t)
    p99 = t[min(len(t) - 1, int(len(t) * 0.99))]
    return f"p50 {statistics.median(t):.1f}, p99 {p99:.1f}, max {t[-1]:.1f} ms"
for limit in (10000, 100000):
    for gzip in (False, True):
        target = f"/v1/stacks?module=libbench.so.1&limit={limit}"
        ask(target, gzip)  # the connection's first use
        first, whole, sent = [], [], []
        for _ in range(n):
            f, w, size, s = ask(target, gzip)
            first.append(f)
            whole.append(w)
            sent.append(s)
        how = f"gzip, {statistics.median(sent) / 1e6:.2f} MB sent" if gzip else "plain"
        print(f"   limit={limit} ({size / 1e6:.1f} MB, {how}), {n} asks: answered (headers in) "
              f"{summary(first)}; whole body in (inflated) {summary(whole)}")
PY
kill "$poster" 2>/dev/null || true
wait "$poster" 2>/dev/null || true
get "https://127.0.0.1:$port/metrics" |
  grep -E '^fieldprof_(answers_[a-z]+_total|batches_accepted_total) ' | sed 's/^/   /'
stop_all
[[ -n "${BASE_AGG:-}" ]] || exit 0

cp -a "$work/db" "$work/db-base"
mv "$work/db" "$work/db-head"
base_port="$(free_port)"
start "$BASE_AGG" "$work/db-base" "$base_port" --answer_max_stale_s 0
head_port="$(free_port)"
start build/aggregator/fieldprof-aggregator "$work/db-head" "$head_port" --answer_max_stale_s 0
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
