// State shared by the hot path (hotpath.cc, built without floating point
// registers so it never disturbs a measured function's arguments or
// results) and the rest of the runtime around it (companion.h lists the
// files).
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_HOTPATH_HOTPATH_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_HOTPATH_HOTPATH_H_

#include <time.h>

#include <atomic>
#include <cstdint>

#include "agent/preload/runtime/hotpath/hotpath_layout.h"
#include "agent/preload/runtime/runtime.h"
#include "common/statistics/histogram.h"

#define FP_HIDDEN __attribute__((visibility("hidden")))
// Process-wide variables that every run reads or writes (the interposers'
// next functions, the flags the destructor tests) and the small state of a
// measured run: kept in .data, on the page the dynamic linker's relocation
// of .got.plt has made private already, so using them costs no page fault.
// (Zero-initialized variables would go to .bss, pages of their own; each
// first touch of one is a fault, ~10 us on a VM.) All of .data must stay
// within that one page: RuntimeLayoutTest (tests/agent/preload/runtime)
// checks it.
#define FP_HOT_DATA __attribute__((section(".data.fp_hot")))
// Big zero-initialized tables that only a measured run touches (settings,
// the fd table). .lbss follows .bss in the same writable segment; keeping
// them out of .bss keeps .bss (crtbegin's `completed` flag, which every
// exit writes) small enough to share the page above too, with no fault of
// its own. RuntimeLayoutTest checks that as well.
#define FP_COLD_BSS __attribute__((section(".lbss")))
#define FP_TLS __attribute__((tls_model("initial-exec")))

namespace fieldprof::rt {

inline constexpr int kShadowDepth = 32;
inline constexpr int kSlabs = 32;  // threads that can measure at once
// Durations of a thread's outermost measured calls are kept in ticks and
// go into the histograms 128 at a time (the exit path then ends with one
// store, not a chain of dependent histogram updates for the next clock
// read to wait on); before calibration they wait there for it.
inline constexpr int kRing = 128;

struct Slab;

// An entry's ret_slot while it is being filled: counts as live (above any
// return slot) and matches none.
inline uintptr_t* FillingSlot() { return reinterpret_cast<uintptr_t*>(~uintptr_t{0}); }

// Entry::flags
inline constexpr uint32_t kCountersMoved = 1;  // the thread's counters changed since entry
inline constexpr uint32_t kSlowExit = 2;       // the return goes to fp_exit (vDSO clock)

struct Entry {
  uintptr_t ret_addr;
  uintptr_t* ret_slot;  // nullptr: restored for an unwinder, dead
  uint64_t t0;
  // The assembly writes and reads these two as one word: a word below
  // FP_CALIBRATION_SLOT is an API's call with nothing but its time to record.
  uint32_t slot;
  uint32_t flags;
  // The thread's counters at entry, taken only once they are about to
  // change (kCountersMoved; SnapEntries): most calls allocate nothing and do
  // no I/O, and then entry and exit never touch them.
  uint64_t alloc_bytes0, alloc_count0, file0, sock0;
  uint64_t child_alloc;  // bytes allocated by nested measured calls
};

// Per-thread shadow stack, taken from a static pool at a thread's first
// measured call (static TLS space is scarce for preloaded libraries).
struct ShadowStack {
  uint32_t depth;
  uint32_t nring;              // written after the entry it counts
  uint64_t ring_ticks[kRing];  // raw durations (probe cost not yet taken off)
  // The slot; kRingCounted set when fp_exit has counted the call in the slab
  // already (calls, quiet, the other metrics). Without it the call is one
  // of the assembly's: quiet, and counted when the ring is flushed.
  uint8_t ring_slot[kRing];
  Entry e[kShadowDepth];
  // Nonzero while the return slots are lent to an unwinder
  // (LendReturnAddresses): no entry is taken for dead meanwhile.
  uint32_t lent;
};
inline constexpr uint8_t kRingCounted = 0x80;
inline constexpr int kShadowStacks = 256;

// Per-thread counters (thread-local; a few words).
// The counters only grow, and change only through CountersWillMove first.
struct ThreadState {
  uint64_t alloc_bytes, alloc_count, file_io, sock_io;
  ShadowStack* ss;    // nullptr until the first measured call; then slab_p is set too
  bool no_slab_left;  // all kSlabs were taken before this thread asked
  Slab* slab_p;       // the thread's slab once taken (nullptr before)
};

// Durations shorter than this many ticks (~450 ns at 2.3 GHz) that the
// assembly finishes are counted per tick value (Slab::ticks).
inline constexpr int kTickTable = 1024;

// Calls in a thread's ring without kRingCounted are in neither calls nor
// quiet yet (FlushRing counts them; the record writer reads the rings).
struct Slab {
  Histogram h[FP_MAX_SLOTS][FP_NUM_METRICS];
  // Every call counted here (the overhead budget's count), also those in
  // `ticks`; the budget is checked each time one crosses a multiple of 1024.
  uint64_t calls[FP_MAX_SLOTS];
  // Calls that allocated nothing and did no I/O: zeros of every metric but
  // wall time, not yet in h (most calls of most APIs; one add instead of
  // five histogram updates). Added when the record is written.
  uint64_t quiet[FP_MAX_SLOTS];
  // Quiet outermost calls shorter than kTickTable ticks, counted by their
  // raw duration: one add on the return path instead of a conversion and a
  // histogram update. The record writer converts each tick value once, with
  // the final calibration, and adds it as many times as it was counted:
  // exactly what recording every call would have given. Not in h nor quiet.
  uint64_t ticks[FP_MAX_SLOTS][kTickTable];
};

// Process-wide state. Written by the constructor, the binder (when it binds
// a slot) and the slow paths.
struct Globals {
  // Read by the assembly fast path (stubs_x86_64.S), at the offsets in
  // hotpath_layout.h: keep them first and in this order.
  //
  // Set when the clock is the vDSO's CLOCK_MONOTONIC (no invariant TSC):
  // then ticks are nanoseconds.
  int (*vdso_gettime)(clockid_t, timespec*);
  uint64_t ns_per_tick_q32;         // ns = ticks * this >> 32
  uint64_t probe_ticks;             // subtracted from every measured duration
  uint64_t calibration_last_ticks;  // probe measurement channel
  volatile int calibrated;

