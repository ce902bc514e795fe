// Calls one exported library function in a tight loop through the PLT and
// prints the best ns per call over several rounds, as JSON:
//   rt_bench_prog empty|work|rdtsc|malloc CALLS ROUNDS
// (rdtsc: the cost of one TSC read, the floor of a timed call, which needs two;
// malloc: one malloc and one free of 16..271 bytes, what the runtime's
// allocation interposers add to every such pair)
// Run by deploy/bench-runtime.sh plain, under the runtime (selected or not),
// under ltrace and under uftrace.
#include <time.h>
#include <x86intrin.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" void fp_bench_empty();
extern "C" unsigned fp_bench_work(unsigned x);

namespace {
double NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: rt_bench_prog empty|work|rdtsc|malloc CALLS ROUNDS\n");
    return 2;
  }
  const bool empty = std::strcmp(argv[1], "empty") == 0;
  const bool tsc = std::strcmp(argv[1], "rdtsc") == 0;
  const bool alloc = std::strcmp(argv[1], "malloc") == 0;
  const long calls = std::atol(argv[2]);
  const int rounds = std::atoi(argv[3]);
  double best = 1e300;
  unsigned x = 1;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = NowNs();
    if (tsc) {
      unsigned long long sum = 0;
      for (long i = 0; i < calls; ++i) sum += __rdtsc();
      x += static_cast<unsigned>(sum & 1);
    } else if (alloc) {
      for (long i = 0; i < calls; ++i) {
        void* p = std::malloc(16 + static_cast<size_t>(i & 255));
        __asm__ __volatile__("" : : "r"(p) : "memory");
        std::free(p);
      }
    } else if (empty) {
      for (long i = 0; i < calls; ++i) fp_bench_empty();
    } else {
      for (long i = 0; i < calls; ++i) x = fp_bench_work(x);
    }
    const double ns = (NowNs() - t0) / static_cast<double>(calls);
    if (ns < best) best = ns;
  }
  std::printf("{\"ns_per_call\":%.3f,\"check\":%u}\n", best, x);
  return 0;
}
