// The lab's timing plan: which APIs are timed together in one pass. Two APIs
// that were ever on one stack are never in one set, so no probe's own cost
// lands inside a timed call (tools/shared/lab_profile.h has the pipeline).
#ifndef FIELDPROF_TOOLS_LAB_TIMING_PLAN_H_
#define FIELDPROF_TOOLS_LAB_TIMING_PLAN_H_

#include <cstdint>
#include <vector>

#include "tools/shared/lab_profile.h"

namespace fieldprof::tools {

struct TimingPlan {
  std::vector<std::vector<uint32_t>> sets;  // graph indexes; no two in a set share a stack
  uint32_t lower_bound = 0;  // no plan has fewer sets: the largest group known to share a stack
  std::vector<uint32_t> recursive;  // APIs seen inside themselves (their inner calls carry a probe)
};

// Colours the APIs `called` (graph indexes) so that no two that were on one
// stack share a set: DSatur (most coloured neighbours first), then the sets
// in order. `clique_hint`: the runtime's most distinct APIs on one stack.
TimingPlan PlanTiming(const LabGraph& g, const std::vector<uint32_t>& called, uint32_t clique_hint);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_LAB_TIMING_PLAN_H_