  FpRunConfig config;
  FpApi apis[FP_MAX_SLOTS + 1];
  volatile uint8_t truncated[FP_MAX_SLOTS];
  volatile uint8_t bound[FP_MAX_SLOTS];
  // Chosen, then replaced by an API of lower priority called later: its
  // calls are not in the record (binder.h).
  volatile uint8_t evicted[FP_MAX_SLOTS];
  volatile int active;
  uint64_t call_cost_ticks;   // what a measured call adds, all told (the budget's unit)
  uint64_t resolution_ticks;  // durations under it cannot be told from 0 (clock.h)
  uint64_t tsc0;              // at start, or at a fork or a failed exec
  int64_t mono0_ns;
  // The rate's first reading (clock.h): CLOCK_MONOTONIC at start, taken
  // between the tick readings rate_tsc0 and rate_tsc0_after.
  uint64_t rate_tsc0;  // 0 before the start
  uint64_t rate_tsc0_after;
  int64_t rate_mono0_ns;
  uint64_t rate_span_ticks;  // the span of the last calibration or check
  // The machine's rate (settings' tsc_hz) as ns_per_tick_q32; 0 if none.
  uint64_t machine_ns_per_tick_q32;
  volatile int rate_refuted;  // the run's clock disagrees with the machine's rate
  // `g` is constinit (start.cc): a dynamic initializer would run after the
  // binder and early measured calls have already written to it.
  std::atomic<int> next_slab{0};
  std::atomic<int> next_stack{0};
  std::atomic<uint64_t> dropped_no_slab{0}, dropped_depth{0}, dropped_uncalibrated{0}, abandoned{0};
  uint8_t slabs_ready[kSlabs];  // owned by a thread
};

FP_HIDDEN extern Globals g;
// Slabs and shadow stacks are mapped (zero-filled, MAP_NORESERVE) when a
// run is measured, so that the many runs that are not carry none of them;
// zero bytes are an empty slab, so a thread takes one without writing it.
// Both nullptr in a run that is not measured.
FP_HIDDEN extern Slab* g_slabs;
inline Slab& SlabAt(int i) { return g_slabs[i]; }
// __thread, not thread_local: a thread_local defined in another file is
// reached through a check for a dynamic initializer on every access.
FP_HIDDEN extern __thread ThreadState t_state FP_TLS;
FP_HIDDEN extern ShadowStack* g_stacks;  // kShadowStacks of them

// What fp_enter tells the stub (returned in %rax:%rdx): where the API is,
// and whether this call is measured (then its return slot already holds
// fp_return_point, and the stub calls the API instead of jumping to it).
struct FpTarget {
  uintptr_t addr;
  uintptr_t measured;
};

extern "C" {
// Per slot (FP_CALIBRATION_SLOT is the probe's): the API's address, and
// whether its calls are measured. Outside Globals because the stubs read
// them: an unmeasured slot's stub jumps straight to the API.
FP_HIDDEN extern uintptr_t fp_real[FP_MAX_SLOTS + 1];
FP_HIDDEN extern volatile uint8_t fp_measuring[FP_MAX_SLOTS + 1];
FP_HIDDEN FpTarget fp_enter(uint32_t slot, uintptr_t* ret_slot);
// `tsc` is the TSC read on return (unused when the clock is the vDSO's).
FP_HIDDEN uintptr_t fp_exit(uintptr_t caller_rsp, uint64_t tsc);
// Where a measured API returns to (inside the stub, stubs_x86_64.S).
FP_HIDDEN extern char fp_return_point[];
// A detour's entry, and where a measured detoured function returns to
// (detour.h; stubs_x86_64.S).
FP_HIDDEN void fp_detour_entry();
FP_HIDDEN extern char fp_detour_return[];
// The stubs, FP_STUB_SIZE bytes apart (stubs_x86_64.S).
FP_HIDDEN extern char fp_stubs[];
}

inline uintptr_t StubAddress(int slot) {
  return reinterpret_cast<uintptr_t>(fp_stubs) + FP_STUB_SIZE * static_cast<uintptr_t>(slot);
}

inline uint64_t TicksToNs(uint64_t ticks) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * g.ns_per_tick_q32) >> 32);
}

