// The lab scenario (tests/tools/lab/lab_test.cc):
//   fieldprof_labprog N [COUNTER_FILE FAIL_AT]
// calls each API of the two lab libraries N times and prints one result
// line. With COUNTER_FILE, the run adds one to the number in it and exits
// 5 when that makes FAIL_AT (a run that fails in one pass of several).
//   fieldprof_labprog --selftime N
// times N calls of each API itself (no probe: the reference of
// tests/benchmarks/lab_benchmark.cc) and prints "API mean_ns" lines.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" long lab_parse(long x);
extern "C" long lab_render(const char* s);
extern "C" long lab_pipeline(long n);
extern "C" long lab_remember(long x);
extern "C" long labb_checksum();
extern "C" long labb_alloc_block(long n);
extern "C" unsigned long labb_hash(unsigned long x);
extern "C" long labb_stage(long n);

namespace {

double NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

template <typename F>
void SelfTime(const char* name, long n, F call) {
  for (long i = 0; i < 100; ++i) call(i);  // bound, warm
  const double t0 = NowNs();
  for (long i = 0; i < n; ++i) call(i);
  std::printf("%s %.2f\n", name, (NowNs() - t0) / static_cast<double>(n));
}

int SelfTimes(long n) {
  volatile long sink = 0;
  SelfTime("lab_parse", n, [&](long i) { sink = sink + lab_parse(i); });
  SelfTime("lab_render", n, [&](long) { sink = sink + lab_render("fieldprof"); });
  SelfTime("lab_pipeline", n, [&](long i) { sink = sink + lab_pipeline(i); });
  SelfTime("labb_checksum", n, [&](long) { sink = sink + labb_checksum(); });
  SelfTime("labb_alloc_block", n, [&](long) { sink = sink + labb_alloc_block(1000); });
  SelfTime("labb_hash", n, [&](long i) { sink = sink + static_cast<long>(labb_hash(i)); });
  SelfTime("labb_stage", n, [&](long i) { sink = sink + labb_stage(i); });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (argc == 3 && !std::strcmp(argv[1], "--selftime")) return SelfTimes(std::atol(argv[2]));
  if (argc == 4) {
    long n = 0;
    if (FILE* f = std::fopen(argv[2], "r")) {
      if (std::fscanf(f, "%ld", &n) != 1) n = 0;
      std::fclose(f);
    }
    if (FILE* f = std::fopen(argv[2], "w")) {
      std::fprintf(f, "%ld\n", n + 1);
      std::fclose(f);
    }
    if (n + 1 == std::atol(argv[3])) return 5;
  }
  const long n = std::atol(argv[1]);
  long sum = 0;
  for (long i = 0; i < n; ++i) {
    sum += lab_parse(i);
    sum += lab_render("fieldprof");
    sum += lab_pipeline(i);
    sum += labb_checksum();
    sum += lab_remember(i) & 1;
  }
  std::printf("result %ld\n", sum);
  return 0;
}
