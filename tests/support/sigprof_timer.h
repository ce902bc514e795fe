// SIGPROF every 20 us, from a CLOCK_MONOTONIC timer (high resolution), for
// the test programs whose points a signal handler cuts into
// (tests/tools/points/pointstacks.cc, tests/agent/preload/points/pointsprog.cc).
#ifndef FIELDPROF_TESTS_SUPPORT_SIGPROF_TIMER_H_
#define FIELDPROF_TESTS_SUPPORT_SIGPROF_TIMER_H_

#include <signal.h>
#include <time.h>

#include <cstdio>

// Sets `handler` on SIGPROF with `flags` (sigaction's), then starts the
// timer into `*timer` (timer_delete stops it); false, said on stderr,
// when it cannot be had.
inline bool StartSigprofEvery20us(void (*handler)(int), int flags, timer_t* timer) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigaction(SIGPROF, &sa, nullptr);
  sigevent ev{};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGPROF;
  const itimerspec every{{0, 20000}, {0, 20000}};
  if (timer_create(CLOCK_MONOTONIC, &ev, timer) != 0 ||
      timer_settime(*timer, 0, &every, nullptr) != 0) {
    std::perror("timer");
    return false;
  }
  return true;
}

#endif  // FIELDPROF_TESTS_SUPPORT_SIGPROF_TIMER_H_
