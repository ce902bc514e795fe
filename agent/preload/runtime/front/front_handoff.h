// What the front (front.cc) decided for the runtime it loads: the run's
// settings and the decision, slot held. The front runs the first look and
// the decision (decide.h); only a run it will measure loads the runtime,
// whose constructor then takes both from here instead of deciding again
// (which would take a second slot and count the rate twice), and leaves
// the front where to pass on the points header's calls. The runtime finds
// it by name among the loaded objects (FindFrontHandoff, start.cc).
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_FRONT_FRONT_HANDOFF_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_FRONT_FRONT_HANDOFF_H_

#include "agent/preload/runtime/front/decide.h"

namespace fieldprof::rt {

// Plain data with no initializers: zero in .bss, no constructor, so a
// process that is not sampled writes none of it.
struct FrontHandoff {
  RunSettings settings;  // page-aligned
  int slot_fd;           // RunDecision::slot_fd, held while measuring
  int ready;             // 1 once the front decided to measure
  // Set by the runtime once it measures: where the front passes on a
  // module's coming and going, as fieldprof/points.h tells it
  // (fieldprof_point_module, front.cc).
  void (*point_module)(volatile unsigned short* semaphore, int arriving);
};

inline constexpr char kFrontHandoffName[] = "fieldprof_front_handoff";

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_FRONT_FRONT_HANDOFF_H_
