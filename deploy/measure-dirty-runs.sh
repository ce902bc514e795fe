#!/usr/bin/env bash
# How often the dirty-run rule eats honest noise (docs/points.md): SETS
# sets of SIZE runs of a real program with nothing wrong, each set read by
# `fieldprof points show --json` as a user's directory of runs would be,
# and how many sets lost a run. The program: python3's startup, points at
# two libc calls it makes (setlocale, getenv) through --at, so its span is
# the start of the interpreter. Run it on a quiet machine: a busy one
# disturbs runs, and removing those is the rule's job.
#
#   ./deploy/measure-dirty-runs.sh [SETS=100] [SIZE=7]
set -euo pipefail
cd "$(dirname "$0")/.."
sets=${1:-100}
size=${2:-7}
./deploy/build.sh fieldprof fieldprof_runtime fieldprof_points_recorder >/dev/null
cli=build/tools/fieldprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cli" points record --runs $((sets * size)) --at libc.so.6:setlocale,libc.so.6:getenv \
  -o "$work/all" -- /usr/bin/python3 -c pass >/dev/null 2>&1
# Consecutive runs, in the order they were written, into sets.
python3 - "$work" "$sets" "$size" <<'EOF'
import os, sys
work, sets, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = sorted(os.listdir(f"{work}/all"), key=lambda f: os.stat(f"{work}/all/{f}").st_mtime_ns)
for s in range(sets):
    os.makedirs(f"{work}/set{s}")
    for f in files[s * size:(s + 1) * size]:
        os.rename(f"{work}/all/{f}", f"{work}/set{s}/{f}")
EOF
lost=0
past=0
for ((s = 0; s < sets; ++s)); do
  read -r removed kept < <("$cli" points show "$work/set$s" --json | python3 -c '
import json, sys
t = json.load(sys.stdin)["tags"][0]
print(len(t["removed"]), len(t["kept_outliers"]))')
  ((removed > 0)) && lost=$((lost + 1))
  past=$((past + removed + kept))
done
echo "$sets sets of $size runs of python3 -c pass: $lost lost a run ($past runs past |M| 3.5 in all)"
