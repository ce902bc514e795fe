// A spin of `ns` nanoseconds of CLOCK_MONOTONIC, for the clock tests: the
// test library's measured fp_test_spin_ns and the test program's unmeasured
// twin are this same code. Returns the span between its first and last
// reading.
#ifndef FIELDPROF_TESTS_AGENT_PRELOAD_RUNTIME_SPIN_H_
#define FIELDPROF_TESTS_AGENT_PRELOAD_RUNTIME_SPIN_H_

#include <time.h>

inline long SpinNs(long ns) {
  timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long d;
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
    d = (t.tv_sec - t0.tv_sec) * 1000000000 + (t.tv_nsec - t0.tv_nsec);
  } while (d < ns);
  return d;
}

#endif  // FIELDPROF_TESTS_AGENT_PRELOAD_RUNTIME_SPIN_H_
