// Seeing an attack: an API's (or one series') latest day --
// today, else yesterday -- against all the days before it. Suspect when
// the day's mean moved by half or more while its runs came from few
// machines: at least kConcentration times the runs per machine of the
// history. Judged only with history enough to judge by. GET /v1/api says
// it for an API; the snapshot carries it per series (wire::Record.suspect)
// for `fieldprof check`, `cost` and the IDE.
#ifndef FIELDPROF_AGGREGATOR_STORE_SUSPECT_H_
#define FIELDPROF_AGGREGATOR_STORE_SUSPECT_H_

#include <cstdint>
#include <string>

#include "aggregator/store/store.h"
#include "common/base/status.h"

namespace fieldprof::aggregator {

inline constexpr uint64_t kSuspectMinHistoryRuns = 30;
inline constexpr uint64_t kSuspectMinHistoryMachines = 3;
inline constexpr uint64_t kSuspectMinDayRuns = 10;
inline constexpr double kSuspectMinShift = 0.5;
inline constexpr double kSuspectConcentration = 4;

// What the judge compares of a day, or of the history.
struct DayFigures {
  double mean = 0;
  uint64_t runs = 0;
  uint64_t machines = 0;  // the sketch's estimate
};

struct Suspicion {
  bool suspect = false;
  // "2026-11-24: mean +412% against its history, from 60 runs on 1
  // machines (60.0 runs a machine; 1.0 before)"
  std::string reason;
};

Suspicion JudgeLatestDay(const DayFigures& day, const DayFigures& history, int32_t latest_day);

// One series of the store, judged at `today`. Series with too few runs
// or machines in all to be judged (ApiAggregate of all time) are not
// read again: pass their all-time figures as `all`.
[[nodiscard]] StatusOr<Suspicion> JudgeSeries(Store* store, const ApiKey& key,
                                              const DayFigures& all, int32_t today);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_SUSPECT_H_
