/* A program that starts its children as Chromium's browser does: each
 * child of the fork puts every signal's disposition back to its default
 * with the raw system call (past any wrapper), shuffles its descriptors,
 * and only then execs. Here the child takes its time doing so (30 ms of
 * sleep and 30 ms of work, as a loaded machine gives it), then execs
 * `true`. Any child that ends other than by exit status 0 is reported,
 * and the program's status is 3. A sampler whose signal's default action
 * ends a process, and which signals a child of the fork before it has
 * exec'ed, would end some. For tests/tools/record/host_safety_test.cc. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The kernel's struct sigaction, for the raw call. */
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  unsigned long mask;
};

static void ResetEverySignalRaw(void) {
  for (int sig = 1; sig < 65; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct KernelSigaction old;
    memset(&old, 0, sizeof old);
    if (syscall(SYS_rt_sigaction, sig, NULL, &old, sizeof old.mask) != 0) continue;
    if (old.handler == SIG_IGN) continue; /* ignored stays ignored */
    struct KernelSigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.handler = SIG_DFL;
    syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
  }
}

int main(int argc, char** argv) {
  const int children = argc > 1 ? atoi(argv[1]) : 20;
  int bad = 0;
  for (int i = 0; i < children; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      ResetEverySignalRaw();
      struct timespec ts = {0, 30 * 1000 * 1000};
      nanosleep(&ts, NULL);
      volatile unsigned long x = 0;
      struct timespec start, now;
      clock_gettime(CLOCK_MONOTONIC, &start);
      do {
        for (int k = 0; k < 10000; ++k) x += (unsigned long)k * 2654435761u;
        clock_gettime(CLOCK_MONOTONIC, &now);
      } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) <
               30 * 1000 * 1000L);
      execlp("true", "true", (char*)NULL);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++bad;
      if (WIFSIGNALED(status)) {
        fprintf(stderr, "child %d ended by signal %d (%s) before its exec\n", i, WTERMSIG(status),
                strsignal(WTERMSIG(status)));
      } else {
        fprintf(stderr, "child %d exited %d\n", i, WEXITSTATUS(status));
      }
    }
  }
  printf("%d children reset their signals and exec'ed\n", children - bad);
  return bad == 0 ? 0 : 3;
}
