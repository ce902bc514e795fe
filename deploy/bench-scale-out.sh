#!/usr/bin/env bash
# The scale-out's figures, in one run on this machine:
#   1. ingest through the load generator (~128 KiB batches, CONNECTIONS at
#      once): the RocksDB store's single aggregator, then the ClickHouse
#      cluster of deploy/scale-out/cluster.sh (ZooKeeper, ClickHouse in
#      SHARDS) through haproxy with 3, 2 and 1 aggregator replicas:
#      batches/s, the ratio to RocksDB, latency, and the CPU time each part
#      spent per batch (the measured per-node figures the capacity model in
#      docs/scale-out.md scales from);
#   2. reads and publishing at SERIES series on that cluster against the
#      RocksDB store (tests/benchmarks/clickhouse_benchmark.cc).
#
#   deploy/bench-scale-out.sh
#   BATCHES=3000 CONNECTIONS=192 SHARDS=2,2 SERIES=1000000 deploy/bench-scale-out.sh
#   SERIES=0 deploy/bench-scale-out.sh      # ingest only
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
root="$PWD"
batches="${BATCHES:-3000}"
connections="${CONNECTIONS:-192}"
shards="${SHARDS:-2,2}"
series="${SERIES:-1000000}"

./deploy/build.sh fieldprof-aggregator fieldprof-loadgen clickhouse_benchmark >/dev/null
work="$(mktemp -d /tmp/fieldprof-scale-out-XXXXXX)"
rocks_pid=""
cleanup() {
  [[ -n "$rocks_pid" ]] && kill "$rocks_pid" 2>/dev/null || true
  [[ -f "$work/c/cluster.env" ]] && "$root/deploy/scale-out/cluster.sh" stop "$work/c" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

hz="$(getconf CLK_TCK)"
# CPU seconds (user + system) the processes PIDS have used so far.
cpu() {
  local t=0 pid
  for pid in "$@"; do
    [[ -r "/proc/$pid/stat" ]] || continue
    t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$t"
}
pids_of() { local n; for n in "$@"; do [[ -f "$work/c/$n/pid" ]] && cat "$work/c/$n/pid"; done; }

# One measured load: prints a line; $1 label, $2 port, $3 CA, then "group=PIDS..." pairs.
measure() {
  local label=$1 port=$2 ca=$3
  shift 3
  ./build/tools/fieldprof-loadgen --port "$port" --ca "$ca" --batches 200 \
    --connections "$connections" --pool 32 >/dev/null 2>&1  # warm up
  local groups=("$@") before=() g
  for g in "${groups[@]}"; do before+=("$(cpu ${g#*=})"); done
  local json
  json="$(./build/tools/fieldprof-loadgen --port "$port" --ca "$ca" --batches "$batches" \
    --connections "$connections" --pool 32 --json 2>"$work/loadgen.err")" || {
    echo "bench-scale-out: $label: the load generator failed: $(tail -3 "$work/loadgen.err")" >&2
    exit 1
  }
  local ok bps rps p50 p99
  ok="$(sed -n 's/.*"batches_ok":\([0-9]*\).*/\1/p' <<<"$json")"
  if [[ -z "$ok" || "$ok" == 0 ]]; then
    echo "bench-scale-out: $label: no batch was accepted; the load generator said: $json" >&2
    exit 1
  fi
  bps="$(sed -n 's/.*"batches_per_second":\([0-9.e+]*\).*/\1/p' <<<"$json")"
  rps="$(sed -n 's/.*"records_per_second":\([0-9.e+]*\).*/\1/p' <<<"$json")"
  p50="$(sed -n 's/.*"latency_p50_ms":\([0-9.e+]*\).*/\1/p' <<<"$json")"
  p99="$(sed -n 's/.*"latency_p99_ms":\([0-9.e+]*\).*/\1/p' <<<"$json")"
  local cpu_line="" i=0
  for g in "${groups[@]}"; do
    local after used
    after="$(cpu ${g#*=})"
    used="$(echo "scale=2; ($after - ${before[$i]}) * 1000 / $hz / $ok" | bc)"
    cpu_line+="$(printf ' %s %s' "${g%%=*}" "$used")"
    i=$((i + 1))
  done
  printf '  %-34s %7.1f batches/s %9.0f records/s  p50 %7.1f ms  p99 %7.1f ms' \
    "$label" "$bps" "$rps" "$p50" "$p99"
  [[ -n "$rocks_bps" ]] && printf '  %.3fx RocksDB' "$(echo "$bps / $rocks_bps" | bc -l)"
  printf '\n    CPU ms per batch:%s\n' "$cpu_line"
  last_bps=$bps
}

echo "== ingest: $batches batches of ~128 KiB over $connections connections, $(nproc) cores"
rocks_bps=""
./deploy/make-cert.sh "$work/tls" >/dev/null
port=$((10000 + RANDOM % 20000))
./build/aggregator/fieldprof-aggregator --listen 127.0.0.1 --port "$port" \
  --tls_cert "$work/tls/cert.pem" --tls_key "$work/tls/key.pem" --db "$work/db" \
  --workers 64 --max_queue 512 --source_batches_per_minute 0 2>"$work/rocks.log" &
rocks_pid=$!
for _ in $(seq 100); do
  curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.1
done
measure "RocksDB, 1 aggregator (synced)" "$port" "$work/tls/cert.pem" "aggregator=$rocks_pid"
rocks_bps=$last_bps
kill "$rocks_pid"
wait "$rocks_pid" 2>/dev/null || true
rocks_pid=""

"$root/deploy/scale-out/cluster.sh" start "$work/c" --shards "$shards" --aggregators 3 >/dev/null
# shellcheck disable=SC1091
source "$work/c/cluster.env"
ch_names=$(cd "$work/c" && ls -d ch-*)
for n in 3 2 1; do
  aggs=""
  for ((i = 1; i <= n; i++)); do aggs+=" agg-$i"; done
  measure "ClickHouse $shards, $n aggregator(s)" "$LB_PORT" "$CA_FILE" \
    "aggregators=$(pids_of $aggs | paste -sd' ')" \
    "clickhouse=$(pids_of $ch_names | paste -sd' ')" \
    "zookeeper=$(pids_of zk)" "haproxy=$(pids_of haproxy)"
  if ((n > 1)); then
    "$root/deploy/scale-out/cluster.sh" term "$work/c" "agg-$n"
    sleep 3  # haproxy takes it out after two failed checks
  fi
done

if [[ "$series" != "0" ]]; then
  echo
  echo "== reads and publishing at $series series: ClickHouse $shards (through Distributed tables) and RocksDB"
  "$root/deploy/scale-out/cluster.sh" term "$work/c" agg-1
  ./build/tests/benchmarks/clickhouse_benchmark "$series" "$CLICKHOUSE_URL" "$CLICKHOUSE_CLUSTER" 50
fi
