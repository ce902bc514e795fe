// The per-call hot path: entry and exit of a measured call. Built with
// -mgeneral-regs-only: no SSE/x87 register is touched, so the measured
// function's floating-point arguments and results pass through untouched.
// No allocation, lock or system call here; the rare slow paths (clock
// calibration, overhead budget) are in companion.cc.
#include "agent/runtime/hotpath.h"

#include <new>

namespace fieldprof::rt {

namespace {

// Calibrate the TSC against the monotonic clock once this much has passed
// since start (~1 ms at 3 GHz), so starting the program is never delayed.
constexpr uint64_t kCalibrateAfterTicks = uint64_t{1} << 22;

inline void Barrier() { __asm__ __volatile__("" ::: "memory"); }

// The thread's slab, taken at its first measured call; nullptr when none is left.
[[gnu::noinline, gnu::cold]] Slab* TakeSlab(ThreadState& t) {
  if (t.slab < 0) return nullptr;
  const int s = g.next_slab.fetch_add(1, std::memory_order_relaxed);
  if (s >= kSlabs) {
    t.slab = -1;
    return nullptr;
  }
  // The storage is zero-filled and never handed out twice, and zero bytes
  // are an empty slab (common/histogram.h): nothing to construct, so pages
  // of histograms this thread never records into are never touched.
  Slab* slab = &SlabAt(s);
  __atomic_store_n(&g.slabs_ready[s], 1, __ATOMIC_RELEASE);
  t.slab = s + 1;
  return slab;
}

inline Slab* MySlab(ThreadState& t) {
  if (t.slab > 0) [[likely]]
    return &SlabAt(t.slab - 1);
  return TakeSlab(t);
}

inline uint64_t TicksToNs(uint64_t ticks) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * g.ns_per_tick_q32) >> 32);
}

// Durations kept in ticks before calibration go into the histograms.
void FlushPre(ShadowStack& t, Slab* slab) {
  if (slab != nullptr) {
    for (uint32_t p = 0; p < t.npre; ++p) {
      slab->h[t.pre_slot[p]][0].Record(TicksToNs(t.pre_ticks[p]));
    }
  }
  t.npre = 0;
}

