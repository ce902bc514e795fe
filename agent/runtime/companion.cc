// libfieldprof.so, the fieldprof runtime (see runtime.h), loaded with
// LD_PRELOAD: its constructor decides whether this run is measured
// (decide.h); if so it maps the measuring state, calibrates the clock and
// starts the binder (binder.h). This file also counts allocations and I/O
// per thread, enforces the overhead budget, restores return addresses
// before an unwinder walks the stack, and writes the run's record to the
// spool at exit. In a run that is not measured, every interposer just goes
// on to the next definition.
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/platform/x86.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "agent/runtime/binder.h"
#include "agent/runtime/clock.h"
#include "agent/runtime/decide.h"
#include "agent/runtime/first_look.h"
#include "agent/runtime/hotpath.h"
#include "agent/runtime/next_symbol.h"
#include "agent/runtime/spool_encode.h"
#include "agent/runtime/sys.h"

#define FP_EXPORT __attribute__((visibility("default")))

namespace fieldprof::rt {

// Constant-initialized (no dynamic initializer may reset it), and with the
// rest of the process-wide state on the page FP_HOT_DATA describes.
FP_HOT_DATA constinit Globals g{};
FP_HOT_DATA uintptr_t fp_real[FP_MAX_SLOTS + 1];
FP_HOT_DATA volatile uint8_t fp_measuring[FP_MAX_SLOTS + 1];

FP_HOT_DATA Slab* g_slabs;
__thread ThreadState t_state FP_TLS;
FP_HOT_DATA ShadowStack* g_stacks;

namespace {

void DebugLog(const char* fmt, ...) {
  if (g.config.debug_log == nullptr) return;
  const int fd = open(g.config.debug_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if (n > static_cast<int>(sizeof buf - 2)) n = sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t ignored = write(fd, buf, n);
  (void)ignored;
  close(fd);
}

}  // namespace

// Called each time an API's count in a slab crosses a multiple of 1024:
// past the overhead budget (estimated from every slab's calls so far and
// the calibrated cost of a call), the API with the most calls stops
// measuring and its record is marked truncated.
void CheckBudget() {
  if (!g.calibrated) return;
  const uint64_t elapsed = Ticks() - g.tsc0;
  // Every call counted in any slab, and the API with the most among those
  // still measuring.
  uint64_t total = 0;
  int worst = -1;
  uint64_t worst_calls = 0;
  const int slabs = std::min(g.next_slab.load(), kSlabs);
  for (int a = 0; a < FP_MAX_SLOTS; ++a) {
    uint64_t calls = 0;
    for (int s = 0; s < slabs; ++s) {
      if (g.slabs_ready[s]) calls += __atomic_load_n(&SlabAt(s).calls[a], __ATOMIC_RELAXED);
    }
    total += calls;
    if (fp_measuring[a] && calls >= worst_calls) {
      worst = a;
      worst_calls = calls;
    }
  }
  const double cost = static_cast<double>(total) * static_cast<double>(g.call_cost_ticks + 1);
  if (cost <= g.config.overhead_budget * static_cast<double>(elapsed)) return;
  if (worst >= 0) {
    fp_measuring[worst] = 0;
    g.truncated[worst] = 1;
    const int rebound = BinderRebindSlot(worst);
    DebugLog(
        "overhead budget reached: %s stops measuring; %d of its call sites now call it "
        "directly",
        g.apis[worst].symbol, rebound);
  }
}

namespace {

// The process whose record this memory holds: a vfork child shares it, and
// must never write it (nor may a raw clone child without fork handlers).
FP_HOT_DATA pid_t owner_pid;

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
  ResetRunClock();
}

size_t SlabBytes() { return sizeof(Slab) * kSlabs; }

void ResetAfterFork() {
  // The child counts only its own calls; its parent reports the rest. It is
  // a process of its own from here: its run time and overhead budget start
  // now, so APIs the parent had stopped for its budget measure again.
  owner_pid = sys::Getpid();
  BinderAfterFork();
  // Fresh slabs, not cleared ones: clearing would copy every page the
  // parent recorded into, and most children exec at once. The child's one
  // thread is the forking one; the others' slabs are gone with them.
  void* fresh = mmap(nullptr, SlabBytes(), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (fresh == MAP_FAILED) {
    g.active = 0;  // nothing of the parent's may be reported twice
    for (auto& m : fp_measuring) m = 0;
    return;
  }
  munmap(g_slabs, SlabBytes());
  g_slabs = static_cast<Slab*>(fresh);
  ReplaceSlabsAfterFork();
  ForgetKeptDurations();
  ResetRunClock();
}

// This run's settings, filled only in a run the first look lets through (a
// run that is not measured never touches these pages); the strings in them
// live as long as the process (g.config and the binder point into them).
FP_COLD_BSS RunSettings settings;

// The slabs and shadow stacks of a measured run: zero-filled and mapped
// without reserving memory, so a thread's pages are touched only where it
// records.
struct RecordMemory {
  Histogram totals[FP_MAX_SLOTS][FP_NUM_METRICS];
  SpoolScratch scratch;
};
FP_HOT_DATA RecordMemory* g_record;

bool MapMeasuringState() {
  const size_t slabs = SlabBytes(), stacks = sizeof(ShadowStack) * kShadowStacks;
  void* p = mmap(nullptr, slabs + stacks + sizeof(RecordMemory), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  g_slabs = static_cast<Slab*>(p);
  g_stacks = reinterpret_cast<ShadowStack*>(static_cast<char*>(p) + slabs);
  g_record = reinterpret_cast<RecordMemory*>(static_cast<char*>(p) + slabs + stacks);
  return true;
}

void StopMeasuring(const char* why) {
  DebugLog("%s: not measuring", why);
  g.active = 0;
  for (auto& m : fp_measuring) m = 0;
  if (g.config.slot_fd >= 0) close(g.config.slot_fd);
  g.config.slot_fd = -1;
}

// Most runs end at the first look (first_look.h), having read one settings
// file with three system calls; a measured run sets up everything else.
// (glibc passes constructors argc, argv and the environment.)
__attribute__((constructor(101))) void Start(int, char**, char** envp) {
  const uint64_t t_start = Rdtsc();
  SettingsText text;
  if (LookAtRun(envp, &text) != FirstLook::kGoOn) return;
  const uint64_t t_looked = Rdtsc();
  const RunDecision d = DecideRun(&settings, &text, envp);
  if (d.verdict != Verdict::kMeasure) return;
  const uint64_t t_decided = Rdtsc();
  g.config = FpRunConfig{1,
                         d.slot_fd,
                         settings.overhead_budget,
                         settings.spool_dir,
                         settings.spool_cap_bytes,
                         settings.debug_log[0] ? settings.debug_log : nullptr};
  g.active = 1;
  owner_pid = sys::Getpid();
  if (!MapMeasuringState()) return StopMeasuring("no memory for the measuring state");
  pthread_atfork(nullptr, nullptr, ResetAfterFork);
  // FIELDPROF_CLOCK=vdso: the vDSO clock even with an invariant TSC (tests,
  // and comparing the two).
  if (!StartClock(envp, settings.tsc_hz))
    return StopMeasuring("no invariant TSC and no vDSO clock");
  const uint64_t t_mapped = Rdtsc();
  CalibrateProbe();
  const uint64_t t_calibrated = Rdtsc();
  BinderConfig bc;
  bc.k = settings.k;
  bc.seed = settings.seed;
  bc.force = settings.force;
  bc.allow_modules = settings.allow_modules;
  bc.deny_modules = settings.deny_modules;
  bc.debug_log = g.config.debug_log;
  if (!BinderStart(bc)) StopMeasuring("cannot read the loaded objects");
  const uint64_t t_bound = Rdtsc();
  // The debug log's own lines come after the timing: its first vsnprintf
  // alone costs more than some of the parts.
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
  const BinderStats b = GetBinderStats();
  DebugLog("binder: %llu forced, %llu objects, %llu imports trapped",
           static_cast<unsigned long long>(b.forced), static_cast<unsigned long long>(b.objects),
           static_cast<unsigned long long>(b.imports));
  DebugLog("probe: %llu ticks (taken off every duration), a measured call adds %llu ticks",
           static_cast<unsigned long long>(g.probe_ticks),
           static_cast<unsigned long long>(g.call_cost_ticks));
  // What starting cost, by part, in TSC ticks (docs/benchmarks.md uses it).
  DebugLog("start, in ticks: first look %llu, decision %llu, memory %llu, probe %llu, binder %llu",
           static_cast<unsigned long long>(t_looked - t_start),
           static_cast<unsigned long long>(t_decided - t_looked),
           static_cast<unsigned long long>(t_mapped - t_decided),
           static_cast<unsigned long long>(t_calibrated - t_mapped),
           static_cast<unsigned long long>(t_bound - t_calibrated));
}

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
  return n + KeptCalls();
}

// Whether this process has a record to write.
bool HasRecord() {
  if (!g.active) return false;
  if (sys::Getpid() != owner_pid) return false;
  return !resumed_after_exec || CallsSinceReset() > 0;
}

void WriteRecord() {
  const uint64_t t_end = Rdtsc();
  CalibrateNow();             // over the whole run: the most precise rate, or the last check of it
  if (RateRefuted()) return;  // said in the debug log
  FlushDurations();
  const uint64_t run_ns = g.calibrated ? static_cast<uint64_t>(sys::MonoNs() - g.mono0_ns) : 0;
  SpoolRun run;
  run.run_ns = run_ns;
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
  Histogram(*totals)[FP_NUM_METRICS] = in_place ? SlabAt(0).h : g_record->totals;
  // Chosen APIs only: one replaced by an API of lower priority called
  // later was measured for part of the run, and is left out (binder.h).
  auto kept = [](int a) { return g.bound[a] && !g.evicted[a]; };
  for (int a = 0; a < FP_MAX_SLOTS; ++a) {
    if (!kept(a)) continue;
    ++run.apis_chosen;
    if (g.truncated[a]) ++run.apis_truncated;
    if (!in_place) {
      for (int m = 0; m < FP_NUM_METRICS; ++m) new (&totals[a][m]) Histogram();
    }
    for (int s = 0; s < slabs; ++s) {
      if (!g.slabs_ready[s]) continue;
      Slab& slab = SlabAt(s);
      // Read once: a thread still running may be counting into it.
      uint64_t quiet = __atomic_load_n(&slab.quiet[a], __ATOMIC_RELAXED);
      // Short quiet calls, by tick value: each value converted once (and
      // dropped, like the rings' durations, if the clock never calibrated).
      // In place, what is folded into the histograms leaves the table.
      for (int k = 0; k < kTickTable; ++k) {
        const uint64_t n = __atomic_load_n(&slab.ticks[a][k], __ATOMIC_RELAXED);
        if (n == 0) continue;
        if (in_place) slab.ticks[a][k] = 0;
        if (!g.calibrated) {
          run.dropped += n;
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
  }
  AddKeptDurations(totals);
  for (int a = 0; a < FP_MAX_SLOTS; ++a) {
    if (!kept(a)) continue;
    if (totals[a][0].count() == 0) continue;
    if (run.napis == FP_MAX_APIS) break;
    run.calls_measured += totals[a][0].count();
    run.apis[run.napis++] = {g.apis[a].module, g.apis[a].build_id, g.apis[a].symbol, totals[a],
                             g.truncated[a] != 0};
  }
  const uint64_t t_summed = Rdtsc();
  const BinderStats bs = GetBinderStats();
  DebugLog(
      "run: %llu imports trapped, %llu first calls, %llu APIs called, %llu replaced, "
      "%llu calls measured",
      static_cast<unsigned long long>(bs.imports), static_cast<unsigned long long>(bs.first_calls),
      static_cast<unsigned long long>(bs.apis_called),
      static_cast<unsigned long long>(bs.evictions),
      static_cast<unsigned long long>(run.calls_measured));
  // A run that measured no call leaves no record, only a count.
  if (run.calls_measured == 0) {
    CountRun(g.config.spool_dir, kRunMeasuredNone);
    return;
  }
  const uint64_t t_write = Rdtsc();
  const char* err =
      WriteSpoolRecord(g.config.spool_dir, g.config.spool_cap_bytes, run, g_record->scratch);
  if (err != nullptr) DebugLog("spool: %s", err);
  DebugLog("record, in ticks: sums %llu, file %llu",
           static_cast<unsigned long long>(t_summed - t_end),
           static_cast<unsigned long long>(Rdtsc() - t_write));
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
bool RecordBeforeImageEnds() {
  if (!HasRecord() || CallsSinceReset() == 0) return false;
  WriteRecord();
  return true;
}

void AfterFailedExec() {
  if (!g.active) return;
  ResetCounts();
  resumed_after_exec = true;
}

}  // namespace
}  // namespace fieldprof::rt

using fieldprof::rt::g;
using fieldprof::rt::ResolveNext;
using fieldprof::rt::t_state;

// ------------------------------------------------ allocation counters
// Forwarded to the next definition (glibc's, or a preloaded allocator's),
// found with ResolveNext, which allocates nothing itself.

namespace {

struct AllocFns {
  void* (*malloc)(size_t);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void (*free)(void*);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
};
FP_HOT_DATA AllocFns real_alloc;

[[gnu::noinline, gnu::cold]] void ResolveAlloc() {
  static const char* const kNames[] = {"malloc",         "calloc",        "realloc",  "free",
                                       "posix_memalign", "aligned_alloc", "memalign", "valloc"};
  uintptr_t f[8] = {};
  ResolveNext(kNames, f, 8);
  if (f[0] == 0 || f[1] == 0 || f[2] == 0 || f[3] == 0) {
    abort();  // no allocator to forward to: nothing sane is possible
  }
  AllocFns a;
  a.malloc = reinterpret_cast<decltype(a.malloc)>(f[0]);
  a.calloc = reinterpret_cast<decltype(a.calloc)>(f[1]);
  a.realloc = reinterpret_cast<decltype(a.realloc)>(f[2]);
  a.free = reinterpret_cast<decltype(a.free)>(f[3]);
  a.posix_memalign = reinterpret_cast<decltype(a.posix_memalign)>(f[4]);
  a.aligned_alloc = reinterpret_cast<decltype(a.aligned_alloc)>(f[5]);
  a.memalign = reinterpret_cast<decltype(a.memalign)>(f[6]);
  a.valloc = reinterpret_cast<decltype(a.valloc)>(f[7]);
  // malloc last: the fast paths test it.
  real_alloc.calloc = a.calloc;
  real_alloc.realloc = a.realloc;
  real_alloc.free = a.free;
  real_alloc.posix_memalign = a.posix_memalign;
  real_alloc.aligned_alloc = a.aligned_alloc;
  real_alloc.memalign = a.memalign;
  real_alloc.valloc = a.valloc;
  __atomic_store_n(&real_alloc.malloc, a.malloc, __ATOMIC_RELEASE);
}

// Outside a measured call the allocation functions just go on to the real
// ones: a program allocates far more often than it calls a chosen API.
inline bool Counting() { return InMeasuredCall(t_state); }

// Inside a measured call (Counting()).
inline void CountAlloc(size_t n) {
  CountersWillMove(t_state);
  t_state.alloc_bytes += n;
  ++t_state.alloc_count;
}

[[gnu::noinline]] void* MallocSlow(size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  void* p = real_alloc.malloc(n);
  if (p != nullptr && Counting()) CountAlloc(n);
  return p;
}

[[gnu::noinline]] void* CallocSlow(size_t a, size_t b) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  void* p = real_alloc.calloc(a, b);
  if (p != nullptr && Counting()) CountAlloc(a * b);
  return p;
}

[[gnu::noinline]] void* ReallocSlow(void* old, size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  void* p = real_alloc.realloc(old, n);
  if (p != nullptr && n > 0 && Counting()) CountAlloc(n);
  return p;
}

}  // namespace

extern "C" {

// malloc, calloc and realloc are shaped so that their common case (the
// allocator resolved, no measured call on the thread) is a check and a tail
// jump to the real function, with no frame: the rest is out of line.

FP_EXPORT void* malloc(size_t n) {
  if (real_alloc.malloc == nullptr || Counting()) [[unlikely]]
    return MallocSlow(n);
  return real_alloc.malloc(n);
}

FP_EXPORT void* calloc(size_t a, size_t b) {
  if (real_alloc.malloc == nullptr || Counting()) [[unlikely]]
    return CallocSlow(a, b);
  return real_alloc.calloc(a, b);
}

FP_EXPORT void* realloc(void* old, size_t n) {
  if (real_alloc.malloc == nullptr || Counting()) [[unlikely]]
    return ReallocSlow(old, n);
  return real_alloc.realloc(old, n);
}

FP_EXPORT void free(void* p) {
  if (p == nullptr) return;
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  real_alloc.free(p);
}

FP_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  if (!Counting()) [[likely]]
    return real_alloc.posix_memalign(out, align, n);
  const int r = real_alloc.posix_memalign(out, align, n);
  if (r == 0) CountAlloc(n);
  return r;
}

FP_EXPORT void* aligned_alloc(size_t align, size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  if (!Counting()) [[likely]]
    return real_alloc.aligned_alloc(align, n);
  void* p = real_alloc.aligned_alloc(align, n);
  if (p != nullptr) CountAlloc(n);
  return p;
}

FP_EXPORT void* memalign(size_t align, size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  if (!Counting()) [[likely]]
    return real_alloc.memalign(align, n);
  void* p = real_alloc.memalign(align, n);
  if (p != nullptr) CountAlloc(n);
  return p;
}

FP_EXPORT void* valloc(size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  if (!Counting()) [[likely]]
    return real_alloc.valloc(n);
  void* p = real_alloc.valloc(n);
  if (p != nullptr) CountAlloc(n);
  return p;
}

}  // extern "C"

// ------------------------------------------------ I/O counters
// Bytes are counted per thread; only inside a measured call is it worth
// knowing whether a read/write fd is a file or a socket (one fstat per fd,
// cached until close).

namespace {

FP_COLD_BSS uint8_t fd_kind[4096];  // 0 unknown, 1 file, 2 socket, 3 other

// The next definition of `name` (next_symbol.h), found at the first call.
// One missing everywhere (an unwinder function before libgcc_s is loaded)
// is looked for again at the next call; a call to none would crash anyway.
template <typename F>
F Next(F* cache, const char* name) {
  F f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (f == nullptr) [[unlikely]] {
    uintptr_t a = 0;
    ResolveNext(&name, &a, 1);
    f = reinterpret_cast<F>(a);
    __atomic_store_n(cache, f, __ATOMIC_RELEASE);
  }
  return f;
}

void CountFdIo(int fd, ssize_t n) {
  if (n <= 0 || !Counting()) return;
  uint8_t kind = 3;
  if (fd >= 0 && fd < static_cast<int>(sizeof fd_kind)) {
    kind = fd_kind[fd];
    if (kind == 0) {
      struct stat st;
      const int saved = errno;
      kind = fstat(fd, &st) != 0 ? 3 : S_ISSOCK(st.st_mode) ? 2 : S_ISREG(st.st_mode) ? 1 : 3;
      errno = saved;
      fd_kind[fd] = kind;
    }
  }
  if (kind == 3) return;
  CountersWillMove(t_state);
  if (kind == 1) t_state.file_io += static_cast<uint64_t>(n);
  if (kind == 2) t_state.sock_io += static_cast<uint64_t>(n);
}

void CountSocketIo(ssize_t n) {
  if (n > 0 && Counting()) {
    CountersWillMove(t_state);
    t_state.sock_io += static_cast<uint64_t>(n);
  }
}

void ForgetFd(int fd) {
  if (fd >= 0 && fd < static_cast<int>(sizeof fd_kind)) fd_kind[fd] = 0;
}

}  // namespace

#define FP_FORWARD(ret, name, params, args) \
  using name##_fn = ret(*) params;          \
  FP_HOT_DATA name##_fn next_##name;        \
  extern "C" FP_EXPORT ret name params {    \
    ret r = Next(&next_##name, #name) args;

FP_FORWARD(ssize_t, read, (int fd, void* b, size_t n), (fd, b, n))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, write, (int fd, const void* b, size_t n), (fd, b, n))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, pread, (int fd, void* b, size_t n, off_t o), (fd, b, n, o))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, pwrite, (int fd, const void* b, size_t n, off_t o), (fd, b, n, o))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, pread64, (int fd, void* b, size_t n, off_t o), (fd, b, n, o))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, pwrite64, (int fd, const void* b, size_t n, off_t o), (fd, b, n, o))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, readv, (int fd, const struct iovec* v, int c), (fd, v, c))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, writev, (int fd, const struct iovec* v, int c), (fd, v, c))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, send, (int fd, const void* b, size_t n, int f), (fd, b, n, f))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, recv, (int fd, void* b, size_t n, int f), (fd, b, n, f))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, sendto,
           (int fd, const void* b, size_t n, int f, const struct sockaddr* a, socklen_t l),
           (fd, b, n, f, a, l))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, recvfrom, (int fd, void* b, size_t n, int f, struct sockaddr* a, socklen_t* l),
           (fd, b, n, f, a, l))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, sendmsg, (int fd, const struct msghdr* m, int f), (fd, m, f))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, recvmsg, (int fd, struct msghdr* m, int f), (fd, m, f))
