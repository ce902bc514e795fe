#!/usr/bin/env bash
# What fieldprof record costs the program it records, interleaved round
# robin so that this VM's drift hits every variant alike:
#   - the sqlite3 workload (deploy/workloads/sqlite-bench.sql): plain, under
#     fieldprof record (the default: sampled from outside, 999 Hz, idle
#     transitions on; the points recorder only where the command has
#     points, so not here), --points (the recorder preloaded all the
#     same, the default before), then each part of the default switched
#     off alone: --idle=false (no switch records, no waits' stacks),
#     --idle_from program (the waits taken by the sampler preloaded into
#     each process, not from outside: what a user without kernel events
#     gets),
#     --cpu_wide off (no CPU-wide switch records), --stack_bytes 8192
#     (perf's stack copy, not 12 KiB), --cgroup off (events each process
#     inherits, as perf record -- CMD, not one a CPU on the command's own
#     cgroup; the default as root); all of them off at once (what perf
#     itself does), --clock task (sampled in the program), and
#     perf record -F 999 --call-graph dwarf, the peer, with its own 8 KiB
#     stacks and with record's 12 KiB (the same rate and depth);
#   - many short processes: make -B -j2 rebuilding a 7-file C program
#     (make, sh, gcc, cc1, as, collect2, ld: each process pays what is
#     preloaded into it): plain, record, --points, --idle=false, --cgroup off,
#     --idle_from program, all parts off, perf with its 8 KiB stacks and
#     with record's 12;
#   - 200 runs of /bin/true from sh, timed by that sh: what each process
#     pays alone (loading and starting what is preloaded, its raw file if
#     it makes one, the events copied into it): plain, record, --points,
#     --idle_from program, --idle=false, --cgroup off, --cgroup off
#     --idle=false, perf at record's depth, and perf taking the waits too;
#   - a two-thread ping-pong of 2 x N waits (tests/tools/record/waits.cc):
#     plain, --clock timer with --idle=false (sampling only), --clock timer
#     (with idle transitions; CPU-wide records too when privileged), the
#     same with --cpu_wide off (what an unprivileged user gets), the
#     default task clock, and the program alone with a context-switch ring
#     per thread that it discards (the kernel's switch records by
#     themselves, the mechanism's floor); and with the perf clock, the
#     default (the waits from outside where privileged: a stack copied at
#     each switch), --idle_from program and --idle=false;
#   - 20 million locks of a mutex on one thread, none of which can wait:
#     plain, under record with --idle=false, under record, and with
#     --idle_from program (what the sampler adds to each: its wrapper of
#     pthread_mutex_lock, mostly).
# Prints each variant's median wall time and its ratio to plain: of the
# whole command, and also of the program alone: the sqlite3 run timed by
# the shell that runs it, the ping-pong's waits timed by itself (so neither
# fieldprof record's work after the program ends nor perf's is in it; the
# sampler's start in the program is). Then what an idle transition adds
# (4 x N of them), from the ping-pong's own times.
#
# With BASE_CLI=<another build>/tools/fieldprof, also that build's record
# (its own preloaded libraries) on sqlite3 and make, in the same rounds:
# a change is told from the drift.
#
#   ./deploy/bench-record.sh [ROUNDS=15] [PINGPONG_ROUNDS=20000]
#   BASE_CLI=<old build>/tools/fieldprof ./deploy/bench-record.sh 15
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
rounds=${1:-15}
pp=${2:-20000}
./deploy/build.sh fieldprof fieldprof_sampler fieldprof_waits >/dev/null
cli=build/tools/fieldprof
waits=build/tests/fieldprof_waits
sql=deploy/workloads/sqlite-bench.sql
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v perf >/dev/null || { echo "bench-record: perf is not installed (linux-perf)" >&2; exit 2; }

