#include "aggregator/time_tree.h"

#include <gtest/gtest.h>

#include <set>

namespace fieldprof::aggregator {
namespace {

int32_t D(const char* s) { return *ParseDay(s); }

TEST(TimeTreeTest, ParseAndFormatDays) {
  EXPECT_EQ(D("1970-01-01"), 0);
  EXPECT_EQ(D("2026-11-21"), 20778);
  EXPECT_EQ(FormatDay(20778), "2026-11-21");
  EXPECT_FALSE(ParseDay("2026-02-30").ok());
  EXPECT_FALSE(ParseDay("2026-1-1").ok());
  EXPECT_FALSE(ParseDay("yesterday").ok());
  EXPECT_EQ(DayFromUnixSeconds(86400 * 3 + 5), 3);
  EXPECT_EQ(DayFromUnixSeconds(-1), -1);
}

TEST(TimeTreeTest, NodesForDay) {
  auto n = NodesForDay(D("2026-11-21"));
  ASSERT_EQ(n.size(), 3u);
  EXPECT_EQ(n[0].level, TimeLevel::kDay);
  EXPECT_EQ(n[1].level, TimeLevel::kMonth);
  EXPECT_EQ(n[1].period, 2026 * 12 + 10);
  EXPECT_EQ(n[2].level, TimeLevel::kAllTime);
}

// Expands a cover back into days and checks it is exactly [first, last].
void ExpectExactCover(int32_t first, int32_t last) {
  auto nodes = CoverRange(first, last);
  std::multiset<int32_t> days;
  for (const TimeNode& n : nodes) {
    if (n.level == TimeLevel::kDay) {
      days.insert(n.period);
    } else {
      ASSERT_EQ(n.level, TimeLevel::kMonth);
      for (int32_t d = first - 40; d <= last + 40; ++d) {
        if (MonthOfDay(d) == n.period) days.insert(d);
      }
    }
  }
  std::multiset<int32_t> want;
  for (int32_t d = first; d <= last; ++d) want.insert(d);
  EXPECT_EQ(days, want) << FormatDay(first) << ".." << FormatDay(last);
}

TEST(TimeTreeTest, CoverIsExactAndSmall) {
  ExpectExactCover(D("2026-11-21"), D("2026-11-21"));
  ExpectExactCover(D("2026-01-01"), D("2026-01-31"));
  ExpectExactCover(D("2025-12-15"), D("2026-03-10"));
  ExpectExactCover(D("2024-02-01"), D("2024-02-29"));
  ExpectExactCover(D("2020-01-05"), D("2026-11-21"));
  // A whole year is 12 month nodes; loose ends at most ~60 days.
  EXPECT_EQ(CoverRange(D("2025-01-01"), D("2025-12-31")).size(), 12u);
  EXPECT_LE(CoverRange(D("2020-01-02"), D("2026-11-20")).size(), 30u + 81u + 20u);
}

TEST(TimeTreeTest, UnboundedIsAllTime) {
  auto n = CoverRange(kUnboundedFirst, kUnboundedLast);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].level, TimeLevel::kAllTime);
}

}  // namespace
}  // namespace fieldprof::aggregator
