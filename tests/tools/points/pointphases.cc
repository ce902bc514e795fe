// A program with points in two phases (tests/tools/points/points_record_test.cc):
//   fieldprof_pointphases COUNTER_FILE SLOW_RUN [PARSE_FACTOR]
// Adds one to the run number in COUNTER_FILE; the run that makes it
// SLOW_RUN is 5 times as slow. Phase "load" spins 2 ms, then scope "parse"
// spins 3 ms times PARSE_FACTOR (default 1). Prints what its own clock
// read between the points:
//   begin->loaded NS / loaded->ready NS / parse NS
#include <fieldprof/points.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace {

long NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

void Spin(long ns) {
  const long t0 = NowNs();
  while (NowNs() - t0 < ns) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long run = 0;
  if (FILE* f = std::fopen(argv[1], "r")) {
    if (std::fscanf(f, "%ld", &run) != 1) run = 0;
    std::fclose(f);
  }
  ++run;
  if (FILE* f = std::fopen(argv[1], "w")) {
    std::fprintf(f, "%ld\n", run);
    std::fclose(f);
  }
  const long slow = run == std::atol(argv[2]) ? 5 : 1;
  const double parse_factor = argc > 3 ? std::atof(argv[3]) : 1.0;
  FP_POINT("startup", "begin");
  const long t0 = NowNs();
  Spin(2000000 * slow);
  FP_POINT("startup", "loaded");
  const long t1 = NowNs();
  long parse_ns;
  {
    FP_SCOPE("startup", "parse");
    const long p0 = NowNs();
    Spin(static_cast<long>(3000000 * slow * parse_factor));
    parse_ns = NowNs() - p0;
  }
  FP_POINT_V("startup", "ready", run);
  const long t2 = NowNs();
  std::printf("begin->loaded %ld\nloaded->ready %ld\nparse %ld\n", t1 - t0, t2 - t1, parse_ns);
  return 0;
}
