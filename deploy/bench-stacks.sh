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
#   3. With DAY_ROUNDS: a working day's mix (git, grep, sort, xz, openssl,
#      cc, python3, sqlite3, ls: 11 measured processes a round), DAY_ROUNDS
#      rounds with stack_hz = 0 and 20; then what the stacks add to the
#      batches the agent seals from a quarter, half and all of those runs,
#      and from all of them ten times over (a day ten times as busy with
#      the same work), the stack records held across batches as the agent
#      holds them.
#
#   deploy/bench-stacks.sh [ROUNDS] [RUNS] [DAY_ROUNDS]   (defaults 30, 40, 0;
#                                         0 skips a part)
#   BASE_LIB=<another build's libfieldprof-front.so>: part 1 also runs it
#   (stack_hz 0 and 20) in the same rounds, its added time against its own
#   stack_hz 0: before and after a change, in one run.
# Prints each table; everything stays in a temp dir and stops by itself.
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
rounds="${1:-30}"
runs="${2:-40}"
day_rounds="${3:-0}"
lib="$PWD/build/lib/fieldprof/libfieldprof-front.so"
agent="$PWD/build/agent/daemon/fieldprof-agent"
for f in "$lib" "$agent"; do
  [[ -e "$f" ]] || { echo "bench-stacks: $f missing (build first)" >&2; exit 2; }
done
work="$(mktemp -d /tmp/fieldprof-stacksbench-XXXXXX)"
trap 'rm -rf "$work"' EXIT

system_code="$(system_code_list)"
conf() {  # conf NAME STACK_HZ
  cat >"$work/$1.conf" <<CONF
consent = yes
system_code = $system_code
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

if [[ "$rounds" -gt 0 ]]; then
echo "== CPU time of a measured run, stack_hz 0 / 20 / 100 interleaved ($rounds rounds)"
python3 - "$rounds" "$lib" "$work" "$sqlite_cmd" "$python_cmd" "${BASE_LIB:-}" <<'PY'
import os, statistics, sys
rounds, lib, work, base_lib = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[6]
workloads = {"sqlite3": sys.argv[4].split(), "python3": sys.argv[5].split()}
variants = ["hz0", "hz20", "hz100"] + (["BASE hz0", "BASE hz20"] if base_lib else [])
def cpu(argv, variant):
    conf = variant.split()[-1]
    env = dict(os.environ, LD_PRELOAD=base_lib if variant.startswith("BASE") else lib,
               FIELDPROF_SETTINGS=f"{work}/{conf}.conf")
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
    print(f"-- {name}")
    for v in variants:
        base = got["BASE hz0" if v.startswith("BASE") else "hz0"]
        d = [a - b for a, b in zip(got[v], base)]
        m = statistics.mean(d); ci = 1.96 * statistics.stdev(d) / len(d) ** 0.5
        print(f"   {v:<9} cpu {statistics.mean(got[v]):8.2f} ms  added {m:+7.2f} ms ± {ci:5.2f}"
              f"  ({100 * m / statistics.mean(base):+5.2f}% ± {100 * ci / statistics.mean(base):4.2f})")
PY
fi

[[ "$runs" -gt 0 ]] && echo "== bytes: $runs measured runs of each workload, stack_hz 0 against 20"
for v in hz0 hz20; do
  [[ "$runs" -gt 0 ]] || break
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

[[ "$day_rounds" -gt 0 ]] || exit 0
echo "== a working day's mix: $day_rounds rounds of 11 measured processes, stack_hz 0 against 20"
conf day0 0
conf day20 20
src="$work/src"
mkdir -p "$src"
cp -r common "$src/"
head -c 4000000 /usr/bin/python3 >"$work/blob"
sort -R "$work/blob" 2>/dev/null | head -c 1000000 >"$work/lines" || true
cat >"$work/small.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct item { char name[32]; int n; };
static int cmp(const void* a, const void* b) { return strcmp(a, b); }
int main(void) {
  struct item v[64];
  for (int i = 0; i < 64; ++i) { snprintf(v[i].name, sizeof v[i].name, "i%d", 63 - i); v[i].n = i; }
  qsort(v, 64, sizeof v[0], cmp);
  printf("%s %d\n", v[0].name, v[0].n);
  return 0;
}
C
cat >"$work/day.py" <<'PY'
import json, re, zlib
rows = [{"id": i, "name": "n%d" % i} for i in range(3000)]
text = json.dumps(rows)
print(len(zlib.compress(text.encode())), len(re.findall(r'"n1\d*"', text)))
PY
for v in day0 day20; do
  for i in $(seq "$day_rounds"); do
    env FIELDPROF_SETTINGS="$work/$v.conf" LD_PRELOAD="$lib" sh -c "
      git -C '$PWD' log --oneline -300 >/dev/null
      git -C '$PWD' status --short >/dev/null
      grep -rc include '$src' >/dev/null
      sort '$work/lines' >/dev/null 2>&1
      xz -3 -c '$work/blob' >/dev/null
      openssl dgst -sha256 '$work/blob' >/dev/null
      cc -O2 -c -o '$work/small.o' '$work/small.c'
      /usr/bin/python3 '$work/day.py' >/dev/null
      /usr/bin/sqlite3 :memory: 'with recursive c(x) as (select 1 union all select x + 1 from c where x < 20000) select sum(x) from c;' >/dev/null
      ls -l /usr/lib >/dev/null" || true
  done
  measured=$(ls "$work/spool-$v" | grep -c '\.fpr$' || true)
  stacks=$("$PWD/build/tools/fieldprof" spool show --spool "$work/spool-$v" 2>/dev/null |
    grep -c 'stack_cpu_ns' || true)
  echo "   stack_hz ${v#day}: $measured run records, stack records $stacks"
done
# The same day sealed as the agent seals it, at four sizes: the first
# quarter and half of its runs, all of them, and all of them ten times over
# (the same mix run ten times as often: 10x the runs, no new kind of work).
# Each spool is sealed by one agent pass (--flush: its held stacks too);
# the stack records' bytes are counted in the sealed batches themselves.
cat >"$work/stack_bytes.py" <<'PY'
import sys
# Bytes of stack records (ApiKey.metric 8) in encoded wire::Batch files:
# Batch.records = 5, Record.key = 1, ApiKey.metric = 4.
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7F) << s; s += 7
        if c < 0x80: return v, i
