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
