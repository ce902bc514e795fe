// fieldprof cost's lookup on a snapshot cache written by the test: the sums
// of one API, and the names offered when the one asked for is not there.
#include "tools/field/cost_lookup.h"

#include <gtest/gtest.h>

#include "tests/support/test_util.h"
#include "tests/tools/snapshot_fixture.h"

namespace fieldprof::tools {
namespace {

using fieldprof::testing::MakeRecord;
using fieldprof::testing::Spread;

TEST(CostLookupTest, AModuleIsSplitOffButNotACppScope) {
  EXPECT_EQ(SplitApiName("libz.so.1:deflate"),
            std::make_pair(std::string("libz.so.1"), std::string("deflate")));
  EXPECT_EQ(SplitApiName("deflate"), std::make_pair(std::string(), std::string("deflate")));
  EXPECT_EQ(SplitApiName("std::chrono::now"),
            std::make_pair(std::string(), std::string("std::chrono::now")));
  EXPECT_EQ(SplitApiName(":x"), std::make_pair(std::string(), std::string(":x")));
}

TEST(CostLookupTest, ClosenessPutsCaseThenContainmentThenEditDistance) {
  EXPECT_EQ(NameCloseness("sqlite3_step", "SQLITE3_STEP"), 0u);
  const size_t contains = NameCloseness("sqlite3_prepare", "sqlite3_prepare_v2");
  const size_t typo = NameCloseness("sqlite3_prepare", "sqlite3_prepaer");
  const size_t other = NameCloseness("sqlite3_prepare", "deflate");
  EXPECT_LT(0u, contains);
  EXPECT_LT(contains, typo);
  EXPECT_LT(typo, other);
  EXPECT_EQ(NameCloseness(std::string(70, 'a'), std::string(70, 'b')), 1000u);
}

TEST(CostLookupTest, TheSumsOfOneApiAndTheNamesNearAnother) {
  fieldprof::testing::TempDir dir;
  fieldprof::testing::Cache cache(dir.path());
  cache.Write(
      1,
      {MakeRecord("libz.so.1", "deflate", wire::METRIC_WALL_TIME_NS, Spread(1000, 2000, 100), 4,
                  25),
       MakeRecord("libz.so.1", "deflate", wire::METRIC_WALL_TIME_NS, Spread(1000, 2000, 50), 2, 23),
       MakeRecord("libz.so.1", "deflate", wire::METRIC_ALLOC_BYTES_INCLUSIVE, Spread(64, 128, 100),
                  4),
       MakeRecord("libz.so.1", "deflateEnd", wire::METRIC_WALL_TIME_NS, Spread(100, 200, 10), 1),
       MakeRecord("libzstd.so.1", "ZSTD_compress", wire::METRIC_WALL_TIME_NS, Spread(100, 200, 10),
                  1)});
  StatusOr<SnapshotIndex> index = SnapshotIndex::Open(SnapshotCache(dir.path()));
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  StatusOr<CostMatch> m = LookUpCost(*index, "libz.so.1", "deflate", wire::METRIC_WALL_TIME_NS);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->by_metric.at(wire::METRIC_WALL_TIME_NS).count(), 150u);
  EXPECT_EQ(m->runs, 6u);
  EXPECT_EQ(m->series.size(), 2u);  // two CPU families
  EXPECT_NEAR(m->MeanOf(wire::METRIC_ALLOC_BYTES_INCLUSIVE), 95.5, 1);
  EXPECT_EQ(m->MeanOf(wire::METRIC_FILE_IO_BYTES), 0);
  EXPECT_EQ(m->suspect, "");
  // Another module's deflate is not libz's.
  EXPECT_TRUE(
      LookUpCost(*index, "libother.so", "deflate", wire::METRIC_WALL_TIME_NS)->by_metric.empty());
  const std::vector<std::string> near = NearestApis(*index, "", "deflat", 6);
  ASSERT_FALSE(near.empty());
  EXPECT_EQ(near[0], "libz.so.1:deflate");
  EXPECT_EQ(std::count(near.begin(), near.end(), "libzstd.so.1:ZSTD_compress"), 0);
  // A series marked suspect by the aggregator: the match says why.
  wire::Record marked =
      MakeRecord("libz.so.1", "deflateEnd", wire::METRIC_WALL_TIME_NS, Spread(100, 200, 10), 1);
  marked.set_suspect("2026-11-22: mean +200% against its history");
  cache.Write(2, {marked});
  StatusOr<SnapshotIndex> again = SnapshotIndex::Open(SnapshotCache(dir.path()));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(LookUpCost(*again, "libz.so.1", "deflateEnd", wire::METRIC_WALL_TIME_NS)->suspect,
            "2026-11-22: mean +200% against its history");
}

}  // namespace
}  // namespace fieldprof::tools
