// A program with points in two phases (tests/agent/points/points_test.cc):
//   fieldprof_pointsprog N [--arm|--exec|--bad]
// runs N rounds of a "load" point, a "parse" scope and a point with a
// value, and prints one result line. --arm raises the module's semaphore
// itself first, as a tracer or the runtime would. --exec then execs
// /bin/true (tests/tools/local/points_record_test.cc). --bad also makes
// points whose tag is a path or whose name is free text, which the field
// refuses.
//   fieldprof_pointsprog N --until FILE
// runs N rounds every 20 ms until FILE exists (a program that runs on),
// and prints how many rounds it ran.
#include <fieldprof/points.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

unsigned long Parse(unsigned long x) {
  FP_SCOPE("startup", "parse");
  for (int i = 0; i < 100; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (argc > 3 && !std::strcmp(argv[2], "--until")) {
    const long n = std::atol(argv[1]);
    unsigned long sum = 0;
    long rounds = 0;
    while (access(argv[3], F_OK) != 0) {
      for (long i = 0; i < n; ++i, ++rounds) {
        FP_POINT("startup", "load");
        sum += Parse(static_cast<unsigned long>(i)) & 0xff;
        FP_POINT_V("startup", "parsed", i);
      }
      const timespec pause{0, 20 * 1000 * 1000};
      nanosleep(&pause, nullptr);
    }
    std::printf("sum %lu rounds %ld\n", sum, rounds);
    return 0;
  }
  if (argc > 2 && !std::strcmp(argv[2], "--arm")) fieldprof_point_semaphore = 1;
  const long n = std::atol(argv[1]);
  const bool bad = argc > 2 && !std::strcmp(argv[2], "--bad");
  unsigned long sum = 0;
  for (long i = 0; i < n; ++i) {
    FP_POINT("startup", "load");
    sum += Parse(static_cast<unsigned long>(i)) & 0xff;
    FP_POINT_V("startup", "parsed", i);
    if (bad) {
      FP_POINT("/home/alice/notes", "load");
      FP_POINT("startup2", "alice wrote this");
    }
  }
  std::printf("sum %lu\n", sum);
  if (argc > 2 && !std::strcmp(argv[2], "--exec")) {
    std::fflush(stdout);
    execl("/bin/true", "true", static_cast<char*>(nullptr));
    return 127;
  }
  return 0;
}
