// Functions for the runtime benchmark (deploy/bench-runtime.sh): an empty
// exported function, and one that does a little work, called through the PLT.
extern "C" __attribute__((visibility("default"), noinline)) void fp_bench_empty() {
  __asm__ __volatile__("");
}

extern "C" __attribute__((visibility("default"), noinline)) unsigned fp_bench_work(unsigned x) {
  for (int i = 0; i < 8; ++i) x = x * 2654435761u + 12345u;
  return x;
}
