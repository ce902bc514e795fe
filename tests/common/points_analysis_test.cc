// The points analysis on runs made here (common/points_analysis.h): what
// `points compare` and GET /v1/dev/compare say when a run calls a scope
// more or fewer times, and when each call itself changes.
#include "common/points_analysis.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fieldprof::local {
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
}  // namespace fieldprof::local
