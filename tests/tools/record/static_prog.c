/* A statically linked program for tests/tools/record/record_test.cc: no
 * dynamic linker, so nothing preloaded runs in it. Spins a little and
 * exits with the status it is given (default 3), which `fieldprof record`
 * must pass on as its own. */
#include <stdlib.h>

int main(int argc, char** argv) {
  volatile unsigned long x = 0;
  for (unsigned long i = 0; i < 200000000; ++i) x += i;
  return argc > 1 ? atoi(argv[1]) : 3;
}
