// The points recorder's per-thread rings (recorder.cc drains them): one
// writer, the thread; one reader, the drain thread; no lock. The writing
// side is in ring.cc, built without floating-point or vector registers:
// the runtime calls fieldprof_point_span from a measured call's exit,
// while that call's results are live in them.
#ifndef FIELDPROF_TOOLS_LOCAL_POINTS_RING_H_
#define FIELDPROF_TOOLS_LOCAL_POINTS_RING_H_

#include <atomic>
#include <cstdint>

#include "common/points_format.h"

namespace fieldprof::local::points {

inline constexpr uint32_t kRingEvents = 1u << 16;  // 65,536 events, 2 MiB (touched as used)

struct Ring {
  // The thread's cache line: what it writes, and the drain's tail as it
  // last read it (read again only when the ring looks full, so a push
  // never touches the line the drain writes).
  std::atomic<uint64_t> head{0};  // events written
  uint64_t seen_tail = 0;
  std::atomic<uint64_t> lost{0};
  uint32_t tid = 0;
  Ring* next = nullptr;
  alignas(64) std::atomic<uint64_t> tail{0};  // the drain's: events taken
  alignas(64) Event ev[kRingEvents];
};

extern std::atomic<Ring*> g_rings;     // every thread's, newest first
extern std::atomic<bool> g_recording;  // events are taken
extern __thread Ring* t_ring __attribute__((tls_model("initial-exec")));

// Puts one event into the calling thread's ring (made at its first); a
// full ring counts it as lost (but for a stack's, kStackKind) and says
// false. `tsc` 0: now.
bool Push(uint64_t tsc, uint64_t site, int64_t value, uint32_t kind);

}  // namespace fieldprof::local::points

#endif  // FIELDPROF_TOOLS_LOCAL_POINTS_RING_H_
