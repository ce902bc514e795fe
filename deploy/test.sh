#!/usr/bin/env bash
# The test command: installs what is needed, checks the C++ formatting,
# builds, runs the batch fuzzer for a bounded time (clang + libFuzzer), then
# the whole CTest suite (real RocksDB in temp dirs, real TLS on loopback,
# real programs, packages, a ClickHouse cluster).
#
#   deploy/test.sh
#   FIELDPROF_FUZZ_SECONDS=300 deploy/test.sh   # fuzz longer (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."

./deploy/install-deps.sh

# Every C++ file as clang-format (the checked-in .clang-format) writes it.
echo "== format: clang-format --dry-run --Werror"
git ls-files -z '*.cc' '*.h' | xargs -0 clang-format --dry-run --Werror

./deploy/build.sh

fuzz_seconds="${FIELDPROF_FUZZ_SECONDS:-60}"
if [[ "$fuzz_seconds" != "0" ]]; then
  echo "== fuzz: batch decoding + validation for ${fuzz_seconds}s (libFuzzer, ASan, UBSan)"
  cmake -S . -B build-fuzz -DFIELDPROF_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFIELDPROF_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build build-fuzz -j"$(nproc)" --target batch_fuzz >/dev/null
  work="build-fuzz/corpus"
  mkdir -p "$work"
  cp tests/fuzz/corpus/* "$work/"
  ./build-fuzz/tests/fuzz/batch_fuzz -max_total_time="$fuzz_seconds" -max_len=262144 \
    -print_final_stats=1 "$work" 2>build-fuzz/fuzz.log || {
      tail -50 build-fuzz/fuzz.log; echo "fuzz: FAILED (crash input saved in the current dir)"; exit 1; }
  grep -E "stat::number_of_executed_units|Done" build-fuzz/fuzz.log | tail -2
fi

echo "== ctest"
cd build
ctest --output-on-failure -j2 --timeout 900
