#!/usr/bin/env bash
# fieldprof record against perf record on the same programs:
# each program is recorded by both, at 999 Hz with DWARF stacks, and the
# top self functions of each are printed side by side with the difference
# in points. The programs are those of the host-safety suite that have
# symbols: Debian's sqlite3 on the project's workload, a Go program (cgo
# and static), python3 with threads, node with JIT code (both read its
# perf map), and a C program that owns SIGTRAP/SIGPROF.
#
#   ./deploy/compare-perf.sh [TOP=6]
#
# perf counts user time only here (--all-user); fieldprof record, as root,
# also counts a system call's kernel time to the user stack that made it,
# so programs that spend time in the kernel differ by that share.
set -euo pipefail
cd "$(dirname "$0")/.."
top=${1:-6}
./deploy/build.sh fieldprof fieldprof_sampler fieldprof_raw_signals >/dev/null
command -v perf >/dev/null || { echo "compare-perf: perf is not installed (linux-perf)" >&2; exit 2; }
cli=$PWD/build/tools/fieldprof
src=$PWD/tests/tools/record/hostprogs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && GOCACHE=$tmp/gocache GO111MODULE=off CGO_ENABLED=1 go build -o go-cgo "$src/gohost.go" &&
  GOCACHE=$tmp/gocache GO111MODULE=off CGO_ENABLED=0 go build -o go-static "$src/gohost.go")

declare -A cmd=(
  [sqlite3]="sqlite3 :memory: -init $PWD/deploy/workloads/sqlite-bench.sql .quit"
  [go-cgo]="$tmp/go-cgo"
  [go-static]="$tmp/go-static"
  [python3]="/usr/bin/python3 $src/threads.py 2000000"
  [node]="node --perf-basic-prof $src/jit.js"
  [raw-signals]="$PWD/build/tests/fieldprof_raw_signals"
)
cd "$tmp"  # node --perf-basic-prof leaves its isolate-*-v8.log files here
for name in sqlite3 go-cgo go-static python3 node raw-signals; do
  $cli record --idle=false -o "$tmp/$name.fprec" -- ${cmd[$name]} >/dev/null 2>"$tmp/$name.log"
  perf record -q --all-user -F 999 --call-graph dwarf -o "$tmp/$name.perf" -- ${cmd[$name]} \
    >/dev/null 2>&1
  $cli record show "$tmp/$name.fprec" --bottom_up --color never >"$tmp/$name.ours"
  perf report -i "$tmp/$name.perf" --no-children --sort sym --stdio -g none 2>/dev/null \
    >"$tmp/$name.theirs"
  python3 - "$name" "$tmp/$name.ours" "$tmp/$name.theirs" "$top" <<'EOF'
import re, sys
name, ours_path, theirs_path, top = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def norm(f):
    # As perf prints them: Go's ABI suffix and symbol versions aside, and
    # a function without a symbol as its offset in its module (perf:
    # 0x00000000000352a3, record: libsqlite3.so.0.8.6+0x352a3).
    f = f.strip()
    f = re.sub(r"\.abi0$", "", f)
    f = re.sub(r"@.*$", "", f)
    m = re.match(r"^(?:\S+\+)?0x0*([0-9a-f]+)$", f)
    if m:
        f = "+0x" + m.group(1)
    return f

ours = {}
for line in open(ours_path):
    m = re.match(r"\s*([\d.]+)%\s+[\d.]+%\s+(.*)$", line)
    if m:
        ours[norm(m.group(2))] = ours.get(norm(m.group(2)), 0) + float(m.group(1))
theirs = {}
for line in open(theirs_path):
    m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(.*)$", line)
    if m:
        theirs[norm(m.group(3))] = theirs.get(norm(m.group(3)), 0) + float(m.group(1))
rows = sorted(theirs.items(), key=lambda kv: -kv[1])[:top]
worst = 0.0
print(f"== {name}: top {top} self functions by perf")
print(f"   {'perf':>7} {'record':>7} {'diff':>6}  function")
for f, p in rows:
    o = ours.get(f, 0.0)
    worst = max(worst, abs(o - p))
    print(f"   {p:6.2f}% {o:6.2f}% {o - p:+6.2f}  {f[:90]}")
print(f"   largest difference: {worst:.2f} points")
EOF
done
