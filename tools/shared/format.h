// Human-readable figures for the command line: durations and byte counts.
#ifndef FIELDPROF_TOOLS_SHARED_FORMAT_H_
#define FIELDPROF_TOOLS_SHARED_FORMAT_H_

#include <string>

#include "common/proto/fieldprof.pb.h"

namespace fieldprof::tools {

// 1234.5 ns -> "1.23 us"; 3e9 -> "3.00 s".
std::string FormatNanos(double ns);
// 1536 -> "1.50 KiB".
std::string FormatBytes(double bytes);
// 1234567 -> "1,234,567".
std::string FormatCount(uint64_t n);

// What an aggregator holds back until k machines have sent it, one
// sentence: "12 series (3 modules not shown at all), sent from 1 machine so
// far: a series is published once 5 machines have sent it (...)".
// Empty when nothing is (series <= 0). Numbers as the aggregator gives
// them in "withheld" (/v1/apis, /v1/modules) or the snapshot's manifest.
std::string WithheldText(int64_t k, int64_t series, int64_t modules, int64_t machines);
// Picks FormatNanos, FormatBytes or a plain count by metric. A wall time
// under `resolution_ns` (wire::Record.resolution_ns; 0: unknown) reads
// "< 10 ns": it cannot be told from 0, and 0 would read as free.
std::string FormatMetricValue(wire::Metric m, double v, uint64_t resolution_ns = 0);
// The zero bucket's label: "0", or "< 10 ns" for wall time with a known
// resolution (the calls no longer than the probe's own cost).
std::string ZeroBucketLabel(wire::Metric m, uint64_t resolution_ns);

// The ANSI colour of a histogram bucket in the heat spectrum: hue from its
// place in the range shown (0 cheap: blue .. 1 expensive: red), brightness
// from its count relative to the largest (0..1). 256 colours, or 24-bit.
std::string Heat(double position, double intensity, bool truecolor);

// `text` in the heat colour of `position` (0 cold .. 1 hot) at full
// brightness, and reset after; `text` itself when colour is off. Lines of
// a call tree coloured by their self share of the hottest, as the lab
// colours its histograms.
std::string HeatText(const std::string& text, double position, bool color, bool truecolor);

// Whether to colour stdout: --color always/never, or auto (a terminal, and
// NO_COLOR unset); and whether the terminal takes 24-bit colours (COLORTERM).
bool ColorWanted(const std::string& flag);
bool TrueColor();

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_FORMAT_H_
