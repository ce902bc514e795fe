#!/usr/bin/env bash
# The snapshot publisher at 100k and 1M series: publish cycle
# time, fragment sizes, a client's bytes per day, and ingest throughput
# while cycles run back to back as a ratio to ingest alone. Each size fills
# a fresh RocksDB store in /tmp (1M series: ~1.5 GiB, ~3 min to fill).
#
#   deploy/bench-publish.sh                  # 100000 and 1000000 series
#   deploy/bench-publish.sh 250000           # one size
#   FRAGMENTS=64 PER_CYCLE=8 PER_DAY=4 INGEST_S=10 deploy/bench-publish.sh
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."
./deploy/build.sh publish_benchmark 2>&1 | grep -E "error" || true
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(100000 1000000)
for n in "${sizes[@]}"; do
  echo "== $n series"
  ./build/tests/benchmarks/publish_benchmark "$n" "${FRAGMENTS:-64}" "${PER_CYCLE:-8}" \
    "${PER_DAY:-4}" "${INGEST_S:-10}"
  echo
done
