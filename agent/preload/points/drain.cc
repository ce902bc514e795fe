// The drain's batches (drain.h).
#include "agent/preload/points/drain.h"

#include <sys/platform/x86.h>
#include <sys/uio.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/include/fieldprof/points.h"
#include "agent/preload/points/stacks.h"

namespace fieldprof::points {
namespace {

// Sites by their address, numbered in the file as they are first seen
// (drain only), with a small cache of the last ones seen in front. A
// module's sites are forgotten before it is closed (ForgetSites): its
// memory goes, and another module may come to the same addresses. Their
// numbers are not used again in the file, whose reader keeps the first
// name of each.
std::unordered_map<uint64_t, uint32_t>* g_sites;
std::pair<uint64_t, uint32_t> g_site_cache[64];
uint32_t g_next_site;

// Up to `n` bytes of this process's memory at `at` into `out`, through
// the kernel, so that an address no longer mapped is an error, not a
// crash: how many were read (those up to the first page not mapped).
size_t ReadOwnMemory(uintptr_t at, void* out, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t split = std::min<uintptr_t>(n, page - at % page);
  char* dst = static_cast<char*>(out);
  iovec local[2] = {{dst, split}, {dst + split, n - split}};
  iovec remote[2] = {{reinterpret_cast<void*>(at), split},
                     {reinterpret_cast<void*>(at + split), n - split}};
  const unsigned long parts = n > split ? 2 : 1;
  const ssize_t r = process_vm_readv(getpid(), local, parts, remote, parts, 0);
  return r < 0 ? 0 : static_cast<size_t>(r);
}

// A site's tag or name, cut at kMaxString as Out::Str cuts it; false
// when it cannot be read whole.
bool ReadOwnString(const char* at, std::string* out) {
  out->clear();
  if (at == nullptr) return true;
  char buf[kMaxString];
  const size_t n = ReadOwnMemory(reinterpret_cast<uintptr_t>(at), buf, sizeof buf);
  const size_t len = strnlen(buf, n);
  if (len == n && n < sizeof buf) return false;  // its end is not mapped
  out->assign(buf, len);
  return true;
}

// A site's index when the cache has it not: numbered, and named in `o`.
// Its names are read where the point was passed: in a module the program
// may have closed since (a point passed after the module's last drain:
// one built with an older points.h, or a thread still inside it as it
// was closed). Such a site goes unnamed, and the reader counts its events
// as lost.
__attribute__((noinline)) uint32_t NewSiteIndex(Out& o, uint64_t site) {
  auto [it, fresh] = g_sites->try_emplace(site, g_next_site);
  if (fresh) {
    ++g_next_site;
    fieldprof_point_site s{};
    std::string tag, name;
    if (ReadOwnMemory(site, &s, sizeof s) == sizeof s && ReadOwnString(s.tag, &tag) &&
        ReadOwnString(s.name, &name)) {
      o.Put(kSite);
      o.Put(it->second);
      o.Str(tag.c_str());
      o.Str(name.c_str());
    }
  }
  g_site_cache[(site >> 4) & 63] = {site, it->second};
  return it->second;
}

inline uint32_t SiteIndex(Out& o, uint64_t site) {
  const auto& c = g_site_cache[(site >> 4) & 63];
  return __builtin_expect(c.first == site, 1) ? c.second : NewSiteIndex(o, site);
}

// ---------------------------------------------------------------- events

// One event packed (points_format.h, 'P'): three fields, each stored as
// 8 bytes and kept as long as it needs, so that no branch depends on the
// data. `p` has kPackedSlack bytes beyond the event.
__attribute__((always_inline)) inline char* PutPacked(char* p, uint64_t delta, uint64_t site_kind,
                                                      uint64_t zigzag) {
  const uint32_t lt = BytesFor(delta), ls = BytesFor(site_kind);
  const uint32_t lz = PackedValueBytes(zigzag);
  *p = static_cast<char>(PackedControl(lt, ls, lz));
  std::memcpy(p + 1, &delta, 8);
  p += 1 + lt;
  std::memcpy(p, &site_kind, 8);
  p += ls;
  std::memcpy(p, &zigzag, 8);
  return p + lz;
}

// The site_kind of event `n` of `ev` (a ring's) when it is whole (its
// tsc and value then read right), else ~0.
__attribute__((always_inline)) inline uint64_t WholeSiteKind(const Event* ev, uint64_t n) {
  const uint64_t site_kind =
      __atomic_load_n(&ev[n & (kRingEvents - 1)].site_kind, __ATOMIC_ACQUIRE);
  return IsWhole(site_kind, n) ? site_kind & kSiteKindBits : ~uint64_t{0};
}

// Packs events [tail, tail + *n) of `ev` (a ring's) at `p`, up to the
// first not yet whole (*n: how many were), naming in `o` the sites they
// are the first of; returns the end. The first event, whole, is the
// batch's head's tsc: it goes as a delta of 0.
__attribute__((always_inline)) inline char* PackEvents(Out& o, const Event* ev, uint64_t tail,
                                                       uint32_t* n, char* p) {
  uint64_t prev = ev[tail & (kRingEvents - 1)].tsc;
  // The last site seen, kept in registers: the packing stores alias
  // everything in memory.
  uint64_t last_site = ~uint64_t{0}, last_index = 0;
  // In runs that stay within one round of the ring: their events lie one
  // after another, and share the mark that tells them whole.
  uint64_t k = tail;
  const uint64_t end = tail + *n;
  while (k != end) {
    const uint64_t run_end = std::min(end, (k | (kRingEvents - 1)) + 1);
    const uint64_t mark = WholeMark(k);
    const Event* e = &ev[k & (kRingEvents - 1)];
    const Event* const stop = e + (run_end - k);
    for (; e != stop; ++e) {
      const uint64_t raw = __atomic_load_n(&e->site_kind, __ATOMIC_ACQUIRE);
      if (__builtin_expect(!HasMark(raw, mark), 0)) break;
      // The thread wrote these lines from its own CPU: ask for them ahead
      // (past the ring's end, a prefetch is only a hint).
      __builtin_prefetch(e + 64);
      const uint64_t site_kind = raw & kSiteKindBits;
      const uint64_t tsc = e->tsc;
      const auto value = static_cast<uint64_t>(e->value);
      const uint64_t site = site_kind & ~uint64_t{3};
      if (__builtin_expect(site != last_site, 0)) {
        if ((site_kind & 3) == kStackKind) {  // the stack of the event before: its id
          last_index = site >> 1;
          last_site = ~uint64_t{0};
        } else {
          last_index = uint64_t{SiteIndex(o, site)} << 2;
          last_site = site;
        }
      }
      // The delta is mod 2^64: an earlier TSC on another CPU wraps back.
      p = PutPacked(p, tsc - prev, last_index | (site_kind & 3),
                    (value << 1) ^ (0 - (value >> 63)));
      prev = tsc;
    }
    k += static_cast<uint64_t>(e - &ev[k & (kRingEvents - 1)]);
    if (k != run_end) break;
  }
  *n = static_cast<uint32_t>(k - tail);
  return p;
}

// The same, built for each kind of CPU: most of packing's time is the
// three counts of leading zeros an event takes, which BSR (every x86-64)
// does in several micro-ops and LZCNT (most since 2013) in one. Packing
// took 32 TSC ticks an event with BSR and 17-20 with LZCNT on this
// project's AMD EPYC VM (docs/benchmarks-history.md).
char* PackEventsBsr(Out& o, const Event* ev, uint64_t tail, uint32_t* n, char* p) {
  return PackEvents(o, ev, tail, n, p);
}
__attribute__((target("lzcnt"))) char* PackEventsLzcnt(Out& o, const Event* ev, uint64_t tail,
                                                       uint32_t* n, char* p) {
  return PackEvents(o, ev, tail, n, p);
}

using PackFn = char* (*)(Out&, const Event*, uint64_t, uint32_t*, char*);
PackFn ChoosePacking() {
  // As glibc read the CPU's features at its start: the cpuid instruction
  // is a VM exit, 8 us here, in every process the recorder is loaded into.
  return CPU_FEATURE_ACTIVE(LZCNT) ? PackEventsLzcnt : PackEventsBsr;
}

// How long the drain waits on a slot claimed and not yet whole before it
// counts it as lost: its push was cut off by a signal handler that has not
// returned (a siglongjmp out of it, or a handler that waits), or its
// thread was stopped in the middle of it. Should the push end after all,
// the drain has passed the slot and does not read it again.
constexpr uint64_t kWaitOnSlotNs = 10000000;

// Whether the drain passes by `r`'s slot `tail`, not yet whole, counting it
// as lost: `last` (the drain at exit or exec: the rest is never written),
// or the slot was claimed kWaitOnSlotNs ago or more: the drain has waited
// that long on it, or on one before it while its head was already past it.
bool PassBy(Ring* r, uint64_t tail, uint64_t head, bool last) {
  if (!last && tail >= r->passable_below) {
    const uint64_t now = MonoNs();
    if (r->waits_on != tail) {
      r->waits_on = tail;
      r->waits_since_ns = now;
      r->head_at_wait = head;
      return false;
    }
    if (now - r->waits_since_ns < kWaitOnSlotNs) return false;
    r->passable_below = r->head_at_wait;
  }
  ++r->never_whole;
  return true;
}

}  // namespace

uint64_t ClockNs(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}
uint64_t MonoNs() { return ClockNs(CLOCK_MONOTONIC); }

// The drain's buffer and its packing, made with the sites at load, before
// any thread: a function-local static made at the first drain instead was
// being made by the drain thread when the program forked, and the child's
// drain at its _exit waited for good on the copied guard.
std::vector<char>* g_batch;
PackFn g_pack;

void StartSites() {
  g_sites = new std::unordered_map<uint64_t, uint32_t>();
  g_batch = new std::vector<char>();  // never destroyed: the last drain runs at exit
  g_pack = ChoosePacking();
}

void ForgetSites(bool renumber) {
  g_sites->clear();
  for (auto& c : g_site_cache) c = {0, 0};
  if (renumber) g_next_site = 0;
}

// Takes every ring's whole events into `o` as batches (points_format.h),
// the sites they name first, then frees their slots; true when there were
// any. `fullest`: the most events one ring held. `last`: the drain at exit
// or before an exec, which counts the slots not yet whole as lost.
bool DrainInto(Out& o, uint64_t* fullest, bool last) {
  std::vector<char>* const batch = g_batch;
  const PackFn pack = g_pack;
  {  // the stacks before the events that name them
    std::string stacks;
    TakeStacks(&stacks);
    o.Put(stacks.data(), stacks.size());
  }
  bool any = false;
  for (Ring* r = g_rings.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    const uint64_t head = r->head.load(std::memory_order_acquire);
    uint64_t tail = r->tail.load(std::memory_order_relaxed);
    if (fullest != nullptr) *fullest = std::max(*fullest, head - tail);
    if (head == tail) {
      FreeIfEnded(r, tail);
      continue;
    }
    any = true;
    while (tail != head) {
      if (WholeSiteKind(r->ev, tail) == ~uint64_t{0}) {
        if (!PassBy(r, tail, head, last)) break;
        ++tail;
        continue;
      }
      uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(head - tail, kMaxBatch));
      const size_t most = 1 + 4 + 4 + 8 + size_t{n} * kMaxPackedEvent + kPackedSlack;
      if (batch->size() < most) batch->resize(most);
      char* p = batch->data();
      *p++ = kPackedBatch;
      std::memcpy(p, &r->tid, 4);
      std::memcpy(p + 8, &r->ev[tail & (kRingEvents - 1)].tsc, 8);
      p = pack(o, r->ev, tail, &n, p + 16);
      std::memcpy(batch->data() + 1 + 4, &n, 4);
      o.Put(batch->data(), static_cast<size_t>(p - batch->data()));  // after the sites it named
      tail += n;
    }
    r->tail.store(tail, std::memory_order_seq_cst);  // before `waiting` is read (WaitForRoom)
    WakeWaiting(r);
    FreeIfEnded(r, tail);
  }
  return any;
}

}  // namespace fieldprof::points
