#include "aggregator/store/suspect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "aggregator/store/calendar_tree.h"

namespace fieldprof::aggregator {

Suspicion JudgeLatestDay(const DayFigures& day, const DayFigures& history, int32_t latest_day) {
  Suspicion out;
  if (day.runs < kSuspectMinDayRuns) return out;
  if (history.runs < kSuspectMinHistoryRuns || history.machines < kSuspectMinHistoryMachines) {
    return out;
  }
  if (!(history.mean > 0)) return out;
  const double shift = day.mean / history.mean - 1;
  const uint64_t day_machines = std::max<uint64_t>(1, day.machines);
  const double day_rpm = static_cast<double>(day.runs) / static_cast<double>(day_machines);
  const double hist_rpm = static_cast<double>(history.runs) / static_cast<double>(history.machines);
  if (std::abs(shift) < kSuspectMinShift || day_rpm < kSuspectConcentration * hist_rpm) {
    return out;
  }
  char reason[256];
  std::snprintf(reason, sizeof reason,
                "%s: mean %+.0f%% against its history, from %llu runs on %llu machines (%.1f runs "
                "a machine; %.1f before)",
                FormatDay(latest_day).c_str(), 100 * shift,
                static_cast<unsigned long long>(day.runs),
                static_cast<unsigned long long>(day.machines), day_rpm, hist_rpm);
  out.suspect = true;
  out.reason = reason;
  return out;
}

namespace {

// Machines counted once a day: runs per machine-day, today's and before.
DayFigures FiguresOf(const ApiAggregate& a) {
  return {a.histogram.Mean(), a.runs, a.day_machines.Estimate()};
}

}  // namespace

StatusOr<Suspicion> JudgeSeries(Store* store, const ApiKey& key, const DayFigures& all,
                                int32_t today) {
  if (all.runs < kSuspectMinHistoryRuns + kSuspectMinDayRuns ||
      all.machines < kSuspectMinHistoryMachines) {
    return Suspicion{};
  }
  ApiAggregate day;
  int32_t latest = today;
  for (; latest >= today - 1; --latest) {
    FP_ASSIGN_OR_RETURN(day, store->QueryRange(key, latest, latest));
    if (day.runs > 0) break;
  }
  if (day.runs < kSuspectMinDayRuns) return Suspicion{};
  FP_ASSIGN_OR_RETURN(ApiAggregate history, store->QueryRange(key, kUnboundedFirst, latest - 1));
  return JudgeLatestDay(FiguresOf(day), FiguresOf(history), latest);
}

}  // namespace fieldprof::aggregator
