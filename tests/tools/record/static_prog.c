/* A statically linked program for tests/tools/record/record_test.cc: no
 * dynamic linker, so nothing preloaded runs in it. Spins a little, sleeps
 * 1 ms SLEEPS times (default none), and exits with the status it is given
 * (default 3), which `fieldprof record` must pass on as its own.
 *
 *   static_prog [STATUS [SLEEPS]] */
#include <stdlib.h>
#include <time.h>

/* Not inlined: the sleeps' stacks are told by its frame. */
__attribute__((noinline)) void SleepOneMs(void) {
  struct timespec ms = {0, 1000000};
  nanosleep(&ms, NULL);
}

int main(int argc, char** argv) {
  volatile unsigned long x = 0;
  for (unsigned long i = 0; i < 200000000; ++i) x += i;
  const int sleeps = argc > 2 ? atoi(argv[2]) : 0;
  for (int i = 0; i < sleeps; ++i) SleepOneMs();
  return argc > 1 ? atoi(argv[1]) : 3;
}
