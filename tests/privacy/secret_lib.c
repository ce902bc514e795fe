/* A library with secret names (the privacy suite, privacy_test.cc): its
 * module, its functions and its build are nobody's package. Compiled by the
 * test where each case puts it. */
#include <stdlib.h>

volatile unsigned long zq_secret_sink;

/* CPU time inside the library, in frames of its own. */
__attribute__((noinline)) unsigned long zq_secret_inner(unsigned long x) {
  for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  return x;
}

unsigned long zq_secret_work(int rounds) {
  unsigned long x = 1;
  for (int r = 0; r < rounds; ++r) x ^= zq_secret_inner(x + (unsigned long)r);
  zq_secret_sink = x;
  return x;
}

/* libc's qsort calling back into the library: libc's stacks end here. */
static int zq_secret_cmp(const void* a, const void* b) {
  unsigned long x = zq_secret_inner(*(const unsigned*)a % 7);
  zq_secret_sink += x;
  return (int)(*(const unsigned*)a % 1000) - (int)(*(const unsigned*)b % 1000);
}

void zq_secret_sort(int n) {
  unsigned* v = malloc(sizeof(unsigned) * (size_t)n);
  for (int i = 0; i < n; ++i) v[i] = (unsigned)i * 2654435761u;
  qsort(v, (size_t)n, sizeof *v, zq_secret_cmp);
  free(v);
}
