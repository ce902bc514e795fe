// `fieldprof record show --idle`: where a
// recording's threads waited, as a call tree of to-idle and from-idle
// counts and off-CPU time over any time range.
#ifndef FIELDPROF_TOOLS_RECORD_IDLE_REPORT_H_
#define FIELDPROF_TOOLS_RECORD_IDLE_REPORT_H_

#include <cstdint>
#include <string>

#include "tools/record/recording.h"

namespace fieldprof::tools {

struct IdleReportOptions {
  uint64_t from_ns = 0, to_ns = UINT64_MAX;  // after the recording's start
  uint32_t tid = 0;                          // 0: every thread
  double min_share = 0.005;                  // hide tree nodes under this share of waits
  bool collapsed = false;                    // "a;b;c OFF_CPU_US" lines instead of the tree
  bool color = false, truecolor = false;     // heat colours by a line's own off-CPU time
};

// The report, as text. Counts come from the recording's idle time tree
// (exactly: its lists are completed); off-CPU time is summed over the
// range's waits.
std::string IdleReport(const Recording& r, const IdleReportOptions& o);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_IDLE_REPORT_H_
