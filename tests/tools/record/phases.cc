// A program with known phases for fieldprof record's tests: 200 ms in
// phase_a, 200 ms in phase_b, then phase_a on the main thread and phase_b
// on a second one together for 200 ms. With "kill" it SIGKILLs itself
// in the middle of the last phase: a recording cut short. With
// "crowd THREADS DEPTH SECONDS" it is a crowd instead: THREADS threads each
// recurse DEPTH calls deep into `deep` and spin there for SECONDS, so that
// a fast sampling clock fills the sampler's ring faster than it drains.
// With "iconv ROUNDS" one thread opens and closes an iconv converter ROUNDS
// times in `convert_loop`, over four charsets in turn: libc loads a
// converter module at each open and unloads another at each close, with
// its own dlopen and dlclose (no wrapper sees them). With "cpu SECONDS" it
// spins in `spin_cpu` on its one thread until that thread has had SECONDS
// of CPU time, then prints the thread's CPU time and the spin's wall time
// ("cpu_ns N wall_ns M").
#include <iconv.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

volatile double sink;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

extern "C" __attribute__((noinline)) void spin(double secs) {
  double x = 0;
  const double end = Now() + secs;
  while (Now() < end) {
    for (int i = 0; i < 1000; ++i) x += i * 1e-9;
  }
  sink = sink + x;
}
extern "C" __attribute__((noinline)) void phase_a(double s) {
  spin(s);
  sink = sink + 1;
}
extern "C" __attribute__((noinline)) void phase_b(double s) {
  spin(s);
  sink = sink + 2;
}

extern "C" __attribute__((noinline)) void deep(int depth, double s) {
  if (depth > 1) {
    deep(depth - 1, s);
  } else {
    spin(s);
  }
  sink = sink + depth;  // not a tail call: each level keeps its frame
}

extern "C" __attribute__((noinline)) long convert_loop(long rounds) {
  static const char* const kCharsets[] = {"ISO-8859-2", "ISO-8859-3", "ISO-8859-4", "ISO-8859-5"};
  long converted = 0;
  for (long i = 0; i < rounds; ++i) {
    iconv_t cd = iconv_open("UTF-8", kCharsets[i % 4]);
    converted += cd != reinterpret_cast<iconv_t>(-1) && iconv_close(cd) == 0;
  }
  return converted;
}

namespace {

int Crowd(int threads, int depth, double secs) {
  struct Job {
    int depth;
    double secs;
  } job{depth, secs};
  std::vector<pthread_t> crowd(static_cast<size_t>(threads));
  for (pthread_t& t : crowd) {
    pthread_create(
        &t, nullptr,
        [](void* p) -> void* {
          const Job& j = *static_cast<const Job*>(p);
          deep(j.depth, j.secs);
          return nullptr;
        },
        &job);
  }
  for (pthread_t& t : crowd) pthread_join(t, nullptr);
  std::printf("crowd done\n");
  return 0;
}

}  // namespace

uint64_t ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

__attribute__((noinline)) void spin_cpu(double seconds) {
  const uint64_t until = ThreadCpuNs() + static_cast<uint64_t>(seconds * 1e9);
  while (ThreadCpuNs() < until) {
    for (int i = 0; i < 20000; ++i) sink = sink + i;  // tens of us between clock reads
  }
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "cpu") == 0) {
    const double start = Now();
    spin_cpu(std::atof(argv[2]));
    std::printf("cpu_ns %llu wall_ns %llu\n", static_cast<unsigned long long>(ThreadCpuNs()),
                static_cast<unsigned long long>((Now() - start) * 1e9));
    return 0;
  }
  if (argc == 5 && std::strcmp(argv[1], "crowd") == 0) {
    return Crowd(std::atoi(argv[2]), std::atoi(argv[3]), std::atof(argv[4]));
  }
  if (argc == 3 && std::strcmp(argv[1], "iconv") == 0) {
    std::printf("converted %ld\n", convert_loop(std::atol(argv[2])));
    return 0;
  }
  const bool kill_self = argc > 1 && std::strcmp(argv[1], "kill") == 0;
  phase_a(0.2);
  phase_b(0.2);
  pthread_t t;
  pthread_create(
      &t, nullptr,
      [](void*) -> void* {
        phase_b(0.2);
        return nullptr;
      },
      nullptr);
  if (kill_self) {
    phase_a(0.1);
    raise(SIGKILL);
  }
  phase_a(0.2);
  pthread_join(t, nullptr);
  std::printf("phases done\n");
  return 3;
}
