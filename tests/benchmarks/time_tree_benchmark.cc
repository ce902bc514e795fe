// The time tree (tools/record/time_tree.h) at the size its goal names: 10
// million samples. Prints, in one run:
//   - building the tree from the samples (goal: <= 1 s), and growing it
//     as they arrive, a sample at a time;
//   - the samples and the tree encoded, bytes per sample (goal: <= 8);
//   - range reports over random ranges, p50/p99/max: the top 1,000 types
//     and "other" (what record show prints; goal: >= 100x the scan at p50
//     and p99, p99 <= 1 ms), every type the tree lists, and --exact; with
//     their error bound;
//   - the same ranges answered by a scan of the samples in them (the peer:
//     a profiler without a tree), and the ratios.
//
//   time_tree_benchmark [SAMPLES] [QUERIES] [TYPES] [TOP]  (default 10000000 1000 20000 1000)
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

using fieldprof::tools::RangeCounts;
using fieldprof::tools::RangeQuery;
using fieldprof::tools::ScanRange;
using fieldprof::tools::TimeTree;
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
  RangeQuery top;
  top.top = argc > 4 ? static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10)) : 1000;
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
  // The same tree grown as samples arrive (what a recording does while it
  // runs): each sample appended, then the tree of them all taken.
  {
    fieldprof::tools::TimeTreeBuilder grow;
    const auto g0 = Clock::now();
    for (size_t i = 0; i < n; ++i) {
      if (!grow.Append(times[i], types[i]).ok()) return 1;
    }
    const double append_ms = Ms(Clock::now() - g0);
    const auto g1 = Clock::now();
    fieldprof::StatusOr<TimeTree> grown = grow.Tree();
    const double tree_ms = Ms(Clock::now() - g1);
    if (!grown.ok() || grown->Encode() != built->Encode()) {
      std::fprintf(stderr, "the grown tree differs from the one built at once\n");
      return 1;
    }
    std::printf(
        "grown as samples arrive: %.0f ns a sample appended (%.0f ms in all), the tree of "
        "them taken in %.0f ms; the same bytes as built at once\n",
        append_ms * 1e6 / static_cast<double>(n), append_ms, tree_ms);
  }
  const TimeTree& tree = *built;
  const std::string bytes = tree.Encode();
  std::printf("build: %.0f ms (goal <= 1000), %zu nodes\n", build_ms, tree.nodes());
  std::printf("encoded: %.1f MB, %.2f bytes/sample (goal <= 8)\n",
              static_cast<double>(bytes.size()) / 1e6,
              static_cast<double>(bytes.size()) / static_cast<double>(n));

  // Random ranges: uniform ends, so spans from tiny to nearly everything.
  std::vector<double> top_ms, tree_ms, exact_ms, scan_ms, bound_share, top_bound, top_other;
  uint64_t sink = 0, merged = 0, scanned = 0, listed = 0, top_entries = 0, all_entries = 0;
  uint64_t top_right = 0, top_listed = 0;
  std::vector<std::pair<uint64_t, uint64_t>> ranges(queries);
  for (auto& [t1, t2] : ranges) {
    t1 = rng() % t, t2 = rng() % t;
    if (t1 > t2) std::swap(t1, t2);
  }
  // First each range by every method in turn (the tree's answers come
  // after the previous range's scan has swept the caches), every answer
  // checked against the scan.
  for (size_t q = 0; q < queries; ++q) {
    const auto [t1, t2] = ranges[q];
    auto a = Clock::now();
    const RangeCounts k = tree.Range(t1, t2, top);
    top_ms.push_back(Ms(Clock::now() - a));
    a = Clock::now();
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
    // The top answer against the truth: its counts within the bound, its
    // "other" exact, and how many of the true top N it lists.
    uint64_t in_list = 0;
    std::vector<uint64_t> truth(kTypes);
    for (const auto& [type, c] : s.by_type) truth[type] = c;
    for (const auto& [type, c] : k.by_type) {
      if (c > truth[type] || truth[type] > c + k.bound) {
        std::fprintf(stderr, "top: type %u beyond its bound\n", type);
        return 1;
      }
      in_list += c;
    }
    if (in_list + k.other != s.samples) {
      std::fprintf(stderr, "top: other is not exact\n");
      return 1;
    }
    std::vector<uint64_t> counts;
    for (const auto& [type, c] : s.by_type) counts.push_back(c);
    std::sort(counts.rbegin(), counts.rend());
    if (counts.size() > top.top) counts.resize(top.top);
    for (const auto& [type, c] : k.by_type) top_right += truth[type] >= counts.back();
    top_listed += k.by_type.size();
    if (s.samples > 0) {
      const auto share = [&](uint64_t n) {
        return static_cast<double>(n) / static_cast<double>(s.samples);
      };
      bound_share.push_back(share(r.bound));
      top_bound.push_back(share(k.bound));
      top_other.push_back(share(k.other));
    }
    sink += r.by_type.size() + e.by_type.size() + k.by_type.size();
    merged += r.nodes_merged;
    scanned += r.samples_scanned;
    listed += r.by_type.size();
    top_entries += k.entries_merged;
    all_entries += r.entries_merged;
  }
  // Then as a person dragging a range asks: one range after another, by
  // one method at a time.
  std::vector<double> drag_top_ms, drag_scan_ms;
  for (const auto& [t1, t2] : ranges) {
    const auto a = Clock::now();
    sink += tree.Range(t1, t2, top).by_type.size();
    drag_top_ms.push_back(Ms(Clock::now() - a));
  }
  for (const auto& [t1, t2] : ranges) {
    const auto a = Clock::now();
    sink += ScanRange(times, types, t1, t2).by_type.size();
    drag_scan_ms.push_back(Ms(Clock::now() - a));
  }
  const Quantiles kq = Of(top_ms), tq = Of(tree_ms), eq = Of(exact_ms), sq = Of(scan_ms);
  const Quantiles dk = Of(drag_top_ms), ds = Of(drag_scan_ms);
  const Quantiles bq = Of(bound_share), kb = Of(top_bound), ko = Of(top_other);
  const auto per = [&](uint64_t n) {
    return static_cast<double>(n) / static_cast<double>(queries);
  };
  std::printf("%zu random ranges, each by every method in turn (every answer checked):\n", queries);
  std::printf(
      "  top %u:   p50 %.3f ms  p99 %.3f ms  max %.3f ms (goal p99 <= 1); %.0f list entries read, "
      "%.0f types listed,\n            %.2f%% of them in the true top %u; other: p50 %.1f%% of "
      "the samples; bound: p50 %.3f%%, p99 %.3f%%\n",
      top.top, kq.p50, kq.p99, kq.max, per(top_entries), per(top_listed),
      100 * static_cast<double>(top_right) / static_cast<double>(std::max<uint64_t>(1, top_listed)),
      top.top, 100 * ko.p50, 100 * kb.p50, 100 * kb.p99);
  std::printf(
      "  all:      p50 %.3f ms  p99 %.3f ms  max %.3f ms; %.0f list entries read, %.0f types "
      "listed; bound: p50 %.3f%%, p99 %.3f%%\n",
      tq.p50, tq.p99, tq.max, per(all_entries), per(listed), 100 * bq.p50, 100 * bq.p99);
  std::printf("  per answer: %.1f nodes merged, %.0f samples counted\n", per(merged), per(scanned));
  std::printf("  --exact:  p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", eq.p50, eq.p99, eq.max);
  std::printf("  scan:     p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", sq.p50, sq.p99, sq.max);
  std::printf(
      "  ratio scan/top: p50 %.0fx, p99 %.0fx (goal >= 100x); scan/all: p50 %.0fx, p99 %.0fx; "
      "scan/exact: p50 %.1fx\n",
      sq.p50 / kq.p50, sq.p99 / kq.p99, sq.p50 / tq.p50, sq.p99 / tq.p99, sq.p50 / eq.p50);
  std::printf("the same ranges one after another, one method at a time (a drag):\n");
  std::printf("  top %u:   p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", top.top, dk.p50, dk.p99,
              dk.max);
  std::printf("  scan:     p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", ds.p50, ds.p99, ds.max);
  std::printf("  ratio scan/top: p50 %.0fx, p99 %.0fx (goal >= 100x)\n", ds.p50 / dk.p50,
              ds.p99 / dk.p99);
  return sink == 0 ? 1 : 0;
}
