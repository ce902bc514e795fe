// The lab's part of a call's exit (lab.h): built with -mgeneral-regs-only
// and calling no libc, as fp_exit is (the measured function's results are
// live in the vector registers).
#include "agent/preload/runtime/binder/state.h"
#include "agent/preload/runtime/lab/lab_state.h"

namespace fieldprof::rt {
namespace {

// A spin lock that yields the CPU (a raw sched_yield: no libc here) when its
// holder was preempted, so waiting threads do not spin through its slice.
void Lock() {
  while (__atomic_exchange_n(&g_lab_lock, 1, __ATOMIC_ACQUIRE) != 0) {
    for (int spins = 0; __atomic_load_n(&g_lab_lock, __ATOMIC_RELAXED) != 0; ++spins) {
      if (spins < 1000) {
        __builtin_ia32_pause();
      } else {
        long r;
        __asm__ __volatile__("syscall" : "=a"(r) : "0"(24L) : "rcx", "r11", "memory");
        spins = 0;
      }
    }
  }
}
void Unlock() { __atomic_store_n(&g_lab_lock, 0, __ATOMIC_RELEASE); }

void Pair(LabCounts& c, uint32_t outer, uint32_t inner, uint64_t direct) {
  const uint64_t key = uint64_t{outer} * kLabMaxApis + inner + 1;
  uint32_t i = static_cast<uint32_t>(Mix64(key)) & (kLabEdgeCap - 1);
  for (uint32_t probes = 0; probes < kLabEdgeCap; ++probes, i = (i + 1) & (kLabEdgeCap - 1)) {
    LabEdgeSlot& s = c.edges[i];
    if (s.key == key) {
      s.direct += direct;
      return;
    }
    if (s.key == 0) {
      if (probes > kLabEdgeCap / 2) break;  // keep the table usable
      s.key = key;
      s.direct = direct;
      return;
    }
  }
  ++c.edges_lost;
}

uint32_t LabIndex(const Entry& e) {
  return IsLabSlot(e.slot) && e.ret_slot != nullptr ? e.slot - kLabSlot0 : 0;
}

// The path of `api` called inside path `parent`, added if new; 0 when the
// table is full.
uint32_t PathChild(LabCounts& c, uint32_t parent, uint32_t api) {
  constexpr uint32_t kMask = 2 * kLabPathCap - 1;
  const uint64_t key = (uint64_t{parent} << 32) | api;
  uint32_t i = static_cast<uint32_t>(Mix64(key)) & kMask;
  for (; c.path_map[i] != 0; i = (i + 1) & kMask) {
    const LabPath& p = c.paths[c.path_map[i]];
    if (p.parent == parent && p.api == api) return c.path_map[i];
  }
  if (c.npaths == 0) c.npaths = 1;  // id 0 is the root
  if (c.npaths >= kLabPathCap) return 0;
  const uint32_t id = c.npaths++;
  c.paths[id].parent = parent;
  c.paths[id].api = api;
  c.path_map[i] = id;
  return id;
}

// The census's call path of the call at depth `i` (API `index`): its
// calls, time, and what the allocator did while it was innermost.
void AddPath(LabCounts& c, const ShadowStack& t, uint32_t i, uint32_t index, uint64_t ns) {
  const long stack = &t - g_stacks;
  LabOwn* own = stack >= 0 && stack < kShadowStacks ? c.own[stack] : nullptr;
  LabOwn mine = {};
  if (own != nullptr) {
    // Entries above it were left by longjmp or an unwinder: theirs too.
    for (uint32_t j = i; j < t.depth && j < kShadowDepth; ++j) {
      mine.alloc_bytes += own[j].alloc_bytes;
      mine.allocs += own[j].allocs;
      mine.freed_bytes += own[j].freed_bytes;
      own[j] = {};
    }
  }
  uint32_t path = 0;
  for (uint32_t j = 0; j <= i; ++j) {
    const uint32_t api = j == i ? index : LabIndex(t.e[j]);
    if (api != 0 && (path = PathChild(c, path, api)) == 0) {
      ++c.paths_lost;
      return;
    }
  }
  LabPath& p = c.paths[path];
  ++p.calls;
  if (ns != ~uint64_t{0}) {
    p.time_ns += ns;
    ++p.timed_calls;
  }
  p.alloc_bytes += mine.alloc_bytes;
  p.allocs += mine.allocs;
  p.freed_bytes += mine.freed_bytes;
}

}  // namespace

void LabPointSpan(ShadowStack& t, uint32_t i, uint32_t index, uint64_t t0, uint64_t t1) {
  // Ticks are the TSC's unless the clock is the vDSO's (then ns): the
  // recorder's times are the TSC's, so those spans are not sent.
  if (index == 0 || index >= kLabMaxApis || g_lab_span == nullptr || g.vdso_gettime != nullptr) {
    return;
  }
  // As the lab's times: less the probe's own cost.
  const uint64_t end = t1 - t0 > g_lab_probe_ticks ? t1 - g_lab_probe_ticks : t0;
  const LabPointSite* site = &g_lab_apis->sites[index];
  if (!g_lab_stacks) {
    g_lab_span(site, t0, end, nullptr);
    return;
  }
  // The recorder takes the caller's stack: this call's return slot and
  // those of the measured calls around it hold their callers' addresses
  // meanwhile, where the stubs' unwind rules look for them.
  const uint64_t lent =
      LendReturnAddresses(t, i + 1, reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
  g_lab_span(site, t0, end, reinterpret_cast<const void*>(t.e[i].ret_addr));
  GiveBackReturnAddresses(t, lent);
}

void LabExit(const ShadowStack& t, uint32_t i, uint32_t slot, uint64_t ns, uint64_t alloc,
             uint64_t alloc_excl, uint64_t count, uint64_t file, uint64_t sock) {
  const uint32_t index = slot - kLabSlot0;
  LabCounts* c = g_lab_counts;
  if (index == 0 || index >= kLabMaxApis || c == nullptr) return;
  if (t_in_lab) {  // a signal handler's call inside this thread's recording
    __atomic_fetch_add(&c->dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  t_in_lab = 1;
  Lock();
  c = g_lab_counts;  // (a fork child's fresh one)
  Histogram* h = c->h[index];
  if (ns != ~uint64_t{0}) {
    h[0].Record(ns);
  } else {
    ++c->dropped;
  }
  h[1].Record(alloc);
  h[2].Record(alloc_excl);
  h[3].Record(count);
  h[4].Record(file);
  h[5].Record(sock);
  __atomic_store_n(&c->calls, c->calls + 1, __ATOMIC_RELAXED);
  if (i > 0) {
    // The APIs beneath on this thread's stack: the direct caller counted,
    // every other one as a pair that was on one stack.
    const uint32_t parent = LabIndex(t.e[i - 1]);
    if (parent != 0) Pair(*c, parent, index, 1);
    uint32_t distinct = 1;
    for (uint32_t j = 0; j + 1 < i; ++j) {
      const uint32_t outer = LabIndex(t.e[j]);
      if (outer == 0) continue;
      Pair(*c, outer, index, 0);
    }
    if (i + 1 > c->max_depth) {
      // Distinct APIs on the stack (recursion repeats one).
      for (uint32_t j = 0; j < i; ++j) {
        const uint32_t a = LabIndex(t.e[j]);
        if (a == 0 || a == index) continue;
        bool seen = false;
        for (uint32_t k = 0; k < j; ++k) seen = seen || LabIndex(t.e[k]) == a;
        distinct += !seen;
      }
      if (distinct > c->max_depth) c->max_depth = distinct;
    }
  } else if (c->max_depth == 0) {
    c->max_depth = 1;
  }
  if (g_lab_mode == kLabCensus) AddPath(*c, t, i, index, ns);
  Unlock();
  t_in_lab = 0;
}

}  // namespace fieldprof::rt
