// Each recording thread's ring of stacks: the samples its handler takes
// and the blocked calls its wrappers see, drained by the writer into the
// raw file.
//
// One ring a thread, with one writer (the thread: its handler never runs
// inside its own record, see t_in_handler) and one reader (the writer
// thread, or the process's one thread): no atomic read-modify-write on the
// way in, and no cache line shared with another thread's records. It was
// first 8,192 fixed 1 KiB slots shared by all threads, then one ring of
// bytes shared by all: each record touched a slot cold in cache and TLB,
// or lines the other CPU had just written, most of what a blocked call
// cost us on this VM. A record is a RecordHead and the raw file's body
// after it (a SampleHeader or BlockedHeader, then the stack), as long as
// its stack needs. It never wraps: one that crosses the ring's end runs
// on into kMaxRecord spare bytes past it, which the reader reads in one
// piece. The thread publishes its head after a record is whole.
#include <sys/mman.h>

#include <atomic>
#include <cstring>

#include "agent/preload/sampler/sampler.h"
#include "common/stacks/sampler_format.h"

namespace fieldprof::sampler {
namespace {

// 256 KiB a thread: at 40,000 blocked calls a second (a ping-pong on this
// VM) about 20 ms of records, as long as the writer sleeps when idle.
constexpr uint64_t kRingBytes = 256 << 10;
static_assert((kRingBytes & (kRingBytes - 1)) == 0);
constexpr int kMaxRings = 1024;

struct RecordHead {
  uint32_t size;  // of the whole record, a multiple of 8
  char kind;      // the raw file's tag
  char reserved[3];
};
static_assert(sizeof(RecordHead) == 8);
static_assert(sizeof(raw::SampleHeader) % 8 == 0 && sizeof(raw::BlockedHeader) % 8 == 0);
constexpr size_t kMaxRecord =
    sizeof(RecordHead) + sizeof(raw::BlockedHeader) + 8 * static_cast<size_t>(raw::kMaxFrames);
constexpr size_t kMapBytes = kRingBytes + ((kMaxRecord + 4095) & ~size_t{4095});

enum RingState : int { kFree = 0, kClaimed, kActive, kClosing };

struct StackRing {
  std::atomic<int> state{kFree};
  char* bytes = nullptr;
  alignas(64) std::atomic<uint64_t> head{0};  // bytes ever written: the thread's
  alignas(64) std::atomic<uint64_t> tail{0};  // bytes ever read: the reader's
};

StackRing g_rings[kMaxRings];
std::atomic<int> g_rings_used{0};    // no ring at or past this index was ever claimed
std::atomic<uint64_t> g_dropped{0};  // records of a full ring, or of a thread without one

thread_local StackRing* t_ring = nullptr;

void Release(StackRing* r) {
  if (r->bytes != nullptr) munmap(r->bytes, kMapBytes);
  r->bytes = nullptr;
  r->state.store(kFree, std::memory_order_release);
}

// Copies one ring's new records to the raw file; returns how full it was.
double DrainRing(StackRing& r) {
  uint64_t tail = r.tail.load(std::memory_order_relaxed);
  const uint64_t head = r.head.load(std::memory_order_acquire);
  const double fill = static_cast<double>(head - tail) / static_cast<double>(kRingBytes);
  while (tail < head) {
    const char* rec = r.bytes + tail % kRingBytes;
    RecordHead h;
    memcpy(&h, rec, sizeof h);
    WriteRecord(h.kind, rec + sizeof h, h.size - sizeof h);
    tail += h.size;
  }
  r.tail.store(tail, std::memory_order_release);
  return fill;
}

}  // namespace

bool OpenStackRing() {
  if (t_ring != nullptr) return true;
  void* map = mmap(nullptr, kMapBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  StackRing* r = nullptr;
  for (int i = 0; map != MAP_FAILED && i < kMaxRings && r == nullptr; ++i) {
    int want = kFree;
    if (g_rings[i].state.compare_exchange_strong(want, kClaimed)) {
      r = &g_rings[i];
      int used = g_rings_used.load();
      while (used < i + 1 && !g_rings_used.compare_exchange_weak(used, i + 1)) {
      }
    }
  }
  if (r == nullptr) {  // out of memory, or more threads than rings: its records are dropped
    if (map != MAP_FAILED) munmap(map, kMapBytes);
    return false;
  }
  r->bytes = static_cast<char*>(map);
  r->head.store(0, std::memory_order_relaxed);
  r->tail.store(0, std::memory_order_relaxed);
  r->state.store(kActive, std::memory_order_release);
  t_ring = r;
  return true;
}

void CloseStackRing() {
  StackRing* r = t_ring;
  if (r == nullptr) return;
  t_ring = nullptr;  // a signal from here on records nothing
  std::atomic_signal_fence(std::memory_order_seq_cst);
  r->state.store(kClosing, std::memory_order_release);  // the reader drains and frees it
}

bool PutRecord(char tag, const void* head, size_t head_bytes, const uint64_t* ips, uint16_t depth) {
  StackRing* r = t_ring;
  if (r == nullptr) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const auto size = static_cast<uint32_t>(sizeof(RecordHead) + head_bytes + 8u * depth);
  const uint64_t at = r->head.load(std::memory_order_relaxed);
  if (at + size - r->tail.load(std::memory_order_acquire) > kRingBytes) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);  // the reader is behind
    return false;
  }
  char* rec = r->bytes + at % kRingBytes;
  const RecordHead h{size, tag, {}};
  memcpy(rec, &h, sizeof h);
  memcpy(rec + sizeof h, head, head_bytes);
  memcpy(rec + sizeof h + head_bytes, ips, 8u * depth);
  r->head.store(at + size, std::memory_order_release);  // whole: the reader may take it
  return true;
}

bool DrainStackRings() {
  bool busy = false;
  const int used = g_rings_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    StackRing& r = g_rings[i];
    const int s = r.state.load(std::memory_order_acquire);
    if (s != kActive && s != kClosing) continue;
    busy |= DrainRing(r) > 0.25;
    if (s == kClosing) Release(&r);
  }
  return busy;
}

void ForgetStackRingsAfterFork() {
  // Only the forking thread goes on in the child: the others' rings are
  // copies nobody writes. Its own starts empty (the parent drains it).
  for (int i = 0; i < g_rings_used.load(); ++i) {
    StackRing& r = g_rings[i];
    if (&r == t_ring || r.state.load() == kFree) continue;
    Release(&r);
  }
  if (t_ring != nullptr) {
    t_ring->head.store(0);
    t_ring->tail.store(0);
  }
  g_dropped = 0;  // the parent's, in its own trailer
}

uint64_t StackRecordsDropped() { return g_dropped.load(); }

}  // namespace fieldprof::sampler
