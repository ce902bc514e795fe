#!/usr/bin/env bash
# What fieldprof-agent costs, measured against a local aggregator (TLS on
# loopback, embedded RocksDB, all in a temp dir that goes away):
#   1. idle: the daemon watching an empty spool for IDLE seconds: CPU time
#      used and resident memory;
#   2. draining: RECORDS realistic spool records (tests/benchmarks/make_spool)
#      dropped into the spool of the running daemon: CPU time, peak RSS and
#      wall time until spool and outbox are empty;
#   3. one pass (--once --flush) over RECORDS records: records/s, batches/s
#      and MB/s of batches uploaded, with its CPU time and peak RSS.
#
#   deploy/bench-agent.sh [RECORDS] [IDLE]      (defaults 1000 and 20)
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
records="${1:-1000}"
idle="${2:-20}"
./deploy/install-deps.sh build bench >/dev/null
./deploy/build.sh fieldprof-aggregator fieldprof-agent make_spool >/dev/null
work="$(mktemp -d /tmp/fieldprof-agentbench-XXXXXX)"
agg_pid="" agent_pid=""
cleanup() {
  [[ -n "$agent_pid" ]] && kill "$agent_pid" 2>/dev/null || true
  [[ -n "$agg_pid" ]] && kill "$agg_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
./deploy/make-cert.sh "$work/tls" ec >/dev/null 2>&1
./build/aggregator/fieldprof-aggregator --listen 127.0.0.1 --port 0 --tls_cert "$work/tls/cert.pem" \
  --tls_key "$work/tls/key.pem" --db "$work/db" --source_batches_per_minute 0 2>"$work/agg.log" &
agg_pid=$!
port=""
for _ in $(seq 1 100); do
  port="$(sed -n 's/.*listening on https:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/agg.log")"
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$work/agg.log"; echo "bench-agent: the aggregator did not start"; exit 1; }
agent=(./build/agent/daemon/fieldprof-agent --server 127.0.0.1 --port "$port" --ca_file "$work/tls/cert.pem"
       --spool "$work/spool" --runtime_settings "$work/runtime.conf")
ticks=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$ticks" '{print ($14 + $15) * 1000 / t}' "/proc/$1/stat"; }
mem_kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }

echo "== 1. idle daemon, ${idle} s"
mkdir -p "$work/spool"
# The volunteer's consent: without it the agent seals and sends nothing
# (and this benchmark waited for a drain that never came).
# make_spool's modules are nobody's package: shared by name, as a volunteer
# shares a module of their own, their records leave (docs/privacy.md).
share="$(for i in $(seq 0 49); do printf 'libbench%d.so.1,' "$i"; done)"
printf 'consent = yes\nshare_modules = %s\n' "${share%,}" >"$work/runtime.conf"
# max_age_s 2: the last, partly filled batch goes 2 s after its records came.
"${agent[@]}" --state_dir "$work/state-idle" --max_age_s 2 2>"$work/agent-idle.log" &
agent_pid=$!
sleep 2  # start-up, first settings download
c0=$(cpu_ms "$agent_pid")
sleep "$idle"
c1=$(cpu_ms "$agent_pid")
echo "CPU while idle: $(python3 -c "print(f'{$c1 - $c0:.1f}')") ms in ${idle} s;" \
  "RSS $(mem_kib "$agent_pid" VmRSS) KiB (target <= 10 MiB = 10240 KiB)"

echo "== 2. the same daemon drains $records records"
./build/tests/benchmarks/make_spool "$work/gen" "$records" 7
bytes=$(du -sb "$work/gen" | cut -f1)
c0=$(cpu_ms "$agent_pid")
t0=$(date +%s%N)
mv "$work/gen"/*.fpr "$work/spool/"
for _ in $(seq 1 600); do
  n=$(find "$work/spool" -name '*.fpr' | wc -l)
  o=$(find "$work/state-idle/outbox" -name '*.batch' 2>/dev/null | wc -l)
  [[ "$n" -eq 0 && "$o" -eq 0 ]] && break
  sleep 0.05
done
t1=$(date +%s%N)
c1=$(cpu_ms "$agent_pid")
left=$(find "$work/spool" -name '*.fpr' | wc -l)
[[ "$left" -eq 0 ]] || { cat "$work/agent-idle.log"; echo "bench-agent: the daemon did not drain the spool"; exit 1; }
echo "drained $records records; wall $(( (t1 - t0) / 1000000 )) ms (includes the 2 s settle after new"
echo "records and the 2 s max age of the last batch); daemon CPU $(python3 -c "print(f'{$c1 - $c0:.0f}')") ms"
echo "(passes run in child processes; their CPU is counted in the daemon's children):"
awk -v t="$ticks" '{printf "  children CPU %.0f ms\n", ($16 + $17) * 1000 / t}' "/proc/$agent_pid/stat"
echo "daemon RSS now $(mem_kib "$agent_pid" VmRSS) KiB, peak $(mem_kib "$agent_pid" VmHWM) KiB"
grep -c "batches sealed" "$work/agent-idle.log" | sed 's/^/  passes that did something: /'
kill "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=""

echo "== 3. one pass (--once --flush) over $records records ($((bytes / 1024)) KiB of spool files)"
rm -rf "$work/spool"
./build/tests/benchmarks/make_spool "$work/spool" "$records" 8
/usr/bin/time -f "%e %U %S %M" -o "$work/time" "${agent[@]}" --state_dir "$work/state-once" --once --flush \
  2>"$work/once.log" || { cat "$work/once.log"; exit 1; }
read -r wall user sys maxrss < "$work/time"
grep -o '[0-9]* batches sealed' "$work/once.log" | head -1
sealed=$(grep -o '[0-9]* batches sealed' "$work/once.log" | head -1 | cut -d' ' -f1)
python3 - "$records" "$sealed" "$wall" "$user" "$sys" "$maxrss" <<'PY'
import sys
records, sealed, wall, user, sys_, rss = int(sys.argv[1]), int(sys.argv[2]), *map(float, sys.argv[3:6]), int(sys.argv[6])
print(f"{records} records -> {sealed} batches in {wall:.2f} s wall: {records / wall:.0f} records/s, "
      f"{sealed / wall:.1f} batches/s (~{sealed * 128 / 1024 / wall:.2f} MiB/s of 128 KiB batches)")
print(f"CPU {1000 * (user + sys_):.0f} ms ({1000 * (user + sys_) / records:.2f} ms per record), peak RSS {rss} KiB")
PY
