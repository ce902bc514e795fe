#!/usr/bin/env bash
# The runtime of this tree against the runtime of an earlier commit, in one
# run, interleaved, so a change's effect on what volunteers pay can be told
# from the machine's drift:
#   1. per measured call: an empty library function through the PLT
#      (tests/benchmarks/rt_bench_prog), plain, with REV's runtime and with
#      this tree's, best of 5 rounds, and the floor (two rdtsc);
#   2. per process: /bin/true plain, the floor (an empty shared object
#      preloaded: what any LD_PRELOAD costs), idle (no consent) and
#      measured (FIELDPROF_RUN=1) under both runtimes
#      (tests/benchmarks/spawn_bench, ROUNDS rounds, 95% intervals).
#
#   deploy/bench-runtime-vs.sh REV [ROUNDS]     (default ROUNDS 1500)
# REV's runtime is built in a temporary git worktree, removed at the end.
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
rev="${1:?usage: deploy/bench-runtime-vs.sh REV [ROUNDS]}"
rounds="${2:-1500}"
./deploy/build.sh fieldprof_runtime spawn_bench rt_bench_prog >/dev/null
work="$(mktemp -d /tmp/fieldprof-runtime-vs-XXXXXX)"
cleanup() {
  git worktree remove --force "$work/tree" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
git worktree add -q --detach "$work/tree" "$rev"
(cmake -S "$work/tree" -B "$work/tree/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
   cmake --build "$work/tree/build" -j"$(nproc)" --target fieldprof_runtime >/dev/null)
old="$work/tree/build/lib/fieldprof/libfieldprof.so"
# (before agent/preload/, the build kept the preloaded libraries here)
[[ -f "$old" ]] || old="$work/tree/build/agent/runtime/libfieldprof.so"
new="$PWD/build/lib/fieldprof/libfieldprof.so"
prog="$PWD/build/tests/benchmarks/rt_bench_prog"
py=/usr/bin/python3
ns() { sed -n 's/.*"ns_per_call":\([0-9.]*\).*/\1/p'; }
selected() {  # selected LIB: ns per call with the function measured
  env FIELDPROF_RUN=1 "FIELDPROF_SPOOL=$work/spool" "FIELDPROF_SLOT_DIR=$work/slots" FIELDPROF_K=1 \
    FIELDPROF_FORCE=fp_bench_empty FIELDPROF_BUDGET=1000 FIELDPROF_MAX_LOAD=1000 \
    "LD_PRELOAD=$1" "$prog" empty 5000000 5 | ns
}
plain=999; tsc=999; o=999; n=999
for _ in 1 2 3 4 5; do
  tsc=$($py -c "print(min($tsc, $("$prog" rdtsc 20000000 5 | ns)))")
  plain=$($py -c "print(min($plain, $("$prog" empty 20000000 5 | ns)))")
  o=$($py -c "print(min($o, $(selected "$old")))")
  n=$($py -c "print(min($n, $(selected "$new")))")
done
echo "== per measured call (ns, best of 5 interleaved rounds)"
echo "   plain $plain; $rev: $o (+$($py -c "print(f'{$o-$plain:.2f}')")); this tree: $n (+$($py -c "print(f'{$n-$plain:.2f}')")); two rdtsc $($py -c "print(f'{2*$tsc:.2f}')")"
echo "== per process, /bin/true (spawn_bench $rounds rounds, interleaved)"
run="FIELDPROF_RUN=1 FIELDPROF_SPOOL=$work/s FIELDPROF_SLOT_DIR=$work/sl FIELDPROF_MAX_LOAD=1000"
echo 'int fieldprof_bench_empty;' >"$work/empty.c"
gcc -shared -fPIC -O2 -o "$work/empty.so" "$work/empty.c"
"$PWD/build/tests/benchmarks/spawn_bench" "$rounds" /bin/true "LD_PRELOAD=$work/empty.so /bin/true" \
  "FIELDPROF_SETTINGS=$work/none.conf LD_PRELOAD=$old /bin/true" \
  "FIELDPROF_SETTINGS=$work/none.conf LD_PRELOAD=$new /bin/true" \
  "$run LD_PRELOAD=$old /bin/true" "$run LD_PRELOAD=$new /bin/true" |
  sed "s|$work/empty.so|FLOOR|g; s|$old|$rev|g; s|$new|THIS|g; s|$work|WORK|g"
