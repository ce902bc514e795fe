// The constructor of libfieldprof.so (companion.h): most runs end at its
// first look (first_look.h); a run it measures gets its measuring state,
// clock (clock.h) and binder (binder.h) here. Also the process-wide state
// the other parts share.
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/preload/base/fork_hooks.h"
#include "agent/preload/runtime/binder/binder.h"
#include "agent/preload/runtime/binder/elf_object.h"
#include "agent/preload/runtime/binder/late_interpose.h"
#include "agent/preload/runtime/companion.h"
#include "agent/preload/runtime/front/decide.h"
#include "agent/preload/runtime/front/first_look.h"
#include "agent/preload/runtime/front/front_handoff.h"
#include "agent/preload/runtime/hotpath/clock.h"
#include "agent/preload/runtime/lab/lab.h"
#include "agent/preload/runtime/points/detour.h"
#include "agent/preload/runtime/points/points.h"
#include "agent/preload/runtime/records/live_file.h"
#include "agent/preload/runtime/stacks/stack_samples.h"
#include "agent/preload/runtime/sys.h"

namespace fieldprof::rt {

// Constant-initialized (no dynamic initializer may reset it), and with the
// rest of the process-wide state on the page FP_HOT_DATA describes.
FP_HOT_DATA constinit Globals g{};
FP_HOT_DATA uintptr_t fp_real[FP_MAX_SLOTS + 1];
FP_HOT_DATA volatile uint8_t fp_measuring[FP_MAX_SLOTS + 1];

FP_HOT_DATA Slab* g_slabs;
__thread ThreadState t_state FP_TLS;
FP_HOT_DATA ShadowStack* g_stacks;
FP_HOT_DATA RecordMemory* g_record;

void DebugLog(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VDebugLine(g.config.debug_log, fmt, ap);
  va_end(ap);
}

namespace {

// This run's settings, filled only in a run the first look lets through (a
// run that is not measured never touches these pages); the strings in them
// live as long as the process (g.config and the binder point into them).
FP_COLD_BSS RunSettings settings;

}  // namespace

bool RunConsentStands() { return ConsentStands(settings); }
const RunSettings& CurrentRunSettings() { return settings; }

namespace {

// The slabs, shadow stacks and record memory of a measured run: zero-filled
// and mapped without reserving memory, so a thread's pages are touched only
// where it records. In a field run the slabs and shadow stacks are mapped
// from the run's live file (live_file.h) where one can be made; a lab pass
// keeps its own files and makes none.
bool MapMeasuringState(char** envp) {
  const size_t slabs = SlabBytes(), stacks = sizeof(ShadowStack) * kShadowStacks;
  void* live =
      sys::Env(envp, "FIELDPROF_LAB") == nullptr ? LiveOpen(settings, g.config.debug_log) : nullptr;
  const size_t anon =
      live != nullptr ? sizeof(RecordMemory) : slabs + stacks + sizeof(RecordMemory);
  void* p = mmap(nullptr, anon, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    if (live != nullptr) LiveDiscard();
    return false;
  }
  char* state = static_cast<char*>(live != nullptr ? live : p);
  g_slabs = reinterpret_cast<Slab*>(state);
  g_stacks = reinterpret_cast<ShadowStack*>(state + slabs);
  g_record = reinterpret_cast<RecordMemory*>(live != nullptr ? p : state + slabs + stacks);
  return true;
}

int OnObjectForHandoff(dl_phdr_info* info, size_t, void* data) {
  ElfObject o;
  if (!ParseElfObject(info->dlpi_addr, info->dlpi_name, info->dlpi_phdr, info->dlpi_phnum,
                      static_cast<uintptr_t>(getpagesize()), &o)) {
    return 0;
  }
  const Elf64_Sym* s =
      FindDefinition(o, kFrontHandoffName, GnuHash(kFrontHandoffName), VersionNeed{});
  if (s == nullptr || ELF64_ST_TYPE(s->st_info) != STT_OBJECT) return 0;
  *static_cast<FrontHandoff**>(data) = reinterpret_cast<FrontHandoff*>(o.base + s->st_value);
  return 1;
}

// The front's decision, when a front is loaded (front_handoff.h).
FrontHandoff* FindFrontHandoff() {
  FrontHandoff* h = nullptr;
  dl_iterate_phdr(OnObjectForHandoff, &h);
  return h;
}

void StopMeasuring(const char* why) {
  DebugLog("%s: not measuring", why);
  LiveDiscard();
  g.active = 0;
  for (auto& m : fp_measuring) m = 0;
  if (g.config.slot_fd >= 0) close(g.config.slot_fd);
  g.config.slot_fd = -1;
}

// Start's times, in TSC ticks, at the end of each part.
struct StartTimes {
  uint64_t start, looked, decided, mapped, calibrated, bound;
};

// What the run measures with and what starting cost, by part, into the
// debug log (docs/benchmarks-history.md uses the ticks). Called after the
// timing: the log's first vsnprintf alone costs more than some parts.
void SayHowItStarted(const StartTimes& t, bool late, int interposed) {
  const RunSettings& s = settings;
  DebugLog(
      "measuring this run: k=%d, overhead budget %g, sample fraction %g, at most %lld runs a "
      "minute, allow '%s', deny '%s'",
      s.k, s.overhead_budget, s.explicit_run ? 1.0 : s.sample_fraction,
      static_cast<long long>(s.explicit_run ? 0 : s.max_runs_per_minute), s.allow_modules,
      s.deny_modules);
  if (g.vdso_gettime != nullptr) {
    DebugLog("clock: vDSO CLOCK_MONOTONIC");
  } else if (g.machine_ns_per_tick_q32 != 0) {
    DebugLog("clock: TSC at the machine's rate, %llu Hz (checked against this run's clock)",
             static_cast<unsigned long long>(s.tsc_hz));
  } else {
    DebugLog("clock: TSC, its rate measured by this run (no tsc_hz in the settings)");
  }
  if (late) DebugLog("loaded by the front: %d imports pointed at the runtime", interposed);
  const BinderStats b = GetBinderStats();
  DebugLog("binder: %llu forced, %llu objects, %llu imports trapped",
           static_cast<unsigned long long>(b.forced), static_cast<unsigned long long>(b.objects),
           static_cast<unsigned long long>(b.imports));
  DebugLog("probe: %llu ticks (taken off every duration), a measured call adds %llu ticks",
           static_cast<unsigned long long>(g.probe_ticks),
           static_cast<unsigned long long>(g.call_cost_ticks));
  DebugLog("start, in ticks: first look %llu, decision %llu, memory %llu, probe %llu, binder %llu",
           static_cast<unsigned long long>(t.looked - t.start),
           static_cast<unsigned long long>(t.decided - t.looked),
           static_cast<unsigned long long>(t.mapped - t.decided),
           static_cast<unsigned long long>(t.calibrated - t.mapped),
           static_cast<unsigned long long>(t.bound - t.calibrated));
}

BinderConfig BinderConfigOf(const RunSettings& s) {
  BinderConfig bc;
  bc.k = s.k;
  bc.seed = s.seed;
  bc.force = s.force;
  bc.points = s.points;
  bc.allow_modules = s.allow_modules;
  bc.deny_modules = s.deny_modules;
  bc.system_code = s.system_code;
  bc.share_modules = s.share_modules;
  bc.debug_log = g.config.debug_log;
  bc.lab = g_lab_mode != kLabOff;
  return bc;
}

// Most runs end at the first look (first_look.h), having read one settings
// file with three system calls; a measured run sets up everything else.
// (glibc passes constructors argc, argv and the environment.)
__attribute__((constructor(101))) void Start(int, char**, char** envp) {
  StartTimes t{};
  t.start = Rdtsc();
  SettingsText text;
  if (LookAtRun(envp, &text) != FirstLook::kGoOn) return;
  t.looked = Rdtsc();
  // Loaded by the front, which decided already (front_handoff.h).
  RunDecision d;
  FrontHandoff* const front = FindFrontHandoff();
  if (front != nullptr && front->ready) {
    settings = front->settings;
    d.verdict = Verdict::kMeasure;
    d.slot_fd = front->slot_fd;
  } else {
    d = DecideRun(&settings, &text, envp);
  }
  if (d.verdict != Verdict::kMeasure) return;
  // Loaded by the front (front.cc) rather than preloaded: point every
  // import of our exports at us, as preloading would have.
  const bool late = DetectLoadedLate();
  const int interposed = late ? InterposeLate() : 0;
  t.decided = Rdtsc();
  g.config = FpRunConfig{1,
                         d.slot_fd,
                         settings.overhead_budget,
                         settings.spool_dir,
                         settings.spool_cap_bytes,
                         settings.debug_log[0] ? settings.debug_log : nullptr};
  g.active = 1;
  owner_pid = sys::Getpid();
  if (!MapMeasuringState(envp)) return StopMeasuring("no memory for the measuring state");
  preload::AtFork(dl_iterate_phdr, BeforeFork, ResetAfterFork);
  // FIELDPROF_CLOCK=vdso: the vDSO clock even with an invariant TSC (tests,
  // and comparing the two).
  if (!StartClock(envp, settings.tsc_hz))
    return StopMeasuring("no invariant TSC and no vDSO clock");
  t.mapped = Rdtsc();
  CalibrateProbe();
  LiveNoteClock();
  // A lab pass (FIELDPROF_LAB) that cannot be set up measures nothing.
  if (!LabStart(envp, g.config.debug_log)) return StopMeasuring("lab mode cannot start");
  LabCalibrate();
  // Capstone for detours (detour.h), loaded before the binder starts: a
  // points pass, or a measured run whose `points` setting names functions.
  if (g_lab_mode == kLabPoints || (g_lab_mode == kLabOff && settings.points[0] != 0)) {
    const char* why = nullptr;
    if (!DetourLoad(&why)) DebugLog("points: %s", why);
  }
  t.calibrated = Rdtsc();
  if (!BinderStart(BinderConfigOf(settings))) StopMeasuring("cannot read the loaded objects");
  DetourNewObjects();  // functions inside modules: a points pass's, `points`
  if (g.active) StackSamplesStart(settings.stack_hz);
  // Modules built with fieldprof/points.h that come from now on are told
  // of by their own constructors, through the front (front_handoff.h).
  if (front != nullptr && g.active) {
    __atomic_store_n(&front->point_module, &PointModuleComesOrGoes, __ATOMIC_RELEASE);
  }
  t.bound = Rdtsc();
  SayHowItStarted(t, late, interposed);
}

}  // namespace
}  // namespace fieldprof::rt
