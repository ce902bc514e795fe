// The time tree (seed 000) at the size the goal names: 10
// million samples. Prints, in one run:
//   - building the tree from the samples (goal: <= 1 s);
//   - the samples and the tree encoded, bytes per sample (goal: <= 8);
//   - range reports over random ranges, p50/p99/max, approximate and
//     --exact (goal: <= 5 ms p99), with their error bound;
//   - the same ranges answered by a scan of the samples in them (the peer:
//     a profiler without a tree), and the ratio (goal: >= 100x).
//
//   time_tree_benchmark [SAMPLES] [QUERIES] [TYPES]  (default 10000000 1000 20000)
//
// The samples: 999 Hz on 4 threads (a sample about every 250 us), TYPES
// stack types over the threads, Zipf-popular with a long tail, the popular
// ones changing every few seconds, as a program's phases do. The answer's
// cost grows with how many types cover 95% of a node: run it with fewer
// types (a program with a few hundred distinct stacks) to see that side.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "tools/record/time_tree.h"

using fieldprof::local::RangeCounts;
using fieldprof::local::ScanRange;
using fieldprof::local::TimeTree;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Quantiles {
  double p50, p99, max;
};
Quantiles Of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return {at(0.5), at(0.99), v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000000;
  const size_t queries = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000;
  std::mt19937_64 rng(1);
  std::vector<uint64_t> times(n);
  std::vector<uint32_t> types(n);
  const auto kTypes = static_cast<uint32_t>(argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 20000);
  uint64_t t = 0;
  uint32_t phase = 0;
  for (size_t i = 0; i < n; ++i) {
    t += 200000 + rng() % 100000;  // ~250 us
    if (i % 12000 == 0) phase = static_cast<uint32_t>(rng() % kTypes);
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const auto z = static_cast<uint32_t>(std::pow(static_cast<double>(kTypes), u * u * u)) - 1;
    times[i] = t;
    types[i] = (z + phase) % kTypes;
  }
  std::printf("time tree: %zu samples over %.0f s, %u stack types; M 100, P 0.95, N 2\n", n,
              static_cast<double>(t) / 1e9, kTypes);

  const auto b0 = Clock::now();
  fieldprof::StatusOr<TimeTree> built = TimeTree::Build(times, types);
  const double build_ms = Ms(Clock::now() - b0);
  if (!built.ok()) {
    std::fprintf(stderr, "%s\n", built.status().ToString().c_str());
    return 1;
  }
  const TimeTree& tree = *built;
  const std::string bytes = tree.Encode();
  std::printf("build: %.0f ms (goal <= 1000), %zu nodes\n", build_ms, tree.nodes());
  std::printf("encoded: %.1f MB, %.2f bytes/sample (goal <= 8)\n",
              static_cast<double>(bytes.size()) / 1e6,
              static_cast<double>(bytes.size()) / static_cast<double>(n));

  // Random ranges: uniform ends, so spans from tiny to nearly everything.
  std::vector<double> tree_ms, exact_ms, scan_ms, bound_share;
  uint64_t sink = 0, merged = 0, scanned = 0, listed = 0;
  for (size_t q = 0; q < queries; ++q) {
    uint64_t t1 = rng() % t, t2 = rng() % t;
    if (t1 > t2) std::swap(t1, t2);
    auto a = Clock::now();
    const RangeCounts r = tree.Range(t1, t2);
    tree_ms.push_back(Ms(Clock::now() - a));
    a = Clock::now();
    const RangeCounts e = tree.Range(t1, t2, /*exact=*/true);
    exact_ms.push_back(Ms(Clock::now() - a));
    a = Clock::now();
    const RangeCounts s = ScanRange(times, types, t1, t2);
    scan_ms.push_back(Ms(Clock::now() - a));
    if (e.by_type != s.by_type || r.samples != s.samples) {
      std::fprintf(stderr, "mismatch at [%llu, %llu]\n", static_cast<unsigned long long>(t1),
                   static_cast<unsigned long long>(t2));
      return 1;
    }
    if (s.samples > 0) {
      bound_share.push_back(static_cast<double>(r.other) / static_cast<double>(s.samples));
    }
    sink += r.by_type.size() + e.by_type.size();
    merged += r.nodes_merged;
    scanned += r.samples_scanned;
    listed += r.by_type.size();
  }
  const Quantiles tq = Of(tree_ms), eq = Of(exact_ms), sq = Of(scan_ms), bq = Of(bound_share);
  std::printf("%zu random ranges (every answer checked against the scan):\n", queries);
  std::printf(
      "  tree:     p50 %.3f ms  p99 %.3f ms  max %.3f ms (goal p99 <= 5); bound: p50 %.1f%%, "
      "p99 %.1f%% of the range's samples\n",
      tq.p50, tq.p99, tq.max, 100 * bq.p50, 100 * bq.p99);
  std::printf("  per answer: %.1f nodes merged, %.0f samples counted, %.0f types in it\n",
              static_cast<double>(merged) / static_cast<double>(queries),
              static_cast<double>(scanned) / static_cast<double>(queries),
              static_cast<double>(listed) / static_cast<double>(queries));
  std::printf("  --exact:  p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", eq.p50, eq.p99, eq.max);
  std::printf("  scan:     p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", sq.p50, sq.p99, sq.max);
  std::printf("  ratio scan/tree: p50 %.0fx, p99 %.0fx (goal >= 100x); scan/exact: p50 %.1fx\n",
              sq.p50 / tq.p50, sq.p99 / tq.p99, sq.p50 / eq.p50);
  return sink == 0 ? 1 : 0;
}
