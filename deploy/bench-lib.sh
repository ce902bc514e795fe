# Sourced first by every deploy/bench-*.sh: strict mode, and a benchmark
# that stops says where and on what, instead of ending with no figure and
# no message.
set -Eeuo pipefail
trap 'echo "${0##*/}: stopped at line $LINENO: $BASH_COMMAND (exit status $?)" >&2' ERR
