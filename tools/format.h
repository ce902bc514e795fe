// Human-readable figures for the command line: durations and byte counts.
#ifndef FIELDPROF_TOOLS_FORMAT_H_
#define FIELDPROF_TOOLS_FORMAT_H_

#include <string>

#include "common/proto/fieldprof.pb.h"

namespace fieldprof::tools {

// 1234.5 ns -> "1.23 us"; 3e9 -> "3.00 s".
std::string FormatNanos(double ns);
// 1536 -> "1.50 KiB".
std::string FormatBytes(double bytes);
// Picks FormatNanos, FormatBytes or a plain count by metric.
std::string FormatMetricValue(wire::Metric m, double v);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_FORMAT_H_
