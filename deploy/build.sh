#!/usr/bin/env bash
# Configures and builds fieldprof into ./build (RelWithDebInfo).
#   deploy/build.sh [TARGET...]      # default: everything
# A new build directory uses Ninja when it is installed (install-deps.sh
# build installs it): one scheduler for the whole tree, where CMake's
# Makefiles walk target by target. A directory configured before keeps the
# generator it was made with.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
if [[ ! -f build/CMakeCache.txt ]] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
jobs="$(nproc)"
if [[ $# -gt 0 ]]; then
  for t in "$@"; do cmake --build build -j"$jobs" --target "$t"; done
else
  cmake --build build -j"$jobs"
fi