def fields(b):
    i = 0
    while i < len(b):
        start = i; tag, i = varint(b, i); f, t = tag >> 3, tag & 7
        if t == 0: v, i = varint(b, i)
        elif t == 2: n, i = varint(b, i); v = b[i:i + n]; i += n
        elif t == 1: v = b[i:i + 8]; i += 8
        elif t == 5: v = b[i:i + 4]; i += 4
        else: raise ValueError(t)
        yield f, v, i - start
stack = total = records = 0
for path in sys.argv[1:]:
    b = open(path, "rb").read(); total += len(b)
    for f, v, n in fields(b):
        if f != 5: continue
        key = next((kv for kf, kv, _ in fields(v) if kf == 1), b"")
        if any(kf == 4 and kv == 8 for kf, kv, _ in fields(key)):
            stack += n; records += 1
print(total, stack, records)
PY
seal_bytes() {  # seal_bytes SHARE_PERCENT COPIES -> runs, batches, bytes, stack bytes, stack records
  local share="$1" copies="$2" d="$work/seal-$1-$2"
  mkdir -p "$d/spool"
  local files n
  mapfile -t files < <(ls "$work/spool-day20" | grep '\.fpr$' | sort)
  n=$(( ${#files[@]} * share / 100 ))
  for c in $(seq "$copies"); do
    for f in "${files[@]:0:$n}"; do cp "$work/spool-day20/$f" "$d/spool/${f%.fpr}-c$c.fpr"; done
  done
  "$agent" --once --flush --server 127.0.0.1 --port 9 --ca_file /dev/null --spool "$d/spool" \
    --state_dir "$d/state" --runtime_settings "$work/day20.conf" >/dev/null 2>&1 || true
  echo "$(( n * copies )) $(ls "$d/state"/outbox/ | grep -c '\.batch$' || true)" \
    "$(python3 "$work/stack_bytes.py" "$d/state"/outbox/*.batch)"
  rm -rf "$d"
}
echo "   sealed as the agent seals a day (stack records held across its batches):"
for size in "25 1" "50 1" "100 1" "100 10"; do
  read -r n k total stack records < <(seal_bytes $size)
  python3 - "$n" "$k" "$total" "$stack" "$records" <<'PY'
import sys
n, k, total, stack, records = map(int, sys.argv[1:])
print(f"   {n:6d} measured runs: {k} batches, {total} bytes; stack records {records}, {stack} bytes "
      f"({stack / 1024:.1f} KiB, {stack / 131072:.2f} of a 128 KiB batch, "
      f"{stack / max(n, 1):.1f} bytes a run)")
PY
done
