// A multi-threaded program that forks while another of its threads holds
// the dynamic linker's lock, as Chromium's browser does (its threads load
// libraries and walk them while the main thread launches processes). Each
// child does what a launcher does between fork and exec: dup2, close,
// then exec (every other child _exits instead). A child that looks
// anything up in the dynamic linker hangs on the lock its parent's other
// thread held at the fork: the parent waits for each child with a
// deadline and says which one hung.
//
//   fieldprof_fork_in_loader [children]   (default 200)
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;

// Holds the lock through a whole walk, slowly.
static int Linger(struct dl_phdr_info* info, size_t size, void* data) {
  (void)info;
  (void)size;
  volatile unsigned spin = 0;
  for (int i = 0; i < 20000; ++i) spin += (unsigned)i;
  *(unsigned*)data += spin;
  return 0;
}

static void* Walker(void* arg) {
  (void)arg;
  unsigned sum = 0;
  while (!atomic_load(&stop)) dl_iterate_phdr(Linger, &sum);
  return NULL;
}

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  const int children = argc > 1 ? atoi(argv[1]) : 200;
  pthread_t walker;
  if (pthread_create(&walker, NULL, Walker, NULL) != 0) return 2;
  for (int i = 0; i < children; ++i) {
    const pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
      if (dup2(2, 9) < 0 || close(9) != 0) _exit(3);
      if (i % 2 == 0) _exit(0);
      char* const args[] = {"true", NULL};
      execv("/bin/true", args);
      _exit(4);
    }
    // A child ends in milliseconds; one that has not after a minute is
    // stuck for good.
    const double deadline = Now() + 60;
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && Now() < deadline) usleep(1000);
    if (got == 0) {
      fprintf(stderr, "child %d (pid %d) hung between fork and exec\n", i, (int)pid);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      atomic_store(&stop, 1);
      pthread_join(walker, NULL);
      return 1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "child %d ended with status %d\n", i, status);
      atomic_store(&stop, 1);
      pthread_join(walker, NULL);
      return 1;
    }
  }
  atomic_store(&stop, 1);
  pthread_join(walker, NULL);
  printf("%d children forked while the loader was busy, each exited\n", children);
  return 0;
}
