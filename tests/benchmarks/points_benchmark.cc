// What a disarmed instrumentation point costs (issue #34's goal: no
// measurable difference against a loop without it, <= 0.5 ns a point), in
// one run with its anchor: a USDT probe site with no tracer (a nop and its
// note, as <sys/sdt.h> makes it without a semaphore).
//
//   points_benchmark [ITERATIONS] [ROUNDS]   (default 100000000 15)
//
// Three loops of the same dependent multiply-add, interleaved round by
// round so the machine's drift lands on all of them: plain, with a
// disarmed FP_POINT per iteration, with a bare USDT probe per iteration.
// Prints each loop's median ns per iteration and what the point adds.
#include <fieldprof/points.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// The anchor probe's semaphore (<sys/sdt.h> refers to one, as the header
// turns semaphores on): never tested, so the probe site is the bare nop.
__attribute__((section(".probes"))) volatile unsigned short fieldprof_bench_tick_semaphore;

namespace {

[[gnu::noinline]] uint64_t Plain(long n, uint64_t x) {
  for (long i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ __volatile__("" : "+r"(x));
  }
  return x;
}

[[gnu::noinline]] uint64_t WithPoint(long n, uint64_t x) {
  for (long i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    FP_POINT("bench", "tick");
    __asm__ __volatile__("" : "+r"(x));
  }
  return x;
}

[[gnu::noinline]] uint64_t WithUsdt(long n, uint64_t x) {
  for (long i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    STAP_PROBE1(fieldprof_bench, tick, x);
    __asm__ __volatile__("" : "+r"(x));
  }
  return x;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  if (n <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: points_benchmark [ITERATIONS] [ROUNDS]\n");
    return 2;
  }
  using Loop = uint64_t (*)(long, uint64_t);
  const Loop loops[] = {Plain, WithPoint, WithUsdt};
  const char* const names[] = {"plain loop", "disarmed FP_POINT", "bare USDT probe (anchor)"};
  std::vector<double> ns[3];
  uint64_t sink = 1;
  for (int r = 0; r < rounds; ++r) {
    for (int l = 0; l < 3; ++l) {
      const auto t0 = Clock::now();
      sink = loops[l](n, sink);
      const auto t1 = Clock::now();
      ns[l].push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                      static_cast<double>(n));
    }
    std::fprintf(stderr, "\rround %d of %d", r + 1, rounds);
  }
  std::fprintf(stderr, "\r");
  const double plain = Median(ns[0]);
  std::printf("%ld iterations x %d rounds, interleaved; median ns per iteration\n", n, rounds);
  for (int l = 0; l < 3; ++l) {
    const double m = Median(ns[l]);
    // The spread: the middle half of the rounds.
    std::vector<double> v = ns[l];
    std::sort(v.begin(), v.end());
    std::printf("  %-26s %7.3f ns  (%.3f-%.3f)  added %+.3f ns\n", names[l], m, v[v.size() / 4],
                v[v.size() * 3 / 4], m - plain);
  }
  std::printf("semaphore %u (0: disarmed), sink %llu\n",
              static_cast<unsigned>(fieldprof_point_semaphore),
              static_cast<unsigned long long>(sink));
  return 0;
}
