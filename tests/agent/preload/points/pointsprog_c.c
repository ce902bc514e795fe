/* The C side of tests/agent/preload/points/points_test.cc:
 *   fieldprof_pointsprog_c N [--arm]
 * N rounds of a begin/end pair around some work and a point, one result
 * line; --arm raises the semaphore first. */
#include <fieldprof/points.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (argc > 2 && !strcmp(argv[2], "--arm")) fieldprof_point_semaphore = 1;
  long n = atol(argv[1]);
  unsigned long sum = 0;
  for (long i = 0; i < n; ++i) {
    FP_BEGIN("request", "handle");
    sum += (unsigned long)(i * i) & 0xff;
    FP_END("request", "handle");
    FP_POINT_V("request", "done", i);
  }
  printf("sum %lu\n", sum);
  return 0;
}