declare -A cmd
# The program alone, timed by the shell that runs it: the work's microseconds
# appended to $tmp/inner_NAME.
timed() { echo "sh -c 'a=\$(date +%s%N); $1; b=\$(date +%s%N); echo \$(((b - a) / 1000)) >>$tmp/inner_$2'"; }
inner() { timed "sqlite3 :memory: < $sql" "$1"; }
cmd[sqlite:plain]="$(inner sqlite_plain)"
cmd[sqlite:record]="$cli record -o $tmp/s.fprec -- $(inner sqlite_record)"
cmd[sqlite:record-points]="$cli record --points -o $tmp/s.fprec -- $(inner sqlite_record-points)"
cmd[sqlite:record-no-idle]="$cli record --idle=false -o $tmp/s.fprec -- $(inner sqlite_record-no-idle)"
cmd[sqlite:record-idle-program]="$cli record --idle_from program -o $tmp/s.fprec -- $(inner sqlite_record-idle-program)"
cmd[sqlite:record-no-cpu-wide]="$cli record --cpu_wide off -o $tmp/s.fprec -- $(inner sqlite_record-no-cpu-wide)"
cmd[sqlite:record-inherit]="$cli record --cgroup off -o $tmp/s.fprec -- $(inner sqlite_record-inherit)"
cmd[sqlite:record-stack-8k]="$cli record --stack_bytes 8192 -o $tmp/s.fprec -- $(inner sqlite_record-stack-8k)"
cmd[sqlite:record-as-perf]="$cli record --idle=false --points=false --stack_bytes 8192 -o $tmp/s.fprec -- $(inner sqlite_record-as-perf)"
cmd[sqlite:record-task]="$cli record --clock task -o $tmp/s.fprec -- $(inner sqlite_record-task)"
cmd[sqlite:perf-dwarf]="perf record -q -F 999 --call-graph dwarf -o $tmp/perf.data -- $(inner sqlite_perf-dwarf)"
# perf at record's own stack depth (12 KiB a sample, perf's default is 8):
# the peer of the default at the same rate and depth.
cmd[sqlite:perf-dwarf-12k]="perf record -q -F 999 --call-graph dwarf,12288 -o $tmp/perf.data -- $(inner sqlite_perf-dwarf-12k)"
# The C project rebuilt whole, timed inside as sqlite3 is.
small_c_project "$tmp/cproj"
minner() { timed "make -s -B -j2 -C $tmp/cproj >/dev/null" "$1"; }
cmd[make:plain]="$(minner make_plain)"
cmd[make:record]="$cli record -o $tmp/m.fprec -- $(minner make_record)"
cmd[make:record-points]="$cli record --points -o $tmp/m.fprec -- $(minner make_record-points)"
cmd[make:record-no-idle]="$cli record --idle=false -o $tmp/m.fprec -- $(minner make_record-no-idle)"
cmd[make:record-inherit]="$cli record --cgroup off -o $tmp/m.fprec -- $(minner make_record-inherit)"
cmd[make:record-idle-program]="$cli record --idle_from program -o $tmp/m.fprec -- $(minner make_record-idle-program)"
cmd[make:record-as-perf]="$cli record --idle=false --points=false --stack_bytes 8192 -o $tmp/m.fprec -- $(minner make_record-as-perf)"
cmd[make:perf-dwarf]="perf record -q -F 999 --call-graph dwarf -o $tmp/perf.data -- $(minner make_perf-dwarf)"
cmd[make:perf-dwarf-12k]="perf record -q -F 999 --call-graph dwarf,12288 -o $tmp/perf.data -- $(minner make_perf-dwarf-12k)"
# The ping-pong's own time: microseconds appended to $tmp/inner_NAME.
own() { echo "set -o pipefail; $1 2>&1 >/dev/null | awk '/^elapsed/ {printf \"%d\\n\", \$2 * 1000}' >>$tmp/inner_$2"; }
cmd[pingpong:plain]="$(own "$waits pingpong $pp" pingpong_plain)"
cmd[pingpong:kernel-rings]="$(own "$waits pingpong-rings $pp" pingpong_kernel-rings)"
cmd[pingpong:timer-no-idle]="$(own "$cli record --clock timer --idle=false -o $tmp/p.fprec -- $waits pingpong $pp" pingpong_timer-no-idle)"
cmd[pingpong:timer]="$(own "$cli record --clock timer -o $tmp/p.fprec -- $waits pingpong $pp" pingpong_timer)"
cmd[pingpong:timer-unpriv]="$(own "$cli record --clock timer --cpu_wide off -o $tmp/p.fprec -- $waits pingpong $pp" pingpong_timer-unpriv)"
cmd[pingpong:task]="$(own "$cli record --clock task -o $tmp/p.fprec -- $waits pingpong $pp" pingpong_task)"
cmd[pingpong:default]="$(own "$cli record -o $tmp/p.fprec -- $waits pingpong $pp" pingpong_default)"
cmd[pingpong:idle-program]="$(own "$cli record --idle_from program -o $tmp/p.fprec -- $waits pingpong $pp" pingpong_idle-program)"
cmd[pingpong:no-idle]="$(own "$cli record --idle=false -o $tmp/p.fprec -- $waits pingpong $pp" pingpong_no-idle)"
# 200 short processes, timed inside as sqlite3 is.
tinner() { timed 'i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i + 1)); done' "$1"; }
cmd[trues:plain]="$(tinner trues_plain)"
cmd[trues:record]="$cli record -o $tmp/t.fprec -- $(tinner trues_record)"
cmd[trues:record-points]="$cli record --points -o $tmp/t.fprec -- $(tinner trues_record-points)"
cmd[trues:record-idle-program]="$cli record --idle_from program -o $tmp/t.fprec -- $(tinner trues_record-idle-program)"
cmd[trues:record-inherit]="$cli record --cgroup off -o $tmp/t.fprec -- $(tinner trues_record-inherit)"
cmd[trues:record-inherit-no-idle]="$cli record --cgroup off --idle=false --points=false -o $tmp/t.fprec -- $(tinner trues_record-inherit-no-idle)"
cmd[trues:record-as-perf]="$cli record --idle=false --points=false -o $tmp/t.fprec -- $(tinner trues_record-as-perf)"
cmd[trues:perf-dwarf-12k]="perf record -q -F 999 --call-graph dwarf,12288 -o $tmp/perf.data -- $(tinner trues_perf-dwarf-12k)"
# perf taking the waits as record does from outside (a context-switch
# event of period 1 with the user stack, the switch records): what they
# cost perf a process.
cmd[trues:perf-waits-12k]="perf record -q -e task-clock/period=1001001/ -e cs/period=1/ --switch-events --call-graph dwarf,12288 -o $tmp/perf.data -- $(tinner trues_perf-waits-12k)"
if [[ -n "${BASE_CLI:-}" ]]; then
  [[ -x "$BASE_CLI" ]] || { echo "bench-record: BASE_CLI $BASE_CLI is not a program" >&2; exit 2; }
  cmd[sqlite:record-base]="$BASE_CLI record -o $tmp/s.fprec -- $(inner sqlite_record-base)"
  cmd[make:record-base]="$BASE_CLI record -o $tmp/m.fprec -- $(minner make_record-base)"
  cmd[trues:record-base]="$BASE_CLI record -o $tmp/t.fprec -- $(tinner trues_record-base)"