CountSocketIo(r);
return r;
}
FP_FORWARD(int, close, (int fd), (fd))
ForgetFd(fd);
return r;
}
FP_FORWARD(int, dup2, (int a, int b), (a, b))
ForgetFd(b);
return r;
}
FP_FORWARD(int, dup3, (int a, int b, int f), (a, b, f))
ForgetFd(b);
return r;
}

// ------------------------------------------------ exec and _exit

namespace {

template <typename Exec>
int AroundExec(Exec exec) {
  const bool wrote = fieldprof::rt::RecordBeforeImageEnds();
  const int r = exec();
  const int saved = errno;
  if (wrote) fieldprof::rt::AfterFailedExec();
  errno = saved;
  return r;
}

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
FP_HOT_DATA ExecveFn next_execve;
FP_HOT_DATA ExecveFn next_execvpe;
FP_HOT_DATA ExecvFn next_execv;
FP_HOT_DATA ExecvFn next_execvp;
FP_HOT_DATA int (*next_fexecve)(int, char* const[], char* const[]);
FP_HOT_DATA int (*next_execveat)(int, const char*, char* const[], char* const[], int);
typedef void (*ExitFn)(int) __attribute__((noreturn));
FP_HOT_DATA ExitFn next_exit;
FP_HOT_DATA ExitFn next_Exit;

// The arguments of an execl-style call, up to its null pointer, as an argv
// on the caller's stack; after the null, execle's environment.
#define FP_COLLECT_ARGS(arg, argv, after_null)                                      \
  size_t argc_ = 1;                                                                 \
  {                                                                                 \
    va_list ap;                                                                     \
    va_start(ap, arg);                                                              \
    while (va_arg(ap, const char*) != nullptr) ++argc_;                             \
    va_end(ap);                                                                     \
  }                                                                                 \
  auto** argv = static_cast<char**>(__builtin_alloca((argc_ + 1) * sizeof(char*))); \
  {                                                                                 \
    va_list ap;                                                                     \
    va_start(ap, arg);                                                              \
    argv[0] = const_cast<char*>(arg);                                               \
    for (size_t i = 1; i <= argc_; ++i) argv[i] = va_arg(ap, char*);                \
    after_null;                                                                     \
    va_end(ap);                                                                     \
  }

}  // namespace

