// The points analysis on runs made here (common/points/points_analysis.h): what
// `points compare` and GET /v1/dev/compare say when a run calls a scope
// more or fewer times, and when each call itself changes.
#include "common/points/points_analysis.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fieldprof {
namespace {

// One run: a "load -> ready" segment of `segment_ns`, and `calls` scopes
// "work:step" of `call_ns` each (+ `jitter` times the call's number mod 3,
// so that no two runs are alike).
PointsRun Run(int calls, int64_t call_ns, int64_t segment_ns, int64_t jitter) {
  PointsRun r;
  r.program = "prog";
  r.sites = {{"work", "step"}, {"startup", "load"}, {"startup", "ready"}};
  int64_t t = 0;
  r.events.push_back({t, 1, 1, 0, PointKind::kPoint});
  t += segment_ns;
  r.events.push_back({t, 2, 1, 0, PointKind::kPoint});
  for (int i = 0; i < calls; ++i) {
    r.events.push_back({t, 0, 1, 0, PointKind::kBegin});
    t += call_ns + jitter * (i % 3);
    r.events.push_back({t, 0, 1, 0, PointKind::kEnd});
    t += 10;
  }
  return r;
}

std::vector<TagReport> Group(int calls, int64_t call_ns, int64_t segment_ns) {
  std::vector<PointsRun> runs;
  for (int k = 0; k < 8; ++k) runs.push_back(Run(calls, call_ns, segment_ns + 7 * k, k + 1));
  return AnalyzePoints(runs, PointsOptions{});
}

const SegmentChange& Row(const std::vector<SegmentChange>& rows, const std::string& segment) {
  for (const SegmentChange& r : rows) {
    if (r.segment == segment) return r;
  }
  ADD_FAILURE() << "no row for " << segment;
  static const SegmentChange kNone;
  return kNone;
}

// Runs of one tag whose spans are `spans_ns` (a "start -> end" segment).
std::vector<PointsRun> SpanRuns(const std::vector<int64_t>& spans_ns) {
  std::vector<PointsRun> runs;
  for (int64_t span : spans_ns) {
    PointsRun r;
    r.program = "prog";
    r.sites = {{"startup", "start"}, {"startup", "end"}};
    r.events.push_back({0, 0, 1, 0, PointKind::kPoint});
    r.events.push_back({span, 1, 1, 0, PointKind::kPoint});
    runs.push_back(std::move(r));
  }
  return runs;
}

// The case the analysis was built for: a handful of runs, one of them disturbed. With 7
// runs and one 10x slower, that run is removed and named; so is one 3x
// slower among 5. Below 5 runs none is, and the report says why.
TEST(PointsAnalysisTest, ASmallSetLosesItsOneDisturbedRun) {
  std::vector<int64_t> spans = {1000000, 1012000, 994000, 1003000, 10000000, 1007000, 998000};
  std::vector<TagReport> tags = AnalyzePoints(SpanRuns(spans), PointsOptions{});
  ASSERT_EQ(tags.size(), 1u);
  ASSERT_EQ(tags[0].removed.size(), 1u);
  EXPECT_EQ(tags[0].removed[0].run, 4u);
  EXPECT_EQ(tags[0].runs.size(), 6u);
  tags = AnalyzePoints(SpanRuns({1000000, 1020000, 3000000, 990000, 1010000}), PointsOptions{});
  ASSERT_EQ(tags[0].removed.size(), 1u);
  EXPECT_EQ(tags[0].removed[0].run, 2u);
  tags = AnalyzePoints(SpanRuns({1000000, 1020000, 9000000, 990000}), PointsOptions{});
  EXPECT_TRUE(tags[0].removed.empty());
  ASSERT_EQ(tags[0].kept_outliers.size(), 1u);
  EXPECT_STREQ(tags[0].kept_outliers[0].kept_why, "with fewer than 5 runs none is removed");
  // Past 3.5 but only 1.5x the median: kept below 20 runs, and said so.
  tags = AnalyzePoints(SpanRuns({1000000, 1001000, 999000, 1500000, 1000500, 999500, 1000200}),
                       PointsOptions{});
  EXPECT_TRUE(tags[0].removed.empty());
  ASSERT_EQ(tags[0].kept_outliers.size(), 1u);
  EXPECT_EQ(tags[0].kept_outliers[0].run, 3u);
}

// Honest noise is not eaten: 100 sets of 7 runs whose spans vary as a
// program's startup does (log-normal, 15% spread, a fixed seed), at most
// 5 sets lose a run. |M| > 3.5 alone took a run from about a third of
// such sets (the MAD of 7 values is rough).
TEST(PointsAnalysisTest, HonestNoiseInSmallSetsKeepsItsRuns) {
  std::mt19937_64 rng(20261127);
  std::lognormal_distribution<double> spread(0.0, 0.15);
  int sets_losing_a_run = 0, outliers = 0;
  for (int set = 0; set < 100; ++set) {
    std::vector<int64_t> spans;
    for (int k = 0; k < 7; ++k) spans.push_back(std::llround(8e6 * spread(rng)));
    const std::vector<TagReport> tags = AnalyzePoints(SpanRuns(spans), PointsOptions{});
    sets_losing_a_run += tags[0].removed.empty() ? 0 : 1;
    outliers += static_cast<int>(tags[0].removed.size() + tags[0].kept_outliers.size());
  }
  EXPECT_LE(sets_losing_a_run, 5);
  EXPECT_GT(outliers, 5);  // the noise does cross 3.5: the ratio keeps them
}

TEST(PointsAnalysisTest, TwiceTheCallsIsSlowerARunButNotACall) {
  const std::vector<SegmentChange> rows =
      ComparePoints(Group(10, 1000, 5000), Group(20, 1000, 5000), CompareOptions{});
  const SegmentChange& step = Row(rows, "step (scope)");
  EXPECT_TRUE(step.CallsDiffer());
  EXPECT_DOUBLE_EQ(step.calls_a, 10);
  EXPECT_DOUBLE_EQ(step.calls_b, 20);
  EXPECT_NEAR(step.mean_b / step.mean_a, 2, 0.01);
  EXPECT_TRUE(step.significant);
  EXPECT_NEAR(step.per_call_a, 1000, 10);
  EXPECT_NEAR(step.per_call_b / step.per_call_a, 1, 0.01);
  EXPECT_FALSE(step.per_call_significant);
  // The segment called once a run in both: nothing differs.
  const SegmentChange& load = Row(rows, "load -> ready");
  EXPECT_FALSE(load.CallsDiffer());
  EXPECT_DOUBLE_EQ(load.calls_a, 1);
  EXPECT_FALSE(load.significant);
  EXPECT_FALSE(load.per_call_significant);
}

TEST(PointsAnalysisTest, ASlowerCallIsSignificantBothWays) {
  const std::vector<SegmentChange> rows =
      ComparePoints(Group(10, 1000, 5000), Group(10, 1500, 5000), CompareOptions{});
  const SegmentChange& step = Row(rows, "step (scope)");
  EXPECT_FALSE(step.CallsDiffer());
  EXPECT_TRUE(step.significant);
  EXPECT_TRUE(step.per_call_significant);
  EXPECT_NEAR(step.per_call_b / step.per_call_a, 1.5, 0.01);
  EXPECT_LT(step.per_call_q, 0.05);
}

TEST(PointsAnalysisTest, FewerButSlowerCallsShowOnlyPerCall) {
  // Half the calls, each twice as long: a run takes as long as before.
  const std::vector<SegmentChange> rows =
      ComparePoints(Group(20, 1000, 5000), Group(10, 2000, 5000), CompareOptions{});
  const SegmentChange& step = Row(rows, "step (scope)");
  EXPECT_TRUE(step.CallsDiffer());
  EXPECT_NEAR(step.mean_b / step.mean_a, 1, 0.02);
  EXPECT_FALSE(step.significant);
  EXPECT_NEAR(step.per_call_b / step.per_call_a, 2, 0.02);
  EXPECT_TRUE(step.per_call_significant);
}

TEST(PointsAnalysisTest, CompareJsonCarriesThePerCallFigures) {
  const std::vector<SegmentChange> rows =
      ComparePoints(Group(10, 1000, 5000), Group(20, 1000, 5000), CompareOptions{});
  const std::string j = CompareJson(rows);
  for (const char* key :
       {"\"calls_a\"", "\"calls_b\"", "\"calls_differ\"", "\"per_call_a_ns\"", "\"per_call_b_ns\"",
        "\"per_call_p\"", "\"per_call_q\"", "\"per_call_significant\""}) {
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
  }
}

}  // namespace
}  // namespace fieldprof
