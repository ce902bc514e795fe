// The time tree (seed 000): range reports against counts from the raw
// samples, for random samples, ranges, M, P and N (a property test): every
// type's true count within [count, count + other], `exact` equal; the
// shape's promises; the encoding round trip and damage.
#include "tools/record/time_tree.h"

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fieldprof::local {
namespace {

struct Samples {
  std::vector<uint64_t> times;
  std::vector<uint32_t> types;
};

// `n` samples over about `span` ns, types Zipf-like over `ntypes`, with
// phases (the popular types change every so often) and bursts of equal
// times, as a recording of threads has.
Samples Make(std::mt19937_64& rng, size_t n, uint32_t ntypes) {
  Samples s;
  uint64_t t = rng() % 1000;
  uint32_t phase = 0;
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 500 == 0) phase = static_cast<uint32_t>(rng() % ntypes);
    t += rng() % 4 == 0 ? 0 : 1 + rng() % 2000;
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const auto z = static_cast<uint32_t>(std::pow(static_cast<double>(ntypes), u * u)) - 1;
    s.times.push_back(t);
    s.types.push_back((z + phase) % ntypes);
  }
  return s;
}

std::map<uint32_t, uint64_t> AsMap(const RangeCounts& r) {
  return {r.by_type.begin(), r.by_type.end()};
}

