#!/usr/bin/env bash
# What the runtime costs a whole process, plain against instrumented, side
# by side in one hyperfine run per workload (the table in docs/benchmarks-history.md):
#   plain      no runtime at all
#   floor      an empty shared object preloaded: what any LD_PRELOAD costs
#              here (mapping, relocation), the floor under "idle"
#   idle       the front preloaded, as sessions do (agent/preload/runtime/front/front.cc),
#              no consent: every run a volunteer's machine does not
#              measure costs about this (not sampled: the front alone;
#              refused by the rate cap or a slot: the front and the runtime)
#   default    consent, the shipped defaults: 1 run in 16 sampled, at most
#              120 measured runs a minute machine-wide, k = 2
#   measured   consent, every run measured (sample_fraction 1, no rate cap):
#              the fixed cost of a measured run
# Workloads: true; ls /usr/lib; python3 -c pass; a shell script running
# 400 short processes (sed, grep, cat); sqlite3 on a ~100 ms SQL workload;
# git status on this repository; make -j2 rebuilding a 7-file C program.
# Then where a measured `true` spends its start, from the runtime's debug
# log (TSC ticks by part), and, in the same run, the cost per call: an
# empty library function through the PLT (tests/benchmarks/rt_bench_prog),
# plain against selected, and the floor of a timed call (two rdtsc).
#
#   deploy/bench-process.sh [RUNS]    (hyperfine --runs, default 200; the
#                                      400-process script and sqlite3 use RUNS/10)
#   BASE_LIB=old/libfieldprof.so deploy/bench-process.sh [RUNS]
#       before and after in one run: the interleaved part and the per-call
#       part also run an older build's preloaded object (the runtime itself
#       before the front, or an older front) beside this one, as "idle
#       (base)" and "measured (base)"
# Each added cost is also printed as a share of the workload's plain run
# and in "spawns": units of a plain spawn of /bin/true measured in the same
# run (machines of this kind differ twofold in that spawn; the goals in
# docs/benchmarks.md are stated in it).
# Prints each table; everything stays in a temp dir and stops by itself.
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
runs="${1:-200}"
./deploy/install-deps.sh build bench >/dev/null
./deploy/build.sh fieldprof_runtime fieldprof_front fieldprof spawn_bench rt_bench_prog >/dev/null
work="$(mktemp -d /tmp/fieldprof-procbench-XXXXXX)"
trap 'rm -rf "$work"' EXIT
lib="$PWD/build/lib/fieldprof/libfieldprof-front.so"

# The runtime chooses only among the system's code (bench-lib.sh).
system_code="$(system_code_list)"
conf() {  # conf NAME CONSENT FRACTION MAX_RUNS
  cat >"$work/$1.conf" <<CONF
consent = $2
sample_fraction = $3
max_runs_per_minute = $4
slots = 64
max_load_per_cpu = 1000
spool_dir = $work/spool-$1
slot_dir = $work/slots
CONF
  # A runtime older than the system's code (BASE_LIB) takes no
  # system_code line (it would read the file as corrupt and measure
  # nothing): its own copy has none. A newer one gets it too, or it would
  # choose among nothing and look cheaper than it is.
  cp "$work/$1.conf" "$work/$1-base.conf"
  echo "system_code = $system_code" >>"$work/$1.conf"
  if [[ -n "${BASE_LIB:-}" ]] && grep -q system_code "$(dirname "$BASE_LIB")/libfieldprof.so"; then
    echo "system_code = $system_code" >>"$work/$1-base.conf"
  fi
}
conf idle no 1 0
echo 'int fieldprof_bench_empty;' >"$work/empty.c"
gcc -shared -fPIC -O2 -o "$work/empty.so" "$work/empty.c"
conf default yes 0.0625 120
conf measured yes 1 0
mkdir -p "$work/spool-default" "$work/spool-measured"

# The shell workload: 400 short processes.
cat >"$work/procs.sh" <<'SH'
for i in $(seq 1 100); do
  echo "line $i" | sed 's/line/row/' | grep -q row
  cat /etc/hostname >/dev/null
done
SH
cp deploy/workloads/sqlite-bench.sql "$work/"

small_c_project "$work/cproj"

bench() {  # bench RUNS COMMAND...
  local n="$1"; shift
  local cmd="$*"
  hyperfine -N --runs "$n" --warmup "$warmup" --style basic \
    -n plain "env $cmd" \
    -n floor "env LD_PRELOAD=$work/empty.so $cmd" \
    -n idle "env FIELDPROF_SETTINGS=$work/idle.conf LD_PRELOAD=$lib $cmd" \
    -n default "env FIELDPROF_SETTINGS=$work/default.conf LD_PRELOAD=$lib $cmd" \
    -n measured "env FIELDPROF_SETTINGS=$work/measured.conf LD_PRELOAD=$lib $cmd" \
    --export-json "$work/h.json" >/dev/null
  python3 - "$work/h.json" "$cmd" "$work/unit" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))["results"]
base = r[0]["mean"]
# The first workload is /bin/true (through env): its plain mean is the
# unit after it.
if not os.path.exists(sys.argv[3]):
    open(sys.argv[3], "w").write(str(base))
unit = float(open(sys.argv[3]).read())
print(f"-- {sys.argv[2]}")
for x in r:
    d = x["mean"] - base
    print(f"   {x['command']:<9} {x['mean']*1e3:9.3f} ms ± {x['stddev']*1e3:6.3f}"
          f"   added {d*1e3:+8.3f} ms ({d/base*100:+6.1f}%, {d/unit:+8.3f} spawns)")
PY
}

