#!/usr/bin/env bash
# What the field's defences cost at ingest, in one run: two
# aggregators on loopback, measured in turns with the same loadgen bodies.
#   plain:    no tokens, no per-source limit, k-anonymity off, batches
#             without machine keys;
#   defended: every batch spends an upload token (VOPRF check), carries a
#             machine key (a sketch update per series), passes the
#             per-source limiter (set too high to refuse, so only its cost
#             shows) and is read back through k-anonymity (k 5).
# Tokens are taken before each defended turn (issuance is timed apart, as
# an agent takes them once a day). Prints each turn's batches/s, the
# medians and their ratio.
#
#   deploy/bench-ingest-defences.sh [BATCHES] [TURNS] [CONNECTIONS]  (default 4000, 3, 16)
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
batches="${1:-4000}"
turns="${2:-3}"
conns="${3:-16}"
./deploy/install-deps.sh build bench >/dev/null
./deploy/build.sh fieldprof-aggregator fieldprof-loadgen >/dev/null
work="$(mktemp -d /tmp/fieldprof-bench-XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
./deploy/make-cert.sh "$work/tls" ec >/dev/null
head -c 32 /dev/urandom >"$work/token.secret"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() {  # name port args...
  local name="$1" port="$2"
  shift 2
  ./build/aggregator/fieldprof-aggregator --port "$port" --db "$work/$name-db" \
    --tls_cert "$work/tls/cert.pem" --tls_key "$work/tls/key.pem" "$@" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 1 100); do
    curl -sf --cacert "$work/tls/cert.pem" "https://127.0.0.1:$port/healthz" >/dev/null && return
    sleep 0.1
  done
  echo "the $name aggregator did not start:" >&2
  cat "$work/$name.log" >&2
  exit 1
}
plain_port="$(free_port)"
start plain "$plain_port" --source_batches_per_minute 0 --k_anonymity 1
defended_port="$(free_port)"
start defended "$defended_port" --token_secret_file "$work/token.secret" \
  --tokens_per_request 4096 --source_token_requests_per_day 0 \
  --source_batches_per_minute 1e9 --source_burst 1e9 --k_anonymity 5

turn() {  # port extra-loadgen-args...
  local port="$1"
  shift
  ./build/tools/fieldprof-loadgen --port "$port" --ca "$work/tls/cert.pem" \
    --connections "$conns" --batches "$batches" --pool 256 --json "$@" 2>/dev/null
}
plain=()
defended=()
for t in $(seq 1 "$turns"); do
  j="$(turn "$plain_port")"
  plain+=("$(echo "$j" | field batches_per_second)")
  j="$(turn "$defended_port" --tokens --machines 1000)"
  failed="$(echo "$j" | field batches_failed)"
  [ "${failed:-0}" = "0" ] || { echo "defended turn $t: $failed batches failed: $j" >&2; exit 1; }
  defended+=("$(echo "$j" | field batches_per_second)")
  echo "turn $t: plain ${plain[-1]} batches/s, defended ${defended[-1]} batches/s"
done
mp="$(median "${plain[@]}")"
md="$(median "${defended[@]}")"
echo "median: plain $mp batches/s, defended $md batches/s, ratio $(echo "scale=3; $md / $mp" | bc)" \
  "($batches batches of ~128 KiB a turn, $conns connections, $turns turns each)"
