// The lab scenario's upper library (tests/tools/lab/lab_test.cc): APIs that
// call into the lower one, so the census sees them nested.
#include <cstdlib>
#include <cstring>

#define LAB_API extern "C" __attribute__((visibility("default")))

extern "C" long labb_alloc_block(long n);
extern "C" unsigned long labb_hash(unsigned long x);
extern "C" long labb_stage(long n);

// Allocates 24 bytes itself, and 1000 in labb_alloc_block: 1024 inclusive,
// 24 exclusive, 2 allocations.
LAB_API long lab_parse(long x) {
  char* own = static_cast<char*>(malloc(24));
  own[0] = static_cast<char>(x);
  __asm__ __volatile__("" : : "r"(own) : "memory");
  const long r = labb_alloc_block(1000) +
                 static_cast<long>(labb_hash(static_cast<unsigned long>(x)) & 7) + own[0];
  free(own);
  return r;
}

LAB_API long lab_render(const char* s) { return static_cast<long>(labb_hash(strlen(s)) & 15); }

// lab_pipeline -> labb_stage -> strtol: three APIs on one stack.
LAB_API long lab_pipeline(long n) { return labb_stage(n) + 1; }

// A cache that keeps its last 200 blocks of 64 bytes: each call allocates
// one and frees the oldest, so after N calls N - 200 are freed and 200
// stay. The leak `fieldprof lab --tree` and `fieldprof tree leaks` find.
LAB_API long lab_remember(long x) {
  static void* kept[200];
  static long n;
  void*& slot = kept[n++ % 200];
  free(slot);
  slot = malloc(64);
  static_cast<char*>(slot)[0] = static_cast<char>(x);
  return static_cast<char*>(slot)[0];
}
