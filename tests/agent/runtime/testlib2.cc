// A second test library, opened with dlopen and closed again while the
// runtime measures it.
#include <cstdlib>

extern "C" __attribute__((visibility("default"))) long fp_test2_work(long n) {
  char* p = static_cast<char*>(malloc(static_cast<size_t>(n)));
  for (long i = 0; i < n; ++i) p[i] = static_cast<char>(i);
  long s = 0;
  for (long i = 0; i < n; ++i) s += p[i];
  free(p);
  return s;
}

// Calls back into the program that opened it (the program's own export,
// as a Python extension calls into python3).
extern "C" long fp_test_main_export(long n);

extern "C" __attribute__((visibility("default"))) long fp_test2_call_main(long n) {
  long s = 0;
  for (long i = 0; i < n; ++i) s += fp_test_main_export(i);
  return s;
}

// A function only the library itself calls, directly (static: its name is
// in .symtab only), for points that move a function's entry
// (tests/agent/points/points_test.cc).
extern "C" {
__attribute__((noinline)) static long fp_test2_inner(long x) {
  for (int i = 0; i < 50; ++i) x = x * 6364136223846793005l + 1442695040888963407l;
  __asm__ __volatile__("" : "+r"(x));
  return x & 0xff;
}
}

// An exported function the library itself calls, through its own PLT (it
// could be interposed: GCC's default for -fPIC code).
extern "C" __attribute__((visibility("default"), noinline)) long fp_test2_twice(long x) {
  __asm__ __volatile__("" : "+r"(x));
  return 2 * x;
}

extern "C" __attribute__((visibility("default"))) long fp_test2_outer(long n) {
  long s = 0;
  for (long i = 0; i < n; ++i) s += fp_test2_inner(i) + fp_test2_twice(i);
  return s;
}
