// A recording as a call tree (tools/tree/call_tree.h): its samples, or
// its waits, over a time range, for `tree`, `record show` and the page.
#ifndef FIELDPROF_TOOLS_RECORD_RECORD_TREE_H_
#define FIELDPROF_TOOLS_RECORD_RECORD_TREE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/base/status.h"
#include "tools/record/recording.h"
#include "tools/tree/call_tree.h"

namespace fieldprof::tools {
// The samples of [t1_ns, t2_ns) (relative to the recording's start) of
// thread `tid` (0: all), counted exactly: samples, and time as samples
// times the sampling period.
CallTree CallTreeFromRecording(const Recording& r, uint64_t t1_ns, uint64_t t2_ns, uint32_t tid);

// Where the threads waited in [t1_ns, t2_ns] (idle transitions): each wait
// (to-idle) is a call of the stack it waited at, its off-CPU time the
// time. Empty when the recording has no idle transitions.
CallTree OffCpuTreeFromRecording(const Recording& r, uint64_t t1_ns, uint64_t t2_ns, uint32_t tid);

// Traced and sampled time in one tree (tools/tree/call_tree.h): the program's scopes
// (FP_SCOPE, --at) give the structure, the calls and the exact durations;
// the samples distribute each scope's self time (its duration less its
// inner scopes') over the call paths they saw inside it. A scope is a node
// "[TAG:NAME]" under the scope that holds it on its thread; under it, the
// whole stacks of its samples (where in the stack the scope was entered is
// not recorded). Its time is shared out in proportion to the
// samples' own times, to the nanosecond, so its total is its traced
// duration exactly; a scope without a sample of its own keeps its self
// time. Samples outside every scope keep their sampled time under the
// root. Scopes wholly in [t1_ns, t2_ns], of thread `tid` (0: all).
CallTree MergedTreeFromRecording(const Recording& r, uint64_t t1_ns, uint64_t t2_ns, uint32_t tid);

// The samples of [t1_ns, t2_ns] of thread `tid` (0: all) as the field
// sees them (field_view.h): the field stacks of `module` they fold into,
// each sample's time under its stack; a tree like the one the field's
// folded stacks of that module make (fieldprof stacks --format folded).
// `version_of(module, build_id)` gives a build's version as the field keys
// it, or the build id itself when no package holds that build: the field
// drops such a module's stacks, and so does the view.
// Unsupported for a recording made before the view was kept; NotFound
// when no sample is in a packaged module of that name (the message lists
// those that are). `name_frame`, when given, names a frame of a build (its
// "+offset" by the build's debug file: tools/shared/debug_names.h); its
// errors are the call's.
using VersionOf =
    std::function<std::string(const std::string& module, const std::string& build_id)>;
using FrameNamer =
    std::function<StatusOr<std::string>(const std::string& build_id, std::string_view frame)>;
[[nodiscard]] StatusOr<CallTree> FieldTreeFromRecording(const Recording& r,
                                                        const std::string& module, uint64_t t1_ns,
                                                        uint64_t t2_ns, uint32_t tid,
                                                        const VersionOf& version_of,
                                                        const FrameNamer& name_frame = {});

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_RECORD_TREE_H_
