// The run's record (companion.h): summed from every thread's slab and
// written to the spool at exit, and before exec and _exit, which end the
// image without running destructors; a fork child and a program after a
// failed exec count afresh.
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "agent/preload/base/image_end.h"
#include "agent/preload/base/next_slots.h"
#include "agent/preload/runtime/binder/binder.h"
#include "agent/preload/runtime/companion.h"
#include "agent/preload/runtime/front/decide.h"
#include "agent/preload/runtime/hotpath/clock.h"
#include "agent/preload/runtime/lab/lab.h"
#include "agent/preload/runtime/points/detour.h"
#include "agent/preload/runtime/points/points.h"
#include "agent/preload/runtime/records/live_file.h"
#include "agent/preload/runtime/stacks/stack_samples.h"
#include "agent/preload/runtime/sys.h"

namespace fieldprof::rt {

FP_HOT_DATA pid_t owner_pid;

namespace {

// The run's drop counters and clock start again; APIs stopped for the
// overhead budget measure again.
void ResetRunClock() {
  g.dropped_depth.store(0);
  g.dropped_no_slab.store(0);
  g.dropped_uncalibrated.store(0);
  g.abandoned.store(0);
  g.tsc0 = Ticks();
  g.mono0_ns = sys::MonoNs();
  for (int a = 0; a < FP_MAX_SLOTS; ++a) {
    if (g.truncated[a]) {
      g.truncated[a] = 0;
      if (g_live != nullptr) g_live->truncated[a] = 0;
      fp_measuring[a] = 1;
    }
  }
}

// Forgets every count: what follows goes into a record of its own. Only
// what holds data is written: a page written in a fork child, or after a
// failed exec, is a page copied.
void ResetCounts() {
  // Only bound APIs count (a slot keeps its API for the life of the
  // process).
  const int slabs = std::min(g.next_slab.load(), kSlabs);
  for (int s = 0; s < slabs; ++s) {
    if (!g.slabs_ready[s]) continue;
    Slab& slab = SlabAt(s);
    for (int a = 0; a < FP_MAX_SLOTS; ++a) {
      if (!g.bound[a]) continue;
      for (Histogram& h : slab.h[a]) {
        if (h.count() != 0) new (&h) Histogram();
      }
      if (slab.calls[a] != 0) slab.calls[a] = 0;
      if (slab.quiet[a] != 0) slab.quiet[a] = 0;
      for (uint64_t& n : slab.ticks[a]) {
        if (n != 0) n = 0;
      }
    }
  }
  ForgetKeptDurations();
  LabResetCounts();
  ForgetPoints(false);
  ResetRunClock();
}

}  // namespace

size_t SlabBytes() { return sizeof(Slab) * kSlabs; }

namespace {

// The forking thread's shadow stack as it was at the fork (BeforeFork), in
// private memory the child gets a copy of. glibc runs fork handlers under
// its own lock, so one fork at a time uses it.
FP_COLD_BSS ShadowStack fork_stack;
FP_HOT_DATA const ShadowStack* fork_stack_of;
// A seccomp filter is coming or came: the run ended (EndBeforeSeccomp).
bool sealed = false;

}  // namespace

void BeforeFork() {
  // Every interposer's next definition was filled just before (the base's
  // handler, fork_hooks.h): the child must not look for one
  // (next_symbol.h). There rather than at start, so that a run that never
  // forks pays nothing.
  WaitForCodePatch();
  ResolveAllocators();
  const ShadowStack* ss = t_state.ss;
  fork_stack_of = nullptr;
  if (ss != nullptr && g_live != nullptr) {
    std::memcpy(&fork_stack, ss, sizeof fork_stack);
    fork_stack_of = ss;
  }
}

void ResetAfterFork() {
  if (sealed) return;  // under a seccomp filter: not a system call more
  // The child counts only its own calls; its parent reports the rest. It is
  // a process of its own from here: its run time and overhead budget start
  // now, so APIs the parent had stopped for its budget measure again.
  owner_pid = sys::Getpid();
  BinderAfterFork();
  // Fresh slabs and shadow stacks, not cleared ones: clearing would copy
  // every page the parent recorded into, and most children exec at once;
  // and the parent's may be its live file's, shared with it. In the child's
  // own live file where one can be made. The child's one thread is the
  // forking one: its shadow stack comes along (it may be inside a measured
  // call); the others' slabs and stacks are gone with them.
  const size_t stacks = sizeof(ShadowStack) * kShadowStacks;
  void* fresh = LiveOpenInForkChild(CurrentRunSettings(), g.config.debug_log);
  if (fresh == nullptr) {
    fresh = mmap(nullptr, SlabBytes() + stacks, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  if (fresh == MAP_FAILED) {
    g.active = 0;  // nothing of the parent's may be reported twice
    for (auto& m : fp_measuring) m = 0;
    return;
  }
  auto* fresh_stacks = reinterpret_cast<ShadowStack*>(static_cast<char*>(fresh) + SlabBytes());
  ThreadState& t = t_state;
  if (t.ss != nullptr) {
    const long i = t.ss - g_stacks;
    if (!LiveAllocateStack(static_cast<int>(i))) {
      g.active = 0;
      for (auto& m : fp_measuring) m = 0;
      return;
    }
    // The stack as it was at the fork: the parent may have popped an entry
    // from the shared one since (its fork call returned first).
    const ShadowStack* at_fork = fork_stack_of == t.ss ? &fork_stack : t.ss;
    std::memcpy(&fresh_stacks[i], at_fork, sizeof(ShadowStack));
    t.ss = &fresh_stacks[i];
    LiveNoteStacks(std::min(g.next_stack.load(), kShadowStacks));
  }
  munmap(g_slabs, SlabBytes() + stacks);
  g_slabs = static_cast<Slab*>(fresh);
  g_stacks = fresh_stacks;
  ReplaceSlabsAfterFork();
  ForgetKeptDurations();
  LabResetCounts();
  ForgetPoints(true);
  ResetRunClock();
  StackSamplesAfterFork();
}

namespace {

// Set after a failed exec: this image's run is on record already, so a
// later record is written only if it has calls of its own (a shell trying
// each PATH entry would otherwise leave one empty record per attempt).
FP_HOT_DATA bool resumed_after_exec;

uint64_t CallsSinceReset() {
  uint64_t n = 0;
  const int slabs = std::min(g.next_slab.load(), kSlabs);
  for (int s = 0; s < slabs; ++s) {
    if (!g.slabs_ready[s]) continue;
    for (int a = 0; a < FP_MAX_SLOTS; ++a) {
      if (!g.evicted[a]) n += __atomic_load_n(&SlabAt(s).calls[a], __ATOMIC_RELAXED);
    }
  }
  return n + KeptCalls() + LabCalls();
}

// Whether this process has a record to write.
bool HasRecord() {
  if (!g.active) return false;
  if (sys::Getpid() != owner_pid) return false;
  return !resumed_after_exec || CallsSinceReset() > 0;
}

// Slab `s`'s counts of API `a` into totals[a]: the short quiet calls by
// tick value (each value converted once; dropped, like the rings'
// durations, if the clock never calibrated), then the histograms. In
// place, what is folded leaves the slab's tables.
void FoldSlab(int s, int a, Histogram (*totals)[FP_NUM_METRICS], bool in_place, SpoolRun* run) {
  Slab& slab = SlabAt(s);
  // Read once: a thread still running may be counting into it.
  uint64_t quiet = __atomic_load_n(&slab.quiet[a], __ATOMIC_RELAXED);
  for (int k = 0; k < kTickTable; ++k) {
    const uint64_t n = __atomic_load_n(&slab.ticks[a][k], __ATOMIC_RELAXED);
    if (n == 0) continue;
    if (in_place) slab.ticks[a][k] = 0;
    if (!g.calibrated) {
      run->dropped += n;
      continue;
    }
    totals[a][0].RecordCopies(DurationNs(static_cast<uint64_t>(k)), n);
    quiet += n;
  }
  if (in_place) slab.quiet[a] = 0;
  for (int m = 0; m < FP_NUM_METRICS; ++m) {
    if (!in_place) totals[a][m].Merge(slab.h[a][m]);
    if (m > 0) totals[a][m].RecordZeros(quiet);
  }
}

// Chosen APIs only: one replaced by an API of lower priority called later
// was measured for part of the run, and is left out (binder.h).
bool Kept(int a) { return g.bound[a] && !g.evicted[a]; }

// Every slab's counts of every kept API into `totals`.
void SumSlabs(Histogram (*totals)[FP_NUM_METRICS], bool in_place, int slabs, SpoolRun* run) {
  for (int a = 0; a < FP_MAX_SLOTS; ++a) {
    if (!Kept(a)) continue;
    ++run->apis_chosen;
    if (g.truncated[a]) ++run->apis_truncated;
    if (!in_place) {
      for (int m = 0; m < FP_NUM_METRICS; ++m) new (&totals[a][m]) Histogram();
    }
    for (int s = 0; s < slabs; ++s) {
      if (g.slabs_ready[s]) FoldSlab(s, a, totals, in_place, run);
    }
  }
  AddKeptDurations(totals);
  for (int a = 0; a < FP_MAX_SLOTS; ++a) {
    if (!Kept(a) || totals[a][0].count() == 0) continue;
    if (run->napis == FP_MAX_APIS) break;
    run->calls_measured += totals[a][0].count();
    run->apis[run->napis++] = {g.apis[a].module, g.apis[a].build_id, g.apis[a].symbol, totals[a],
                               g.truncated[a] != 0};
    if (SlotIsPoint(a)) AddApiPoint(run, g.apis[a], totals[a][0]);
  }
}

// The stacks of a run whose counts the agent reports from its live file:
// a record of their own, a later part of the run (spool_encode.h).
void WriteStacksOnly() {
  SpoolRun run;
  AddStackRecords(&run);
  if (run.nstacks == 0) return;  // the agent's fold finds none either
  run.part = kStacksOnlyPart;
  const char* err =
      WriteSpoolRecord(g.config.spool_dir, g.config.spool_cap_bytes, run, g_record->scratch);
  if (err != nullptr) DebugLog("spool: %s", err);
  LiveNoteStacksFolded();  // written, or lost as a full spool loses them: never twice
}

// Writes the run's record, or leaves it to the agent (live_file.h): who
// reports the run's counts, kRuntime also when nothing is to be reported
// (a lab pass's own file, consent withdrawn, the clock refuted).
LiveReporter WriteRecord() {
  if (g_lab_mode != kLabOff) {  // a lab pass writes its own file, never to the spool
    LabWriteRecord();
    return LiveReporter::kRuntime;
  }
  // Consent withdrawn while the run went on (fieldprof optout): nothing
  // is written, not even the spool's directory.
  if (!RunConsentStands()) {
    DebugLog("consent withdrawn since the run began: no record");
    LiveDiscard();
    return LiveReporter::kRuntime;
  }
  const uint64_t t_end = Rdtsc();
  CalibrateNow();       // over the whole run: the most precise rate, or the last check of it
  if (RateRefuted()) {  // said in the debug log
    LiveDiscard();
    return LiveReporter::kRuntime;
  }
  FlushDurations();
  LiveNoteClock();
  // The agent reported parts of this run while it went on: the rest is its
  // to report, from the counts left whole in the live file.
  if (LiveBeforeRecord() == LiveReporter::kAgent) {
    DebugLog("record: parts of this run were reported; the agent reports the rest");
    WriteStacksOnly();
    return LiveReporter::kAgent;
  }
  SpoolRun run;
  run.run_ns = g.calibrated ? static_cast<uint64_t>(sys::MonoNs() - g.mono0_ns) : 0;
  run.probe_ns = g.calibrated ? TicksToNs(g.probe_ticks) : 0;
  run.resolution_ns = g.calibrated ? std::max<uint64_t>(1, TicksToNs(g.resolution_ticks)) : 0;
  run.abandoned = g.abandoned.load();
  run.dropped = g.dropped_depth.load() + g.dropped_no_slab.load() + g.dropped_uncalibrated.load();
  const int slabs = std::min(g.next_slab.load(), kSlabs);
  // One thread measured, and it is this one (most programs): its slab's
  // histograms become the totals, in place, on pages it has written
  // already. Otherwise the totals are summed apart (other threads may still
  // be counting into their slabs), on fresh pages (~18 KB per API).
  const bool in_place = slabs == 1 && g.slabs_ready[0] && t_state.slab_p == &SlabAt(0);
  SumSlabs(in_place ? SlabAt(0).h : g_record->totals, in_place, slabs, &run);
  const uint64_t t_summed = Rdtsc();
  const BinderStats bs = GetBinderStats();
  DebugLog(
      "run: %llu imports trapped, %llu first calls, %llu APIs called, %llu replaced, "
      "%llu calls measured",
      static_cast<unsigned long long>(bs.imports), static_cast<unsigned long long>(bs.first_calls),
      static_cast<unsigned long long>(bs.apis_called),
      static_cast<unsigned long long>(bs.evictions),
      static_cast<unsigned long long>(run.calls_measured));
  AddPointRecords(&run);
  AddStackRecords(&run);
  // A run that measured no call, no point and no stack leaves no record,
  // only a count.
  if (run.calls_measured == 0 && run.npoints == 0 && run.nstacks == 0) {
    CountRun(g.config.spool_dir, kRunMeasuredNone);
    LiveRetire();
    return LiveReporter::kRuntime;
  }
  const uint64_t t_write = Rdtsc();
  const char* err =
      WriteSpoolRecord(g.config.spool_dir, g.config.spool_cap_bytes, run, g_record->scratch);
  if (err != nullptr) DebugLog("spool: %s", err);
  // Written (or refused by the spool's cap, as it would have been anyway):
  // the live file goes.
  LiveRetire();
  DebugLog("record, in ticks: sums %llu, file %llu",
           static_cast<unsigned long long>(t_summed - t_end),
           static_cast<unsigned long long>(Rdtsc() - t_write));
  return LiveReporter::kRuntime;
}

__attribute__((destructor)) void Finish() {
  if (HasRecord()) WriteRecord();
}

// exec and _exit end the image without running destructors: the record is
// written first. If exec fails the program carries on, and counts from zero
// into the record it writes later.
// Only an image that measured something writes here: a fork child that
// execs at once (every command a shell runs) would otherwise leave an empty
// record and a file write per command; the program it becomes writes its own.
// Returns who reports what the image counted (kNone: it had nothing).
LiveReporter RecordBeforeImageEnds() {
  if (!HasRecord()) return LiveReporter::kNone;
  if (CallsSinceReset() == 0 && !StackSamplesTaken()) {
    // Nothing to report: the live file goes (an image that goes on after a
    // failed exec then counts into a mapping no file names, as after a
    // record: only its record at the end reports it).
    LiveRetire();
    return LiveReporter::kNone;
  }
  return WriteRecord();
}

void EndBeforeSeccomp() {
  sealed = true;
  RecordBeforeImageEnds();
  LiveSeal();
  g.active = 0;
  for (auto& m : fp_measuring) m = 0;
}

void AfterFailedExec(LiveReporter who) {
  if (!g.active) return;
  if (who == LiveReporter::kAgent) {
    // The agent reports this run in parts: it simply goes on, counting
    // into the same live file (no call is in two reports).
    LiveResumeAfterFailedExec();
    return;
  }
  ResetCounts();
  resumed_after_exec = true;
}

}  // namespace
}  // namespace fieldprof::rt

// ------------------------------------------------ exec, _exit, seccomp

// The wrappers are agent/preload/base/'s (image_end.cc, seccomp_hooks.cc);
// what the runtime does at each:
namespace fieldprof::preload {

int BeforeExec() {
  const int who = static_cast<int>(rt::RecordBeforeImageEnds());
  rt::StackSamplesQuiet();  // no sample of ours pending as the image goes
  return who;
}

void AfterFailedExec(int before_exec) {
  const auto who = static_cast<rt::LiveReporter>(before_exec);
  if (who != rt::LiveReporter::kNone) rt::AfterFailedExec(who);
}

void BeforeExit() { rt::RecordBeforeImageEnds(); }

// A seccomp filter may kill the process at the first system call the
// program did not expect, and the runtime's later ones would be such calls
// (a live file's next page, the record at exit, a fork child's own live
// file). Before one is installed the run ends as at an exec: its record is
// written now, and nothing more is measured in this process, nor in the
// children that inherit the filter.
void BeforeSeccomp() { rt::EndBeforeSeccomp(); }

void FindNext(const char* const* names, uintptr_t* out, int n) { rt::ResolveNext(names, out, n); }

}  // namespace fieldprof::preload
