# Sourced first by every deploy/bench-*.sh: strict mode, and a benchmark
# that stops says where and on what, instead of ending with no figure and
# no message.
set -Eeuo pipefail
trap 'echo "${0##*/}: stopped at line $LINENO: $BASH_COMMAND (exit status $?)" >&2' ERR

# FIELDPROF_BENCH_SMOKE=1 (deploy/test-benchmarks.sh sets it): a benchmark
# shrinks the parts its arguments do not size (a peer's loop, a count taken
# by another tool) to a token run. Every step still runs; no figure means
# anything.
smoke="${FIELDPROF_BENCH_SMOKE:-0}"

# The list of the system's code the runtime chooses among (docs/privacy.md),
# brought up to date as `fieldprof run` does; its path on stdout. Measured
# runs whose settings lack it (`system_code`, FIELDPROF_SYSTEM_CODE) choose
# nothing at random.
system_code_list() {
  ./build/tools/fieldprof run --spool "$(mktemp -d)" -- /bin/true >/dev/null
  if [[ $(id -u) == 0 ]]; then
    echo /var/cache/fieldprof/system-code/build-ids
  else
    echo "${XDG_CACHE_HOME:-$HOME/.cache}/fieldprof/system-code/build-ids"
  fi
}

# The number under key $1 of a one-line JSON object on stdin (loadgen's,
# the references'), written out for bash and bc, which read no exponent:
# 1e-05 is 0.000010000; a whole number stays whole.
field() {
  sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p" |
    awk '{ if ($1 == int($1)) printf "%d\n", $1; else printf "%.9f\n", $1 }'
}

# The median of its arguments (numbers; the mean of the middle two of an
# even count).
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

# A small C project in DIR, for make -s -B -j2 -C DIR to rebuild whole: gcc,
# cc1, as, collect2 and ld for each of its seven files, the process-heavy
# side of a build (bench-process.sh, bench-record.sh).
small_c_project() {
  mkdir -p "$1"
  for i in 1 2 3 4 5 6; do
    printf '#include <stdio.h>\n#include <string.h>\nint f%d(const char *s) { return (int)strlen(s) + %d; }\n' \
      "$i" "$i" >"$1/f$i.c"
  done
  printf 'int f1(const char *);\nint main(void) { return f1("x") == 2 ? 0 : 1; }\n' >"$1/main.c"
  cat >"$1/Makefile" <<'MK'
OBJS = main.o f1.o f2.o f3.o f4.o f5.o f6.o
prog: $(OBJS)
	$(CC) -o $@ $(OBJS)
%.o: %.c
	$(CC) -O1 -c $< -o $@
MK
}
