// The distinct-machine sketch (aggregator/store/machine_sketch.h): exact
// while small, within HyperLogLog's error when large, the same bytes for
// the same set whatever the order, replays and double merges change
// nothing, and damaged encodings are refused.
#include "aggregator/store/machine_sketch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>

namespace fieldprof::aggregator {
namespace {

std::string Key(uint64_t i) {
  std::string k(16, '\0');
  for (int b = 0; b < 8; ++b) k[b] = static_cast<char>(i >> (8 * b));
  k[8] = 'm';
  return k;
}

MachineSketch Of(uint64_t first, uint64_t n) {
  MachineSketch s;
  for (uint64_t i = first; i < first + n; ++i) s.Add(MachineHash(Key(i)));
  return s;
}

std::string Bytes(const MachineSketch& s) {
  std::string out;
  s.Encode(&out);
  return out;
}

TEST(MachineSketchTest, SmallCountsAreExact) {
  EXPECT_EQ(MachineSketch().Estimate(), 0u);
  for (uint64_t n : {1, 2, 4, 5, 6, 10, 100, 1000}) {
    const MachineSketch s = Of(0, n);
    EXPECT_FALSE(s.dense()) << n;
    EXPECT_NEAR(static_cast<double>(s.Estimate()), static_cast<double>(n), n >= 1000 ? 1 : 0) << n;
  }
  // The same machine in many batches is one machine.
  MachineSketch s = Of(0, 5);
  for (int i = 0; i < 100; ++i) s.Add(MachineHash(Key(3)));
  EXPECT_EQ(s.Estimate(), 5u);
}

TEST(MachineSketchTest, LargeCountsAreWithinTheStandardError) {
  for (uint64_t n : {2000, 10000, 100000, 1000000}) {
    const MachineSketch s = Of(n * 7, n);
    EXPECT_TRUE(s.dense());
    const double err = std::abs(static_cast<double>(s.Estimate()) - n) / n;
    EXPECT_LT(err, 0.05) << n << ": " << s.Estimate();  // 3 sigma of 1.6%
  }
}

TEST(MachineSketchTest, OrderReplaysAndMergesGiveTheSameBytes) {
  // Sparse: two halves merged in either order, and merged twice.
  MachineSketch a = Of(0, 300), b = Of(200, 300);
  MachineSketch ab = a, ba = b;
  ab.Merge(b);
  ba.Merge(a);
  EXPECT_EQ(Bytes(ab), Bytes(ba));
  EXPECT_EQ(Bytes(ab), Bytes(Of(0, 500)));
  ab.Merge(b);
  EXPECT_EQ(Bytes(ab), Bytes(Of(0, 500)));
  EXPECT_EQ(ab.Estimate(), 500u);
  // Across the switch to dense: added one by one, or two sparse halves
  // merged, or a dense and a sparse one.
  const MachineSketch whole = Of(0, 2000);
  MachineSketch halves = Of(0, 1000);
  halves.Merge(Of(1000, 1000));
  EXPECT_TRUE(halves.dense());
  EXPECT_EQ(Bytes(halves), Bytes(whole));
  MachineSketch mixed = Of(0, 1900);
  mixed.Merge(Of(1900, 100));
  EXPECT_EQ(Bytes(mixed), Bytes(whole));
  MachineSketch other_way = Of(1900, 100);
  other_way.Merge(Of(0, 1900));
  EXPECT_EQ(Bytes(other_way), Bytes(whole));
}

TEST(MachineSketchTest, EncodingRoundTripsAndRefusesDamage) {
  for (uint64_t n : {0, 1, 7, 1024, 1025, 5000}) {
    const MachineSketch s = Of(0, n);
    const std::string bytes = Bytes(s);
    MachineSketch back;
    ASSERT_TRUE(back.Decode(bytes)) << n;
    EXPECT_EQ(Bytes(back), bytes) << n;
    EXPECT_EQ(back.Estimate(), s.Estimate()) << n;
    if (n == 0) continue;
    EXPECT_FALSE(back.Decode(bytes.substr(0, bytes.size() - 1))) << "truncated " << n;
    EXPECT_TRUE(back.empty());
    EXPECT_FALSE(back.Decode(bytes + "x")) << "trailing " << n;
    std::string bad_tag = bytes;
    bad_tag[0] = 9;
    EXPECT_FALSE(back.Decode(bad_tag)) << n;
  }
  // A sparse entry out of order, or with rank 0, is refused.
  MachineSketch s;
  EXPECT_FALSE(s.Decode(std::string("\x03\x02\x41\x00", 4)));  // second delta 0: same index
  EXPECT_FALSE(s.Decode(std::string("\x03\x01\x40", 3)));      // rank 0
  EXPECT_FALSE(s.Decode(std::string("\x04", 1) + std::string(4096, '\x40')));  // rank 64
  // A sketch of day keys, from a store before per-series entries: read as
  // empty (it counted machine-days, and joined a machine's series).
  EXPECT_TRUE(s.Decode(std::string("\x01\x01\x41", 3)));
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(s.Decode(std::string("\x02", 1) + std::string(4096, '\x01')));
  EXPECT_TRUE(s.empty());
  // Sizes: sparse a few bytes a machine, dense 4 KiB.
  EXPECT_LT(Bytes(Of(0, 5)).size(), 30u);
  EXPECT_EQ(Bytes(Of(0, 5000)).size(), 4097u);
}

// A machine's entries (SeriesEntry): the same machine in one series on one
// key is one entry, however often; in two series, or on two days' keys,
// entries that share nothing, so the sketches of a machine's series
// cannot be matched (docs/privacy.md). 200 machines, 2 series: no entry of
// one series is in the other's sketch.
TEST(MachineSketchTest, AMachinesEntriesAreItsOwnInEachSeriesAndEachDay) {
  const std::string a = "series a's key", b = "series b's key";
  MachineSketch in_a, in_b, a_again;
  std::set<uint64_t> entries_a, entries_b;
  for (uint64_t m = 0; m < 200; ++m) {
    const MachineSecret secret = MachineSecretOf(Key(m));
    const uint64_t ea = SeriesEntry(secret, EntryKind::kFirst, a);
    const uint64_t eb = SeriesEntry(secret, EntryKind::kFirst, b);
    EXPECT_EQ(ea, SeriesEntry(secret, EntryKind::kFirst, a)) << "the same entry again";
    EXPECT_NE(ea, SeriesEntry(secret, EntryKind::kDay, a)) << "the day's is another";
    in_a.Add(ea);
    a_again.Add(ea);
    a_again.Add(SeriesEntry(secret, EntryKind::kFirst, a));
    in_b.Add(eb);
    entries_a.insert(ea);
    entries_b.insert(eb);
    // The next day's key: another entry.
    EXPECT_NE(ea, SeriesEntry(MachineSecretOf(Key(m + 1000)), EntryKind::kFirst, a));
  }
  EXPECT_EQ(in_a.Estimate(), 200u);
  EXPECT_EQ(Bytes(a_again), Bytes(in_a));
  for (uint64_t e : entries_a) EXPECT_EQ(entries_b.count(e), 0u);
  // Their union counts each machine twice: why several series' sketches
  // are never added up into a count of machines (KeepLarger instead).
  MachineSketch both = in_a;
  both.Merge(in_b);
  EXPECT_EQ(both.Estimate(), 400u);
  MachineSketch larger = in_a;
  larger.KeepLarger(in_b);
  EXPECT_EQ(larger.Estimate(), 200u);
}

}  // namespace
}  // namespace fieldprof::aggregator