extern "C" FP_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return AroundExec([&] { return Next(&next_execve, "execve")(path, argv, envp); });
}
extern "C" FP_EXPORT int execv(const char* path, char* const argv[]) {
  return AroundExec([&] { return Next(&next_execv, "execv")(path, argv); });
}
extern "C" FP_EXPORT int execvp(const char* file, char* const argv[]) {
  return AroundExec([&] { return Next(&next_execvp, "execvp")(file, argv); });
}
extern "C" FP_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return AroundExec([&] { return Next(&next_execvpe, "execvpe")(file, argv, envp); });
}
extern "C" FP_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  return AroundExec([&] { return Next(&next_fexecve, "fexecve")(fd, argv, envp); });
}
extern "C" FP_EXPORT int execveat(int dirfd, const char* path, char* const argv[],
                                  char* const envp[], int flags) {
  return AroundExec(
      [&] { return Next(&next_execveat, "execveat")(dirfd, path, argv, envp, flags); });
}
extern "C" FP_EXPORT int execl(const char* path, const char* arg, ...) {
  FP_COLLECT_ARGS(arg, argv, (void)0)
  return AroundExec([&] { return Next(&next_execv, "execv")(path, argv); });
}
extern "C" FP_EXPORT int execlp(const char* file, const char* arg, ...) {
  FP_COLLECT_ARGS(arg, argv, (void)0)
  return AroundExec([&] { return Next(&next_execvp, "execvp")(file, argv); });
}
extern "C" FP_EXPORT int execle(const char* path, const char* arg, ...) {
  char* const* envp = nullptr;
  FP_COLLECT_ARGS(arg, argv, envp = va_arg(ap, char* const*))
  return AroundExec([&] { return Next(&next_execve, "execve")(path, argv, envp); });
}
#undef FP_COLLECT_ARGS

