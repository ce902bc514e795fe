// A program whose points are passed from known places, for points record
// --stacks: `step` passes a point and runs a scope, called A times from
// `via_a` and B times from `via_b`; a thread runs N scopes in `worker_loop`.
//   fieldprof_pointstacks A B N
#include <fieldprof/points.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

extern "C" {
// Kept out of line and out of tail position, so that each is a frame.
__attribute__((noinline)) void step(int i) {
  FP_POINT_V("stacks", "step", i);
  {
    FP_SCOPE("stacks", "inner");
    for (int k = 0; k < 50; ++k) __asm__ __volatile__("");
  }
  __asm__ __volatile__("");
}
__attribute__((noinline)) void via_a(int n) {
  for (int i = 0; i < n; ++i) step(i);
  __asm__ __volatile__("");
}
__attribute__((noinline)) void via_b(int n) {
  for (int i = 0; i < n; ++i) step(i);
  __asm__ __volatile__("");
}
__attribute__((noinline)) void worker_loop(int n) {
  for (int i = 0; i < n; ++i) {
    FP_SCOPE("stacks", "work");
    __asm__ __volatile__("");
  }
  __asm__ __volatile__("");
}
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s A B N\n", argv[0]);
    return 2;
  }
  via_a(std::atoi(argv[1]));
  via_b(std::atoi(argv[2]));
  std::thread t(worker_loop, std::atoi(argv[3]));
  t.join();
  std::printf("done\n");
  return 0;
}
