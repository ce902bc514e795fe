// Lab mode's tables (lab.h), shared by lab.cc and lab_exit.cc.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_LAB_LAB_STATE_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_LAB_LAB_STATE_H_

#include <cstdint>

#include "agent/preload/base/recorder_abi.h"
#include "agent/preload/runtime/lab/lab.h"
#include "agent/preload/runtime/runtime.h"
#include "common/statistics/histogram.h"

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

// A points pass's scope for an API: a point's site (tag, name), passed to
// the points recorder's fieldprof_point_span (agent/preload/base/recorder_abi.h).
using LabPointSite = fieldprof_point_site;
FP_HIDDEN extern recorder_abi::SpanFn g_lab_span;
// Set in a points pass whose recorder takes stacks (common/points/points_format.h's
// kStacksEnv): the measured calls' return slots are lent to its unwinder
// (LendReturnAddresses).
FP_HIDDEN extern bool g_lab_stacks;

// The APIs bound, for the life of the process (a fork child keeps them).
// Written under the binder's lock.
struct LabApis {
  uintptr_t real[kLabMaxApis];
  LabName names[kLabMaxApis];
  LabPointSite sites[kLabMaxApis];  // a points pass's, as names
  uint32_t map[kLabMapCap];         // open addressing by the function's address; 0: free
  uint64_t plan[kLabPlanCap];       // a timing pass's APIs (PlanKey); 0: free
  uint32_t plan_size;
  uint32_t plan_len;  // bytes of plan_text: its lines, each ended by a NUL
  // Functions whose entry jumps to their stub (detour.h): reached through
  // an import, they go straight on, the entry measures them.
  uint32_t ndetoured;
  uintptr_t detoured[256];
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

// One call path of the census (wire.LabPath): `api` called with the
// path `parent` beneath it (0: the root). A parent has a smaller id.
inline constexpr uint32_t kLabPathCap = 1u << 17;
struct LabPath {
  uint32_t parent, api;
  uint64_t calls, time_ns, timed_calls;       // time inclusive
  uint64_t alloc_bytes, allocs, freed_bytes;  // exclusive (LabOwn)
};

// What the allocator did for a call while it was the innermost one on its
// thread: the lab's exclusive allocation figures, in usable sizes.
struct LabOwn {
  uint64_t alloc_bytes, allocs, freed_bytes;
};

// What the calls recorded; a fork child starts afresh. Written under
// g_lab_lock (own[]: by its thread only).
struct LabCounts {
  Histogram h[kLabMaxApis][FP_NUM_METRICS];
  LabEdgeSlot edges[kLabEdgeCap];
  // The census's call paths: paths[1..npaths), found by (parent, api)
  // through path_map (open addressing; 0: free).
  LabPath paths[kLabPathCap];
  uint32_t path_map[2 * kLabPathCap];
  uint32_t npaths;
  uint64_t paths_lost;
  LabOwn own[kShadowStacks][kShadowDepth];  // by shadow stack and depth
  uint64_t calls;                           // read without the lock (record.cc)
  uint64_t dropped;     // calls not recorded (a signal handler inside the lab's own recording)
  uint64_t edges_lost;  // pairs not kept: the table was full
  uint32_t max_depth;   // most distinct APIs on one stack at once
};

FP_HIDDEN extern LabApis* g_lab_apis;
FP_HIDDEN extern LabCounts* g_lab_counts;
FP_HIDDEN extern volatile int g_lab_lock;
FP_HIDDEN extern __thread int t_in_lab FP_TLS;

// The census's share of what the allocator does inside a lab call: once
// the census turns it on (LabCountAllocations, alloc_counters.cc), the
// allocation functions tell LabAllocated(p) of each block a measured call
// got, and LabFreeing(p) of each it is about to give back (lab.cc).
void LabCountAllocations();
void LabAllocated(void* p);
void LabFreeing(void* p);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_LAB_LAB_STATE_H_
