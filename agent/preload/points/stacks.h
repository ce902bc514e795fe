// Stacks of points (`points record --stacks`): each event of a point in
// the program's code is followed in its thread's ring by the id of its
// call stack, unwound by libunwind where the point is passed (0.2 us,
// several the first time through new code), kept once per distinct stack
// in a table mapped once, and written by the drain ('K', with the modules
// to read it against, 'M'). No stack is taken where the dynamic linker's
// lock may be held, inside the runtime's binder work, or beyond each
// thread's share of its time (points_format.h's kStackShare); such events
// are counted as stackless.
#ifndef FIELDPROF_AGENT_PRELOAD_POINTS_STACKS_H_
#define FIELDPROF_AGENT_PRELOAD_POINTS_STACKS_H_

#include <cstdint>
#include <string>

#include "agent/preload/base/recorder_abi.h"

namespace fieldprof::points {

// At load, with --stacks: opens libunwind (said on stderr, once, when it
// cannot) and the table. `tsc_hz`: the TSC's rate (0: a guess), for each
// thread's allowance. False: no stacks.
bool StartStacks(uint64_t tsc_hz);

// In a fork child of a process with stacks: a table of its own (the
// parent's lock may have been held at the fork). False: none to be had.
bool RenewStacksAfterFork();

// The runtime's test of whether the calling thread is in its binder work
// (fieldprof_points_busy_from).
void SetRuntimeBusy(int (*busy)());

// A point with its stack, from `caller` (the return address into the code
// that passed it) outwards; a scope's end takes none (its begin's stands).
void HitWithStack(const fieldprof_point_site* site, int kind, int64_t value, const void* caller);

// A placed function's call (fieldprof_point_span, --stacks): its begin and
// end, then the begin's stack.
void SpanWithStack(uint64_t site, uint64_t tsc_begin, uint64_t tsc_end, const void* caller);

// Appends the stacks first seen since the last call, after the modules
// when they changed (the drain's).
void TakeStacks(std::string* out);

}  // namespace fieldprof::points

#endif  // FIELDPROF_AGENT_PRELOAD_POINTS_STACKS_H_
