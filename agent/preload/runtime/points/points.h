// Instrumentation points in measured runs (points.cc).
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_POINTS_POINTS_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_POINTS_POINTS_H_

#include "agent/preload/runtime/binder/elf_object.h"
#include "agent/preload/runtime/records/spool_encode.h"

namespace fieldprof::rt {

// Raises the points semaphore of a module the binder sees for the first
// time, if it was built with fieldprof/points.h (its "fieldprof" note).
// Not in the lab's census and timing passes.
void ArmPoints(const ElfObject& e);
// The same for a module seen before, after objects were unloaded: raises
// its semaphores that are 0. Loaded again where it was (dlclose, then
// dlopen), the module is a new copy whose semaphore starts at 0; the copy
// seen before keeps its own raised.
void RearmPoints(const ElfObject& e);

// Names the module of each point series not named yet, from the binder's
// object table brought up to date (before a dlclose, and at the record).
void NamePointSeries();

// A module built with fieldprof/points.h comes (`arriving`) or goes, as
// its first constructor and its last destructor tell the front, which
// passes it on here (front_handoff.h). One that comes is looked at now,
// as at the program's next dlsym: its points armed and its imports
// pointed at the runtime before its own constructors pass their points.
// One that goes has the series its destructors' points began named while
// it is still loaded.
void PointModuleComesOrGoes(volatile unsigned short* semaphore, int arriving);

// A lab points pass: every point goes to `next_hit` (the points recorder's
// fieldprof_point_hit), none into the run's record. With stacks, to
// `next_hit_from` (its fieldprof_point_hit_from) instead, with the measured
// calls' return slots lent to its unwinder (LendReturnAddresses).
void SetPointsForward(void* next_hit, void* next_hit_from);

// Whether the calling thread is inside the binder's slow work, where it
// may hold, or be taking, the dynamic linker's lock. Handed to the points
// recorder (its fieldprof_points_busy_from), which takes no stack then:
// its unwinder takes that lock too (dl_iterate_phdr), and a signal
// handler's point cutting in there would wait on its own thread for good.
int InBinderWork();

// Forgets the points counted so far: what follows goes into a record of
// its own. A fork child (`after_fork`): its parent's points are its
// parent's, and its one thread is the forking one.
void ForgetPoints(bool after_fork);

// The run's point series into run->points (metric point_ns); returns how
// many. Series whose module is no longer loaded are left out.
int AddPointRecords(SpoolRun* run);

// A function named in the `points` setting, measured as an API: its
// durations (`time`, in ns) also into run->points, as the scope
// "MODULE$FUNCTION" of the module that defines it (the tag is the module's
// key name with any character a point name may not hold made '_'). False
// when the names break the point-name rule or the run has no room left.
bool AddApiPoint(SpoolRun* run, const FpApi& api, const Histogram& time);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_POINTS_POINTS_H_