fi
# A single thread's locks, none of which can wait: what the sampler's
# wrapper of pthread_mutex_lock adds to each, where a program takes many.
locks=20000000
cmd[locks:plain]="$(own "$waits locks $locks" locks_plain)"
cmd[locks:record-no-idle]="$(own "$cli record --idle=false -o $tmp/l.fprec -- $waits locks $locks" locks_record-no-idle)"
cmd[locks:record]="$(own "$cli record -o $tmp/l.fprec -- $waits locks $locks" locks_record)"
cmd[locks:record-idle-program]="$(own "$cli record --idle_from program -o $tmp/l.fprec -- $waits locks $locks" locks_record-idle-program)"
order=(sqlite:plain sqlite:record sqlite:record-points sqlite:record-no-idle sqlite:record-idle-program
  sqlite:record-no-cpu-wide sqlite:record-inherit sqlite:record-stack-8k sqlite:record-as-perf sqlite:record-task sqlite:perf-dwarf
  sqlite:perf-dwarf-12k
  make:plain make:record make:record-points make:record-no-idle make:record-idle-program make:record-inherit make:record-as-perf make:perf-dwarf
  make:perf-dwarf-12k
  trues:plain trues:record trues:record-points trues:record-idle-program trues:record-inherit
  trues:record-inherit-no-idle trues:record-as-perf
  trues:perf-dwarf-12k trues:perf-waits-12k
  pingpong:plain pingpong:kernel-rings pingpong:timer-no-idle pingpong:timer pingpong:timer-unpriv
  pingpong:task pingpong:no-idle pingpong:default pingpong:idle-program
  locks:plain locks:record-no-idle locks:record locks:record-idle-program)
