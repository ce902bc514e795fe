#!/usr/bin/env bash
# What field stacks (docs/field-stacks.md) cost a measured run, and what
# they add to the batches:
#   1. CPU time (user + system, from wait4) of measured runs of a sqlite3
#      and a python3 workload (about 0.4 s each), with stack_hz = 0 (no
#      stacks), 20 (the default) and 100, interleaved round by round (each
#      round runs every variant once): the added CPU time against
#      stack_hz = 0, with a 95% confidence interval.
#   2. Bytes: RUNS measured runs of each workload into a spool with
#      stack_hz = 0 and with the default; the spool's bytes, the stack
#      records, and the batch the agent seals from each spool (this
#      machine's dpkg database, the aggregator unreachable: the batch waits
#      in the outbox), so what stacks add to the uploads.
#
#   deploy/bench-stacks.sh [ROUNDS] [RUNS]   (defaults 30 and 40)
# Prints each table; everything stays in a temp dir and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-30}"
runs="${2:-40}"
lib="$PWD/build/agent/runtime/libfieldprof-front.so"
agent="$PWD/build/agent/fieldprof-agent"
for f in "$lib" "$agent"; do
  [[ -e "$f" ]] || { echo "bench-stacks: $f missing (build first)" >&2; exit 2; }
done
work="$(mktemp -d /tmp/fieldprof-stacksbench-XXXXXX)"
trap 'rm -rf "$work"' EXIT

conf() {  # conf NAME STACK_HZ
  cat >"$work/$1.conf" <<CONF
consent = yes
sample_fraction = 1
max_runs_per_minute = 0
slots = 64
max_load_per_cpu = 1000
spool_dir = $work/spool-$1
slot_dir = $work/slots
stack_hz = $2
CONF
  mkdir -p "$work/spool-$1"
}
conf hz0 0
conf hz20 20
conf hz100 100

cat >"$work/sqlite.sql" <<'SQL'
create table t(a, b);
with recursive c(x) as (select 1 union all select x + 1 from c where x < 150000)
  insert into t select x, hex(randomblob(16)) from c;
select count(*), sum(length(b)) from t where b like '%AB%';
create index i on t(b);
select count(*) from t a join t b on a.a = b.a where a.b < b.b;
SQL
cat >"$work/work.py" <<'PY'
import json, re, zlib
rows = [{"id": i, "name": "n%d" % i, "tags": ["a", "b", str(i % 7)]} for i in range(20000)]
text = json.dumps(rows)
for _ in range(6):
    back = json.loads(text)
    z = zlib.compress(text.encode(), 6)
    found = len(re.findall(r'"n1\d*"', text))
print(len(back), len(z), found)
PY
sqlite_cmd="/usr/bin/sqlite3 -init $work/sqlite.sql :memory: .quit"
python_cmd="/usr/bin/python3 $work/work.py"

echo "== CPU time of a measured run, stack_hz 0 / 20 / 100 interleaved ($rounds rounds)"
python3 - "$rounds" "$lib" "$work" "$sqlite_cmd" "$python_cmd" <<'PY'
import os, statistics, sys
rounds, lib, work = int(sys.argv[1]), sys.argv[2], sys.argv[3]
workloads = {"sqlite3": sys.argv[4].split(), "python3": sys.argv[5].split()}
variants = ["hz0", "hz20", "hz100"]
def cpu(argv, conf):
    env = dict(os.environ, LD_PRELOAD=lib, FIELDPROF_SETTINGS=f"{work}/{conf}.conf")
    pid = os.fork()
    if pid == 0:
        fd = os.open("/dev/null", os.O_WRONLY)
        os.dup2(fd, 1); os.dup2(fd, 2)
        os.execve(argv[0], argv, env)
    _, status, ru = os.wait4(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return (ru.ru_utime + ru.ru_stime) * 1e3
for name, argv in workloads.items():
    for _ in range(3):  # warm-up
        for v in variants: cpu(argv, v)
    got = {v: [] for v in variants}
    for _ in range(rounds):
        for v in variants: got[v].append(cpu(argv, v))
    base = got["hz0"]
    print(f"-- {name}")
    for v in variants:
        d = [a - b for a, b in zip(got[v], base)]
        m = statistics.mean(d); ci = 1.96 * statistics.stdev(d) / len(d) ** 0.5
        print(f"   {v:<6} cpu {statistics.mean(got[v]):8.2f} ms  added {m:+7.2f} ms ± {ci:5.2f}"
              f"  ({100 * m / statistics.mean(base):+5.2f}% ± {100 * ci / statistics.mean(base):4.2f})")
PY

echo "== bytes: $runs measured runs of each workload, stack_hz 0 against 20"
for v in hz0 hz20; do
  for i in $(seq "$runs"); do
    FIELDPROF_SETTINGS="$work/$v.conf" LD_PRELOAD="$lib" $sqlite_cmd >/dev/null
    FIELDPROF_SETTINGS="$work/$v.conf" LD_PRELOAD="$lib" $python_cmd >/dev/null
  done
  spool_bytes=$(cat "$work/spool-$v"/*.fpr | wc -c)
  stacks=$("$PWD/build/tools/fieldprof" spool show --spool "$work/spool-$v" 2>/dev/null |
    grep -c 'stack_cpu_ns' || true)
  # The settings file gives the agent consent; it is not replaced (no
  # aggregator answers).
  "$agent" --once --flush --server 127.0.0.1 --port 9 --ca_file /dev/null --spool "$work/spool-$v" \
    --state_dir "$work/state-$v" --runtime_settings "$work/$v.conf" >/dev/null 2>&1 || true
  batch=$(cat "$work/state-$v"/outbox/*.batch 2>/dev/null | wc -c)
  echo "   stack_hz ${v#hz}: spool $spool_bytes bytes in $((2 * runs)) runs, stack records $stacks;" \
    "sealed batches $batch bytes"
done
