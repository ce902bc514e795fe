// The lab scenario's lower library (tests/tools/lab/lab_test.cc): leaves with
// known allocations and costs. FPL_SLOW=1 makes labb_checksum 3 times as
// slow.
#include <cstdlib>
#include <cstring>

#include "tests/agent/preload/runtime/spin.h"

#define LAB_API extern "C" __attribute__((visibility("default")))

// Allocates exactly n bytes in one malloc, and frees them.
LAB_API long labb_alloc_block(long n) {
  char* p = static_cast<char*>(malloc(static_cast<size_t>(n)));
  p[0] = 1;
  __asm__ __volatile__("" : : "r"(p) : "memory");
  const long r = p[0];
  free(p);
  return r;
}

// Integer work, no library call.
LAB_API unsigned long labb_hash(unsigned long x) {
  for (int i = 0; i < 200; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

// Calls strtol (libc): the third level of lab_pipeline's stack.
LAB_API long labb_stage(long n) {
  char buf[32];
  int len = 0;
  for (long v = (n & 0xffff) + 1; v > 0; v /= 10) buf[len++] = static_cast<char>('0' + v % 10);
  buf[len] = 0;
  return strtol(buf, nullptr, 10);
}

// A spin of 2000 ns, 6000 ns with FPL_SLOW=1 (read once).
LAB_API long labb_checksum() {
  static int slow = -1;
  if (slow < 0) slow = getenv("FPL_SLOW") != nullptr;
  return SpinNs(slow ? 6000 : 2000) > 0;
}
