// The calendar tree over additive aggregates (the aggregator's; the
// recording's index of time ranges is tools/record/time_tree.h).
//
// Every record is summed into three nodes: its day, its month and all time.
// Any inclusive day range [first, last] is then answered by a few nodes: the
// whole months inside the range plus the loose days at both ends (at most
// ~60 days + 1 node per month), or the single all-time node when the range is
// unbounded.
//
// The store adds a day to its month and all-time nodes only once the day is
// over (a roll-up), so during the day each record costs one write instead of
// three. Month and all-time nodes then hold the days up to a roll-up point
// only, and the days after it are answered from their day nodes: the
// four-argument CoverRange.
//
// Days are counted from 1970-01-01 (UTC), months as year*12 + (month-1).
#ifndef FIELDPROF_AGGREGATOR_STORE_CALENDAR_TREE_H_
#define FIELDPROF_AGGREGATOR_STORE_CALENDAR_TREE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"

namespace fieldprof::aggregator {

enum class TimeLevel : char { kDay = 'D', kMonth = 'M', kAllTime = 'A' };

struct TimeNode {
  TimeLevel level;
  int32_t period;  // day number, month number, or 0 for all time
  bool operator==(const TimeNode&) const = default;
};

inline constexpr int32_t kUnboundedFirst = std::numeric_limits<int32_t>::min();
inline constexpr int32_t kUnboundedLast = std::numeric_limits<int32_t>::max();

// Day number of a unix time in seconds (UTC).
int32_t DayFromUnixSeconds(int64_t unix_seconds);
// Month number (year*12 + month-1) of a day number.
int32_t MonthOfDay(int32_t day);
// The first and the last day number of a month number.
int32_t FirstDayOfMonth(int32_t month);
int32_t LastDayOfMonth(int32_t month);
// "2026-11-21" <-> day number. Parse errors say what was wrong.
[[nodiscard]] StatusOr<int32_t> ParseDay(std::string_view yyyy_mm_dd);
std::string FormatDay(int32_t day);

// The nodes a record of `day` is added to.
std::vector<TimeNode> NodesForDay(int32_t day);
// The fewest nodes whose union is exactly [first, last] (inclusive). Both
// bounds unbounded -> the all-time node. One bound unbounded is clamped to
// the years 1970..2200.
std::vector<TimeNode> CoverRange(int32_t first, int32_t last);
// The same when month and all-time nodes hold only the days up to
// `rolled_through` and no day after `newest` holds data: the fewest nodes
// whose union is exactly the data of [first, last]. Days after
// `rolled_through` come back as day nodes (the store skips those without data).
std::vector<TimeNode> CoverRange(int32_t first, int32_t last, int32_t rolled_through,
                                 int32_t newest);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_CALENDAR_TREE_H_