extern "C" FP_EXPORT [[noreturn]] void _exit(int status) {
  fieldprof::rt::RecordBeforeImageEnds();
  Next(&next_exit, "_exit")(status);
}
extern "C" FP_EXPORT [[noreturn]] void _Exit(int status) {
  fieldprof::rt::RecordBeforeImageEnds();
  Next(&next_Exit, "_Exit")(status);
}

// ------------------------------------------------ unwinding
// An unwinder walking the stack must see real return addresses, not the
// stub's return point: before a C++ exception or a forced unwind (pthread_exit/cancel)
// starts, put back every return address this thread replaced. Those calls
// are then not measured (counted as abandoned); the program is unaffected.

namespace {

void RestoreReturnAddresses() {
  if (t_state.ss == nullptr) return;
  auto& t = *t_state.ss;
  const uintptr_t ours = reinterpret_cast<uintptr_t>(fieldprof::rt::fp_return_point);
  for (int i = static_cast<int>(t.depth) - 1; i >= 0; --i) {
    fieldprof::rt::Entry& e = t.e[i];
    if (e.ret_slot != nullptr && e.ret_slot != fieldprof::rt::FillingSlot() &&
        *e.ret_slot == ours) {
      *e.ret_slot = e.ret_addr;
      g.abandoned.fetch_add(1, std::memory_order_relaxed);
    }
    e.ret_slot = nullptr;
  }
}

}  // namespace

