#!/usr/bin/env bash
# A fieldprof scale-out cluster on this machine's loopback, from Debian's
# packages (deploy/install-deps.sh installs them): ZooKeeper, ClickHouse
# servers in shards and replicas, fieldprof-aggregator replicas over them,
# and haproxy in front. For trying the scale-out, its tests and benchmarks;
# docs/scale-out.md has the production setup these files mirror.
#
#   deploy/scale-out/cluster.sh start DIR [options]   configure and start all, wait until up
#   deploy/scale-out/cluster.sh stop DIR              stop all (SIGTERM, then SIGKILL)
#   deploy/scale-out/cluster.sh status DIR            what runs, and where
#   deploy/scale-out/cluster.sh kill DIR NAME         SIGKILL one: zk, ch-S-R, agg-N, haproxy
#   deploy/scale-out/cluster.sh term DIR NAME         SIGTERM one (a clean stop)
#   deploy/scale-out/cluster.sh run DIR NAME          start one again (same config and data)
#
# start options:
#   --shards R1,R2,...    replicas of each ClickHouse shard (default 2,2)
#   --aggregators N       aggregator replicas behind haproxy (default 3; 0: none)
#   --bin DIR             where fieldprof-aggregator is (default: build/aggregator)
#   --signing-key FILE    publish the snapshot (the lease picks the publisher)
#   --agg-args "ARGS"     more arguments for every aggregator
#   --batches-per-minute N  haproxy's per-source limit on POST /v1/batches,
#                         shared by every aggregator (default 0: none)
#   --exempt CIDR         a source the limit leaves alone (say, a CI fleet)
#   --owner PID           stop the cluster when process PID ends
#
# DIR/cluster.env then holds what clients need: LB_PORT (haproxy, HTTPS),
# AGG_PORTS, CA_FILE, CLICKHOUSE_URL, CLICKHOUSE_CLUSTER, ZOOKEEPER. Each
# process keeps its config, data, log and pid in DIR/NAME/.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

die() { echo "cluster: $*" >&2; exit 1; }
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

[[ $# -ge 2 ]] || usage
cmd=$1
dir=$2
shift 2

# A block of free loopback ports: PORTS[0..n-1].
free_ports() {
  local n=$1 base tries=0
  while ((tries++ < 50)); do
    # Below the ephemeral range (32768 and up), where outgoing connections
    # take their ports.
    base=$((10000 + RANDOM % 20000))
    local ok=1 p
    for ((p = base; p < base + n; p++)); do
      if (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then ok=0; break; fi
    done
    if ((ok)); then
      PORTS=()
      for ((p = base; p < base + n; p++)); do PORTS+=("$p"); done
      return 0
    fi
  done
  die "no block of $n free ports found"
}

# Starts the command line in DIR/$name (a new session, its output in log).
launch() {
  local name=$1
  shift
  mkdir -p "$dir/$name"
  (
    cd "$dir/$name"
    exec setsid "$@" >>"$dir/$name/log" 2>&1 </dev/null
  ) &
  echo $! >"$dir/$name/pid"
}

alive() { [[ -f "$dir/$1/pid" ]] && kill -0 "$(cat "$dir/$1/pid")" 2>/dev/null; }

# Waits up to $2 seconds for the check "$3..." to pass.
wait_for() {
  local what=$1 secs=$2
  shift 2
  local i
  for ((i = 0; i < secs * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "$what did not come up within ${secs}s (see its log under $dir)"
}

# ZooKeeper answers "ruok" before it serves sessions; ClickHouse (Debian's
# 18.16) that connects in between can crash in its DDL worker. "srvr"
# names a mode only once the server serves.
zk_ok() { (exec 3<>/dev/tcp/127.0.0.1/"$1"; printf srvr >&3; timeout 1 cat <&3) 2>/dev/null | grep -q '^Mode: '; }
ch_ok() { curl -sf "http://127.0.0.1:$1/ping" | grep -q Ok; }
https_ok() { curl -sf --cacert "$dir/tls/cert.pem" "https://127.0.0.1:$1/healthz" | grep -q ok; }

# The command line of process NAME, from the saved settings.
run_one() {
  local name=$1
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  case "$name" in
    zk)
      launch zk java -Xmx256m -cp /etc/zookeeper/conf_example:/usr/share/java/zookeeper.jar \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zk/zoo.cfg"
      wait_for "ZooKeeper" 30 zk_ok "$ZK_PORT"
      ;;
    ch-*)
      launch "$name" clickhouse-server --config-file="$dir/$name/config.xml"
      wait_for "$name" 60 ch_ok "$(cat "$dir/$name/http_port")"
      ;;
    agg-*)
      local port
      port="$(cat "$dir/$name/port")"
      # shellcheck disable=SC2086
      launch "$name" "$AGG_BIN" --listen 127.0.0.1 --port "$port" \
        --tls_cert "$dir/tls/cert.pem" --tls_key "$dir/tls/key.pem" \
        --store clickhouse --clickhouse_url "$CLICKHOUSE_URL" \
        --clickhouse_cluster "$CLICKHOUSE_CLUSTER" --zookeeper "$ZOOKEEPER" \
        --lab_dir "$dir/$name/lab" --workers 64 --max_queue 512 \
        --source_batches_per_minute 0 --k_anonymity 1 $AGG_ARGS
      wait_for "$name" 60 https_ok "$port"
      ;;
    haproxy)
      launch haproxy haproxy -db -f "$dir/haproxy/haproxy.cfg"
      wait_for "haproxy" 30 https_ok "$LB_PORT"
      ;;
    *) die "no process named $name" ;;
  esac
}