TEST(TimeTreeTest, RangeReportsAreWithinTheirBoundAndExactIsExact) {
  std::mt19937_64 rng(42);
  int checked = 0;
  for (int round = 0; round < 60; ++round) {
    const size_t n = 1 + rng() % 20000;
    const uint32_t ntypes = 1 + static_cast<uint32_t>(rng() % 300);
    Samples s = Make(rng, n, ntypes);
    TimeTreeOptions o;
    o.leaf_samples = 1 + static_cast<uint32_t>(rng() % 300);
    o.keep_fraction = std::vector<double>{0.5, 0.8, 0.95, 0.99, 1.0}[rng() % 5];
    o.fanout = 2 + static_cast<uint32_t>(rng() % 7);
    StatusOr<TimeTree> tree = TimeTree::Build(s.times, s.types, o);
    ASSERT_TRUE(tree.ok()) << tree.status().ToString();
    for (int q = 0; q < 40; ++q) {
      const uint64_t span = s.times.back() + 2000;
      uint64_t t1 = rng() % span, t2 = rng() % span;
      if (q == 0) t1 = 0, t2 = span;  // everything
      if (q == 1) t2 = t1;            // one instant
      if (t1 > t2) std::swap(t1, t2);
      const RangeCounts truth = ScanRange(s.times, s.types, t1, t2);
      const RangeCounts got = tree->Range(t1, t2);
      const RangeCounts exact = tree->Range(t1, t2, /*exact=*/true);
      const std::map<uint32_t, uint64_t> want = AsMap(truth), approx = AsMap(got);
      ASSERT_EQ(got.samples, truth.samples) << "round " << round << " [" << t1 << ", " << t2 << "]";
      uint64_t attributed = 0;
      for (const auto& [type, c] : approx) {
        attributed += c;
        ASSERT_TRUE(want.count(type)) << "type " << type << " is not in the range";
        ASSERT_LE(c, want.at(type));
      }
      for (const auto& [type, c] : want) {
        const uint64_t lower = approx.count(type) ? approx.at(type) : 0;
        ASSERT_LE(c, lower + got.bound) << "type " << type << " beyond the bound";
      }
      ASSERT_LE(got.bound, got.other);
      ASSERT_EQ(attributed + got.other, truth.samples);
      ASSERT_EQ(exact.by_type, truth.by_type) << "round " << round;
      ASSERT_EQ(exact.other, 0u);
      if (o.keep_fraction == 1.0) {
        ASSERT_EQ(got.other, 0u);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 60 * 40);
}

// The top N of a range: at most N types, the rest one "other" of exact
// size; every count within the bound, listed or not; no type left out has
// more than other_at_most; with N at least the range's types, the answer
// is the one without a top. Big trees (long lists, read from their heads)
// and small ones (short lists, read in order of type).
TEST(TimeTreeTest, TheTopOfARangeIsWithinItsBoundAndOtherIsExact) {
  std::mt19937_64 rng(5);
  int checked = 0;
  for (int round = 0; round < 12; ++round) {
    const bool big = round % 3 == 0;
    const size_t n = big ? 300000 : 1 + rng() % 30000;
    const uint32_t ntypes = big ? 20000 : 1 + static_cast<uint32_t>(rng() % 3000);
    Samples s = Make(rng, n, ntypes);
    TimeTreeOptions o;
    o.leaf_samples = 1 + static_cast<uint32_t>(rng() % 200);
    o.keep_fraction = std::vector<double>{0.8, 0.95, 1.0}[rng() % 3];
    o.fanout = 2 + static_cast<uint32_t>(rng() % 4);
    StatusOr<TimeTree> tree = TimeTree::Build(s.times, s.types, o);
    ASSERT_TRUE(tree.ok()) << tree.status().ToString();
    for (int q = 0; q < 30; ++q) {
      const uint64_t span = s.times.back() + 2000;
      uint64_t t1 = rng() % span, t2 = rng() % span;
      if (q == 0) t1 = 0, t2 = span;
      if (t1 > t2) std::swap(t1, t2);
      RangeQuery want;
      want.top = std::vector<uint32_t>{1, 10, 100, 1000, 5000}[rng() % 5];
      const RangeCounts truth = ScanRange(s.times, s.types, t1, t2);
      const RangeCounts got = tree->Range(t1, t2, want);
      const std::map<uint32_t, uint64_t> real = AsMap(truth), listed = AsMap(got);
      SCOPED_TRACE("round " + std::to_string(round) + " top " + std::to_string(want.top));
      ASSERT_EQ(got.samples, truth.samples);
      ASSERT_LE(got.by_type.size(), want.top);
      ASSERT_EQ(listed.size(), got.by_type.size()) << "a type listed twice";
      uint64_t sum = 0;
      for (const auto& [type, c] : got.by_type) {
        ASSERT_GT(c, 0u);
        ASSERT_TRUE(real.count(type)) << "type " << type << " is not in the range";
        ASSERT_LE(c, real.at(type));
        ASSERT_LE(real.at(type), c + got.bound) << "type " << type << " beyond the bound";
        sum += c;
      }
      ASSERT_EQ(sum + got.other, truth.samples) << "other is not exact";
      // A type left out has at most the least listed count and the bound
      // (the bound alone when the list is not full).
      uint64_t least = 0;
      if (got.by_type.size() == want.top) {
        least = UINT64_MAX;
        for (const auto& [type, c] : got.by_type) least = std::min<uint64_t>(least, c);
      }
      ASSERT_LE(got.other_at_most, least + got.bound);
      ASSERT_LE(got.other_at_most, got.other);
      for (const auto& [type, c] : real) {
        if (listed.count(type)) continue;
        ASSERT_LE(c, got.other_at_most) << "type " << type << " left out with more";
      }
      if (real.size() <= want.top && o.keep_fraction == 1.0) {
        ASSERT_EQ(listed, real) << "everything fits in the top and the lists are whole";
      }
      ++checked;
    }
    // The heads are what make the top cheap: the whole range from them,
    // against every list entry.
    if (big) {
      RangeQuery ten;
      ten.top = 10;
      const RangeCounts a = tree->Range(0, UINT64_MAX, ten), b = tree->Range(0, UINT64_MAX);
      EXPECT_LE(a.entries_merged, 10u * b.nodes_merged);
      EXPECT_GT(b.entries_merged, 100u * b.nodes_merged);
    }
  }
  EXPECT_EQ(checked, 12 * 30);
}

// Big nodes are filled on several threads: the lists must land on their
// own nodes, in the order of the nodes, whatever the fanout.
TEST(TimeTreeTest, ABigTreeFilledOnThreadsAnswersAsTheScan) {
  std::mt19937_64 rng(11);
  Samples s = Make(rng, 700000, 2000);
  for (uint32_t fanout : {2u, 3u, 8u}) {
    TimeTreeOptions o{100, 0.9, fanout};
    StatusOr<TimeTree> tree = TimeTree::Build(s.times, s.types, o);
    ASSERT_TRUE(tree.ok());
    const uint64_t span = s.times.back() + 1;
    for (int q = 0; q < 60; ++q) {
      uint64_t t1 = rng() % span, t2 = rng() % span;
      if (q == 0) t1 = 0, t2 = span;
      if (t1 > t2) std::swap(t1, t2);
      const RangeCounts truth = ScanRange(s.times, s.types, t1, t2);
      const RangeCounts got = tree->Range(t1, t2);
      const std::map<uint32_t, uint64_t> want = AsMap(truth);
      ASSERT_EQ(got.samples, truth.samples);
      uint64_t attributed = 0;
      for (const auto& [type, c] : got.by_type) {
        attributed += c;
        ASSERT_LE(c, want.count(type) ? want.at(type) : 0) << "fanout " << fanout << " q " << q;
      }
      ASSERT_EQ(attributed + got.other, truth.samples);
      ASSERT_LE(got.other, truth.samples / 10 + 2 * fanout * 100) << "fanout " << fanout;
      ASSERT_EQ(tree->Range(t1, t2, /*exact=*/true).by_type, truth.by_type);
    }
  }
}

TEST(TimeTreeTest, TheShapeKeepsItsPromises) {
  std::mt19937_64 rng(7);
  Samples s = Make(rng, 100000, 1000);
  StatusOr<TimeTree> tree = TimeTree::Build(s.times, s.types, {});
  ASSERT_TRUE(tree.ok());
  // Leaves of fewer than 100 samples, halving: about 2 * 100000 / 64 nodes.
  EXPECT_GT(tree->nodes(), 100000u / 100);
  EXPECT_LT(tree->nodes(), 2 * 100000u / 50 + 1);
  // A range over the whole recording is the root alone.
  const RangeCounts all = tree->Range(0, UINT64_MAX);
  EXPECT_EQ(all.nodes_merged, 1u);
  EXPECT_EQ(all.samples_scanned, 0u);
  EXPECT_LE(all.other, 100000u * 5 / 100 + 1);  // P = 95%
  // A middle range merges a few nodes per level, and at each of its two
  // ends counts the samples of at most N = 2 leaves (of < 100 samples).
  const RangeCounts mid = tree->Range(s.times[12345], s.times[87654]);
  EXPECT_LE(mid.leaves_scanned, 2u * 2);
  EXPECT_LE(mid.samples_scanned, 2u * 2 * 100);
  EXPECT_LT(mid.nodes_merged, 2u * 20);
  // Bad options and inputs are refused.
  EXPECT_FALSE(TimeTree::Build({2, 1}, {0, 0}, {}).ok());
  EXPECT_FALSE(TimeTree::Build({1}, {0, 0}, {}).ok());
  EXPECT_FALSE(TimeTree::Build({1}, {0}, {100, 0.0, 2}).ok());
  EXPECT_FALSE(TimeTree::Build({1}, {0}, {100, 0.95, 1}).ok());
  EXPECT_FALSE(TimeTree::Build({1}, {0}, {0, 0.95, 2}).ok());
  EXPECT_FALSE(TimeTree::Build({1}, {kMaxTimeTreeTypes}, {}).ok());  // not interned
  // Empty: every range is empty.
  StatusOr<TimeTree> empty = TimeTree::Build({}, {}, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->Range(0, UINT64_MAX).samples, 0u);
}

TEST(TimeTreeTest, TheEncodingRoundTripsAndRefusesDamage) {
  std::mt19937_64 rng(3);
  Samples s = Make(rng, 50000, 500);
  TimeTreeOptions o{64, 0.9, 4};
  StatusOr<TimeTree> tree = TimeTree::Build(s.times, s.types, o);
  ASSERT_TRUE(tree.ok());
  const std::string bytes = tree->Encode();
  // Samples a millisecond or so apart take about 4 bytes each, the tree a
  // fraction more.
  EXPECT_LT(bytes.size(), 50000u * 8);
  StatusOr<TimeTree> back = TimeTree::Decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->times(), tree->times());
  EXPECT_EQ(back->types(), tree->types());
  EXPECT_EQ(back->Encode(), bytes);
  for (int q = 0; q < 50; ++q) {
    uint64_t t1 = rng() % s.times.back(), t2 = rng() % s.times.back();
    if (t1 > t2) std::swap(t1, t2);
    const RangeCounts a = tree->Range(t1, t2), b = back->Range(t1, t2);
    EXPECT_EQ(a.by_type, b.by_type);
    EXPECT_EQ(a.other, b.other);
    EXPECT_EQ(a.bound, b.bound);
    RangeQuery top;
    top.top = 20;
    const RangeCounts c = tree->Range(t1, t2, top), d = back->Range(t1, t2, top);
    EXPECT_EQ(AsMap(c), AsMap(d));
    EXPECT_EQ(c.bound, d.bound);
  }
  EXPECT_FALSE(TimeTree::Decode("not a tree").ok());
  EXPECT_FALSE(TimeTree::Decode(bytes.substr(0, bytes.size() / 2)).ok());
  EXPECT_FALSE(TimeTree::Decode(bytes + "x").ok());
  // A type id past the range (a damaged or hostile file) is refused, not
  // allocated for.
  StatusOr<TimeTree> one = TimeTree::Build({5}, {3}, {});
  ASSERT_TRUE(one.ok());
  std::string huge = one->Encode();
  ASSERT_EQ(huge.back(), 3);  // the last byte: the one sample's type
  huge.back() = static_cast<char>(0xff);
  huge += std::string("\xff\xff\x7f", 3);  // 2^28 - 1
  StatusOr<TimeTree> refused = TimeTree::Decode(huge);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("out of range"), std::string::npos);
  for (size_t at : {size_t{12}, size_t{13}, bytes.size() - 3}) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(0xff);
    StatusOr<TimeTree> d = TimeTree::Decode(bad);  // refused, or read as other data: never a crash
    if (d.ok()) (void)d->Range(0, UINT64_MAX);
  }
}

}  // namespace
}  // namespace fieldprof::local