if [[ -n "${BASE_CLI:-}" ]]; then order+=(sqlite:record-base make:record-base trues:record-base); fi

for ((i = 1; i <= rounds; i++)); do
  for v in "${order[@]}"; do
    s=$(date +%s%N)
    bash -c "${cmd[$v]}" >/dev/null 2>&1 || { echo "bench-record: $v failed: ${cmd[$v]}" >&2; exit 1; }
    e=$(date +%s%N)
    echo "$(((e - s) / 1000)) " >>"$tmp/${v//:/_}"
  done
  printf '\rround %d/%d' "$i" "$rounds" >&2
done
echo >&2
median() { tr ' ' '\n' <"$1" | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
fastest() { tr ' ' '\n' <"$1" | grep -v '^$' | sort -n | head -1; }
printf '%-26s %12s %8s %14s %8s %14s %8s\n' variant "median ms" "÷ plain" "program ms" "÷ plain" \
  "fastest ms" "÷ plain"
for v in "${order[@]}"; do
  m=$(median "$tmp/${v//:/_}")
  base=$(median "$tmp/${v%%:*}_plain")
  printf '%-26s %12.1f %8.3f' "$v" "$(echo "$m / 1000" | bc -l)" "$(echo "$m / $base" | bc -l)"
  if [[ -s "$tmp/inner_${v//:/_}" ]]; then
    mi=$(median "$tmp/inner_${v//:/_}")
    bi=$(median "$tmp/inner_${v%%:*}_plain")
    printf ' %14.1f %8.3f' "$(echo "$mi / 1000" | bc -l)" "$(echo "$mi / $bi" | bc -l)"
    fi=$(fastest "$tmp/inner_${v//:/_}")
    fb=$(fastest "$tmp/inner_${v%%:*}_plain")
    printf ' %14.1f %8.3f' "$(echo "$fi / 1000" | bc -l)" "$(echo "$fi / $fb" | bc -l)"
  fi
  echo
done
# What an idle transition adds, from the ping-pong's own medians: the
# kernel's switch records alone (against plain), and fieldprof record's
# whole mechanism (against sampling alone).
per() { echo "($(median "$tmp/inner_pingpong_$1") - $(median "$tmp/inner_pingpong_$2")) / (4 * $pp)" | bc -l; }
printf 'per idle transition: kernel switch records %.2f us; in the program (timer clock): unprivileged %.2f us, with CPU-wide records %.2f us; perf clock: in the program %.2f us, the default %.2f us\n' \
  "$(per kernel-rings plain)" "$(per timer-unpriv timer-no-idle)" "$(per timer timer-no-idle)" \
  "$(per idle-program no-idle)" "$(per default no-idle)"
lock_more() { echo "($(median "$tmp/inner_locks_$1") - $(median "$tmp/inner_locks_record-no-idle")) * 1000 / $locks" | bc -l; }
printf 'a lock and unlock that cannot wait: %.2f ns plain; more than under record --idle=false: %.2f ns under record, %.2f ns with --idle_from program (the sampler: its wrapper, the thread'"'"'s switch ring)\n' \
  "$(echo "$(median "$tmp/inner_locks_plain") * 1000 / $locks" | bc -l)" \
  "$(lock_more record)" "$(lock_more record-idle-program)"
