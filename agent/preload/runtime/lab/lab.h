// Lab mode (`fieldprof lab`): the runtime observes many APIs in one run,
// not the field's few. Two kinds of pass:
// - the census (FIELDPROF_LAB=census): every import one object makes from
//   another, and every function the program gets from dlsym, is bound to a
//   lab stub. Each call records its allocation, I/O and the APIs on the
//   thread's stack beneath it: the nesting graph. Its durations include the
//   probes of the APIs nested inside, so the lab's times come from:
// - timing passes (FIELDPROF_LAB=time, FIELDPROF_LAB_APIS=<file of
//   module:symbol lines>): only the APIs listed, chosen by `fieldprof lab`
//   so that no two of them were ever on one stack, are bound.
//
// Lab stubs are made at start, one per lab API index, 16 bytes apart:
//   mov $slot, %r11d ; jmp thunk  ->  fp_lab_entry (stubs_x86_64.S)
// where slot = kLabSlot0 + index, and go through the hot path's slow
// entry and exit (fp_enter/fp_exit), which hand lab slots to LabExit: the
// shadow stack, the counters and the unwinder's repairs are the field's.
// Index 0 is the lab probe (calibration), never recorded.
//
// - points passes (FIELDPROF_LAB=points, FIELDPROF_LAB_APIS as for timing):
//   `fieldprof points record --at`: each call of the APIs listed becomes a
//   scope (tag: the module, name: the symbol), its entry and exit ticks
//   handed to fieldprof_point_span of the points recorder
//   (agent/preload/points/), which is preloaded after this library.
//
// At exit (and before exec and _exit) each process writes one file,
// <FIELDPROF_LAB_DIR>/lab-<pid>-<ms>-<rand>.fplab: kLabRunMagic, then a
// wire.LabRunRecord. Never the spool: lab data stays out of field sums.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_LAB_LAB_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_LAB_LAB_H_

#include <cstdint>

#include "agent/preload/runtime/hotpath/hotpath.h"

namespace fieldprof::rt {

inline constexpr uint32_t kLabSlot0 = 64;  // above every field slot and the probe's
inline constexpr uint32_t kLabMaxApis = 16384;
inline constexpr uint32_t kLabStubSize = 16;
inline constexpr char kLabRunMagic[] = "FPLABRUN1\n";  // 10 bytes, then the record

enum LabMode : int { kLabOff = 0, kLabCensus = 1, kLabTime = 2, kLabPoints = 3 };

FP_HIDDEN extern int g_lab_mode;
FP_HIDDEN extern uintptr_t* g_lab_real;  // [kLabMaxApis]: index -> the function
FP_HIDDEN extern uintptr_t g_lab_stubs;  // the stubs' code
FP_HIDDEN extern uint64_t g_lab_probe_ticks;

inline bool IsLabSlot(uint32_t slot) { return slot >= kLabSlot0; }
inline uintptr_t LabStubAddress(uint32_t index) { return g_lab_stubs + kLabStubSize * index; }

// Reads FIELDPROF_LAB*; in lab mode maps the lab's state, makes the stubs
// and reads the timing plan. False: not a lab run, or it cannot be set up
// (then nothing is measured: a lab pass must not quietly do field work).
bool LabStart(char** envp, const char* debug_log);
// After the clock's calibration: the lab probe's typical cost.
void LabCalibrate();

// Under the binder's lock: the lab index of the function `real`, named
// module:symbol (build id `build_id`), bound from now on; -1 when this pass
// does not observe it (a timing pass's plan leaves it out) or no index is left.
int32_t LabBind(const char* module, const char* build_id, const char* symbol, uintptr_t real);

// A points pass's plan, a line ("module:symbol") at a time from *pos
// (start at 0); false at its end.
bool LabPlanLine(uint32_t* pos, const char** line);
// Under the binder's lock: whether one more function may be detoured;
// then lab API `index`, the function at `fn`, is reached by its entry,
// which jumps to its stub (detour.h), and `moved` runs it.
bool LabDetourRoom();
void LabDetoured(uint32_t index, uintptr_t fn, uintptr_t moved);
// Under the binder's lock: the function at `fn` is no longer reached by a
// detour (its module was closed; another copy is loaded there now).
void LabForgetDetour(uintptr_t fn);
// The cell holding lab API `index`'s real function, for a move made while
// other threads run: it must hold the moved copy before the entry leads
// to the slot (DetourWhileThreadsRun).
uintptr_t* LabReal(uint32_t index);
// Tells `fieldprof points record` what became of plan line `line`: a line
// "LINE<TAB>WHAT[: WHY]" in <FIELDPROF_LAB_DIR>/placed-<pid>.
void LabSayPlaced(const char* line, const char* what, const char* why);
// Points passes: the plan's functions defined in objects not looked at yet
// get detours; outside lab mode, the `points` setting's functions do
// (points/field_setting.cc). Takes the binder's lock; call it with neither that
// nor the dynamic linker's held (lab/binding.cc).
void DetourNewObjects();

// From fp_exit (hotpath.cc), for the call of lab slot `slot` at depth `i`
// of `t`, with what it moved. No libc, no floating point.
void LabExit(const ShadowStack& t, uint32_t i, uint32_t slot, uint64_t ticks, uint64_t alloc,
             uint64_t alloc_excl, uint64_t count, uint64_t file, uint64_t sock);

// From fp_exit, a points pass's call of lab API `index` (entry `i` of
// `t`): its span, from the entry's ticks to the exit's. No libc, no
// floating point.
void LabPointSpan(ShadowStack& t, uint32_t i, uint32_t index, uint64_t t0, uint64_t t1);

// Calls the lab recorded since the last reset (record.cc's test for a
// record to write).
uint64_t LabCalls();
// The process's lab file (record.cc calls it in place of the spool record).
void LabWriteRecord();
// A fork child, or after a failed exec: counts start again (APIs stay bound).
void LabResetCounts();

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_LAB_LAB_H_
