#!/usr/bin/env bash
# Ingest throughput of the aggregator, with its references measured in the
# same run on the same request bodies:
#   1. fieldprof-aggregator (TLS, parse, validate, dedupe, synced WAL write,
#      background fold into the sums), driven by fieldprof-loadgen;
#   2. the physical reference: RocksDB synced writes of the same bodies from
#      as many threads, no TLS, parsing or merging (tests/benchmarks/rocksdb_reference),
#      with the aggregator's CRC32C (SSE 4.2) and then with Debian's build
#      as it is (a table-driven CRC32C), the reference of stops before 97;
#   3. the network-side reference: Debian's nginx over TLS discarding the
#      bodies, driven by the same loadgen.
# Prints each rate and the ratios, and the CPU each side spent a batch (the
# aggregator's for the whole load and the fold of its backlog, the load
# generator's beside it, the reference's with RocksDB's background work): on
# a machine whose cores the load keeps busy, what a batch costs in CPU sets
# the rate. After each aggregator run, a line says where a request's time
# went (the stages its /metrics times). Everything binds to 127.0.0.1 and
# stops.
# CONNECTIONS may be a list (1,4,16): the aggregator and the RocksDB
# references then run at each count, ROUNDS times (default 3) in turn, a
# fresh database each, and the summary gives the medians and their ratio
# at each. The reference has the machine to itself; the aggregator shares
# its cores with the load generator.
#
# Each round also runs the aggregator without its sync (--sync=false, a
# switch for benchmarks only): the rate with the cost of the sync taken out
# and everything else kept, TLS, decoding, validation, the WAL's write, the
# fold and the applier. Below the reference, making the sync cheaper cannot
# reach it at that count in that hour; the CPU a batch or the waits left in
# the write (such as behind the applier's fold write) have to shrink too.
# NOSYNC=0 leaves that run out.
#
# With BASE_AGG=<another build's fieldprof-aggregator>, a last part runs
# that build and this one in turn, ROUNDS times, at the largest count: the
# CPU a batch and batches/s of each, interleaved, and their medians, to
# tell a change from the drift between runs.
#
#   deploy/bench-ingest.sh [SECONDS] [CONNECTIONS] [POOL]   (default 20 s, 1,4,16, 256)
#   ROUNDS=5 deploy/bench-ingest.sh 15 4
#   NOSYNC=0 deploy/bench-ingest.sh 15 16      (no run without the sync)
#   BASE_AGG=old/fieldprof-aggregator ROUNDS=3 deploy/bench-ingest.sh 15 16
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
seconds="${1:-20}"
conn_list="${2:-1,4,16}"
pool="${3:-256}"   # distinct bodies; more = fewer repeated series per fold
./deploy/install-deps.sh build bench >/dev/null
./deploy/build.sh fieldprof-aggregator fieldprof-loadgen rocksdb_reference >/dev/null
work="$(mktemp -d /tmp/fieldprof-bench-XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
./deploy/make-cert.sh "$work/tls" ec >/dev/null
mkdir -p "$work/bodies"
./build/tools/fieldprof-loadgen --dump "$work/bodies" --pool "$pool" 2>/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# CPU seconds a running process has used (all its threads): utime + stime.
tck="$(getconf CLK_TCK)"
cpu_of() { sed 's/.*) //' "/proc/$1/stat" | awk -v t="$tck" '{printf "%.2f", ($12 + $13) / t}'; }

