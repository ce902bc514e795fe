/* A program with its own SIGPROF handler, installed with sigaction() as
 * crash reporters do (Chromium's takes SIGPROF as a termination): any
 * SIGPROF it did not cause itself ends it with status 3. Its own causes:
 * an ITIMER_PROF while it works (the kernel's, SI_KERNEL) and three
 * raise() calls (SI_TKILL) at the end; it prints how many of each it saw.
 * A sampler whose signal reached this handler would end it. For
 * tests/tools/record/host_safety_test.cc. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t timer_seen, raised_seen;

static void OnProf(int sig, siginfo_t* si, void* uc) {
  (void)sig;
  (void)uc;
  if (si->si_code == SI_KERNEL) {
    ++timer_seen;
  } else if (si->si_code == SI_TKILL || si->si_code == SI_USER) {
    ++raised_seen;
  } else {
    static const char kMsg[] = "a SIGPROF this program did not cause\n";
    (void)!write(2, kMsg, sizeof kMsg - 1);
    _exit(3);
  }
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnProf;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  /* Its own profiling timer for the first half of the work. */
  struct itimerval it = {{0, 2000}, {0, 2000}};
  setitimer(ITIMER_PROF, &it, NULL);
  volatile unsigned long sum = 0;
  for (unsigned long i = 0; i < 150000000ul || timer_seen == 0; ++i) sum += i ^ (i >> 3);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  for (unsigned long i = 0; i < 150000000ul; ++i) sum += i ^ (i >> 5);
  for (int i = 0; i < 3; ++i) raise(SIGPROF);
  printf("raised 3, saw %d; profiling timer %s; sum %lu\n", (int)raised_seen,
         timer_seen > 0 ? "fired" : "silent", (unsigned long)(sum & 0xffff));
  return raised_seen == 3 ? 0 : 1;
}
