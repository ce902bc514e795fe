// The entry points the points recorder (libfieldprof-points.so, agent/
// points/) exports and the field runtime calls in a lab points pass
// (agent/preload/runtime/lab/lab.cc), declared once for both. The runtime finds them
// by name after itself (ResolveNext): neither library links the other.
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_RECORDER_ABI_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_RECORDER_ABI_H_

#include <cstdint>

// The point's site as <fieldprof/points.h> lays it out, with its
// declaration of fieldprof_point_hit: the header's declarations only, not
// the semaphore, note and constructors that make a module one with points.
#define FIELDPROF_POINTS_DECLARATIONS_ONLY
#include "agent/include/fieldprof/points.h"
#undef FIELDPROF_POINTS_DECLARATIONS_ONLY

extern "C" {

// A call of a function placed by configuration (`points record --at`):
// its entry and exit ticks (the TSC), its site, and the return address
// into its caller at the call's exit, from which the recorder takes the
// caller's stack (null: none taken). One begin and one end event, as an
// FP_SCOPE makes.
void fieldprof_point_span(const fieldprof_point_site* site, uint64_t tsc_begin, uint64_t tsc_end,
                          const void* caller);

// A program's own point, passed on by the runtime with the stack taken
// from `caller` (the return address into the code that passed it)
// outwards.
void fieldprof_point_hit_from(const fieldprof_point_site* site, int kind, int64_t value,
                              const void* caller);

// The runtime's test of whether the calling thread is inside its binder
// work, where the recorder must take no stack.
void fieldprof_points_busy_from(int (*busy)());

}  // extern "C"

namespace fieldprof::recorder_abi {

using SpanFn = decltype(&fieldprof_point_span);
using HitFn = decltype(&fieldprof_point_hit);
using HitFromFn = decltype(&fieldprof_point_hit_from);
using BusyFromFn = decltype(&fieldprof_points_busy_from);

}  // namespace fieldprof::recorder_abi

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_RECORDER_ABI_H_
