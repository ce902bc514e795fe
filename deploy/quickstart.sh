#!/usr/bin/env bash
# The main job, end to end on the embedded defaults:
#   1. install dependencies (Debian 12) and build,
#   2. make a self-signed ECDSA certificate for loopback,
#   3. start fieldprof-aggregator on an embedded RocksDB (127.0.0.1, a free port),
#   4. run real Debian programs many times under `fieldprof run` (sqlite3 on
#      deploy/workloads/sqlite-bench.sql, python3, gzip, xz, zstd, sort, git):
#      each run measures a few library APIs chosen at random and leaves a
#      record in the spool,
#   5. run fieldprof-agent once: the records become ~128 KiB batches, go over
#      TLS to the aggregator, exactly once,
#   6. print the field view: the most called APIs with their time
#      percentiles, the biggest allocators, one API in detail,
#   7. publish the signed snapshot, pull it into a local cache and read an
#      API's cost from the cache, offline (fieldprof pull, fieldprof cost),
#   8. stop the aggregator with SIGTERM (graceful).
#
#   deploy/quickstart.sh
#   QUICKSTART_ROUNDS=30 deploy/quickstart.sh        # more runs (default 12 rounds x 7 programs)
#   QUICKSTART_APIS=2 deploy/quickstart.sh           # APIs per run (default 4; the product's default is 2)
#   QUICKSTART_LOADGEN=400 deploy/quickstart.sh      # also load-test with synthetic batches, verified
#   QUICKSTART_KEEP_DB=1 deploy/quickstart.sh        # keep .quickstart/db between runs
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
state="$root/.quickstart"
rounds="${QUICKSTART_ROUNDS:-12}"
apis="${QUICKSTART_APIS:-4}"
loadgen="${QUICKSTART_LOADGEN:-0}"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "dependencies"
./deploy/install-deps.sh build
step "build"
./deploy/build.sh fieldprof-aggregator fieldprof-agent fieldprof-loadgen fieldprof 2>&1 |
  grep -E "Built target|error" || true

step "certificate, snapshot signing key, admin token"
mkdir -p "$state"
./deploy/make-cert.sh "$state/tls" ec
./deploy/make-signing-key.sh "$state/keys"
[[ -s "$state/admin.token" ]] || (umask 077 && head -c 24 /dev/urandom | base64 > "$state/admin.token")
[[ -s "$state/token.secret" ]] || (umask 077 && head -c 32 /dev/urandom > "$state/token.secret")
# Every batch spends an anonymous upload token, as in a public deployment;
# the load generator's synthetic batches carry none, so with
# QUICKSTART_LOADGEN tokens are off (a closed fleet's setting).
tokens=(--token_secret_file "$state/token.secret")
if [[ "$loadgen" != "0" ]]; then tokens=(); fi
if [[ "${QUICKSTART_KEEP_DB:-0}" != "1" ]]; then rm -rf "$state/db"; fi

step "aggregator"
# One machine sends here, so the aggregator publishes what one machine
# sends: k-anonymity 1. A real deployment keeps the default of 5.
echo "quickstart: one machine, so the aggregator runs with --k_anonymity 1 (the default is 5)"
log="$state/aggregator.log"
: >"$log"
./build/aggregator/fieldprof-aggregator --listen 127.0.0.1 --port 0 \
  --tls_cert "$state/tls/cert.pem" --tls_key "$state/tls/key.pem" --db "$state/db" \
  --signing_key "$state/keys/snapshot-signing.key" --snapshot_dir "$state/snapshot" \
  --admin_token_file "$state/admin.token" --k_anonymity 1 \
  "${tokens[@]}" \
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
client=(--host "127.0.0.1:$port" --ca "$state/tls/cert.pem")
curl -sf --cacert "$state/tls/cert.pem" "https://127.0.0.1:$port/healthz" >/dev/null
echo "healthz: ok"

step "real programs under the runtime: $rounds rounds x 8 programs, $apis random APIs each"
spool="$state/spool"
rm -rf "$spool" "$state/agent" "$state/cache"
work="$state/work"
rm -rf "$work" && mkdir -p "$work"
seq 1 200000 | sed 's/$/ fieldprof quickstart line/' > "$work/data.txt"
# A C++ program of libstdc++ calls; two of its APIs are always among those
# measured, so the field and the editor steps below have a C++ API to show.
cxx_demo=deploy/workloads/cxx-demo.cc
g++ -O2 -o "$work/cxx-demo" "$cxx_demo"
cxx_find='_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4findEPKcm'
cxx_apis="libstdc++.so.6:$cxx_find,libstdc++.so.6:_ZNSo5writeEPKcl"
run() { ./build/tools/fieldprof run --apis "$apis" --spool "$spool" -- "$@"; }
for i in $(seq 1 "$rounds"); do
  ./build/tools/fieldprof run --apis "$apis" --force "$cxx_apis" --spool "$spool" -- \
    "$work/cxx-demo" "$work" > /dev/null
  run sqlite3 :memory: < deploy/workloads/sqlite-bench.sql > /dev/null
  run /usr/bin/python3 -c 'import json, re, zlib
