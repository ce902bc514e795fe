// A program with known phases for fieldprof record's tests: 200 ms in
// phase_a, 200 ms in phase_b, then phase_a on the main thread and phase_b
// on a second one together for 200 ms. With "kill" it SIGKILLs itself
// in the middle of the last phase: a recording cut short.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>

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

int main(int argc, char** argv) {
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
