#include "aggregator/store/calendar_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace fieldprof::aggregator {
namespace {

int32_t D(const char* s) { return *ParseDay(s); }

TEST(CalendarTreeTest, ParseAndFormatDays) {
  EXPECT_EQ(D("1970-01-01"), 0);
  EXPECT_EQ(D("2026-11-21"), 20778);
  EXPECT_EQ(FormatDay(20778), "2026-11-21");
  EXPECT_FALSE(ParseDay("2026-02-30").ok());
  EXPECT_FALSE(ParseDay("2026-1-1").ok());
  EXPECT_FALSE(ParseDay("yesterday").ok());
  EXPECT_EQ(DayFromUnixSeconds(86400 * 3 + 5), 3);
  EXPECT_EQ(DayFromUnixSeconds(-1), -1);
}

TEST(CalendarTreeTest, NodesForDay) {
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

TEST(CalendarTreeTest, CoverIsExactAndSmall) {
  ExpectExactCover(D("2026-11-21"), D("2026-11-21"));
  ExpectExactCover(D("2026-01-01"), D("2026-01-31"));
  ExpectExactCover(D("2025-12-15"), D("2026-03-10"));
  ExpectExactCover(D("2024-02-01"), D("2024-02-29"));
  ExpectExactCover(D("2020-01-05"), D("2026-11-21"));
  // A whole year is 12 month nodes; loose ends at most ~60 days.
  EXPECT_EQ(CoverRange(D("2025-01-01"), D("2025-12-31")).size(), 12u);
  EXPECT_LE(CoverRange(D("2020-01-02"), D("2026-11-20")).size(), 30u + 81u + 20u);
}

TEST(CalendarTreeTest, UnboundedIsAllTime) {
  auto n = CoverRange(kUnboundedFirst, kUnboundedLast);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].level, TimeLevel::kAllTime);
}

// With roll-ups: month and all-time nodes hold only days <= rolled_through,
// and days hold data from `data_first` to `newest`. Expanding the cover back
// into days must give every day of [first, last] that has data exactly once.
void ExpectExactRolledCover(int32_t first, int32_t last, int32_t rolled, int32_t newest,
                            int32_t data_first) {
  auto has_data = [&](int32_t d) { return d >= data_first && d <= newest; };
  std::multiset<int32_t> days;
  for (const TimeNode& n : CoverRange(first, last, rolled, newest)) {
    for (int32_t d = data_first; d <= newest; ++d) {
      const bool in = n.level == TimeLevel::kDay     ? d == n.period
                      : n.level == TimeLevel::kMonth ? MonthOfDay(d) == n.period && d <= rolled
                                                     : d <= rolled;
      if (in) days.insert(d);
    }
  }
  std::multiset<int32_t> want;
  for (int32_t d = std::max(first, data_first); d <= std::min(last, newest); ++d) {
    if (has_data(d)) want.insert(d);
  }
  EXPECT_EQ(days, want) << "first " << first << " last " << last << " rolled " << rolled
                        << " newest " << newest;
}

TEST(CalendarTreeTest, RolledCoverIsExactForRandomRanges) {
  std::mt19937 rng(7);
  const int32_t base = D("2026-09-20");
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 3000; ++i) {
    const int32_t data_first = base - 40;
    const int32_t newest = base + pick(0, 120);
    const int32_t rolled = std::min(newest + pick(-1, 2), base + pick(-45, 120));
    const int32_t first = pick(0, 9) == 0 ? kUnboundedFirst : base + pick(-35, 120);
    const int32_t last = pick(0, 9) == 0            ? kUnboundedLast
                         : first == kUnboundedFirst ? base + pick(-35, 130)
                                                    : first + pick(0, 100);
    ExpectExactRolledCover(first, last, rolled, newest, data_first);
  }
}

TEST(CalendarTreeTest, RolledCoverUsesFewNodes) {
  // Rolled up to yesterday, data until today: all time is 2 nodes.
  const int32_t today = D("2026-11-21");
  auto all = CoverRange(kUnboundedFirst, kUnboundedLast, today - 1, today);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].level, TimeLevel::kAllTime);
  EXPECT_EQ(all[1], (TimeNode{TimeLevel::kDay, today}));
  // This month so far: its month node (through yesterday) and today.
  auto month = CoverRange(D("2026-11-01"), today, today - 1, today);
  ASSERT_EQ(month.size(), 2u);
  EXPECT_EQ(month[0], (TimeNode{TimeLevel::kMonth, MonthOfDay(today)}));
  // A year to date: 10 whole months, this month's node and today.
  EXPECT_EQ(CoverRange(D("2026-01-01"), today, today - 1, today).size(), 12u);
}

}  // namespace
}  // namespace fieldprof::aggregator
