// Call trees (call_tree.h) from other tools' files: collapsed stacks
// (flamegraph.pl, perf script | stackcollapse) and Chrome trace event JSON
// (B/E and X events, as Perfetto, chrome://tracing and many tracers write
// them).
#ifndef FIELDPROF_TOOLS_TREE_TREE_FORMATS_H_
#define FIELDPROF_TOOLS_TREE_TREE_FORMATS_H_

#include <cstdint>
#include <string_view>

#include "common/base/status.h"
#include "tools/tree/call_tree.h"

namespace fieldprof::tools {

// "a;b;c 12" lines, the count (an integer) after the last space, into
// metric `m`. Blank lines and "#" comments are skipped; anything else is
// an error naming its line.
[[nodiscard]] StatusOr<CallTree> CallTreeFromCollapsed(std::string_view text, Metric m);

struct ChromeTraceOptions {
  bool threads = false;  // a frame per thread above its events ("thread NAME" or "tid N")
};

// Trace events: a {"traceEvents": [...]} object or a bare array. "B"/"E"
// pairs and "X" events (with "dur") nest by time on each (pid, tid);
// timestamps are microseconds. Each event is a call of its name: calls
// count them, time is the duration (self: less its nested events). Other
// phases are skipped; a "B" never ended is ended at its thread's last
// timestamp, and counted in `*unended`.
[[nodiscard]] StatusOr<CallTree> CallTreeFromChromeTrace(std::string_view json,
                                                         const ChromeTraceOptions& o,
                                                         uint64_t* unended = nullptr);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_TREE_TREE_FORMATS_H_
