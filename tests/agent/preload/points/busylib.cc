// A library whose own thread calls two of its functions in a tight loop
// from the moment it is loaded (tests/agent/preload/points/points_test.cc): the
// runtime moves busy_leaf's entry and re-aims the call to busy_push while
// the thread runs through them.
//   busy_join() -> rounds * 1000000 + rounds whose result was wrong
#include <pthread.h>

#include <atomic>

#include "tests/support/push_rbx_function.h"

// A function whose first instruction is one byte (push %rbx), in
// assembly so that no compiler changes it: its entry cannot be moved while
// the thread runs, so its call is re-aimed. Returns x * 3 + 1.
FIELDPROF_PUSH_RBX_FUNCTION(busy_push, ".hidden busy_push\n", "lea 1(%rdi,%rdi,2), %rbx");
extern "C" __attribute__((visibility("hidden"))) long busy_push(long x);

namespace {

std::atomic<bool> g_stop{false};
std::atomic<long> g_rounds{0}, g_wrong{0};
pthread_t g_thread;

extern "C" {
__attribute__((noinline)) static long busy_leaf(long x) {
  for (int i = 0; i < 8; ++i) x = x * 6364136223846793005l + 1442695040888963407l;
  __asm__ __volatile__("" : "+r"(x));
  return x & 0xff;
}
}

// Keeps its sum and counter in registers across the calls, as GCC does
// knowing which registers busy_leaf leaves alone.
__attribute__((noinline)) long Round() {
  long s = 0;
  for (long i = 0; i < 100; ++i) s += busy_leaf(i) + (busy_push(i) & 3);
  return s;
}

void* Loop(void*) {
  const long want = Round();
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (Round() != want) g_wrong.fetch_add(1);
    g_rounds.fetch_add(1);
  }
  return nullptr;
}

// Returns once the loop is going, so that it runs through its call from
// before the runtime first looks at this library until well after.
__attribute__((constructor)) void Start() {
  pthread_create(&g_thread, nullptr, Loop, nullptr);
  while (g_rounds.load() < 50) {
  }
}

}  // namespace

// Lets the loop run on until it has done `more` rounds after this call
// began, then stops it.
extern "C" __attribute__((visibility("default"))) long busy_join(long more) {
  const long until = g_rounds.load() + more;
  while (g_rounds.load() < until) {
  }
  g_stop = true;
  pthread_join(g_thread, nullptr);
  return g_rounds.load() * 1000000 + g_wrong.load();
}
