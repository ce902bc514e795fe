/* A program that owns SIGTRAP, SIGPROF and SIGURG and installs its
 * handlers with the raw rt_sigaction system call, as Go's runtime and
 * sandboxes do, so that no wrapped sigaction() sees them. It raises SIGTRAP itself and runs
 * its own ITIMER_PROF while it works, and prints what it can be sure of:
 * its three traps, that its profiling timer fired, and a checksum. For
 * tests/tools/record/host_safety_test.cc. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t traps, profs;

static void OnTrap(int sig) { (void)sig; ++traps; }
static void OnProf(int sig) { (void)sig; ++profs; }
static void OnUrg(int sig) { (void)sig; }

/* The kernel's struct sigaction on x86-64. */
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  unsigned long mask;
};

static void RawInstall(int sig, void (*handler)(int), void (*restorer)(void)) {
  struct KernelSigaction a;
  memset(&a, 0, sizeof a);
  a.handler = handler;
  a.flags = 0x04000000 /* SA_RESTORER */ | SA_RESTART;
  a.restorer = restorer;
  syscall(SYS_rt_sigaction, sig, &a, NULL, 8);
}

static void Ignore(int sig) { (void)sig; }

int main(void) {
  /* glibc's restorer, read back from a handler glibc installed. */
  signal(SIGUSR2, Ignore);
  struct KernelSigaction cur;
  syscall(SYS_rt_sigaction, SIGUSR2, NULL, &cur, 8);
  RawInstall(SIGTRAP, OnTrap, cur.restorer);
  RawInstall(SIGPROF, OnProf, cur.restorer);
  RawInstall(SIGURG, OnUrg, cur.restorer);
  struct itimerval it = {{0, 2000}, {0, 2000}};
  setitimer(ITIMER_PROF, &it, NULL);
  volatile unsigned long sum = 0;
  for (unsigned long i = 0; i < 300000000ul || profs == 0; ++i) sum += i ^ (i >> 3);
  for (int i = 0; i < 3; ++i) raise(SIGTRAP);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  printf("traps %d, profiling timer %s, sum %lu\n", (int)traps, profs > 0 ? "fired" : "silent",
         (unsigned long)(sum & 0xffff));
  return traps == 3 ? 0 : 1;
}
