// A library with known per-call costs, measured by the runtime in tests.
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <stdexcept>

#include "tests/agent/preload/runtime/spin.h"

#define FP_TEST_API __attribute__((visibility("default")))

extern "C" {

// Allocates exactly n bytes in one malloc (and frees them).
__attribute__((visibility("default"))) void fp_test_alloc(size_t n) {
  void* p = malloc(n);
  __asm__ __volatile__("" : : "r"(p) : "memory");
  free(p);
}

// Sleeps about `us` microseconds.
__attribute__((visibility("default"))) void fp_test_sleep_us(long us) {
  timespec ts{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

// Writes n bytes to fd.
__attribute__((visibility("default"))) long fp_test_write(int fd, long n) {
  static char buf[65536];
  return write(fd, buf, static_cast<size_t>(n));
}

// Returns the sum of its double arguments (floating point through the stub).
__attribute__((visibility("default"))) double fp_test_fsum(double a, double b, double c, double d,
                                                           double e, double f, double g2, double h,
                                                           double i) {
  return a + b + c + d + e + f + g2 + h + i;
}

// A long double result comes back in the x87 register %st0.
__attribute__((visibility("default"))) long double fp_test_lmul(long double a, long double b) {
  return a * b;
}

// Recursion through the caller's PLT: cb calls fp_test_recurse(n - 1, cb).
FP_TEST_API long fp_test_recurse(long n, long (*cb)(long)) { return n <= 0 ? 0 : n + cb(n); }

// Varargs: n doubles (more than fit in registers go on the stack; %al says
// how many vector registers are used).
FP_TEST_API double fp_test_vsum(int n, ...) {
  va_list ap;
  va_start(ap, n);
  double s = 0;
  for (int i = 0; i < n; ++i) s += va_arg(ap, double);
  va_end(ap);
  return s;
}

// Ten integer arguments: four on the stack.
FP_TEST_API long fp_test_many(long a, long b, long c, long d, long e, long f, long g, long h,
                              long i, long j) {
  return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j;
}

// Returned through a hidden pointer (memory class).
struct FpBig {
  long v[6];
};
FP_TEST_API FpBig fp_test_big(long x) {
  FpBig b;
  for (int i = 0; i < 6; ++i) b.v[i] = x * (i + 1);
  return b;
}

// Returned in rax + xmm0.
struct FpPair {
  long n;
  double d;
};
FP_TEST_API FpPair fp_test_pair(long x) { return FpPair{x * 3, static_cast<double>(x) / 4}; }

// Calls back (for longjmp and fork inside a measured call).
FP_TEST_API void fp_test_callback(void (*cb)(void*), void* arg) { cb(arg); }

// Busy for about `us` microseconds (a signal may arrive inside).
FP_TEST_API void fp_test_spin_us(long us) {
  timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

// Spins for `ns` nanoseconds of CLOCK_MONOTONIC, the clock the runtime's
// durations must agree with, and keeps the span between its first and last
// reading (the first 2^17 calls): what each call really took, by a clock
// that does not depend on the TSC's rate.
static long spin_spans[1 << 17];
static unsigned long spin_calls;
FP_TEST_API void fp_test_spin_ns(long ns) {
  const long d = SpinNs(ns);
  if (spin_calls < sizeof spin_spans / sizeof spin_spans[0]) spin_spans[spin_calls] = d;
  ++spin_calls;
}
// The spans kept so far and their count. Called before the first spin too:
// it binds clock_gettime and faults in the vDSO's data, which would
// otherwise fall inside the first measured call before its first reading.
// (Not in a constructor: the runtime's start must stay the process's first
// use of the vDSO, as it is in most programs.)
FP_TEST_API const long* fp_test_spin_truth(unsigned long* calls) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  *calls = spin_calls;
  return spin_spans;
}

}  // extern "C"

// Throws through the measured call.
__attribute__((visibility("default"))) void fp_test_throw(int v) {
  if (v > 0) throw std::runtime_error("thrown through a measured call");
}
