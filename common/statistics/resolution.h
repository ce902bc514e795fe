// A duration under its run's timing resolution (wire::Record.resolution_ns)
// cannot be told from 0: every reader shows it as "< resolution", never as
// 0 ns or 1 ns. These say which of a series' figures are such.
#ifndef FIELDPROF_COMMON_STATISTICS_RESOLUTION_H_
#define FIELDPROF_COMMON_STATISTICS_RESOLUTION_H_

#include <cstdint>

#include "common/base/json_writer.h"
#include "common/statistics/histogram.h"

namespace fieldprof {

// Whether `ns` is under `resolution_ns` (0: unknown, then never).
inline bool BelowResolution(double ns, uint64_t resolution_ns) {
  return resolution_ns != 0 && ns < static_cast<double>(resolution_ns);
}

// For JSON answers about wall time: "resolution_ns" and "below_resolution",
// the names of the figures of `s` ("mean", "p50", "p90", "p99", "min")
// under it. Nothing when the resolution is unknown (0).
void WriteResolution(JsonWriter& j, const HistogramStats& s, uint64_t resolution_ns);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_STATISTICS_RESOLUTION_H_
