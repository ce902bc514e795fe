// The writing side of the points recorder's rings (ring.h), and the
// runtime's entry for points placed by configuration. Built with
// -mgeneral-regs-only.
#include "agent/preload/points/ring.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <new>

#include "agent/preload/base/recorder_abi.h"

namespace fieldprof::points {

std::atomic<Ring*> g_rings{nullptr};
std::atomic<bool> g_recording{false};
std::atomic<bool> g_drain_running{false};
uint64_t g_ticks_per_ms = 3'000'000;
std::atomic<int> g_drain_word{0};
__thread Ring* t_ring __attribute__((tls_model("initial-exec")));
__thread int t_own __attribute__((tls_model("initial-exec")));
void (*g_span_with_stack)(uint64_t, uint64_t, uint64_t, const void*) = nullptr;

namespace {

// Its value in a thread with a ring: the ring, given back at the thread's
// end (RingEnded).
pthread_key_t g_ring_key;
std::atomic<int> g_rings_ended{0};    // ended, not yet free
std::atomic<int> g_ring_key_made{0};  // 0 no, 1 being made, 2 made, 3 failed

// A thread's end: its ring is the drain's to empty and free. Only if it is
// still the thread's (a fork child's thread has a ring of its own since).
// An event the thread passes after this (in another key's destructor)
// takes a ring again.
void RingEnded(void* value) {
  auto* r = static_cast<Ring*>(value);
  if (r == nullptr || r != t_ring) return;
  t_ring = nullptr;
  r->state.store(kRingEnded, std::memory_order_release);
  if ((g_rings_ended.fetch_add(1, std::memory_order_relaxed) + 1) % kWakeForEnded == 0) {
    syscall(SYS_futex, reinterpret_cast<int*>(&g_drain_word), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
  }
}

bool RingKeyMade() {
  int made = g_ring_key_made.load(std::memory_order_acquire);
  if (made == 0 && g_ring_key_made.compare_exchange_strong(made, 1)) {
    made = pthread_key_create(&g_ring_key, RingEnded) == 0 ? 2 : 3;
    g_ring_key_made.store(made, std::memory_order_release);
  }
  return made == 2;
}

// A ring a thread that ended left, emptied by the drain; nullptr if none.
Ring* TakeFreeRing() {
  for (Ring* r = g_rings.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    int free = kRingFree;
    if (r->state.load(std::memory_order_relaxed) == kRingFree &&
        r->state.compare_exchange_strong(free, kRingOwned, std::memory_order_acquire)) {
      return r;
    }
  }
  return nullptr;
}

Ring* NewRing() {
  Ring* r = TakeFreeRing();
  if (r != nullptr) {
    r->seen_tail = r->tail.load(std::memory_order_acquire);  // the drain took all it held
    r->gave_up_at = ~0ull;
  } else {
    void* p = mmap(nullptr, sizeof(Ring), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    // Default-initialised: the events are left as mmap gives them (zero
    // pages, touched as they fill), not cleared, which would touch all 2 MiB.
    r = new (p) Ring;
    Ring* head = g_rings.load(std::memory_order_relaxed);
    do {
      r->next = head;
    } while (!g_rings.compare_exchange_weak(head, r, std::memory_order_release,
                                            std::memory_order_relaxed));
  }
  // Before the thread's first event: the drain reads it with the events.
  r->tid = static_cast<uint32_t>(syscall(SYS_gettid));
  t_ring = r;
  if (RingKeyMade()) pthread_setspecific(g_ring_key, r);
  return r;
}

}  // namespace

// Every kNudgeEvery events of a thread: the drain woken when they are still
// in the ring. Returns `pushed`, so that Push's call is a jump.
__attribute__((noinline, cold)) uint64_t Nudge(Ring* r, uint64_t pushed) {
  if (pushed - r->tail.load(std::memory_order_relaxed) >= kNudgeEvery) {
    syscall(SYS_futex, reinterpret_cast<int*>(&g_drain_word), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
  }
  return pushed;
}

// A thread's first event: its ring first. Out of Push's line, so the push
// itself saves no register.
__attribute__((noinline)) uint64_t PushFirst(uint64_t tsc, uint64_t site, int64_t value,
                                             uint32_t kind) {
  return NewRing() != nullptr ? Push(tsc, site, value, kind) : 0;
}

// Moves the head from `*head` on by one: true, or false with `*head` what
// it is now (a signal handler's points took it on). One instruction, so
// that no handler comes between the compare and the store; without LOCK,
// which only other CPUs would need: the drain never writes the head.
inline bool Claim(std::atomic<uint64_t>* head, uint64_t* seen) {
  bool claimed;
  __asm__ __volatile__("cmpxchgq %3, %1"
                       : "=@ccz"(claimed), "+m"(*reinterpret_cast<uint64_t*>(head)), "+a"(*seen)
                       : "r"(*seen + 1)
                       : "memory");
  return claimed;
}

// A full ring: the event is lost (counted) and takes no slot.
__attribute__((noinline, cold)) uint64_t Full(Ring* r, uint32_t kind) {
  if (kind != kStackKind) {  // a stack is no event: its loss leaves an event without one
    r->lost.fetch_add(1, std::memory_order_relaxed);  // one instruction: a handler's count stays
  }
  return 0;
}

// `r` is full at `head`: wakes the drain and waits, up to kWaitForRoomNs,
// until it has taken events. True when there is room then; false at once
// when no drain runs, or when the thread already waited in vain at this
// tail (the drain is held up: a disk, or a lock this thread holds), so that
// a thread waits once, not at every point, for a drain that does not come.
// It calls nothing but futex system calls, and reads the TSC for its
// deadline: the runtime may call in from a measured call's exit, with that
// call's results in vector registers (ring.h).
bool WaitForRoom(Ring* r, uint64_t head) {
  if (!g_drain_running.load(std::memory_order_acquire) ||
      g_drain_word.load(std::memory_order_relaxed) != 0) {
    return false;
  }
  uint64_t tail = r->tail.load(std::memory_order_acquire);
  if (tail == r->gave_up_at) return false;
  r->waiting.store(1, std::memory_order_seq_cst);  // before the tail is read again (WakeWaiting)
  syscall(SYS_futex, reinterpret_cast<int*>(&g_drain_word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
  // Each wait a millisecond at most: woken early by the drain's
  // WakeWaiting, at once when the tail moved before it began (the kernel
  // compares first), or by a signal.
  const uint64_t until = __rdtsc() + kWaitForRoomNs / 1000000 * g_ticks_per_ms;
  for (;;) {
    tail = r->tail.load(std::memory_order_seq_cst);
    if (head - tail < kRingEvents) break;
    if (__rdtsc() >= until) {
      r->gave_up_at = tail;
      r->waiting.store(0, std::memory_order_relaxed);
      return false;
    }
    const timespec ms{0, 1000000};
    syscall(SYS_futex, reinterpret_cast<int*>(&r->tail), FUTEX_WAIT_PRIVATE,
            static_cast<int>(static_cast<uint32_t>(tail)), &ms, nullptr, 0);
  }
  r->waiting.store(0, std::memory_order_relaxed);
  r->seen_tail = tail;
  return true;
}

// A full ring (Push): a stack's record is dropped (no event is lost with
// it); an event waits for room (WaitForRoom), and is put in with the time
// it was passed, followed by the wait as a pause (points_format.h: a
// stack's record with id 0 and no event before it), which the reader takes
// out of the thread's later times. If no room came, it is lost (counted).
// Push's own arguments only, so that Push's call is a jump and the push
// itself saves no register.
__attribute__((noinline, cold)) uint64_t PushWhenFull(uint64_t tsc, uint64_t site, int64_t value,
                                                      uint32_t kind) {
  Ring* r = t_ring;
  if (kind == kStackKind) return 0;
  const uint64_t from = __rdtsc();
  if (!WaitForRoom(r, r->head.load(std::memory_order_relaxed))) return Full(r, kind);
  const uint64_t pushed = Push(tsc != 0 ? tsc : from, site, value, kind);
  if (pushed != 0) {
    Push(from, 0, static_cast<int64_t>((__rdtsc() - from) << 8), kStackKind);
  }
  return pushed;
}

uint64_t Push(uint64_t tsc, uint64_t site, int64_t value, uint32_t kind) {
  Ring* r = t_ring;
  if (__builtin_expect(r == nullptr, 0)) return PushFirst(tsc, site, value, kind);
  uint64_t head = r->head.load(std::memory_order_relaxed);
  do {
    if (__builtin_expect(head - r->seen_tail >= kRingEvents, 0)) {
      r->seen_tail = r->tail.load(std::memory_order_acquire);
      if (head - r->seen_tail >= kRingEvents) {
        return PushWhenFull(tsc, site, value, kind);
      }
    }
  } while (__builtin_expect(!Claim(&r->head, &head), 0));
  Event& e = r->ev[head & (kRingEvents - 1)];
  e.tsc = tsc != 0 ? tsc : __rdtsc();  // after the ring is made: its making is not the point's
  e.value = value;
  __atomic_store_n(&e.site_kind, site | (kind & 3) | WholeMark(head), __ATOMIC_RELEASE);
  if (__builtin_expect(((head + 1) & (kNudgeEvery - 1)) == 0, 0)) return Nudge(r, head + 1);
  return head + 1;
}

void WakeWaiting(Ring* r) {
  if (r->waiting.load(std::memory_order_seq_cst) != 0) {
    syscall(SYS_futex, reinterpret_cast<int*>(&r->tail), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
            0);
  }
}

void FreeIfEnded(Ring* r, uint64_t tail) {
  if (r->state.load(std::memory_order_acquire) == kRingEnded &&
      r->head.load(std::memory_order_acquire) == tail) {
    g_rings_ended.fetch_sub(1, std::memory_order_relaxed);
    r->state.store(kRingFree, std::memory_order_release);
  }
}

void FreeRingsAfterFork() {
  for (Ring* r = g_rings.load(); r != nullptr; r = r->next) r->state.store(kRingFree);
  g_rings_ended.store(0);
  t_ring = nullptr;
}

void CountLost() {
  if (Ring* r = t_ring; r != nullptr) r->lost.fetch_add(1, std::memory_order_relaxed);
}

void PushStack(uint64_t tsc, uint32_t id, uint64_t pause, uint64_t event_slot) {
  // How far back the event is, read as the slot is taken: a signal
  // handler's points since the event's push lie between the two.
  const uint64_t back = t_ring->head.load(std::memory_order_relaxed) - event_slot;
  if (back <= kMaxStackBack)
    Push(tsc, uint64_t{id} << 3, static_cast<int64_t>(pause << 8 | back), kStackKind);
}

}  // namespace fieldprof::points

// A call of a function placed by configuration (`fieldprof points record
// --at`): the runtime hands its entry and exit ticks (the TSC), its site
// (tag, name, laid out as fieldprof_point_site) and its caller's return
// address from the call's exit. One begin and one end event, as an
// FP_SCOPE makes; with --stacks, the begin's stack too.
extern "C" __attribute__((visibility("default"))) void fieldprof_point_span(
    const fieldprof_point_site* site, uint64_t tsc_begin, uint64_t tsc_end, const void* caller) {
  namespace pf = fieldprof::points;
  if (!pf::g_recording.load(std::memory_order_relaxed) || pf::t_own != 0) return;
  const auto id = reinterpret_cast<uint64_t>(site);
  if (pf::g_span_with_stack != nullptr && caller != nullptr) {
    // The unwinder and libc use vector registers; the call's results are
    // in them (a long double in %st0): the runtime's slow paths do the same.
    alignas(16) unsigned char fpu[512];
    __asm__ __volatile__("fxsave64 %0" : "=m"(fpu));
    pf::g_span_with_stack(id, tsc_begin, tsc_end, caller);
    __asm__ __volatile__("fxrstor64 %0" : : "m"(fpu));
    return;
  }
  pf::Push(tsc_begin, id, 0, 1);
  pf::Push(tsc_end, id, 0, 2);
}
