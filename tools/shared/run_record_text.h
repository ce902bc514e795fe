// One run record (a spool file the runtime wrote), readably: what
// `fieldprof spool show` prints, and `fieldprof run --show` after a run.
#ifndef FIELDPROF_TOOLS_SHARED_RUN_RECORD_TEXT_H_
#define FIELDPROF_TOOLS_SHARED_RUN_RECORD_TEXT_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"

namespace fieldprof::tools {

// A unix time in ms as local "YYYY-MM-DD HH:MM:SS" ("?" when it cannot be).
std::string LocalTime(int64_t unix_ms);
// What the runtime did with the run: "measured", or why it refused.
std::string RefusedText(uint32_t refused);

// A histogram drawn as bars, one line per non-empty bucket: its range (in
// `m`'s unit), its count and up to 30 '#' against the fullest bucket.
std::string HistogramBarsText(wire::Metric m, const Histogram& h, uint64_t resolution_ns);

// The run's end, platform, counters, and per API and metric its statistics;
// with `histograms`, each metric's histogram drawn as bars.
void PrintRunRecord(std::FILE* out, const std::string& name, const wire::RunRecord& r,
                    bool histograms);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_RUN_RECORD_TEXT_H_