# Each workload at least 5 times after 5 warm-ups; a smoke run (bench-lib.sh)
# 2, the fewest spawn_bench and the tables' deviations take.
least=$((smoke == 1 ? 2 : 5))
few=$((runs / 10 > least ? runs / 10 : least))
quarter=$((runs / 4 > least ? runs / 4 : least))
warmup=$least
# Each workload with its share of RUNS.
workloads() {  # workloads FN: calls FN ROUNDS COMMAND... per workload
  "$1" "$runs" /bin/true
  "$1" "$runs" /bin/ls /usr/lib
  "$1" "$quarter" /usr/bin/python3 -c pass
  "$1" "$few" /bin/bash "$work/procs.sh"
  "$1" "$few" /usr/bin/sqlite3 -init "$work/sqlite-bench.sql" :memory: .quit
  "$1" "$quarter" /usr/bin/git -C "$PWD" status --short
  "$1" "$few" /usr/bin/make -s -B -j2 -C "$work/cproj"
}

# env(1) itself costs an exec: the plain side runs through env too, so the
# columns differ by the runtime alone.
echo "== whole processes, mean of hyperfine runs (plain, floor, idle, default, measured side by side)"
echo "   a spawn here: the plain \"env /bin/true\"'s mean below (two execs; the interleaved part times one)"
workloads bench
echo "   records left by the 'default' runs: $(ls "$work/spool-default" | grep -c '\.fpr$' || true)," \
  "by the 'measured' runs: $(ls "$work/spool-measured" | grep -c '\.fpr$' || true)"

# The same, interleaved (each round runs every variant once): on a shared
# VM hyperfine's back-to-back runs drift more than the differences sought.
spawn="$PWD/build/tests/benchmarks/spawn_bench"
base="${BASE_LIB:-}"
interleaved() {  # interleaved ROUNDS COMMAND...
  local n="$1"; shift
  local extra=()
  if [[ -n "$base" ]]; then
    extra=("FIELDPROF_SETTINGS=$work/idle-base.conf LD_PRELOAD=$base $*"
      "FIELDPROF_SETTINGS=$work/measured-base.conf LD_PRELOAD=$base $*")
  fi
  "$spawn" --unit /bin/true "$n" "$*" "LD_PRELOAD=$work/empty.so $*" \
    "FIELDPROF_SETTINGS=$work/idle.conf LD_PRELOAD=$lib $*" \
    "FIELDPROF_SETTINGS=$work/default.conf LD_PRELOAD=$lib $*" \
    "FIELDPROF_SETTINGS=$work/measured.conf LD_PRELOAD=$lib $*" "${extra[@]}" |
    { if [[ -n "$base" ]]; then sed "s|$base|BASE|g"; else cat; fi; } |
    sed "s|$work|WORK|g; s|$lib|LIB|g"
}
echo "== interleaved (spawn_bench): plain, floor (empty preload), idle, default, measured${base:+, idle and measured with BASE}"
echo "   each added cost also as a share of the plain run and in spawns of a plain /bin/true, in the same rounds"
workloads interleaved

echo "== a measured /bin/true's start, by part (TSC ticks, median of 50)"
for i in $(seq 50); do
  FIELDPROF_SETTINGS="$work/measured.conf" FIELDPROF_DEBUG="$work/debug.log" LD_PRELOAD="$lib" /bin/true
done
python3 - "$work/debug.log" <<'PY'
import re, statistics, sys
rows = [list(map(int, re.findall(r"\d+", l))) for l in open(sys.argv[1]) if l.startswith("start, in ticks")]
names = ["first look", "decision", "memory", "probe", "binder"]
print("   " + ", ".join(f"{n} {statistics.median(c[i] for c in rows):.0f}" for i, n in enumerate(names)))
PY

echo "== per call: an empty library function through the PLT (ns per call, best of 5 interleaved runs)"
prog="$PWD/build/tests/benchmarks/rt_bench_prog"
ns() { sed -n 's/.*"ns_per_call":\([0-9.]*\).*/\1/p'; }
plain=999; sel=999; tsc=999; bsel=999
call_ns() {  # call_ns LIB: ns per call of the selected empty function
  env FIELDPROF_RUN=1 "FIELDPROF_SPOOL=$work/spool-call" "FIELDPROF_SLOT_DIR=$work/slots" \
    FIELDPROF_K=1 FIELDPROF_FORCE=fp_bench_empty FIELDPROF_BUDGET=1000 FIELDPROF_MAX_LOAD=1000 \
    "LD_PRELOAD=$1" "$prog" empty 5000000 5 | ns
}
for i in 1 2 3 4 5; do
  t=$("$prog" rdtsc 20000000 5 | ns)
  tsc=$(python3 -c "print(min($tsc, $t))")
  p=$("$prog" empty 20000000 5 | ns)
  q=$(call_ns "$lib")
  plain=$(python3 -c "print(min($plain, $p))"); sel=$(python3 -c "print(min($sel, $q))")
  if [[ -n "$base" ]]; then b=$(call_ns "$base"); bsel=$(python3 -c "print(min($bsel, $b))"); fi
done
echo "   plain $plain ns, selected $sel ns: $(python3 -c "print(f'{$sel - $plain:+.2f}')") ns per measured call"
echo "   the floor, two rdtsc: $(python3 -c "print(f'{2 * $tsc:.2f}')") ns; added / floor = $(python3 -c "print(f'{($sel - $plain) / (2 * $tsc):.2f}')")"
if [[ -n "$base" ]]; then
  echo "   BASE: selected $bsel ns: $(python3 -c "print(f'{$bsel - $plain:+.2f}')") ns per measured call;" \
    "added / floor = $(python3 -c "print(f'{($bsel - $plain) / (2 * $tsc):.2f}')")"
fi
