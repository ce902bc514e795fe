// Lab mode's tables (lab.h), shared by lab.cc and lab_exit.cc.
#ifndef FIELDPROF_AGENT_RUNTIME_LAB_STATE_H_
#define FIELDPROF_AGENT_RUNTIME_LAB_STATE_H_

#include <cstdint>

#include "agent/runtime/lab.h"
#include "agent/runtime/runtime.h"
#include "common/histogram.h"

extern "C" FP_HIDDEN void fp_lab_entry();  // stubs_x86_64.S

namespace fieldprof::rt {

inline constexpr uint32_t kLabMapCap = 2 * kLabMaxApis;  // function address -> index
inline constexpr uint32_t kLabPlanCap = 2 * kLabMaxApis;
inline constexpr uint32_t kLabEdgeCap = 1u << 18;

struct LabName {
  const char* module;
  const char* build_id;
  const char* symbol;
};

// The APIs bound, for the life of the process (a fork child keeps them).
// Written under the binder's lock.
struct LabApis {
  uintptr_t real[kLabMaxApis];
  LabName names[kLabMaxApis];
  uint32_t map[kLabMapCap];    // open addressing by the function's address; 0: free
  uint64_t plan[kLabPlanCap];  // a timing pass's APIs (PlanKey); 0: free
  uint32_t plan_size;
  uint32_t n;        // indexes used, the probe's 0 included
  uint64_t refused;  // APIs left unbound: no index or name space left
  char dir[1024];
  char plan_text[1 << 20];
  size_t arena_used;
  char arena[4 << 20];  // the names, copied (a library may be unloaded first)
};

// One pair of APIs seen on one stack: `outer` below `inner`.
// key = outer * kLabMaxApis + inner + 1 (lab indexes); 0: free.
struct LabEdgeSlot {
  uint64_t key;
  uint64_t direct;  // calls of inner made directly inside outer
};

// What the calls recorded; a fork child starts afresh. Written under
// g_lab_lock.
struct LabCounts {
  Histogram h[kLabMaxApis][FP_NUM_METRICS];
  LabEdgeSlot edges[kLabEdgeCap];
  uint64_t calls;       // read without the lock (record.cc)
  uint64_t dropped;     // calls not recorded (a signal handler inside the lab's own recording)
  uint64_t edges_lost;  // pairs not kept: the table was full
  uint32_t max_depth;   // most distinct APIs on one stack at once
};

FP_HIDDEN extern LabApis* g_lab_apis;
FP_HIDDEN extern LabCounts* g_lab_counts;
FP_HIDDEN extern volatile int g_lab_lock;
FP_HIDDEN extern __thread int t_in_lab FP_TLS;

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_RUNTIME_LAB_STATE_H_