# Prints where a batch's time went in the aggregator on port $1, from its
# /metrics: the mean ms a request spent in each stage (the body read after
# its header, the wait for a worker, decoding and checks, the synced write
# with its wait for the write group, the hop back with the answer), the
# fold after the answer, and the share of writes over 8 ms (held up behind
# something, such as an applier's fold write) with their share of the write
# time (from the histogram's buckets, so approximate). An older build
# without the stages prints nothing.
stage_report() {
  curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$1/metrics" | python3 -c '
import re, sys
sums, counts, write = {}, {}, {}
for line in sys.stdin:
    m = re.match(r"fieldprof_(?:request|ingest)_stage_seconds_(sum|count)\{stage=\"(\w+)\"\} (\S+)", line)
    if m:
        (sums if m.group(1) == "sum" else counts)[m.group(2)] = float(m.group(3))
    m = re.match(r"fieldprof_ingest_stage_seconds_bucket\{stage=\"write\",le=\"([^\"]+)\"\} (\S+)", line)
    if m:
        write[m.group(1)] = float(m.group(2))
if not counts.get("write"):
    sys.exit(0)
def mean(s):
    return 1000 * sums.get(s, 0) / counts[s] if counts.get(s) else float("nan")
n = write.get("+Inf", 0)
slow = n - write.get("0.008388608", n)
# Their share of the write time, each taken at 3/4 of its bucket bound.
les = sorted((float(le), c) for le, c in write.items() if le != "+Inf")
slow_s = sum(0.75 * le * (c - p) for (le, c), (_, p) in zip(les[1:], les) if le > 0.0084)
print("  a batch, mean ms: body %.2f, queue %.2f, decode %.2f, write %.2f, answer %.2f;"
      " fold after the answer %.2f; writes over 8 ms %.1f%% (~%.0f%% of the write time)" % (
          mean("body"), mean("queue"), mean("decode"), mean("write"), mean("answer"),
          mean("fold"), 100 * slow / n if n else 0,
          100 * slow_s / sums["write"] if sums.get("write") else 0))
' || true
}

# Runs aggregator build $1 at $2 connections for the load's length, its
# database in $3, any further arguments given to it; sets run_json (the
# load generator's JSON), run_batches (the batches it stored) and run_cpu
# (the aggregator's CPU ms a batch, the fold of its backlog included).
run_aggregator() {
  local bin="$1" conns="$2" db="$3" port pid cpu_before cpu_after drain_start
  shift 3
  port="$(free_port)"
  "$bin" "$@" --port "$port" --db "$db" --source_batches_per_minute 0 \
    --tls_cert "$work/tls/cert.pem" --tls_key "$work/tls/key.pem" 2>"$work/agg.log" &
  pid=$!
  pids+=($pid)
  for _ in $(seq 1 50); do curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/healthz" >/dev/null ||
    { cat "$work/agg.log" >&2; echo "bench-ingest: the aggregator ($bin) did not start" >&2; exit 1; }
  cpu_before="$(cpu_of "$pid")"
  run_json="$(./build/tools/fieldprof-loadgen --port "$port" --ca "$work/tls/cert.pem" \
    --connections "$conns" --batches 0 --duration_s "$seconds" --pool "$pool" --json 2>/dev/null)"
  drain_start=$(date +%s.%N)
  until curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/metrics" | grep -q '^fieldprof_pending_batches 0$'; do sleep 0.1; done
  run_drain=$(echo "$(date +%s.%N) - $drain_start" | bc)
  cpu_after="$(cpu_of "$pid")"
  stage_report "$port"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  run_batches="$(echo "$run_json" | field batches_ok)"
  [[ "${run_batches:-0}" -gt 0 ]] || { echo "bench-ingest: the aggregator ($bin) stored no batch at $conns connections" >&2; exit 1; }
  run_cpu="$(echo "($cpu_after - $cpu_before) * 1000 / $run_batches" | bc -l)"
  rm -rf "$db"  # gigabytes at 20 s
}

# Runs the RocksDB reference at $1 threads, with the environment
# assignments after it; prints its JSON and sets run_ref_bps and
# run_ref_cpu (its CPU ms a batch).
run_reference() {
  local conns="$1" json batches
  shift
  json="$(env "$@" ./build/tests/benchmarks/rocksdb_reference "$work/refdb-$conns" "$work/bodies" \
    "$conns" "$seconds")"
  echo "$json"
  batches="$(echo "$json" | field batches)"
  [[ "${batches:-0}" -gt 0 ]] || { echo "bench-ingest: the reference wrote no batch at $conns threads" >&2; exit 1; }
  run_ref_bps="$(echo "$json" | field batches_per_second)"
  run_ref_cpu="$(echo "$(echo "$json" | field cpu_seconds) * 1000 / $batches" | bc -l)"
  rm -rf "$work/refdb-$conns"
}

