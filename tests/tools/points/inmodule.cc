// Functions a program calls inside itself, for points placed on them by
// configuration (`fieldprof points record --at fieldprof_inmodule:NAME`,
// tests/tools/points/points_record_test.cc):
//   fieldprof_inmodule N
// calls each function N times and prints its results, then what its own
// clock read for load_config's calls ("load_config_median_ns NS") and how
// many calls fib made. The functions are chosen for their first
// instructions, which a detour moves:
//   load_config  spins 20 us (a static function: no symbol but .symtab's)
//   bump         starts with a RIP-relative load of a global
//   early        starts with a test and a conditional branch
//   fib          calls itself, through a pointer (nested scopes)
//   thrower      throws on odd arguments (an exception through the scope)
//   tiny         3 bytes: too short to move, left alone
//   loop_head    a branch back into its first 5 bytes: left alone
//   cfg::Parser::Parse  two C++ overloads, named as written in the code
//
//   fieldprof_inmodule --busy LIB N
// opens LIB (tests/agent/preload/points/busylib.cc), whose thread already calls
// its function in a loop, asks it for busy_join (the runtime looks at the
// library then, while that thread runs), lets the loop run N more rounds
// and prints "busy wrong W" (rounds whose result was not the first one's).
//   fieldprof_inmodule --dlopen LIB N [--thread | --thread_exit | --once]
// opens LIB (tests/agent/preload/runtime/testlib2.cc), calls its fp_test2_outer(N),
// which calls the library's static fp_test2_inner N times, closes it, and
// does all that twice (once with --once); prints "dlopen SUM". With
// --thread a second thread runs meanwhile (it wakes every millisecond), as
// in a program that has started its threads before it opens a library;
// with --thread_exit it ends by pthread_exit, not by returning.
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

extern "C" long loop_head(long n);  // below, in assembly
__asm__(
    ".text\n"
    ".globl loop_head\n"
    ".type loop_head, @function\n"
    "loop_head:\n"
    "  xorl %eax, %eax\n"  // 2 bytes: the loop starts at +2
    "1: addq $3, %rax\n"
    "  decq %rdi\n"
    "  jg 1b\n"
    "  ret\n"
    ".size loop_head, .-loop_head\n");

namespace {

long NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

volatile long g_sink = 3;
volatile long g_spin;
long g_total;
long g_fib_calls;

}  // namespace

// C names, local to this file: what .symtab alone holds for them.
extern "C" {

__attribute__((noinline)) static long load_config(long x) {
  const long t0 = NowNs();
  long v = x;
  while (NowNs() - t0 < 20000) v = v * 31 + 7;
  g_spin = v;
  return x & 0xff;
}

__attribute__((noinline)) static long bump(long x) {
  g_total += x;
  return g_total;
}

__attribute__((noinline)) static long early(long x) {
  if (x < 0) return -1;
  long s = 0;
  for (long i = 0; i <= x % 16; ++i) s += i * g_sink;
  return s + x;
}

__attribute__((noinline)) static long fib(long n);
// Through a pointer the compiler cannot see through: every call is a call
// (called directly, GCC unrolls some of the recursion into the function).
long (*volatile g_fib)(long) = fib;

__attribute__((noinline)) static long fib(long n) {
  ++g_fib_calls;
  return n < 2 ? n : g_fib(n - 1) + g_fib(n - 2);
}

__attribute__((noinline)) static long thrower(long x) {
  if (x & 1) throw std::runtime_error("odd");
  return x / 2;
}

__attribute__((noinline)) static long tiny() { return 0; }

}  // extern "C"

// C++: two overloads of one name, which --at names as the code does.
namespace cfg {
class Parser {
 public:
  __attribute__((noinline)) long Parse(long x) {
    seen_ += x % 7;
    return seen_;
  }
  __attribute__((noinline)) long Parse(const char* s) {
    for (; *s != 0; ++s) seen_ += *s;
    return seen_;
  }

 private:
  long seen_ = 0;
};
}  // namespace cfg

int OpenAndClose(const char* lib, long n, int times, bool thread, bool thread_exit) {
  std::atomic<bool> stop{false};
  std::thread other;
  if (thread || thread_exit) {
    other = std::thread([&stop, thread_exit] {
      while (!stop.load()) {
        const timespec ms{0, 1000000};
        nanosleep(&ms, nullptr);
      }
      if (thread_exit) pthread_exit(nullptr);
    });
  }
  long sum = 0;
  for (int round = 0; round < times; ++round) {
    void* h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);  // it calls a function it never finds here
    if (h == nullptr) return 8;
    auto* outer = reinterpret_cast<long (*)(long)>(dlsym(h, "fp_test2_outer"));
    if (outer == nullptr) return 8;
    sum += outer(n);
    dlclose(h);
  }
  stop = true;
  if (other.joinable()) other.join();
  std::printf("dlopen %ld\n", sum);
  return 0;
}

int Busy(const char* lib, long more) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return 8;
  auto* join = reinterpret_cast<long (*)(long)>(dlsym(h, "busy_join"));
  if (join == nullptr) return 8;
  const long r = join(more);
  std::printf("busy wrong %ld\n", r % 1000000);
  std::fprintf(stderr, "busy rounds %ld\n", r / 1000000);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (argc >= 4 && !std::strcmp(argv[1], "--busy")) return Busy(argv[2], std::atol(argv[3]));
  if (argc >= 4 && !std::strcmp(argv[1], "--dlopen")) {
    const char* option = argc > 4 ? argv[4] : "";
    return OpenAndClose(argv[2], std::atol(argv[3]), std::strcmp(option, "--once") == 0 ? 1 : 2,
                        std::strcmp(option, "--thread") == 0,
                        std::strcmp(option, "--thread_exit") == 0);
  }
  const long n = std::atol(argv[1]);
  std::vector<long> own;
  long sum = 0, caught = 0;
  cfg::Parser parser;
  for (long i = 0; i < n; ++i) {
    sum += parser.Parse(i) + parser.Parse(i % 2 == 0 ? "even" : "odd");
    const long t0 = NowNs();
    sum += load_config(i);
    own.push_back(NowNs() - t0);
    sum += bump(i);
    sum += early(i % 3 == 0 ? -i : i);
    sum += fib(i % 8);
    try {
      sum += thrower(i);
    } catch (const std::exception&) {
      ++caught;
    }
    sum += tiny() + loop_head(i % 5 + 1);
  }
  std::sort(own.begin(), own.end());
  std::printf("result %ld total %ld caught %ld\n", sum, g_total, caught);
  std::printf("fib_calls %ld\n", g_fib_calls);
  std::printf("load_config_median_ns %ld\n", own.empty() ? 0 : own[own.size() / 2]);
  return 0;
}
