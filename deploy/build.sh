#!/usr/bin/env bash
# Configures and builds fieldprof into ./build (RelWithDebInfo).
#   deploy/build.sh [TARGET...]      # default: everything
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
jobs="$(nproc)"
if [[ $# -gt 0 ]]; then
  for t in "$@"; do cmake --build build -j"$jobs" --target "$t"; done
else
  cmake --build build -j"$jobs"
fi
