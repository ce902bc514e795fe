// The companion: the parts of libfieldprof.so around the hot path
// (hotpath/hotpath.h), one concept per file:
//   start.cc                   the constructor: the decision (front/decide.h),
//                              the measuring state, the clock, the binder
//                              (binder/binder.h); and the process-wide state
//                              every part shares
//   hotpath/clock.cc           the clock, its rate, the probe's own cost
//   hotpath/budget.cc          the overhead budget (an API past it stops
//                              measuring and its call sites are pointed back
//                              at it)
//   records/record.cc          the run's record: written at exit and before
//                              exec and _exit; counts start afresh in a fork
//                              child and after a failed exec
//   hotpath/alloc_counters.cc  malloc and friends: bytes and allocations
//   hotpath/io_counters.cc     read, write, send and friends: file and
//                              socket bytes
//   hotpath/unwind.cc          return addresses put back before an unwinder
//                              walks
// In a run that is not measured, every interposer just goes on to the next
// definition. This header holds what more than one of them uses.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_COMPANION_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_COMPANION_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "agent/preload/runtime/binder/next_symbol.h"
#include "agent/preload/runtime/hotpath/hotpath.h"
#include "agent/preload/runtime/records/spool_encode.h"

#define FP_EXPORT __attribute__((visibility("default")))

namespace fieldprof::rt {

// Appends a line to the run's debug log (FIELDPROF_DEBUG), if any (start.cc).
void DebugLog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// What only the record needs, mapped with the slabs and shadow stacks when
// a run is measured (start.cc).
struct RecordMemory {
  Histogram totals[FP_MAX_SLOTS][FP_NUM_METRICS];
  SpoolScratch scratch;
};
FP_HIDDEN extern RecordMemory* g_record;
size_t SlabBytes();  // all kSlabs of them

// The process whose record this memory holds (record.cc): a vfork child
// shares it, and must never write it (nor may a raw clone child without
// fork handlers).
FP_HIDDEN extern pid_t owner_pid;
// Before a fork, in the forking thread (record.cc): waits for code being
// patched (detour.h), and keeps the thread's shadow stack as it is, for
// the child (a live file's shadow stacks are shared with the child until
// it maps its own, and the parent may pop an entry meanwhile).
void BeforeFork();
// In a fork child: a record and a clock of its own (record.cc).
void ResetAfterFork();

// The allocation functions the counters go on to, found now if they were
// not yet (alloc_counters.cc): before a fork.
void ResolveAllocators();

// Whether a measured call is on this thread's shadow stack: only then do
// the interposers count anything.
inline bool Counting() { return InMeasuredCall(t_state); }

// The next definition of `name` (agent/preload/base/next_slots.h; the
// runtime finds it with ResolveNext, next_symbol.h).
using preload::Next;

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_COMPANION_H_
