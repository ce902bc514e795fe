#!/usr/bin/env bash
# How right the runtime's durations are, in short runs and long ones: a test function spins for 1.5 us of CLOCK_MONOTONIC
# (tests/agent/preload/runtime/testlib.cc fp_test_spin_ns) and is measured in runs of 300
# calls (~0.5 ms), 130 calls nested inside another measured call, and
# 100,000 calls; with the machine's TSC rate handed over (FIELDPROF_TSC_HZ,
# as fieldprof run and the agent's settings do), with the run's own
# estimate, and with the vDSO clock. The truth is each call's own span plus
# what a call takes beyond it (timed on an unmeasured twin); both sides are
# compared in the bucket of 1-2 us, as ClockTest does. Prints the recorded
# mean's error per case: mean, least and greatest over the runs.
#
#   deploy/bench-clock.sh [RUNS]   (runs per case, default 10)
#
# BASELINE_LIB=DIR (another build's libfieldprof.so, e.g. from a worktree of
# an older commit) measures that runtime too, in the same loop.
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
runs="${1:-10}"
./deploy/install-deps.sh build bench >/dev/null
./deploy/build.sh fieldprof_runtime fieldprof_testprog fieldprof >/dev/null
work="$(mktemp -d /tmp/fieldprof-clock-XXXXXX)"
trap 'rm -rf "$work"' EXIT
cli="$PWD/build/tools/fieldprof"
prog="$PWD/build/tests/fieldprof_testprog"
libs=("$PWD/build/lib/fieldprof/libfieldprof.so")
[[ -n "${BASELINE_LIB:-}" ]] && libs+=("$BASELINE_LIB/libfieldprof.so")

# The machine's rate, as fieldprof run measures it (its debug log says it).
"$cli" run --debug "$work/rate.log" --spool "$work/rate-spool" --max_load 1000 -- true
hz="$(sed -n "s/.*machine's rate, \([0-9]*\) Hz.*/\1/p" "$work/rate.log" | head -1)"
echo "machine TSC rate: ${hz:-none (no invariant TSC)} Hz"

one() {  # LIB CALLS MODE ENV... -> the error, %
  local lib=$1 calls=$2 mode=$3
  shift 3
  rm -rf "$work/spool"
  env "$@" FIELDPROF_RUN=1 FIELDPROF_K=2 FIELDPROF_FORCE=fp_test_spin_ns,fp_test_callback \
    "FIELDPROF_SPOOL=$work/spool" "FIELDPROF_SLOT_DIR=$work/slots" FIELDPROF_MAX_LOAD=1000 \
    FIELDPROF_BUDGET=1000 "LD_PRELOAD=$lib" "$prog" spin 1500 "$calls" "$mode" "$work/truth" \
    >/dev/null
  "$cli" spool show --json --spool "$work/spool" >"$work/rec.json"
  /usr/bin/python3 - "$work/truth" "$work/rec.json" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().split()
beyond = float(lines[0])
truth = [float(x) + beyond for x in lines[1:]]
inb = [v for v in truth if 1024 <= v < 2048]
text, dec, pos, recorded = open(sys.argv[2]).read(), json.JSONDecoder(), 0, None
while pos < len(text):
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos >= len(text):
        break
    obj, pos = dec.raw_decode(text, pos)
    for r in obj.get("records", []):
        k = r["key"]
        if k["symbol"] == "fp_test_spin_ns" and k["metric"] == "METRIC_WALL_TIME_NS":
            for b in r["histogram"]["buckets"]:
                if b["index"] == 10:
                    recorded = int(b["sumLo"]) / int(b["count"])
if recorded is None or not inb:
    print("nan")
else:
    print(f"{(recorded / (sum(inb) / len(inb)) - 1) * 100:.3f}")
PY
}

printf '%-8s %-22s %-16s %9s %9s %9s\n' library clock run "mean %" "least %" "most %"
for lib in "${libs[@]}"; do
  name=current
  [[ "$lib" != "${libs[0]}" ]] && name=baseline
  clocks=("own rate|" "vDSO clock|FIELDPROF_CLOCK=vdso")
  [[ -n "$hz" ]] && clocks+=("machine rate|FIELDPROF_TSC_HZ=$hz")
  for c in "${clocks[@]}"; do
    label="${c%%|*}"
    envs=()
    [[ -n "${c#*|}" ]] && envs=("${c#*|}")
    for case in "300 outer" "130 nested" "100000 outer"; do
      read -r calls mode <<<"$case"
      n=$runs
      [[ $calls -ge 100000 ]] && n=$(((runs + 4) / 5))
      errs=()
      for _ in $(seq "$n"); do errs+=("$(one "$lib" "$calls" "$mode" "${envs[@]}")"); done
      /usr/bin/python3 -c "
import sys
e = [float(x) for x in sys.argv[4:] if x != 'nan']
print(f'{sys.argv[1]:<8} {sys.argv[2]:<22} {sys.argv[3]:<16} {sum(e)/len(e):+9.2f} {min(e):+9.2f} {max(e):+9.2f}')
" "$name" "$label" "$calls $mode" "${errs[@]}"
    done
  done
done
