#include "aggregator/store/calendar_tree.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace fieldprof::aggregator {
namespace {

using std::chrono::day;
using std::chrono::month;
using std::chrono::sys_days;
using std::chrono::year;
using std::chrono::year_month_day;

year_month_day Ymd(int32_t d) { return year_month_day(sys_days(std::chrono::days(d))); }
int32_t DayNumber(const year_month_day& ymd) {
  return static_cast<int32_t>(sys_days(ymd).time_since_epoch().count());
}

}  // namespace

int32_t DayFromUnixSeconds(int64_t unix_seconds) {
  int64_t d = unix_seconds / 86400;
  if (unix_seconds < 0 && unix_seconds % 86400 != 0) --d;
  return static_cast<int32_t>(d);
}

int32_t MonthOfDay(int32_t d) {
  year_month_day ymd = Ymd(d);
  return static_cast<int32_t>(int(ymd.year()) * 12 + (unsigned(ymd.month()) - 1));
}

int32_t FirstDayOfMonth(int32_t m) {
  return DayNumber(year_month_day{year(m / 12), month(static_cast<unsigned>(m % 12) + 1), day(1)});
}

int32_t LastDayOfMonth(int32_t m) { return FirstDayOfMonth(m + 1) - 1; }

StatusOr<int32_t> ParseDay(std::string_view s) {
  int y = 0;
  unsigned m = 0, dd = 0;
  char tail = 0;
  std::string str(s);
  if (s.size() != 10 || std::sscanf(str.c_str(), "%4d-%2u-%2u%c", &y, &m, &dd, &tail) != 3) {
    return InvalidArgument("date '" + str + "' is not YYYY-MM-DD");
  }
  year_month_day ymd{year(y), month(m), day(dd)};
  if (!ymd.ok() || y < 1970 || y > 2200) {
    return InvalidArgument("date '" + str + "' does not exist or is outside 1970..2200");
  }
  return DayNumber(ymd);
}

std::string FormatDay(int32_t d) {
  year_month_day ymd = Ymd(d);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", int(ymd.year()), unsigned(ymd.month()),
                unsigned(ymd.day()));
  return buf;
}

std::vector<TimeNode> NodesForDay(int32_t d) {
  return {{TimeLevel::kDay, d}, {TimeLevel::kMonth, MonthOfDay(d)}, {TimeLevel::kAllTime, 0}};
}

std::vector<TimeNode> CoverRange(int32_t first, int32_t last) {
  return CoverRange(first, last, kUnboundedLast, kUnboundedLast);
}

std::vector<TimeNode> CoverRange(int32_t first, int32_t last, int32_t rolled_through,
                                 int32_t newest) {
  static const int32_t kMinDay = DayNumber(year_month_day{year(1970), month(1), day(1)});
  static const int32_t kMaxDay = DayNumber(year_month_day{year(2200), month(12), day(31)});
  std::vector<TimeNode> nodes;
  // Part 1: the rolled-up days [first, min(last, rolled_through)].
  const int32_t rolled_last = std::min(last, rolled_through);
  if (first <= kMinDay && rolled_last == rolled_through) {
    nodes.push_back({TimeLevel::kAllTime, 0});
  } else {
    const int32_t end = std::min(rolled_last, kMaxDay);
    int32_t d = std::max(first, kMinDay);
    while (d <= end) {
      year_month_day ymd = Ymd(d);
      if (ymd.day() == day(1)) {
        const year_month_day next =
            year_month_day(ymd.year() / ymd.month() / day(1)) + std::chrono::months(1);
        const int32_t next_day = DayNumber(next);
        // A month node holds its days up to rolled_through only, so it also
        // covers a range that ends exactly there.
        if (next_day - 1 <= end || end == rolled_through) {
          nodes.push_back({TimeLevel::kMonth, MonthOfDay(d)});
          d = next_day;
          continue;
        }
      }
      nodes.push_back({TimeLevel::kDay, d});
      ++d;
    }
  }
  // Part 2: days after the roll-up point, one node each.
  if (rolled_through < kUnboundedLast) {
    const int32_t end = std::min({last, newest, kMaxDay});
    for (int32_t d = std::max({first, rolled_through + 1, kMinDay}); d <= end; ++d) {
      nodes.push_back({TimeLevel::kDay, d});
    }
  }
  return nodes;
}

}  // namespace fieldprof::aggregator