# At each count, ROUNDS rounds of the aggregator and the two references in
# turn: the machine's speed drifts between runs by more than the
# differences looked for (the reference alone moved 1,450 -> 1,690
# batches/s between two runs an hour apart), so each figure is the median
# of its rounds, each ratio the medians'.
rounds="${ROUNDS:-3}"
nosync="${NOSYNC:-1}"
declare -A agg_bps agg_rps ref_bps agg_cpu gen_cpu ref_cpu deb_bps deb_cpu nosync_bps nosync_cpu
IFS=, read -r -a counts <<<"$conn_list"
for conns in "${counts[@]}"; do
  a_bps=() a_rps=() a_cpu=() g_cpu=() r_bps=() r_cpu=() d_bps=() d_cpu=() c_bps=() c_cpu=()
  for round in $(seq 1 "$rounds"); do
    echo "== ${conns} connections, round ${round} of ${rounds}"
    echo "== 1. fieldprof-aggregator, ${conns} connections, ${seconds}s, synced writes"
    run_aggregator ./build/aggregator/fieldprof-aggregator "$conns" "$work/db-$conns"
    agg_json="$run_json"
    echo "$agg_json"
    echo "applied backlog drained ${run_drain}s after the load stopped"
    a_bps+=("$(echo "$agg_json" | field batches_per_second)")
    a_rps+=("$(echo "$agg_json" | field records_per_second)")
    a_cpu+=("$run_cpu")
    g_cpu+=("$(echo "$(echo "$agg_json" | field cpu_seconds) * 1000 / $run_batches" | bc -l)")
    if [[ "$nosync" != 0 ]]; then
      echo "== 1b. the same aggregator without the sync (--sync=false): the sync's cost taken out"
      run_aggregator ./build/aggregator/fieldprof-aggregator "$conns" "$work/db-$conns" --sync=false
      echo "$run_json"
      sync  # its unsynced writes are not left to the reference's disk
      c_bps+=("$(echo "$run_json" | field batches_per_second)") c_cpu+=("$run_cpu")
    fi

    echo "== 2. reference: RocksDB synced Put of the same bodies, ${conns} threads, ${seconds}s"
    run_reference "$conns"
    r_bps+=("$run_ref_bps") r_cpu+=("$run_ref_cpu")
    echo "== 2b. the same reference with Debian's RocksDB as built (table-driven CRC32C)"
    run_reference "$conns" FIELDPROF_ROCKS_CRC32C=rocksdb
    d_bps+=("$run_ref_bps") d_cpu+=("$run_ref_cpu")
    printf "  round %d: aggregator %.1f batches/s, reference %.1f (ratio %.2f), as built %.1f (%.2f)\n" \
      "$round" "${a_bps[-1]}" "${r_bps[-1]}" "$(echo "${a_bps[-1]} / ${r_bps[-1]}" | bc -l)" \
      "${d_bps[-1]}" "$(echo "${a_bps[-1]} / ${d_bps[-1]}" | bc -l)"
    if [[ "$nosync" != 0 ]]; then
      printf "           without the sync %.1f (ratio %.2f)\n" "${c_bps[-1]}" "$(echo "${c_bps[-1]} / ${r_bps[-1]}" | bc -l)"
    fi
  done
  agg_bps[$conns]="$(median "${a_bps[@]}")" agg_rps[$conns]="$(median "${a_rps[@]}")"
  agg_cpu[$conns]="$(median "${a_cpu[@]}")" gen_cpu[$conns]="$(median "${g_cpu[@]}")"
  ref_bps[$conns]="$(median "${r_bps[@]}")" ref_cpu[$conns]="$(median "${r_cpu[@]}")"
  deb_bps[$conns]="$(median "${d_bps[@]}")" deb_cpu[$conns]="$(median "${d_cpu[@]}")"
  if [[ "$nosync" != 0 ]]; then
    nosync_bps[$conns]="$(median "${c_bps[@]}")" nosync_cpu[$conns]="$(median "${c_cpu[@]}")"
  fi
done

echo "== 3. reference: nginx TLS sink discarding the bodies, ${conns} connections, ${seconds}s"
nport="$(free_port)"
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  server {
    listen 127.0.0.1:$nport ssl;
    ssl_certificate $work/tls/cert.pem;
    ssl_certificate_key $work/tls/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    keepalive_requests 1000000;
    client_max_body_size 2m;
    client_body_buffer_size 2m;
    location / { return 200 '{"duplicate":false}'; }
  }
}
CONF
nginx -c "$work/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)
for _ in $(seq 1 100); do curl -sk "https://127.0.0.1:$nport/" >/dev/null && break; sleep 0.1; done
curl -sk "https://127.0.0.1:$nport/" >/dev/null || { echo "bench-ingest: nginx did not start" >&2; exit 1; }
ngx_json="$(./build/tools/fieldprof-loadgen --port "$nport" --ca "$work/tls/cert.pem" \
  --connections "$conns" --batches 0 --duration_s "$seconds" --pool "$pool" --json 2>/dev/null)"