d = [{"id": i, "name": "item%d" % i, "tags": ["a", "b"][: i % 3]} for i in range(20000)]
s = json.dumps(d)
print(len(zlib.compress(s.encode())), len(re.findall(r"item1\d+", s)))' > /dev/null
  run gzip -c "$work/data.txt" > "$work/data.gz"
  run xz -T2 -c "$work/data.txt" > "$work/data.xz"
  run zstd -q -T2 -c "$work/data.txt" > "$work/data.zst"
  run sort -r --parallel=2 -S 16M "$work/data.txt" -o "$work/sorted.txt"
  rm -rf "$work/repo"
  run git -c init.defaultBranch=main init -q "$work/repo"
  cp "$work/data.txt" "$work/repo/"
  run git -C "$work/repo" add data.txt
  run git -C "$work/repo" -c user.name=q -c user.email=q@example.invalid commit -q -m quickstart
  printf '\r  round %d/%d' "$i" "$rounds"
done
echo
./build/tools/fieldprof spool ls --spool "$spool" | tail -1

step "fieldprof-agent --once --flush: spool -> batches -> aggregator"
# The agent sends nothing without the user's consent (fieldprof optin does
# this for a volunteer): running this demo is yours.
mkdir -p "$state" && printf 'consent = yes\n' > "$state/runtime.conf"
./build/agent/daemon/fieldprof-agent --once --flush --server 127.0.0.1 --port "$port" \
  --ca_file "$state/tls/cert.pem" --spool "$spool" --state_dir "$state/agent" \
  --runtime_settings "$state/runtime.conf" \
  --snapshot_key "$state/keys/snapshot-signing.pub" --snapshot_cache "$state/cache"
./build/tools/fieldprof status --spool "$spool" --state_dir "$state/agent" \
  --runtime_settings "$state/runtime.conf" --cache "$state/cache"

if [[ "$loadgen" != "0" ]]; then
  step "load: $loadgen synthetic batches of ~128 KiB over 8 TLS connections, verified against ground truth"
  ./build/tools/fieldprof-loadgen "${client[@]}" --batches "$loadgen" --connections 8 --verify
fi

step "the field view: most called APIs (wall time per call)"
./build/tools/fieldprof top "${client[@]}" --limit 15

step "the biggest allocators (bytes allocated per call, nested measured calls included)"
./build/tools/fieldprof top "${client[@]}" --limit 8 --metric alloc_bytes_inclusive --order mean

step "one module as its vendor sees it: libsqlite3 by package version (first lines)"
./build/tools/fieldprof report "${client[@]}" --module libsqlite3.so.0 | sed -n 1,8p

step "the most called API in detail"
top_api="$(./build/tools/fieldprof top "${client[@]}" --limit 1 --json |
  /usr/bin/python3 -c 'import json, sys; a = json.load(sys.stdin)["apis"][0]; print(a["module"], a["symbol"])')"
# shellcheck disable=SC2086
./build/tools/fieldprof api "${client[@]}" $top_api

step "publish the signed snapshot now (admin call), pull it, read a cost offline"
for _ in $(seq 1 100); do  # the uploaded batches folded into the sums
  curl -sf --cacert "$state/tls/cert.pem" "https://127.0.0.1:$port/metrics" |
    grep -q '^fieldprof_pending_batches 0$' && break
  sleep 0.1
done
curl -sf --cacert "$state/tls/cert.pem" -X POST \
  -H "Authorization: Bearer $(cat "$state/admin.token")" \
  "https://127.0.0.1:$port/v1/admin/publish?all=1"
./build/tools/fieldprof pull --all "${client[@]}" --cache "$state/cache" \
  --key "$state/keys/snapshot-signing.pub"
# shellcheck disable=SC2086
set -- $top_api
./build/tools/fieldprof cost --cache "$state/cache" "$1:$2"

step "C++: the field's libstdc++ APIs, and a call's cost as the editor shows it"
./build/tools/fieldprof top "${client[@]}" --limit 5 --module libstdc++.so.6
# The hover an editor gets over text.find("quick") in the demo's source
# (docs/ide.md sets up Neovim and VS Code): Clang tells which find it is.
at="$(grep -n 'text.find("quick")' "$cxx_demo" | head -1 | cut -d: -f1)"
col="$(sed -n "${at}p" "$cxx_demo" | awk '{ print index($0, "text.find(\"quick\")") + 5 }')"
./build/tools/fieldprof lsp --cache "$state/cache" --hover "$cxx_demo:$at:$col" | sed -n 1,12p

step "a few metrics (GET /metrics)"
curl -sf --cacert "$state/tls/cert.pem" "https://127.0.0.1:$port/metrics" |
  grep -E '^fieldprof_(batches_accepted_total|batches_duplicate_total|records_merged_total|pending_batches|apply_series_written_total|rocksdb_estimate_num_keys\{cf="data"\}|publish_cycles_total|snapshot_version|publish_last_seconds)'

step "graceful stop (SIGTERM)"
kill -TERM $pid
wait $pid
trap - EXIT
tail -2 "$log"
echo
echo "quickstart: done. Data in $state/db; run again with QUICKSTART_KEEP_DB=1 to add to it."