using RaiseFn = _Unwind_Reason_Code (*)(struct _Unwind_Exception*);
FP_HOT_DATA RaiseFn next_raise;
FP_HOT_DATA RaiseFn next_resume_or_rethrow;
using ForcedFn = _Unwind_Reason_Code (*)(struct _Unwind_Exception*, _Unwind_Stop_Fn, void*);
FP_HOT_DATA ForcedFn next_forced;

extern "C" FP_EXPORT _Unwind_Reason_Code _Unwind_RaiseException(struct _Unwind_Exception* e) {
  RestoreReturnAddresses();
  return Next(&next_raise, "_Unwind_RaiseException")(e);
}

extern "C" FP_EXPORT _Unwind_Reason_Code _Unwind_Resume_or_Rethrow(struct _Unwind_Exception* e) {
  RestoreReturnAddresses();
  return Next(&next_resume_or_rethrow, "_Unwind_Resume_or_Rethrow")(e);
}

extern "C" FP_EXPORT _Unwind_Reason_Code _Unwind_ForcedUnwind(struct _Unwind_Exception* e,
                                                              _Unwind_Stop_Fn stop, void* arg) {
  RestoreReturnAddresses();
  return Next(&next_forced, "_Unwind_ForcedUnwind")(e, stop, arg);
}