names() {
  local n
  for n in zk $(cd "$dir" && ls -d ch-* 2>/dev/null) $(cd "$dir" && ls -d agg-* 2>/dev/null) haproxy; do
    [[ -d "$dir/$n" ]] && echo "$n"
  done
}

signal_one() {
  local sig=$1 name=$2
  alive "$name" || return 0
  local pid
  pid="$(cat "$dir/$name/pid")"
  kill "-$sig" -- "-$pid" 2>/dev/null || kill "-$sig" "$pid" 2>/dev/null || true
  local i
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
}

case "$cmd" in
  start)
    shape="2,2"
    aggregators=3
    bin="$root/build/aggregator"
    signing_key=""
    agg_args=""
    owner=""
    per_minute=0
    exempt=""
    while [[ $# -gt 0 ]]; do
      case "$1" in
        --shards) shape=$2; shift 2 ;;
        --aggregators) aggregators=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --signing-key) signing_key=$2; shift 2 ;;
        --agg-args) agg_args=$2; shift 2 ;;
        --owner) owner=$2; shift 2 ;;
        --batches-per-minute) per_minute=$2; shift 2 ;;
        --exempt) exempt=$2; shift 2 ;;
        *) die "unknown option $1" ;;
      esac
    done
    [[ "$shape" =~ ^[1-9]([,][1-9])*$ ]] || die "--shards wants replica counts like 2,2"
    command -v clickhouse-server >/dev/null || die "clickhouse-server is missing: run deploy/install-deps.sh"
    command -v haproxy >/dev/null || die "haproxy is missing: run deploy/install-deps.sh"
    [[ -f /usr/share/java/zookeeper.jar ]] || die "ZooKeeper is missing: run deploy/install-deps.sh"
    if ((aggregators > 0)) && [[ ! -x "$bin/fieldprof-aggregator" ]]; then
      die "$bin/fieldprof-aggregator is missing: run deploy/build.sh"
    fi
    [[ ! -e "$dir/cluster.env" ]] || die "$dir already holds a cluster (stop it, or remove the directory)"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    IFS=, read -r -a replicas <<<"$shape"
    servers=0
    for r in "${replicas[@]}"; do servers=$((servers + r)); done
    free_ports $((1 + 3 * servers + aggregators + 2))
    next=0
    take() { PORT=${PORTS[$next]}; next=$((next + 1)); }

    # ZooKeeper: one server (a production ensemble has three or five).
    take
    zk_port=$PORT
    mkdir -p "$dir/zk/data"
    cat >"$dir/zk/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/zk/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