echo "$ngx_json"
ngx_bps="$(echo "$ngx_json" | field batches_per_second)"

echo
echo "== summary ($(nproc) cores, ~128 KiB bodies; medians of $rounds rounds in turn)"
# Per count: the rates, then the CPU a batch (ms, all threads: what sets
# the rate when the cores are busy).
for conns in "${counts[@]}"; do
  printf "%3d connections: aggregator %8.1f batches/s (%9.0f records/s), RocksDB synced-Put ref %8.1f: ratio %.2f (goal >= 1.0)\n" \
    "$conns" "${agg_bps[$conns]}" "${agg_rps[$conns]}" "${ref_bps[$conns]}" \
    "$(echo "${agg_bps[$conns]} / ${ref_bps[$conns]}" | bc -l)"
  printf "    Debian's RocksDB as built (table-driven CRC32C) %8.1f: ratio %.2f\n" \
    "${deb_bps[$conns]}" "$(echo "${agg_bps[$conns]} / ${deb_bps[$conns]}" | bc -l)"
  printf "    CPU a batch: aggregator %.3f ms (load generator beside it %.3f ms), ref %.3f ms: ref/aggregator %.2f; as built %.3f ms\n" \
    "${agg_cpu[$conns]}" "${gen_cpu[$conns]}" "${ref_cpu[$conns]}" \
    "$(echo "${ref_cpu[$conns]} / ${agg_cpu[$conns]}" | bc -l)" "${deb_cpu[$conns]}"
  if [[ "$nosync" != 0 ]]; then
    # Below 1.0, a cheaper sync alone does not reach the reference here.
    printf "    without the sync (its cost taken out) %8.1f: ratio %.2f to the reference; CPU a batch %.3f ms\n" \
      "${nosync_bps[$conns]}" "$(echo "${nosync_bps[$conns]} / ${ref_bps[$conns]}" | bc -l)" "${nosync_cpu[$conns]}"
  fi
done
printf "nginx TLS sink ref, %d connections: %8.1f batches/s; aggregator/nginx = %.2f\n" \
  "$conns" "$ngx_bps" "$(echo "${agg_bps[$conns]} / $ngx_bps" | bc -l)"

if [[ -n "${BASE_AGG:-}" ]]; then
  [[ -x "$BASE_AGG" ]] || { echo "bench-ingest: BASE_AGG=$BASE_AGG is not an executable" >&2; exit 1; }
  rounds="${ROUNDS:-3}"
  echo
  echo "== 4. this build against BASE_AGG, in turn, $rounds rounds, $conns connections, ${seconds}s each"
  base_cpus=() new_cpus=() base_rates=() new_rates=()
  for round in $(seq 1 "$rounds"); do
    run_aggregator "$BASE_AGG" "$conns" "$work/db-base"
    base_cpus+=("$run_cpu") base_rates+=("$(echo "$run_json" | field batches_per_second)")
    run_aggregator ./build/aggregator/fieldprof-aggregator "$conns" "$work/db-new"
    new_cpus+=("$run_cpu") new_rates+=("$(echo "$run_json" | field batches_per_second)")
    printf "  round %d: CPU a batch BASE %.3f ms, this %.3f ms; batches/s BASE %.1f, this %.1f\n" \
      "$round" "${base_cpus[-1]}" "${new_cpus[-1]}" "${base_rates[-1]}" "${new_rates[-1]}"
  done
  printf "  medians: CPU a batch BASE %.3f ms, this %.3f ms (%+.1f%%); batches/s BASE %.1f, this %.1f (%+.1f%%)\n" \
    "$(median "${base_cpus[@]}")" "$(median "${new_cpus[@]}")" \
    "$(echo "($(median "${new_cpus[@]}") / $(median "${base_cpus[@]}") - 1) * 100" | bc -l)" \
    "$(median "${base_rates[@]}")" "$(median "${new_rates[@]}")" \
    "$(echo "($(median "${new_rates[@]}") / $(median "${base_rates[@]}") - 1) * 100" | bc -l)"
fi
