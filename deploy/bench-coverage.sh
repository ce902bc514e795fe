#!/usr/bin/env bash
# Does every measured run bring data? The quickstart's programs
# (sqlite3, python3, gzip, xz, zstd, sort, git init/add/commit), RUNS runs in
# all, round robin, each under `fieldprof run --apis 2 --seed N` (the
# product's k), once with this tree's build and once with BASELINE's, same
# programs and seeds. BASELINE (default 6529c32: the runtime before the
# binder, an LD_AUDIT auditor choosing its APIs among all imports at start) is
# built in a temporary git worktree.
#
#   deploy/bench-coverage.sh [RUNS]          (default 1000)
#   BASELINE=<commit> deploy/bench-coverage.sh 300
#   BASELINE= deploy/bench-coverage.sh       (this tree only)
#   BASELINE_FIELDPROF=DIR/build/tools/fieldprof deploy/bench-coverage.sh
#                                            (a baseline built already)
#
# Prints for each build: runs, the share that measured at least one call,
# record files left, distinct APIs with data and with >= 100 calls.
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
root="$PWD"
runs="${1:-1000}"
baseline="${BASELINE-6529c32}"
./deploy/install-deps.sh build bench >/dev/null
./deploy/build.sh fieldprof >/dev/null
work="$(mktemp -d /tmp/fieldprof-coverage-XXXXXX)"
cleanup() {
  if [[ -n "$baseline" ]]; then git -C "$root" worktree remove --force "$work/base" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# This tree's runtime copied aside: a rebuild meanwhile must not change it.
mkdir -p "$work/lib"
cp "$root/build/lib/fieldprof/libfieldprof.so" "$root/build/lib/fieldprof/libfieldprof-front.so" \
  "$work/lib/"
builds=("current:$root/build/tools/fieldprof:--lib_dir=$work/lib")
if [[ -n "${BASELINE_FIELDPROF:-}" ]]; then
  builds+=("baseline:$BASELINE_FIELDPROF:")
  baseline=""
elif [[ -n "$baseline" ]]; then
  echo "== building $baseline in a temporary worktree (a few minutes)"
  git -C "$root" worktree add --detach --force "$work/base" "$baseline" >/dev/null 2>&1
  (cd "$work/base" && ./deploy/build.sh fieldprof >/dev/null)
  builds+=("$baseline:$work/base/build/tools/fieldprof:")
fi

# What a measured run brings is measured here, not whether the machine's
# load let it be measured: without this, a run after a busy minute (as in
# the test command) is not measured at all.
export FIELDPROF_MAX_LOAD=1000000
seq 1 50000 | sed 's/$/ fieldprof coverage line/' >"$work/data.txt"
sql="$root/deploy/workloads/sqlite-bench.sql"
# One program run: number I of the rotation, under FIELDPROF (the tool).
one() {  # one FIELDPROF FLAG SPOOL I
  local fp="$1" flag="$2" spool="$3" i="$4" w="$work/run"
  local run=("$fp" run ${flag:+"$flag"} --apis 2 --seed "$i" --spool "$spool" --)
  case $((i % 9)) in
    0) "${run[@]}" sqlite3 :memory: <"$sql" >/dev/null ;;
    1) "${run[@]}" /usr/bin/python3 -c 'import json, re, zlib
d = [{"id": i, "name": "item%d" % i} for i in range(5000)]
s = json.dumps(d)
print(len(zlib.compress(s.encode())), len(re.findall(r"item1\d+", s)))' >/dev/null ;;
    2) "${run[@]}" gzip -c "$work/data.txt" >"$w.gz" ;;
    3) "${run[@]}" xz -T2 -c "$work/data.txt" >"$w.xz" ;;
    4) "${run[@]}" zstd -q -T2 -c "$work/data.txt" >"$w.zst" ;;
    5) "${run[@]}" sort -r --parallel=2 -S 16M "$work/data.txt" -o "$w.sorted" ;;
    6) rm -rf "$w.repo" && "${run[@]}" git -c init.defaultBranch=main init -q "$w.repo" ;;
    7) cp "$work/data.txt" "$w.repo/" && "${run[@]}" git -C "$w.repo" add data.txt ;;
    8) "${run[@]}" git -C "$w.repo" -c user.name=q -c user.email=q@example.invalid \
         commit -q -m coverage ;;
  esac
}

for b in "${builds[@]}"; do
  IFS=: read -r name fp flag <<<"$b"
  out="$work/out-${name//[^a-zA-Z0-9]/_}"
  mkdir -p "$out"
  # A spool per run: a run may leave several records (a child, an exec).
  for i in $(seq 0 $((runs - 1))); do
    one "$fp" "$flag" "$out/$i" "$i" || true
    "$root/build/tools/fieldprof" spool show --spool "$out/$i" --json >"$out/$i.json" 2>/dev/null || true
    (((i + 1) % 50 == 0)) && printf '\r   %s: %d/%d runs' "$name" $((i + 1)) "$runs" >&2
  done
  echo >&2
  /usr/bin/python3 - "$name" "$runs" "$out" <<'PY'
import collections, json, os, sys
name, runs, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dec = json.JSONDecoder()
with_data, files, empty_files, nothing = 0, 0, 0, 0
calls = collections.Counter()
for i in range(runs):
    text = open(f"{out}/{i}.json").read() if os.path.exists(f"{out}/{i}.json") else ""
    pos, n = 0, 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        run, pos = dec.raw_decode(text, pos)
        files += 1
        m = 0
        for r in run.get("records", []):
            if r["key"]["metric"] == "METRIC_WALL_TIME_NS":
                c = int(r["histogram"]["count"])
                calls[(r["key"]["module"], r["key"]["symbol"])] += c
                m += c
        empty_files += m == 0
        n += m
    with_data += n > 0
    counters = f"{out}/{i}/.counters"
    if os.path.exists(counters):
        for line in open(counters):
            k, _, v = line.partition(" ")
            if k == "measured_nothing":
                nothing += int(v)
print(f"-- {name}: {runs} runs, {with_data} with calls measured "
      f"({100.0 * with_data / runs:.1f}%); {files} record files, {empty_files} of them "
      f"without a call; {nothing} images counted as measuring nothing (no file)")
print(f"   distinct APIs with data {len(calls)}, with >= 100 calls "
      f"{sum(1 for v in calls.values() if v >= 100)}")
if files == 0:
    sys.exit(f"bench-coverage: the {name} build's runs left no record at all")
PY
done
