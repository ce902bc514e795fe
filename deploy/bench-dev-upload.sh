#!/usr/bin/env bash
# Developer mode's upload: EVENTS point events recorded by
# `fieldprof points record` into a developer spool, carried by the agent
# daemon to a local aggregator (TLS on loopback, embedded RocksDB, a temp
# dir that goes away) on its size threshold, and counted back on the
# aggregator: how long from the last run written to the last run stored,
# events a minute, uploads, and whether every event arrived.
#
#   deploy/bench-dev-upload.sh [EVENTS=1000000] [RUNS=40] [MAX_BYTES=1000000]
# (A thread whose ring is full waits for the recorder's drain; an event
# still without room is counted as lost in the file, and the events
# compared are the files'.)
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
events="${1:-1000000}"
runs="${2:-40}"
max_bytes="${3:-1000000}"
./deploy/install-deps.sh build bench >/dev/null
./deploy/build.sh fieldprof-aggregator fieldprof-agent fieldprof fieldprof_points_recorder \
  fieldprof_pointsprog >/dev/null
work="$(mktemp -d /tmp/fieldprof-devbench-XXXXXX)"
agg_pid="" agent_pid=""
cleanup() {
  [[ -n "$agent_pid" ]] && kill "$agent_pid" 2>/dev/null || true
  [[ -n "$agg_pid" ]] && kill "$agg_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
./deploy/make-cert.sh "$work/tls" ec >/dev/null 2>&1
token="bench-developer-token-$RANDOM$RANDOM"
echo "bench $token fieldprof_pointsprog" >"$work/developers"
echo "$token" >"$work/token"
./build/aggregator/fieldprof-aggregator --listen 127.0.0.1 --port 0 --tls_cert "$work/tls/cert.pem" \
  --tls_key "$work/tls/key.pem" --db "$work/db" --developers_file "$work/developers" \
  2>"$work/agg.log" &
agg_pid=$!
port=""
for _ in $(seq 1 100); do
  port="$(sed -n 's/.*listening on https:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/agg.log")"
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$work/agg.log"; echo "bench-dev-upload: the aggregator did not start"; exit 1; }

# Each round of the program makes 4 events (a point, a scope's begin and
# end, a point), so EVENTS/RUNS/4 rounds a run. Recorded apart, then moved
# into the watched spool at once, as a CI job's runs would land.
rounds=$((events / runs / 4))
./build/tools/fieldprof points record -o "$work/recorded" --runs "$runs" -- \
  ./build/tests/fieldprof_pointsprog "$rounds" >/dev/null 2>&1
recorded_bytes=$(du -cb "$work"/recorded/*.fppoints | tail -1 | cut -f1)
read -r file_events file_lost < <(./build/tools/fieldprof points show "$work/recorded" --json |
  python3 -c 'import json, sys; r = json.load(sys.stdin)["runs"]
print(sum(x["events"] for x in r), sum(x["lost"] for x in r))')
mkdir -p "$work/dev"
./build/agent/daemon/fieldprof-agent --server 127.0.0.1 --port "$port" --ca_file "$work/tls/cert.pem" \
  --spool "$work/spool" --state_dir "$work/state" --runtime_settings "" --snapshot_key "" \
  --dev_spool "$work/dev" --dev_token_file "$work/token" --dev_max_age_ms 60000 \
  --dev_max_bytes "$max_bytes" 2>"$work/agent.log" &
agent_pid=$!
sleep 1
start=$(date +%s%N)
mv "$work"/recorded/*.fppoints "$work/dev/"
stored=0
for _ in $(seq 1 1200); do
  kill -0 "$agent_pid" 2>/dev/null ||
    { cat "$work/agent.log"; echo "bench-dev-upload: the agent stopped"; exit 1; }
  stored=$(curl -sf --cacert "$work/tls/cert.pem" -H "Authorization: Bearer $token" \
    "https://127.0.0.1:$port/v1/dev/runs?tag=startup" | python3 -c \
    'import json, sys; r = json.load(sys.stdin)["runs"]; print(len(r), sum(x["events"] for x in r))')
  [[ "${stored%% *}" == "$runs" ]] && break
  sleep 0.1
done
end=$(date +%s%N)
got_runs="${stored%% *}"
got_events="${stored##* }"
secs=$(echo "($end - $start) / 1000000000" | bc -l)
uploads=$(grep -o "developer runs: [0-9]* sealed in [0-9]* uploads" "$work/agent.log" |
  awk '{s += $6} END {print s + 0}')
printf 'runs            %d recorded, %d stored\n' "$runs" "$got_runs"
printf 'events          %d made (%d rounds x 4 x %d runs), %d in the files (%d lost by the recorder), %d stored\n' \
  "$((rounds * 4 * runs))" "$rounds" "$runs" "$file_events" "$file_lost" "$got_events"
printf 'bytes           %d in run files (%.2f bytes an event)\n' "$recorded_bytes" \
  "$(echo "$recorded_bytes / $file_events" | bc -l)"
printf 'uploads         %d of at most %d bytes\n' "$uploads" "$max_bytes"
printf 'time            %.2f s from the runs landing to the last stored\n' "$secs"
printf 'rate            %.0f events a minute (goal: 1,000,000 a minute held)\n' \
  "$(echo "$got_events / $secs * 60" | bc -l)"
[[ "$got_events" == "$file_events" ]] || { echo "bench-dev-upload: events lost on the way"; exit 1; }
