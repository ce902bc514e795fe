// Where call trees (call_tree.h) come from: a recording's samples over a
// time range, collapsed stacks (flamegraph.pl, perf script |
// stackcollapse), and Chrome trace event JSON (B/E and X events, as
// Perfetto, chrome://tracing and many tracers write them). Any file a
// tree command takes goes through LoadCallTree, which tells them apart.
#ifndef FIELDPROF_TOOLS_LOCAL_TREE_SOURCES_H_
#define FIELDPROF_TOOLS_LOCAL_TREE_SOURCES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "tools/record/recording.h"
#include "tools/tree/call_tree.h"

namespace fieldprof::local {

// The samples of [t1_ns, t2_ns) (relative to the recording's start) of
// thread `tid` (0: all), counted exactly: samples, and time as samples
// times the sampling period.
CallTree CallTreeFromRecording(const Recording& r, uint64_t t1_ns, uint64_t t2_ns, uint32_t tid);

// Where the threads waited in [t1_ns, t2_ns] (idle transitions): each wait
// (to-idle) is a call of the stack it waited at, its off-CPU time the
// time. Empty when the recording has no idle transitions.
CallTree OffCpuTreeFromRecording(const Recording& r, uint64_t t1_ns, uint64_t t2_ns, uint32_t tid);

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

struct LoadOptions {
  // For a recording: the range and thread.
  uint64_t from_ns = 0, to_ns = UINT64_MAX;
  uint32_t tid = 0;
  bool off_cpu = false;  // the waits and their off-CPU time instead of the samples
  // For collapsed stacks: what the counts are.
  Metric collapsed_metric = Metric::kSamples;
  ChromeTraceOptions chrome;
};

// A .fptree, a recording (.fprec), Chrome trace JSON or collapsed stacks,
// told apart by their first bytes; errors name the file.
[[nodiscard]] StatusOr<CallTree> LoadCallTree(const std::string& path, const LoadOptions& o);

}  // namespace fieldprof::local

#endif  // FIELDPROF_TOOLS_LOCAL_TREE_SOURCES_H_
