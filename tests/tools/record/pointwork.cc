// A program with points around known work, for fieldprof record's points
// and `tree merge`: one thread, spinning on its CPU.
//   fieldprof_pointwork [SCALE]   (default 1)
// Scope "work:load" holds scope "work:hash" (100 ms x SCALE in
// `load_hash`) and 50 ms in `load_copy`; scope "work:parse" 150 ms in
// `parse_tokens`; between them, outside any scope, 50 ms in `idle_spin`.
// Points "work:begin" and "work:end" bracket it all. Prints what its own
// clock read:
//   load NS / parse NS / total NS
#include <fieldprof/points.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace {

long CpuNs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

long NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

volatile double sink;

// Spins until this thread has had `ns` more of CPU time.
__attribute__((noinline)) void Spin(long ns) {
  const long end = CpuNs() + ns;
  double x = 0;
  while (CpuNs() < end) {
    for (int i = 0; i < 200; ++i) x += i * 1e-9;
  }
  sink = sink + x;
}

}  // namespace

extern "C" __attribute__((noinline)) void load_hash(long ns) {
  Spin(ns);
  sink = sink + 1;
}
extern "C" __attribute__((noinline)) void load_copy(long ns) {
  Spin(ns);
  sink = sink + 2;
}
extern "C" __attribute__((noinline)) void parse_tokens(long ns) {
  Spin(ns);
  sink = sink + 3;
}
extern "C" __attribute__((noinline)) void idle_spin(long ns) {
  Spin(ns);
  sink = sink + 4;
}

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  const auto ms = [scale](double m) { return static_cast<long>(m * scale * 1e6); };
  const long t0 = NowNs();
  FP_POINT("work", "begin");
  long load = 0, parse = 0;
  {
    FP_SCOPE("work", "load");
    const long a = NowNs();
    {
      FP_SCOPE("work", "hash");
      load_hash(ms(100));
    }
    load_copy(ms(50));
    load = NowNs() - a;
  }
  idle_spin(ms(50));
  {
    FP_SCOPE("work", "parse");
    const long a = NowNs();
    parse_tokens(ms(150));
    parse = NowNs() - a;
  }
  FP_POINT("work", "end");
  std::printf("load %ld\nparse %ld\ntotal %ld\n", load, parse, NowNs() - t0);
  return 0;
}
