// A second test library, opened with dlopen and closed again while the
// runtime measures it.
#include <cstdlib>

#include "tests/support/push_rbx_function.h"

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
// (tests/agent/preload/points/points_test.cc).
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

// A static function the library calls only through a pointer: timed
// only where its entry is moved (a re-aimed call site never sees it).
extern "C" {
__attribute__((noinline)) static long fp_test2_callback(long x) {
  __asm__ __volatile__("" : "+r"(x));
  return x ^ 5;
}
}
static long (*volatile g_callback)(long) = fp_test2_callback;

// Two functions whose first instruction is one byte (push %rbx), written in
// assembly so that no compiler changes it: no thread may be stopped inside
// a jump written over it, so with a second thread running their entries
// stay and the calls to them are re-aimed. fp_test2_pushy is hidden (the
// library calls it directly), fp_test2_pushy_export exported (the library
// calls it through its own PLT). Each returns x + 1.
FIELDPROF_PUSH_RBX_FUNCTION(fp_test2_pushy, ".hidden fp_test2_pushy\n", "lea 1(%rdi), %rbx");
FIELDPROF_PUSH_RBX_FUNCTION(fp_test2_pushy_export, "", "lea 1(%rdi), %rbx");
extern "C" __attribute__((visibility("hidden"))) long fp_test2_pushy(long x);
extern "C" __attribute__((visibility("default"))) long fp_test2_pushy_export(long x);

extern "C" __attribute__((visibility("default"))) long fp_test2_outer(long n) {
  long s = 0;
  for (long i = 0; i < n; ++i) {
    s += fp_test2_inner(i) + fp_test2_twice(i) + g_callback(i) + fp_test2_pushy(i) +
         fp_test2_pushy_export(i);
  }
  return s;
}