maxSessionTimeout=60000
EOF

    # ClickHouse: shards of replicas, every one told the whole layout.
    cat >"$dir/users.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
EOF
    remote="    <fieldprof>"
    url=""
    declare -A http tcp inter
    for ((s = 1; s <= ${#replicas[@]}; s++)); do
      remote+=$'\n'"      <shard><internal_replication>true</internal_replication>"
      shard_urls=""
      for ((r = 1; r <= replicas[s - 1]; r++)); do
        name="ch-$s-$r"
        take; http[$name]=$PORT
        take; tcp[$name]=$PORT
        take; inter[$name]=$PORT
        remote+="<replica><host>127.0.0.1</host><port>${tcp[$name]}</port></replica>"
        shard_urls+="${shard_urls:+,}http://127.0.0.1:${http[$name]}"
      done
      remote+="</shard>"
      url+="${url:+;}$shard_urls"
    done
    remote+=$'\n'"    </fieldprof>"
    for ((s = 1; s <= ${#replicas[@]}; s++)); do
      for ((r = 1; r <= replicas[s - 1]; r++)); do
        name="ch-$s-$r"
        h="$dir/$name"
        mkdir -p "$h/data" "$h/tmp"
        echo "${http[$name]}" >"$h/http_port"
        cat >"$h/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$h/server.log</log><errorlog>$h/err.log</errorlog></logger>
  <http_port>${http[$name]}</http_port>
  <tcp_port>${tcp[$name]}</tcp_port>
  <interserver_http_port>${inter[$name]}</interserver_http_port>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <listen_host>127.0.0.1</listen_host>
  <path>$h/data/</path>
  <tmp_path>$h/tmp/</tmp_path>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <zookeeper>
    <node><host>127.0.0.1</host><port>$zk_port</port></node>
    <session_timeout_ms>6000</session_timeout_ms>
  </zookeeper>
  <macros><shard>$s</shard><replica>$name</replica></macros>
  <remote_servers>
$remote
  </remote_servers>
  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
  <!-- A replica killed while inserting comes back with parts ZooKeeper does
       not know (it moves them aside and fetches from the others). In tables
       as young as a test's, those are more than the default half of its
       rows, and the replica would refuse to start. -->
  <merge_tree><replicated_max_ratio_of_wrong_parts>1</replicated_max_ratio_of_wrong_parts></merge_tree>
</yandex>
EOF
      done
    done

    [[ "$per_minute" =~ ^[0-9]+$ ]] || die "--batches-per-minute wants a number"
    # TLS: haproxy ends the clients' TLS and opens its own to the
    # aggregators; one certificate serves both here.
    "$root/deploy/make-cert.sh" "$dir/tls" >/dev/null
    mkdir -p "$dir/haproxy"
    cat "$dir/tls/cert.pem" "$dir/tls/key.pem" >"$dir/haproxy/tls.pem"
    chmod 600 "$dir/haproxy/tls.pem"
    agg_ports=""
    servers_block=""
    for ((i = 1; i <= aggregators; i++)); do
      take
      mkdir -p "$dir/agg-$i"
      echo "$PORT" >"$dir/agg-$i/port"
      agg_ports+="${agg_ports:+ }$PORT"
      servers_block+="  server agg-$i 127.0.0.1:$PORT"$'\n'
    done
    take
    lb_port=$PORT
    take
    stats_port=$PORT
    if [[ -n "$signing_key" ]]; then
      agg_args="--signing_key $signing_key $agg_args"
    fi

    # haproxy: HTTP over TLS, sent on to any aggregator that answers
    # /healthz (checked every second; out after 2 failures, back after 2).
    # The per-source limit lives in haproxy's stick table, so it holds
    # across the aggregators (they run without one: to them every request
    # comes from haproxy).
    limit=""
    if ((per_minute > 0)); then
      [[ "$exempt" =~ ^[0-9a-fA-F:./]*$ ]] || die "--exempt wants an address or CIDR"
      limit="  stick-table type ipv6 size 1m expire 2m store http_req_rate(1m)
  acl batch_post method POST
  acl batch_path path /v1/batches
  acl exempt src ${exempt:-255.255.255.255/32}
  http-request track-sc0 src,ipmask(24,56) if batch_post batch_path !exempt
  http-request return status 429 content-type application/json string '{\"error\":\"ResourceExhausted\",\"rule\":\"source_rate\",\"message\":\"too many batches from your network\"}' hdr Retry-After 60 if batch_post batch_path !exempt { sc_http_req_rate(0) gt $per_minute }"
    fi
    cat >"$dir/haproxy/haproxy.cfg" <<EOF
global
  maxconn 4096

defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  timeout http-request 15s
  timeout http-keep-alive 15s
  retries 2
  option redispatch

frontend fieldprof
  bind 127.0.0.1:$lb_port ssl crt $dir/haproxy/tls.pem
$limit
  default_backend aggregators

backend aggregators
  balance roundrobin
  option httpchk GET /healthz
  http-check expect status 200
  default-server ssl verify required ca-file $dir/tls/cert.pem check inter 1s fall 2 rise 2
$servers_block
listen stats
  bind 127.0.0.1:$stats_port
  stats enable
  stats uri /
EOF

    cat >"$dir/cluster.env" <<EOF
ZK_PORT=$zk_port
ZOOKEEPER=127.0.0.1:$zk_port
CLICKHOUSE_URL="$url"
CLICKHOUSE_CLUSTER=fieldprof
AGG_BIN="$bin/fieldprof-aggregator"
AGG_ARGS="$agg_args"
AGG_PORTS="$agg_ports"
LB_PORT=$lb_port
STATS_PORT=$stats_port
CA_FILE=$dir/tls/cert.pem
EOF
    echo "cluster: starting in $dir: ZooKeeper, ClickHouse shards $shape, $aggregators aggregators, haproxy"
    run_one zk
    for ((s = 1; s <= ${#replicas[@]}; s++)); do
      for ((r = 1; r <= replicas[s - 1]; r++)); do run_one "ch-$s-$r"; done
    done
    # The first aggregator makes the tables (ON CLUSTER) before the others start.
    for ((i = 1; i <= aggregators; i++)); do run_one "agg-$i"; done
    if ((aggregators > 0)); then run_one haproxy; fi
    if [[ -n "$owner" ]]; then
      # Stops the cluster when its owner (a test) ends, however it ends.
      (
        exec setsid bash -c "while kill -0 $owner 2>/dev/null; do sleep 1; done; exec '$0' stop '$dir'" \
          >/dev/null 2>&1 </dev/null
      ) &
      echo $! >"$dir/watchdog.pid"
    fi
    "$0" status "$dir"
    ;;
  stop)
    [[ -f "$dir/cluster.env" ]] || die "no cluster in $dir"
    for name in haproxy $(names | grep '^agg-' || true) $(names | grep '^ch-' || true) zk; do
      signal_one TERM "$name"
    done
    if [[ -f "$dir/watchdog.pid" ]]; then kill "$(cat "$dir/watchdog.pid")" 2>/dev/null || true; fi
    echo "cluster: stopped ($dir)"
    ;;
  status)
    [[ -f "$dir/cluster.env" ]] || die "no cluster in $dir"
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    for name in $(names); do
      printf '  %-8s %s\n' "$name" "$(alive "$name" && echo "running (pid $(cat "$dir/$name/pid"))" || echo stopped)"
    done
    echo "  haproxy https://127.0.0.1:$LB_PORT (stats http://127.0.0.1:$STATS_PORT/), CA $CA_FILE"
    echo "  ClickHouse $CLICKHOUSE_URL"
    echo "  ZooKeeper $ZOOKEEPER"
    ;;
  kill) [[ $# -eq 1 ]] || usage; signal_one KILL "$1" ;;
  term) [[ $# -eq 1 ]] || usage; signal_one TERM "$1" ;;
  run)
    [[ $# -eq 1 ]] || usage
    alive "$1" && die "$1 is running"
    run_one "$1"
    ;;
  *) usage ;;
esac
