// The points recorder's per-thread rings (agent/preload/points/ring.h) as units:
// threads push while a reader drains as the recorder's drain does (whole
// events only, tail moved, waiters woken); every event arrives once, in
// its thread's order, or is counted lost. Without a drain a full ring
// loses what does not fit, and says so.
#include "agent/preload/points/ring.h"

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace fieldprof::points {
namespace {

constexpr uint64_t kSite = 0x1000;  // 8-aligned, as a point's site is

struct Received {
  uint64_t events = 0;
  int64_t last = -1;
  bool in_order = true;
};

// One pass of the reader over every ring: the whole events from each
// ring's tail, then the tail moved on.
void DrainOnce(std::map<uint32_t, Received>* got) {
  for (Ring* r = g_rings.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    const uint64_t head = r->head.load(std::memory_order_acquire);
    uint64_t tail = r->tail.load(std::memory_order_relaxed);
    while (tail != head) {
      const Event& e = r->ev[tail & (kRingEvents - 1)];
      const uint64_t site_kind = __atomic_load_n(&e.site_kind, __ATOMIC_ACQUIRE);
      if (!IsWhole(site_kind, tail)) break;  // its push is not done yet
      ++tail;
      // A pause (the writer waited for room): a stack record, no event.
      if ((site_kind & 3) == kStackKind) continue;
      Received& g = (*got)[r->tid];
      g.in_order &= e.value > g.last;
      g.last = e.value;
      ++g.events;
    }
    r->tail.store(tail, std::memory_order_seq_cst);
    WakeWaiting(r);
  }
}

TEST(PointsRingTest, EveryEventArrivesOnceInItsThreadsOrderOrIsCountedLost) {
  g_recording.store(true);
  g_drain_running.store(true);
  constexpr int kThreads = 4;
  constexpr int64_t kEach = 3 * kRingEvents;  // each ring fills three times over
  std::atomic<int> done{0};
  std::map<uint32_t, Received> got;
  std::thread reader([&] {
    t_own = 1;
    while (done.load() < kThreads) DrainOnce(&got);
    DrainOnce(&got);
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kThreads; ++w) {
    writers.emplace_back([&] {
      for (int64_t i = 0; i < kEach; ++i) Push(0, kSite, i, 0);
      done.fetch_add(1);
    });
  }
  for (auto& t : writers) t.join();
  reader.join();
  int rings = 0;
  for (Ring* r = g_rings.load(); r != nullptr; r = r->next) {
    ++rings;
    const Received& g = got[r->tid];
    EXPECT_TRUE(g.in_order) << "thread " << r->tid;
    EXPECT_EQ(g.events + r->lost.load(), static_cast<uint64_t>(kEach)) << "thread " << r->tid;
  }
  EXPECT_EQ(rings, kThreads);
  g_drain_running.store(false);
}

TEST(PointsRingTest, WithoutADrainAFullRingLosesWhatDoesNotFitAndCountsIt) {
  g_recording.store(true);
  g_drain_running.store(false);
  std::thread writer([] {
    uint64_t kept = 0, refused = 0;
    for (uint64_t i = 0; i < kRingEvents + 100; ++i) {
      (Push(0, kSite, static_cast<int64_t>(i), 1) != 0 ? kept : refused) += 1;
    }
    EXPECT_EQ(kept, kRingEvents);
    EXPECT_EQ(refused, 100u);
    EXPECT_EQ(t_ring->lost.load(), 100u);
    // What it kept is whole, in order.
    for (uint64_t n = 0; n < kRingEvents; ++n) {
      const Event& e = t_ring->ev[n & (kRingEvents - 1)];
      ASSERT_TRUE(IsWhole(e.site_kind, n)) << n;
      ASSERT_EQ(e.value, static_cast<int64_t>(n));
      ASSERT_EQ(e.site_kind & kSiteKindBits, kSite | 1);
    }
  });
  writer.join();
}

}  // namespace
}  // namespace fieldprof::points
