// A program for fieldprof tree's tests: a deterministic
// workload, main -> Run -> Parse, Compute, Render, each a fixed number of
// iterations (not a time: a slower build does more work, a busy machine
// only takes longer). Built twice: fieldprof_treeprog, and
// fieldprof_treeprog_slow, where Compute does 60% more.
//
//   treeprog [noise SEED]
// With "noise", a second thread wakes at random times (from SEED) and
// does random work in one of 16 functions, as timers, GC threads and
// one-off work do: what `fieldprof tree min` is meant to remove.
#include <pthread.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#ifndef COMPUTE_FACTOR
#define COMPUTE_FACTOR 1.0
#endif

namespace {

volatile double sink;

// Inlined into each function, so that each holds its own samples.
__attribute__((always_inline)) inline void Iterate(long n) {
  double x = 0;
  for (long i = 0; i < n; ++i) x += static_cast<double>(i) * 1e-9;
  sink = sink + x;
}

uint64_t g_seed = 0;

template <int K>
__attribute__((noinline)) void Noise(long n) {
  Iterate(n + K);
  sink = sink + K;  // no tail call: the frame stays on the stack
}
using NoiseFn = void (*)(long);
constexpr NoiseFn kNoise[16] = {Noise<0>,  Noise<1>,  Noise<2>,  Noise<3>, Noise<4>,  Noise<5>,
                                Noise<6>,  Noise<7>,  Noise<8>,  Noise<9>, Noise<10>, Noise<11>,
                                Noise<12>, Noise<13>, Noise<14>, Noise<15>};

__attribute__((noinline)) void* NoiseMain(void*) {
  std::mt19937_64 rng(g_seed);
  const int bursts = 1 + static_cast<int>(rng() % 3);
  for (int b = 0; b < bursts; ++b) {
    timespec nap{0, static_cast<long>(rng() % 60) * 1000 * 1000};
    nanosleep(&nap, nullptr);
    kNoise[rng() % 16](25000000 + static_cast<long>(rng() % 50000000));
  }
  return nullptr;
}

}  // namespace

extern "C" {
// Each ends with a store, so that Run's calls are no tail calls (which
// would leave Run's frame off the stack).
__attribute__((noinline)) void Parse() {
  Iterate(125000000);
  sink = sink + 1;
}
__attribute__((noinline)) void Compute() {
  Iterate(static_cast<long>(325000000 * COMPUTE_FACTOR));
  sink = sink + 2;
}
__attribute__((noinline)) void Render() {
  Iterate(125000000);
  sink = sink + 3;
}
__attribute__((noinline)) void Run() {
  Parse();
  Compute();
  Render();
  sink = sink + 4;
}
}

int main(int argc, char** argv) {
  pthread_t noise{};
  const bool with_noise = argc > 2 && std::strcmp(argv[1], "noise") == 0;
  if (with_noise) {
    g_seed = std::strtoull(argv[2], nullptr, 10);
    pthread_create(&noise, nullptr, NoiseMain, nullptr);
  }
  Run();
  if (with_noise) pthread_join(noise, nullptr);
  std::printf("treeprog done\n");
  return 0;
}
