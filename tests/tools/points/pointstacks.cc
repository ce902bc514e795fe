// A program whose points are passed from known places, for points record
// --stacks: `step` passes a point and runs a scope, called A times from
// `via_a` and B times from `via_b`; a thread runs N scopes in `worker_loop`.
// With "signals", a SIGPROF handler passes a point too, every 20 us.
// `placed` (no point of its own: for --at) and libc's getppid and rand
// are called after each step, from the same two places (rand's entry is
// one the runtime cannot move: a call among its first instructions).
//   fieldprof_pointstacks A B N [signals]
// With "dlsym" instead, the handler's point every 20 us while the program
// calls dlsym A times (the runtime's binder looks at the loaded objects
// under the dynamic linker's lock at each), a point before each. With
// "dliterate", the program's own dl_iterate_phdr instead (its callback
// passes a point "in_callback" at each call's first object), and with
// "dlopen", its own dlopen and dlclose of libz.so.1 (each holds the
// dynamic linker's lock for a while), and with "iconv", iconv_open and
// iconv_close, whose converter modules libc loads and unloads itself.
//   fieldprof_pointstacks A 0 0 dlsym|dliterate|dlopen|iconv
// In those modes the loop ends after A iterations or, with
// FIELDPROF_TEST_SPAN_MS, that many milliseconds, whichever first, and
// writes how many it made to FIELDPROF_TEST_PROGRESS now and then
// (tests/support/progress_watch.h); it prints "iterations I".
#include <dlfcn.h>
#include <fcntl.h>
#include <fieldprof/points.h>
#include <iconv.h>
#include <link.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tests/support/sigprof_timer.h"

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
int sink;
__attribute__((noinline)) void placed(int i) {
  for (int k = 0; k < 20; ++k) sink = sink * 31 + i + k;
}
// The body of via_a and via_b: inlined into each, so each is the frame
// that makes the calls.
__attribute__((always_inline)) inline void Calls(int n) {
  for (int i = 0; i < n; ++i) {
    step(i);
    placed(i);
    sink += getppid() + (rand() & 1);
  }
  __asm__ __volatile__("");
}
__attribute__((noinline)) void via_a(int n) { Calls(n); }
__attribute__((noinline)) void via_b(int n) { Calls(n); }
// A point passed in a signal handler, which may have interrupted another
// point's stack being taken.
__attribute__((noinline)) void on_signal(int) {
  FP_POINT("stacks", "in_handler");
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

// The first object of each dl_iterate_phdr passes a point, inside the
// dynamic linker's lock (the thread's there): its stack can be had.
int CountObject(dl_phdr_info*, size_t, void* n) {
  if ((*static_cast<long*>(n))++ == 0) FP_POINT("stacks", "in_callback");
  return 0;
}

// One of the dynamic linker's calls that take its lock, as `how` names it;
// 1 when it found what it looked for.
long LinkerCall(const char* how) {
  if (std::strcmp(how, "dlsym") == 0) return dlsym(RTLD_DEFAULT, "printf") != nullptr;
  if (std::strcmp(how, "dliterate") == 0) {
    long objects = 0;
    dl_iterate_phdr(CountObject, &objects);
    return objects > 0;
  }
  if (std::strcmp(how, "iconv") == 0) {
    // libc loads and unloads gconv modules itself, by its own dlopen and
    // dlclose: the recorder sees no call. It unloads a module not in use
    // once three others have been released since it was: in turns of four,
    // each open loads its module and each close unloads another.
    static const char* const kCharsets[] = {"ISO-8859-2", "ISO-8859-3", "ISO-8859-4", "ISO-8859-5"};
    static int turn = 0;
    iconv_t cd = iconv_open("UTF-8", kCharsets[turn++ % 4]);
    return cd != reinterpret_cast<iconv_t>(-1) && iconv_close(cd) == 0;
  }
  void* h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  return h != nullptr && dlclose(h) == 0;
}

int main(int argc, char** argv) {
  if (argc == 5 && (std::strcmp(argv[4], "dlsym") == 0 || std::strcmp(argv[4], "dliterate") == 0 ||
                    std::strcmp(argv[4], "dlopen") == 0 || std::strcmp(argv[4], "iconv") == 0)) {
    const char* progress_file = std::getenv("FIELDPROF_TEST_PROGRESS");
    const int progress =
        progress_file != nullptr ? open(progress_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
    const char* span = std::getenv("FIELDPROF_TEST_SPAN_MS");
    timespec start{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    auto ms_since_start = [&] {
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);
      return (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    };
    const long span_ms = span != nullptr ? std::atol(span) : -1;
    timer_t timer{};
    if (!StartSigprofEvery20us(on_signal, SA_RESTART, &timer)) return 1;
    // The count is written at most every 100 ms, and at each call when
    // calls are slower: under a signal every 20 us, a call that loads a
    // module can take seconds, and a watch that saw only every 256th
    // would take a slow machine for a hung one.
    long found = 0, done = 0, written_at = -1;
    for (long i = std::atol(argv[1]); i > 0; --i) {
      FP_POINT("stacks", "lookup");
      found += LinkerCall(argv[4]);
      ++done;
      const long ms = ms_since_start();
      if (progress >= 0 && ms - written_at >= 100) {
        written_at = ms;
        char text[32];
        const int n = std::snprintf(text, sizeof text, "%ld\n", done);
        if (pwrite(progress, text, static_cast<size_t>(n), 0) < 0) return 3;
      }
      if (span_ms >= 0 && ms >= span_ms) break;
    }
    timer_delete(timer);
    if (progress >= 0) close(progress);
    std::printf("iterations %ld\nfound %ld\ndone\n", done, found);
    return 0;
  }
  if (argc != 4 && !(argc == 5 && std::strcmp(argv[4], "signals") == 0)) {
    std::fprintf(stderr, "usage: %s A B N [signals|dlsym|dliterate|dlopen|iconv]\n", argv[0]);
    return 2;
  }
  // "signals": SIGPROF every 20 us (a CLOCK_MONOTONIC timer: high
  // resolution) while via_a and via_b run.
  timer_t timer{};
  if (argc == 5 && !StartSigprofEvery20us(on_signal, SA_RESTART, &timer)) return 1;
  via_a(std::atoi(argv[1]));
  via_b(std::atoi(argv[2]));
  if (argc == 5) timer_delete(timer);
  std::thread t(worker_loop, std::atoi(argv[3]));
  t.join();
  std::printf("done\n");
  return 0;
}
