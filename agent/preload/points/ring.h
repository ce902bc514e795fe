// The points recorder's per-thread rings (drain.cc drains them): one
// writer, the thread; one reader, the drain thread; no lock. The writing
// side is in ring.cc, built without floating-point or vector registers:
// the runtime calls fieldprof_point_span from a measured call's exit,
// while that call's results are live in them.
#ifndef FIELDPROF_AGENT_PRELOAD_POINTS_RING_H_
#define FIELDPROF_AGENT_PRELOAD_POINTS_RING_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "common/points/points_format.h"

namespace fieldprof::points {

// 65,536 events a ring, 1.5 MiB (touched as used).
inline constexpr uint32_t kRingShift = 16;
inline constexpr uint32_t kRingEvents = 1u << kRingShift;

// A push first claims its slot (the head moves on), then writes the event,
// its site_kind last, with this mark in its top 8 bits (the site's address
// is under 2^56, a stack's id far less): so a signal handler's points in
// the middle of its thread's push take the slots after it, and the drain,
// which reads the head, takes no event before it is whole. The mark of the
// event counted `n` from the ring's start is the ring's round, inverted:
// neither the zeros the ring starts with nor an earlier round's event
// (left in a slot whose push was cut off for good) pass for it.
inline constexpr uint32_t kMarkShift = 56;
inline uint64_t WholeMark(uint64_t n) { return ~n >> kRingShift << kMarkShift; }
// Whether an event's site_kind carries `mark` (WholeMark's, for its count).
inline bool HasMark(uint64_t site_kind, uint64_t mark) {
  return ((site_kind ^ mark) >> kMarkShift) == 0;
}
inline bool IsWhole(uint64_t site_kind, uint64_t n) { return HasMark(site_kind, WholeMark(n)); }
inline constexpr uint64_t kSiteKindBits = (uint64_t{1} << kMarkShift) - 1;

struct Ring {
  // The thread's cache line: what it writes, and the drain's tail as it
  // last read it (read again only when the ring looks full, so a push
  // never touches the line the drain writes).
  std::atomic<uint64_t> head{0};  // events written
  uint64_t seen_tail = 0;
  // The tail at which the thread last waited for room in vain (WaitForRoom):
  // until the drain moves on from it, a full ring loses its events at once.
  uint64_t gave_up_at = ~0ull;
  std::atomic<uint64_t> lost{0};
  std::atomic<uint64_t> stackless{0};  // events whose stack its budget had no time for
  uint32_t tid = 0;                    // the owner's; written before its first event in the ring
  Ring* next = nullptr;
  // kRingOwned while a thread writes it; kRingEnded once that thread has
  // ended (its key's destructor); kRingFree once the drain has taken all
  // it holds, for the next thread that starts to take (NewRing). A program
  // that starts and ends threads by the thousand keeps as many rings as it
  // has threads at once, and the drain walks no more.
  std::atomic<int> state{0};
  // The drain's: events taken, and the slot it waits on to be whole (a
  // push cut off by a signal handler that never returned, or stopped):
  // since when, the head then, and below which it waits no more.
  alignas(64) std::atomic<uint64_t> tail{0};
  std::atomic<int> waiting{0};  // 1: the thread waits for room (a futex on tail's low word)
  uint64_t waits_on = ~0ull;
  uint64_t waits_since_ns = 0;
  uint64_t head_at_wait = 0;
  uint64_t passable_below = 0;
  uint64_t never_whole = 0;  // slots passed by, counted as lost
  alignas(64) Event ev[kRingEvents];
};

inline constexpr int kRingOwned = 0, kRingEnded = 1, kRingFree = 2;

extern std::atomic<Ring*> g_rings;     // every thread's, newest first
extern std::atomic<bool> g_recording;  // events are taken
// A drain thread runs (started, not yet told to stop): a thread whose ring
// is full waits for it to make room, up to kWaitForRoomNs, rather than
// losing the event. The wait is recorded as a pause (a stack record with
// id 0 and no event: points_format.h) and taken out of the thread's times.
extern std::atomic<bool> g_drain_running;
inline constexpr uint64_t kWaitForRoomNs = 100'000'000;
extern uint64_t g_ticks_per_ms;  // the TSC's, as the command measured it (else a guess: 3 GHz)
// The word the drain thread sleeps on (a futex wait with a timeout): 1
// when it is to stop. A thread whose ring has filled a quarter since the
// drain last took from it wakes it early, at every kNudgeEvery events:
// a program quiet for a while (the drain sleeping long) and then busy
// would otherwise fill its ring before the drain woke.
extern std::atomic<int> g_drain_word;
inline constexpr uint32_t kNudgeEvery = kRingEvents / 4;
extern __thread Ring* t_ring __attribute__((tls_model("initial-exec")));
// Non-zero while the thread does the recorder's own work (the drain thread
// always): the calls it makes to functions placed with --at are not the
// program's, and are not recorded.
extern __thread int t_own __attribute__((tls_model("initial-exec")));
// The recorder's own work on a thread of the program, for its span: the
// functions placed with --at that it calls (malloc, say) are not recorded
// as the program's. Nor is it cancelled halfway: the library is built
// without C++ exceptions, so a cancellation inside it (a write to the file
// is a cancellation point) would leave its locks held.
struct OwnWork {
  OwnWork() {
    ++t_own;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
  }
  ~OwnWork() {
    pthread_setcancelstate(cancel_state, nullptr);
    --t_own;
  }
  int cancel_state = 0;
  OwnWork(const OwnWork&) = delete;
  OwnWork& operator=(const OwnWork&) = delete;
};

// Puts one event into the calling thread's ring (made at its first) and
// returns its slot + 1. A full ring waits for the drain (g_drain_running);
// if there is still no room, or no drain, it counts the event as lost (but
// for a stack's, kStackKind, which never waits) and returns 0. `tsc` 0:
// now.
uint64_t Push(uint64_t tsc, uint64_t site, int64_t value, uint32_t kind);

// Counts one of the calling thread's events as lost.
void CountLost();

// The drain, after taking events from `r` and moving its tail: the thread
// waiting for room, if it does, is woken.
void WakeWaiting(Ring* r);

// The drain, after taking every event of `r` that it holds: a ring whose
// thread has ended goes free (ring.h, Ring::state). The next thread
// writes on from where its events stopped: only the ring's round tells an
// event whole, so every slot must have been written in each round before.
void FreeIfEnded(Ring* r, uint64_t tail);
// Rings whose thread has ended, not yet freed: at every kWakeForEnded of
// them, the thread that ends wakes the drain (threads that start and end
// faster than it wakes would otherwise each take a ring of their own).
inline constexpr int kWakeForEnded = 16;

// A fork child: every ring goes free (the threads that wrote them are
// gone, and the forking thread takes one again at its next event).
void FreeRingsAfterFork();

// With --stacks (stacks.cc, set at start): a placed function's span,
// its begin with the stack from `caller` (the call's return address)
// outwards. Built with vector registers: ring.cc saves them around it.
extern void (*g_span_with_stack)(uint64_t site, uint64_t tsc_begin, uint64_t tsc_end,
                                 const void* caller);

// Puts the stack `id` of the thread's event at `event_slot` (Push's less
// one), which took `pause` ticks to take, into the ring (points_format.h,
// kind 3); nothing when other events pushed since leave it too far back.
void PushStack(uint64_t tsc, uint32_t id, uint64_t pause, uint64_t event_slot);

}  // namespace fieldprof::points

#endif  // FIELDPROF_AGENT_PRELOAD_POINTS_RING_H_
