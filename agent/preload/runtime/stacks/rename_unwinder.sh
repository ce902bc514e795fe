#!/bin/sh
# rename_unwinder.sh IN.a OUT.a: a copy of GCC's libgcc_eh.a with every
# symbol it defines renamed fp_<name> (CMakeLists.txt, stack_samples.h).
set -eu
in="$1"
out="$2"
nm --defined-only -g "$in" 2>/dev/null | awk 'NF == 3 { print $3 " fp_" $3 }' | sort -u >"$out.syms"
# Its zero-initialised data to .lbss, with the runtime's other cold data,
# off the page of .bss every process writes (tests/agent/preload/runtime, RuntimeLayoutTest).
objcopy --redefine-syms="$out.syms" --rename-section .bss=.lbss "$in" "$out"
