// The time tree (tools/record/time_tree.h): range reports against counts from the raw
// samples, for random samples, ranges, M, P and N (a property test): every
// type's true count within [count, count + other], `exact` equal; the
// shape's promises; the encoding round trip and damage.
#include "tools/record/time_tree.h"

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fieldprof::tools {
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

// Grown as samples arrive: at any moment the tree of the samples so far is
// the one built from them at once, byte for byte, and answers the same;
// nodes complete as their last sample comes, not at the end.
TEST(TimeTreeTest, GrownAsSamplesArriveItIsTheTreeOfThem) {
  std::mt19937_64 rng(9);
  for (int round = 0; round < 8; ++round) {
    const size_t n = 1 + rng() % 40000;
    Samples s = Make(rng, n, 1 + static_cast<uint32_t>(rng() % 2000));
    TimeTreeOptions o;
    o.leaf_samples = 1 + static_cast<uint32_t>(rng() % 150);
    o.keep_fraction = std::vector<double>{0.5, 0.9, 0.95, 1.0}[rng() % 4];
    o.fanout = 2 + static_cast<uint32_t>(rng() % 6);
    TimeTreeBuilder b(o);
    std::vector<size_t> looks = {1, n / 3, n / 2, n};
    for (int i = 0; i < 4; ++i) looks.push_back(1 + rng() % n);
    std::sort(looks.begin(), looks.end());
    size_t at = 0;
    for (size_t look : looks) {
      for (; at < look; ++at) ASSERT_TRUE(b.Append(s.times[at], s.types[at]).ok());
      SCOPED_TRACE("round " + std::to_string(round) + " at " + std::to_string(at));
      StatusOr<TimeTree> grown = b.Tree();
      ASSERT_TRUE(grown.ok()) << grown.status().ToString();
      StatusOr<TimeTree> whole = TimeTree::Build(
          std::vector<uint64_t>(s.times.begin(), s.times.begin() + static_cast<ptrdiff_t>(at)),
          std::vector<uint32_t>(s.types.begin(), s.types.begin() + static_cast<ptrdiff_t>(at)), o);
      ASSERT_TRUE(whole.ok());
      ASSERT_EQ(grown->Encode(), whole->Encode());
      const uint64_t span = s.times[at - 1] + 1;
      uint64_t t1 = rng() % span, t2 = rng() % span;
      if (t1 > t2) std::swap(t1, t2);
      RangeQuery top;
      top.top = 50;
      EXPECT_EQ(AsMap(grown->Range(t1, t2, top)), AsMap(whole->Range(t1, t2, top)));
      EXPECT_EQ(grown->Range(t1, t2).by_type, whole->Range(t1, t2).by_type);
    }
  }
  // Every node whose samples have all come is complete: with M = 1 and
  // N = 2, n samples complete n - popcount(n) inner nodes.
  TimeTreeBuilder b({1, 1.0, 2});
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(b.Append(i, static_cast<uint32_t>(i % 7)).ok());
  EXPECT_EQ(b.complete_nodes(), 1000u - 6);  // 1000 = 0b1111101000: six ones
  // Out of order, or an id not interned: refused, and nothing added.
  EXPECT_FALSE(b.Append(5, 0).ok());
  EXPECT_FALSE(b.Append(2000, kMaxTimeTreeTypes).ok());
  EXPECT_EQ(b.samples(), 1000u);
  EXPECT_FALSE(TimeTreeBuilder({0, 0.95, 2}).Append(1, 1).ok());
}

// Recordings made before the tree was built bottom up hold a version-1
// tree (split top down): it is still read, answers as the scan, and is
// written back as it was.
TEST(TimeTreeTest, AVersionOneTreeIsStillRead) {
  std::vector<uint64_t> times;
  std::vector<uint32_t> types;
  for (uint32_t i = 0; i < 300; ++i) {  // what the tree below was built from, {8, 0.8, 3}
    times.push_back(1000 + i * 7 + (i % 5 == 0 ? 3 : 0));
    types.push_back((i * i + 3 * i) % 23);
  }
  const std::string hex =
      "465054494d4554524545310aac0208039ab3e6cc99b3e6f43feb07040707070a040707070a040707070a04070707"
      "0a04"
      "0707070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a0407"
      "0707"
      "0a040707070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a"
      "0407"
      "07070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a040707"
      "070a"
      "040707070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a04"
      "0707"
      "070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a040707070a04070707"
      "0a04"
      "0707070a040707070a040707070a040707070a040707070a040707070a040707070a0407070700040a1205110801"
      "1310"
      "0f101301081105120a0400151500040a120511080113100f101301081105120a0400151500040a12051108011310"
      "0f10"
      "1301081105120a0400151500040a120511080113100f101301081105120a0400151500040a120511080113100f10"
      "1301"
      "081105120a0400151500040a120511080113100f101301081105120a0400151500040a120511080113100f101301"
      "0811"
      "05120a0400151500040a120511080113100f101301081105120a0400151500040a120511080113100f1013010811"
      "0512"
      "0a0400151500040a120511080113100f101301081105120a0400151500040a120511080113100f10130108110512"
      "0a04"
      "00151500040a120511080113100f101301081105120a0400151500040a120511080113100f101301081105120a04"
      "0015"
      "15000b001b011a031a011a031a021a061a011a011a011a0a0009010903090109030902090608010901090b000801"
      "0903"
      "08010803090208060a01090108010a0a000a0108030901090308020906080209030a000000000000000000000000"
      "0000"
      "00000000000000000000000000000000000000000000";
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  ASSERT_EQ(bytes.substr(0, 12), "FPTIMETREE1\n");
  StatusOr<TimeTree> old = TimeTree::Decode(bytes);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->times(), times);
  EXPECT_EQ(old->Encode(), bytes);
  for (uint64_t t1 = 990; t1 < 3200; t1 += 97) {
    for (uint64_t t2 = t1; t2 < 3200; t2 += 211) {
      const RangeCounts truth = ScanRange(times, types, t1, t2);
      EXPECT_EQ(old->Range(t1, t2, /*exact=*/true).by_type, truth.by_type);
      const RangeCounts got = old->Range(t1, t2);
      EXPECT_EQ(got.samples, truth.samples);
      for (const auto& [type, c] : truth.by_type) {
        const std::map<uint32_t, uint64_t> m = AsMap(got);
        EXPECT_LE(c, (m.count(type) ? m.at(type) : 0) + got.bound);
      }
    }
  }
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
  // Leaves of 100 samples, two to a parent: 1,000 leaves, 999 inner nodes
  // (a level's last node may have one child).
  EXPECT_GE(tree->nodes(), 2 * 1000u - 1);
  EXPECT_LE(tree->nodes(), 2 * 1000u + 10);
  uint32_t largest_unlisted = 100;  // a leaf, or an inner node with no list
  for (const TimeTree::NodeView& n : tree->NodeViews()) {
    EXPECT_LE(n.hi - n.lo, n.children == 0 ? 100u : 100000u);
    if (n.children > 0 && !n.listed) largest_unlisted = std::max(largest_unlisted, n.hi - n.lo);
  }
  EXPECT_LT(largest_unlisted, 100000u / 16);
  // A range over the whole recording is the root alone.
  const RangeCounts all = tree->Range(0, UINT64_MAX);
  EXPECT_EQ(all.nodes_merged, 1u);
  EXPECT_EQ(all.samples_scanned, 0u);
  EXPECT_LE(all.other, 100000u * 5 / 100 + 1);  // P = 95%
  // A middle range merges a few nodes per level, and at each of its two
  // ends counts at most the samples of one node with no list (near the
  // leaves, lists as long as the samples are not kept).
  const RangeCounts mid = tree->Range(s.times[12345], s.times[87654]);
  EXPECT_LE(mid.samples_scanned, 2u * largest_unlisted);
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
}  // namespace fieldprof::tools