// A measured duration in ns: the probe's typical cost taken off, clamped at
// 0 (the zero bucket: no longer than the probe itself).
inline uint64_t DurationNs(uint64_t ticks) {
  return TicksToNs(ticks > g.probe_ticks ? ticks - g.probe_ticks : 0);
}

inline uint64_t Rdtsc() {
  uint32_t lo, hi;
  __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
  return (uint64_t{hi} << 32) | lo;
}

// The hot path's clock: the TSC, or without an invariant TSC the vDSO's
// monotonic clock (checked at start to answer without a system call). The
// vDSO is built without SSE, so calling it from a stub leaves
// floating-point arguments alone.
inline uint64_t Ticks() {
  if (g.vdso_gettime == nullptr) [[likely]]
    return Rdtsc();
  timespec ts;
  g.vdso_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Slow paths, normal code that may call libc: clock.cc, budget.cc.
FP_HIDDEN void CalibrateNow();
FP_HIDDEN void CheckBudget();
// In hotpath.cc: the calling thread's kept durations into its histograms.
FP_HIDDEN void FlushDurations();
// Calls other threads still keep in their rings, into `totals[api]` of APIs
// bound (the record; the threads may be running, so their rings are only
// read): their durations, and zeros of the other metrics for quiet ones.
FP_HIDDEN void AddKeptDurations(Histogram (*totals)[FP_NUM_METRICS]);
// Calls kept in rings and not yet counted in any slab.
FP_HIDDEN uint64_t KeptCalls();
// Empties every thread's batch of kept durations.
FP_HIDDEN void ForgetKeptDurations();
// In a fork child, once g_slabs is a fresh mapping: no slab is taken but
// the forking thread's (if it has a shadow stack).
FP_HIDDEN void ReplaceSlabsAfterFork();

// Whether a measured call is on this thread's shadow stack. Only then do
// the counters matter (an entry takes their values when they are about to
// move), so the interposers count nothing otherwise.
inline bool InMeasuredCall(const ThreadState& t) { return t.ss != nullptr && t.ss->depth != 0; }

// For an unwinder walking this thread's stack now (the points recorder's
// --stacks, in a points pass): the return slots of entries [0, n) that
// still hold a stub's return point, and lie at or above `floor` (the
// calling frame: lower ones are dead), get their callers' addresses back
// for the while, so the unwind goes on through every measured call into
// its caller (the stubs' unwind rules read the slot, stubs_x86_64.S).
// Returns what was lent, for GiveBackReturnAddresses, which puts each
// stub's return point back where its caller's address still is.
FP_HIDDEN uint64_t LendReturnAddresses(ShadowStack& t, uint32_t n, uintptr_t floor);
FP_HIDDEN void GiveBackReturnAddresses(ShadowStack& t, uint64_t lent);

// Entries on the shadow stack not yet holding the counters' values at
// entry get them (the counters have not moved since those entries were
// pushed). Called inside a measured call (InMeasuredCall) before a counter
// changes.
FP_HIDDEN void SnapEntries(ThreadState& t, uint32_t depth);
inline void CountersWillMove(ThreadState& t) {
  const ShadowStack& ss = *t.ss;
  const uint32_t d = ss.depth;
  if (d == 0 || (ss.e[d - 1].flags & kCountersMoved)) return;
  SnapEntries(t, d);
}

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_HOTPATH_HOTPATH_H_
