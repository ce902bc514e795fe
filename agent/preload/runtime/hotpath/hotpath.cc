// The per-call hot path: entry and exit of a measured call. Built with
// -mgeneral-regs-only: no SSE/x87 register is touched, so the measured
// function's floating-point arguments and results pass through untouched.
// No allocation, lock or system call here; the rare slow paths (clock
// calibration, overhead budget) are in clock.cc and budget.cc.
#include "agent/preload/runtime/hotpath/hotpath.h"

#include <algorithm>
#include <cstddef>
#include <new>

#include "agent/preload/runtime/lab/lab.h"
#include "agent/preload/runtime/records/live_file.h"

namespace fieldprof::rt {

// The assembly fast path's view of the data (hotpath_layout.h).
static_assert(FP_PROBE_SLOT == FP_CALIBRATION_SLOT);
static_assert(offsetof(ThreadState, ss) == FP_TS_SS);
static_assert(offsetof(ThreadState, slab_p) == FP_TS_SLAB_P);
static_assert(offsetof(Slab, calls) == FP_SLAB_CALLS);
static_assert(offsetof(Slab, ticks) == FP_SLAB_TICKS);
static_assert(kTickTable == FP_TICK_TABLE && kTickTable == 1 << FP_TICK_SHIFT);
static_assert(offsetof(ShadowStack, depth) == FP_SS_DEPTH && sizeof(ShadowStack::depth) == 4);
static_assert(offsetof(ShadowStack, nring) == FP_SS_NRING && sizeof(ShadowStack::nring) == 4);
static_assert(offsetof(ShadowStack, ring_ticks) == FP_SS_RING_TICKS);
static_assert(offsetof(ShadowStack, ring_slot) == FP_SS_RING_SLOT);
static_assert(kRing == FP_RING);
static_assert(offsetof(ShadowStack, e) == FP_SS_E);
static_assert(kShadowDepth == FP_SHADOW_DEPTH);
static_assert(sizeof(Entry) == FP_E_SIZE);
static_assert(offsetof(Entry, ret_addr) == FP_E_RET_ADDR);
static_assert(offsetof(Entry, ret_slot) == FP_E_RET_SLOT);
static_assert(offsetof(Entry, t0) == FP_E_T0);
static_assert(offsetof(Entry, slot) == FP_E_SLOT && sizeof(Entry::slot) == 4);
static_assert(offsetof(Entry, flags) == FP_E_SLOT + 4 && sizeof(Entry::flags) == 4);
static_assert(offsetof(Globals, vdso_gettime) == FP_G_VDSO);
static_assert(offsetof(Globals, calibration_last_ticks) == FP_G_CALIBRATION_LAST);
static_assert(FP_MAX_SLOTS < kRingCounted);
static_assert(FP_CALIBRATION_SLOT == 32);  // the stubs' .irp list in stubs_x86_64.S
static_assert(FP_STUB_SIZE >= 32);

namespace {

inline void Barrier() { __asm__ __volatile__("" ::: "memory"); }

// Runs a slow path (normal code in clock.cc or budget.cc, which may call libc) with
// the whole x87/SSE state saved around it: the measured function's results
// (%xmm0/%xmm1, and a long double in %st0) pass through untouched.
template <typename F>
[[gnu::always_inline]] inline void WithFpuSaved(F f) {
  alignas(16) unsigned char area[512];
  __asm__ __volatile__("fxsave64 %0" : "=m"(area));
  f();
  __asm__ __volatile__("fxrstor64 %0" : : "m"(area));
}

// The thread's slab, taken at its first measured call; nullptr when none is left.
[[gnu::noinline, gnu::cold]] Slab* TakeSlab(ThreadState& t) {
  if (t.no_slab_left) return nullptr;
  const int s = g.next_slab.fetch_add(1, std::memory_order_relaxed);
  if (s >= kSlabs) {
    t.no_slab_left = true;
    return nullptr;
  }
  // The storage is zero-filled and never handed out twice, and zero bytes
  // are an empty slab (common/statistics/histogram.h): nothing to construct, so pages
  // of histograms this thread never records into are never touched.
  Slab* slab = &SlabAt(s);
  __atomic_store_n(&g.slabs_ready[s], 1, __ATOMIC_SEQ_CST);
  // In a live file, the slab's pages of every slot bound so far are
  // allocated before the thread writes them (a slot bound later allocates
  // its own in every ready slab: BindStub); the fence pairs with its.
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  bool backed = LiveAllocateSlabCounts(s);
  for (int a = 0; backed && a < FP_MAX_SLOTS; ++a) {
    if (__atomic_load_n(&g.bound[a], __ATOMIC_SEQ_CST)) backed = LiveAllocateSlot(s, a);
  }
  LiveNoteSlabReady(s);
  if (!backed) {  // the live file's file system is full: this thread measures nothing
    t.no_slab_left = true;
    return nullptr;
  }
  t.slab_p = slab;
  return slab;
}

inline Slab* MySlab(ThreadState& t) {
  if (t.slab_p != nullptr) [[likely]]
    return t.slab_p;
  return TakeSlab(t);
}

// Calibrates the clock if it is not yet (slow path, once per process; a
// thread that finds another calibrating carries on uncalibrated).
inline bool Calibrated() {
  if (!g.calibrated) [[unlikely]]
    WithFpuSaved(CalibrateNow);
  return g.calibrated != 0;
}

// The overhead budget, checked each time an API's count in a slab crosses
// a multiple of 1024 (CheckBudget reads every slab's counts).
[[gnu::noinline]] void BudgetTick() { WithFpuSaved(CheckBudget); }
inline void CountCalls(Slab& slab, uint32_t slot, uint64_t n) {
  const uint64_t before = slab.calls[slot];
  slab.calls[slot] = before + n;
  if ((before >> 10) != ((before + n) >> 10)) [[unlikely]]
    BudgetTick();
}

// The thread's kept durations into its histograms, once the clock is
// calibrated: each run of one API's durations in ns, then into its
// histogram at once. The assembly's calls (no kRingCounted) are counted
// here: calls and quiet (and so the overhead budget).
[[gnu::noinline]] void FlushRing(ShadowStack& t, Slab& slab) {
  if (!Calibrated()) return;
  // A closer rate once the run is four times as long as the last one's span.
  if (g.rate_span_ticks < (uint64_t{1} << 36) && Ticks() - g.rate_tsc0 > 4 * g.rate_span_ticks)
    WithFpuSaved(CalibrateNow);
  const uint32_t n = t.nring;
  uint64_t ns[kRing];
  uint32_t p = 0;
  while (p < n) {
    const uint8_t tag = t.ring_slot[p];
    uint32_t m = 0;
    do {
      ns[m++] = DurationNs(t.ring_ticks[p++]);
    } while (p < n && t.ring_slot[p] == tag);
    const uint32_t slot = tag & ~kRingCounted;
    slab.h[slot][0].RecordMany(ns, m);
    if (!(tag & kRingCounted)) {
      slab.quiet[slot] += m;
      CountCalls(slab, slot, m);
    }
  }
  t.nring = 0;
}

// An outermost call's duration into the thread's ring (as the assembly
// fast path does, but tagged kRingCounted), then the full ring into the
// histograms.
inline void KeepDuration(ShadowStack& t, Slab& slab, uint32_t slot, uint64_t ticks) {
  const uint32_t n = t.nring;
  if (n < kRing) {
    t.ring_ticks[n] = ticks;
    t.ring_slot[n] = static_cast<uint8_t>(slot | kRingCounted);
    Barrier();
    t.nring = n + 1;
  } else {
    g.dropped_uncalibrated.fetch_add(1, std::memory_order_relaxed);
  }
  if (t.nring == kRing) FlushRing(t, slab);
}

}  // namespace

void FlushDurations() {
  ThreadState& tls = t_state;
  if (tls.ss == nullptr || tls.ss->nring == 0) return;
  Slab* slab = MySlab(tls);
  if (slab != nullptr) FlushRing(*tls.ss, *slab);
}

namespace {

// Calls `f(tag, ticks)` for every call kept in any thread's ring. The
// threads may be running: their rings are only read, up to the count
// published after the entries.
template <typename F>
void ForEachKept(F f) {
  const int stacks = std::min(g.next_stack.load(std::memory_order_relaxed), kShadowStacks);
  for (int i = 0; i < stacks; ++i) {
    const ShadowStack& t = g_stacks[i];
    const uint32_t n = std::min<uint32_t>(__atomic_load_n(&t.nring, __ATOMIC_ACQUIRE), kRing);
    for (uint32_t p = 0; p < n; ++p) f(t.ring_slot[p], t.ring_ticks[p]);
  }
}

}  // namespace

void AddKeptDurations(Histogram (*totals)[FP_NUM_METRICS]) {
  if (!g.calibrated) return;
  ForEachKept([totals](uint8_t tag, uint64_t ticks) {
    const uint32_t slot = tag & ~kRingCounted;
    if (slot >= FP_MAX_SLOTS || !g.bound[slot] || g.evicted[slot]) return;
    totals[slot][0].Record(DurationNs(ticks));
    if (!(tag & kRingCounted)) {
      for (int m = 1; m < FP_NUM_METRICS; ++m) totals[slot][m].RecordZeros(1);
    }
  });
}

void ForgetKeptDurations() {
  const int stacks = std::min(g.next_stack.load(std::memory_order_relaxed), kShadowStacks);
  for (int i = 0; i < stacks; ++i) {
    if (g_stacks[i].nring != 0) g_stacks[i].nring = 0;  // written only if not yet
  }
}

void ReplaceSlabsAfterFork() {
  for (uint8_t& r : g.slabs_ready) r = 0;
  g.next_slab.store(0, std::memory_order_relaxed);
  ThreadState& t = t_state;
  t.slab_p = nullptr;
  t.no_slab_left = false;
  // A thread with a shadow stack always has a slab (the assembly's calls
  // wait in its ring for it).
  if (t.ss != nullptr) TakeSlab(t);
}

uint64_t KeptCalls() {
  uint64_t calls = 0;
  ForEachKept([&calls](uint8_t tag, uint64_t) { calls += !(tag & kRingCounted); });
  return calls;
}

void SnapEntries(ThreadState& tls, uint32_t d) {
  ShadowStack& t = *tls.ss;
  // Entries without the flag sit on top of the stack (a counter that moved
  // while one was pushed snapped it and all below it), so stop at the first
  // with it. A signal handler that moves counters between an entry's depth
  // and its flags being written loses its own bytes for that entry, no more.
  while (d > 0) {
    Entry& e = t.e[--d];
    if (e.flags & kCountersMoved) break;
    e.alloc_bytes0 = tls.alloc_bytes;
    e.alloc_count0 = tls.alloc_count;
    e.file0 = tls.file_io;
    e.sock0 = tls.sock_io;
    e.child_alloc = 0;
    Barrier();
    e.flags |= kCountersMoved;
  }
}

namespace {

// A thread's first measured call: its shadow stack.
// Its slab first: a thread with a shadow stack always has one (the
// assembly's calls wait in the ring for it).
[[gnu::noinline, gnu::cold]] ShadowStack* TakeStack(ThreadState& tls) {
  if (MySlab(tls) == nullptr) {
    g.dropped_no_slab.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  const int i = g.next_stack.fetch_add(1, std::memory_order_relaxed);
  if (i >= kShadowStacks || !LiveAllocateStack(i)) {
    g.dropped_depth.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  LiveNoteStacks(std::min(g.next_stack.load(std::memory_order_relaxed), kShadowStacks));
  tls.ss = &g_stacks[i];
  return tls.ss;
}

// A call while entries are on the thread's shadow stack (nesting,
// recursion, or entries that longjmp or an unwinder left): drops the dead
// ones and returns the depth at which the new call goes.
[[gnu::noinline]] uint32_t DropDeadEntries(ShadowStack& t, uintptr_t* ret_slot) {
  // Entries restored for an unwinder are no longer referenced: drop them.
  while (t.depth > 0 && t.e[t.depth - 1].ret_slot == nullptr) --t.depth;
  // A signal handler's call while the slots are lent (their callers'
  // addresses in place of the stubs'): every entry is live.
  if (t.lent != 0) return t.depth;
  // Entries of frames that longjmp left: on this stack at or below the new
  // call's return slot, and that slot no longer holds fp_return_point (or
  // fp_detour_return). (An
  // enclosing live call's slot is higher up and still holds it, until its
  // fp_exit is over; so does an interrupted call's when a handler runs on a
  // higher alternate stack.)
  uint32_t live = t.depth;
  while (live > 0) {
    uintptr_t* const rs = t.e[live - 1].ret_slot;
    if (rs > ret_slot || *rs == reinterpret_cast<uintptr_t>(fp_return_point) ||
        *rs == reinterpret_cast<uintptr_t>(fp_detour_return)) {
      break;
    }
    --live;
  }
  if (live != t.depth) {
    g.abandoned.fetch_add(t.depth - live, std::memory_order_relaxed);
    t.depth = live;
  }
  return live;
}

// The entry of the call returning through `ret_slot` when it is not the
// topmost: entries above it belong to frames that are gone (longjmp, or an
// exception caught inside); they are counted as abandoned here and dropped
// when the caller lowers the depth.
[[gnu::noinline]] uint32_t FindEntry(ShadowStack& t, uintptr_t* ret_slot) {
  int i = static_cast<int>(t.depth) - 1;
  while (i >= 0 && t.e[i].ret_slot != ret_slot) --i;
  if (i < 0) __builtin_trap();  // cannot happen: fp_return_point is only planted with an entry
  g.abandoned.fetch_add(t.depth - 1 - static_cast<uint32_t>(i), std::memory_order_relaxed);
  return static_cast<uint32_t>(i);
}

}  // namespace

namespace {

// Where the API of `slot` is: a field slot's, or a lab API's (lab.h).
inline uintptr_t RealOf(uint32_t slot) {
  return IsLabSlot(slot) ? g_lab_real[slot - kLabSlot0] : fp_real[slot];
}

}  // namespace

// The stub calls this only for a slot it measures (fp_measuring); lab
// stubs and detours for every call.
extern "C" FpTarget fp_enter(uint32_t slot, uintptr_t* ret_slot) {
  // A detour's entry (points/field_setting.cc) comes here whether its slot
  // measures or not (past its overhead budget).
  if (!IsLabSlot(slot) && !fp_measuring[slot]) [[unlikely]]
    return {RealOf(slot), 0};
  ThreadState& tls = t_state;
  ShadowStack* ss = tls.ss;
  if (ss == nullptr) [[unlikely]] {
    ss = TakeStack(tls);
    if (ss == nullptr) return {RealOf(slot), 0};
  }
  ShadowStack& t = *ss;
  uint32_t d = t.depth;
  if (d != 0) [[unlikely]] {
    d = DropDeadEntries(t, ret_slot);
    if (d >= kShadowDepth) {
      g.dropped_depth.fetch_add(1, std::memory_order_relaxed);
      return {RealOf(slot), 0};
    }
  }
  // Reserve the entry before filling it: a signal handler that runs a
  // measured call in between pushes above it, and takes the entry for a
  // live one (FillingSlot) until its return slot holds fp_return_point.
  // The assembly fast path (stubs_x86_64.S) does the same in the same order.
  Entry& e = t.e[d];
  e.ret_slot = FillingSlot();
  Barrier();
  t.depth = d + 1;
  Barrier();
  e.ret_addr = *ret_slot;
  e.slot = slot;
  e.flags = g.vdso_gettime == nullptr ? 0 : kSlowExit;
  Barrier();
  *ret_slot = reinterpret_cast<uintptr_t>(fp_return_point);
  Barrier();
  e.ret_slot = ret_slot;
  e.t0 = Ticks();
  return {RealOf(slot), 1};
}

uint64_t LendReturnAddresses(ShadowStack& t, uint32_t n, uintptr_t floor) {
  const auto stub = reinterpret_cast<uintptr_t>(fp_return_point);
  const auto detour = reinterpret_cast<uintptr_t>(fp_detour_return);
  ++t.lent;
  Barrier();
  // Bit i: entry i lent; bit 32 + i: its slot held the detour's point.
  uint64_t lent = 0;
  for (uint32_t i = 0; i < n && i < kShadowDepth; ++i) {
    uintptr_t* const rs = t.e[i].ret_slot;
    if (rs == nullptr || rs == FillingSlot() || reinterpret_cast<uintptr_t>(rs) < floor) continue;
    const uintptr_t held = *rs;
    if (held != stub && held != detour) continue;
    lent |= uint64_t{1} << i | (held == detour ? uint64_t{1} << (32 + i) : 0);
    *rs = t.e[i].ret_addr;
  }
  Barrier();
  return lent;
}

void GiveBackReturnAddresses(ShadowStack& t, uint64_t lent) {
  Barrier();
  for (uint32_t i = 0; i < kShadowDepth; ++i) {
    if ((lent >> i & 1) == 0) continue;
    // An unwinder meanwhile (an exception in a signal handler) restored it
    // and gave the entry up: the call returns straight to its caller.
    uintptr_t* const rs = t.e[i].ret_slot;
    if (rs == nullptr || rs == FillingSlot() || *rs != t.e[i].ret_addr) continue;
    *rs = reinterpret_cast<uintptr_t>((lent >> (32 + i) & 1) ? fp_detour_return : fp_return_point);
  }
  Barrier();
  --t.lent;
}

// The entry stays on the shadow stack until the end, so a signal handler
// that runs a measured call meanwhile pushes above it; the stub keeps
// fp_return_point in the return slot until fp_exit is over.
extern "C" uintptr_t fp_exit(uintptr_t caller_rsp, uint64_t tsc) {
  const uint64_t t1 = g.vdso_gettime == nullptr ? tsc : Ticks();
  ThreadState& tls = t_state;
  ShadowStack& t = *tls.ss;
  uintptr_t* const ret_slot = reinterpret_cast<uintptr_t*>(caller_rsp - 8);
  uint32_t i = t.depth - 1;
  if (t.depth == 0 || t.e[i].ret_slot != ret_slot) [[unlikely]]
    i = FindEntry(t, ret_slot);
  const Entry& e = t.e[i];
  const uintptr_t ret = e.ret_addr;
  const uint32_t slot = e.slot;
  // The counters first: calibrating (below) may allocate. Unless they
  // moved during the call, the entry never took them and all are 0.
  uint64_t alloc = 0, count = 0, file = 0, sock = 0, child_alloc = 0;
  if (e.flags & kCountersMoved) {
    alloc = tls.alloc_bytes - e.alloc_bytes0;
    count = tls.alloc_count - e.alloc_count0;
    file = tls.file_io - e.file0;
    sock = tls.sock_io - e.sock0;
    child_alloc = e.child_alloc;
    // The enclosing entry moved too (SnapEntries), so it has its own count.
    if (i > 0) t.e[i - 1].child_alloc += alloc;
  }
  Slab* slab;
  if (IsLabSlot(slot)) [[unlikely]] {
    const uint64_t ticks = t1 - e.t0;
    if (slot == kLabSlot0) {
      g.calibration_last_ticks = ticks;  // the lab probe (LabCalibrate)
    } else if (g_lab_mode == kLabPoints) {
      LabPointSpan(t, i, slot - kLabSlot0, e.t0, t1);
    } else {
      const uint64_t ns = Calibrated()
                              ? TicksToNs(ticks > g_lab_probe_ticks ? ticks - g_lab_probe_ticks : 0)
                              : ~uint64_t{0};
      LabExit(t, i, slot, ns, alloc, alloc - child_alloc, count, file, sock);
    }
  } else if (slot == FP_CALIBRATION_SLOT) [[unlikely]] {
    g.calibration_last_ticks = t1 - e.t0;
  } else if ((slab = MySlab(tls)) == nullptr) [[unlikely]] {
    g.dropped_no_slab.fetch_add(1, std::memory_order_relaxed);
  } else {
    const uint64_t ticks = t1 - e.t0;
    if (i == 0) {
      // Outermost: kept in the ring. A signal handler's measured calls
      // meanwhile are nested (this entry is still on the shadow stack), so
      // they never touch the ring.
      KeepDuration(t, *slab, slot, ticks);
    } else if (Calibrated()) {
      slab->h[slot][0].Record(DurationNs(ticks));
    } else {
      g.dropped_uncalibrated.fetch_add(1, std::memory_order_relaxed);
    }
    if ((alloc | count | file | sock) == 0) {
      ++slab->quiet[slot];  // exclusive bytes are 0 too: child_alloc <= alloc
    } else if (!LiveAllocateMetrics(static_cast<int>(slab - g_slabs), static_cast<int>(slot)))
        [[unlikely]] {
      // The live file's file system is full: this API stops here.
      fp_measuring[slot] = 0;
      g.truncated[slot] = 1;
      ++slab->quiet[slot];
    } else {
      Histogram* h = slab->h[slot];
      h[1].Record(alloc);
      h[2].Record(alloc - child_alloc);
      h[3].Record(count);
      h[4].Record(file);
      h[5].Record(sock);
    }
    CountCalls(*slab, slot, 1);
  }
  Barrier();
  t.depth = i;
  return ret;
}

}  // namespace fieldprof::rt