// Before the clock is calibrated: keep the duration in ticks (calibrating
// once enough has passed), or, once calibrated, flush what was kept first.
[[gnu::noinline]] void RecordUncalibrated(ShadowStack& t, Slab& slab, uint32_t slot, uint64_t ticks,
                                          uint64_t now) {
  if (!g.calibrated && (t.npre == kPreCalibration || now - g.tsc0 > kCalibrateAfterTicks)) {
    CalibrateNow();  // slow path, once per process
  }
  if (g.calibrated) {
    FlushPre(t, &slab);
    slab.h[slot][0].Record(TicksToNs(ticks));
  } else if (t.npre < kPreCalibration) {
    t.pre_ticks[t.npre] = ticks;
    t.pre_slot[t.npre] = static_cast<uint8_t>(slot);
    ++t.npre;
  } else {
    g.dropped_uncalibrated.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

void FlushPreCalibration() {
  ThreadState& tls = t_state;
  if (tls.ss == nullptr || !g.calibrated) return;
  FlushPre(*tls.ss, MySlab(tls));
}

namespace {

// A thread's first measured call: its shadow stack.
[[gnu::noinline, gnu::cold]] ShadowStack* TakeStack(ThreadState& tls) {
  const int i = g.next_stack.fetch_add(1, std::memory_order_relaxed);
  if (i >= kShadowStacks) {
    g.dropped_depth.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  tls.ss = &g_stacks[i];
  return tls.ss;
}

// A call while entries are on the thread's shadow stack (nesting,
// recursion, or entries that longjmp or an unwinder left): drops the dead
// ones and returns the depth at which the new call goes.
[[gnu::noinline]] uint32_t DropDeadEntries(ShadowStack& t, uintptr_t* ret_slot) {
  // Entries restored for an unwinder are no longer referenced: drop them.
  while (t.depth > 0 && t.e[t.depth - 1].ret_slot == nullptr) --t.depth;
  // Entries of frames that longjmp left: on this stack at or below the new
  // call's return slot, and that slot no longer holds fp_return_point. (An
  // enclosing live call's slot is higher up and still holds it, until its
  // fp_exit is over; so does an interrupted call's when a handler runs on a
  // higher alternate stack.)
  uint32_t live = t.depth;
  while (live > 0) {
    uintptr_t* const rs = t.e[live - 1].ret_slot;
    if (rs > ret_slot || *rs == reinterpret_cast<uintptr_t>(fp_return_point)) break;
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

// Every 1024 calls of an API in a slab: the overhead budget.
[[gnu::noinline]] void BudgetTick() {
  g.calls_total.fetch_add(1024, std::memory_order_relaxed);
  CheckBudget();
}

}  // namespace

// The stub calls this only for a slot it measures (fp_measuring).
extern "C" FpTarget fp_enter(uint32_t slot, uintptr_t* ret_slot) {
  ThreadState& tls = t_state;
  ShadowStack* ss = tls.ss;
  if (ss == nullptr) [[unlikely]] {
    ss = TakeStack(tls);
    if (ss == nullptr) return {fp_real[slot], 0};
  }
  ShadowStack& t = *ss;
  uint32_t d = t.depth;
  if (d != 0) [[unlikely]] {
    d = DropDeadEntries(t, ret_slot);
    if (d >= kShadowDepth) {
      g.dropped_depth.fetch_add(1, std::memory_order_relaxed);
      return {fp_real[slot], 0};
    }
  }
  // Reserve the entry before filling it: a signal handler that runs a
  // measured call in between pushes above it.
  t.depth = d + 1;
  Barrier();
  Entry& e = t.e[d];
  e.ret_addr = *ret_slot;
  e.ret_slot = ret_slot;
  e.slot = slot;
  e.alloc_bytes0 = tls.alloc_bytes;
  e.alloc_count0 = tls.alloc_count;
  e.file0 = tls.file_io;
  e.sock0 = tls.sock_io;
  e.child_alloc = 0;
  Barrier();
  *ret_slot = reinterpret_cast<uintptr_t>(fp_return_point);
  e.t0 = Ticks();
  return {fp_real[slot], 1};
}

// The entry stays on the shadow stack until the end, so a signal handler
// that runs a measured call meanwhile pushes above it; the stub keeps
// fp_return_point in the return slot until fp_exit is over.
extern "C" uintptr_t fp_exit(uintptr_t caller_rsp) {
  const uint64_t t1 = Ticks();
  ThreadState& tls = t_state;
  ShadowStack& t = *tls.ss;
  uintptr_t* const ret_slot = reinterpret_cast<uintptr_t*>(caller_rsp - 8);
  uint32_t i = t.depth - 1;
  if (t.depth == 0 || t.e[i].ret_slot != ret_slot) [[unlikely]]
    i = FindEntry(t, ret_slot);
  const Entry& e = t.e[i];
  const uintptr_t ret = e.ret_addr;
  const uint32_t slot = e.slot;
  const uint64_t alloc = tls.alloc_bytes - e.alloc_bytes0;
  if (i > 0) t.e[i - 1].child_alloc += alloc;
  Slab* slab;
  if (slot == FP_CALIBRATION_SLOT) [[unlikely]] {
    g.calibration_last_ticks = t1 - e.t0;
  } else if ((slab = MySlab(tls)) == nullptr) [[unlikely]] {
    g.dropped_no_slab.fetch_add(1, std::memory_order_relaxed);
  } else {
    uint64_t ticks = t1 - e.t0;
    ticks = ticks > g.probe_ticks ? ticks - g.probe_ticks : 0;
    if (g.calibrated && t.npre == 0) [[likely]] {
      slab->h[slot][0].Record(TicksToNs(ticks));
    } else {
      RecordUncalibrated(t, *slab, slot, ticks, t1);
    }
    const uint64_t count = tls.alloc_count - e.alloc_count0;
    const uint64_t file = tls.file_io - e.file0;
    const uint64_t sock = tls.sock_io - e.sock0;
    if ((alloc | count | file | sock) == 0) {
      ++slab->quiet[slot];  // exclusive bytes are 0 too: child_alloc <= alloc
    } else {
      Histogram* h = slab->h[slot];
      h[1].Record(alloc);
      h[2].Record(alloc - e.child_alloc);
      h[3].Record(count);
      h[4].Record(file);
      h[5].Record(sock);
    }
    if ((++slab->calls[slot] & 1023) == 0) [[unlikely]]
      BudgetTick();
  }
  Barrier();
  t.depth = i;
  return ret;
}

}  // namespace fieldprof::rt
