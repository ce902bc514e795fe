// The spool's run counters: runs the runtime decided not to measure, or
// that measured no call, leave no record file; each adds one to a count in
// <spool>/.counters instead ("name value" lines, updated under an flock by
// the runtime). The agent takes the counts from there into its batches'
// counters (AgentCounters) and zeroes them under the same lock.
//
// Shared spelling: the runtime (agent/preload/runtime/front/decide.cc) writes these names,
// the agent and `fieldprof status` read them.
#ifndef FIELDPROF_COMMON_SPOOL_RUN_COUNTERS_H_
#define FIELDPROF_COMMON_SPOOL_RUN_COUNTERS_H_

#include <stdint.h>

#ifdef __cplusplus
#ifndef FIELDPROF_RUNTIME
#include <functional>
#endif
#endif

#ifdef __cplusplus
namespace fieldprof {
#endif

#define FP_COUNTERS_FILE ".counters"

// Index order is the file's line order.
enum FpRunCounter {
  kRunRefusedSlot = 0,   // no free machine-wide slot
  kRunRefusedLoad = 1,   // system load above the threshold
  kRunRefusedRate = 2,   // machine-wide rate cap on measured runs reached
  kRunMeasuredNone = 3,  // measured, but no chosen API was called
  kNumRunCounters = 4
};

static const char* const kRunCounterNames[kNumRunCounters] = {
    "refused_no_slot", "refused_load", "refused_rate_cap", "measured_nothing"};

#ifdef __cplusplus
}  // namespace fieldprof

// The reading side (agent, tools): libfieldprof.so includes only the names
// above.
#ifndef FIELDPROF_RUNTIME
#include <array>
#include <string>

#include "common/base/status.h"

namespace fieldprof {

using RunCounts = std::array<uint64_t, kNumRunCounters>;

// The counts in <spool_dir>/.counters; all zero when there is no file.
// Damaged lines are skipped (the runtime does the same).
[[nodiscard]] StatusOr<RunCounts> ReadRunCounters(const std::string& spool_dir);

// Reads the counts and sets them to zero, under the runtime's lock, after
// `keep(counts)` succeeds (so nothing counted is lost if it fails). A
// runtime waiting for the lock adds its count after the zeroing.
[[nodiscard]] StatusOr<RunCounts> TakeRunCounters(
    const std::string& spool_dir, const std::function<Status(const RunCounts&)>& keep);

}  // namespace fieldprof
#endif  // FIELDPROF_RUNTIME
#endif  // __cplusplus

#endif  // FIELDPROF_COMMON_SPOOL_RUN_COUNTERS_H_
