/* A program that closes the descriptors it inherited above stderr, as
 * daemons and Chromium's child processes do before they set up their own,
 * and then passes numbered messages through pipes that land on the lowest
 * numbers, in four threads that work at varying stack depths. Any byte in
 * one of its pipes that it did not write, or one of its own missing, ends
 * it with status 3. A preloaded library that kept a descriptor of its own
 * at a low number (libunwind's memory-check pipe) and went on using it
 * would read from and write into this program's pipes. For
 * tests/tools/record/host_safety_test.cc. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { kThreads = 4, kMessages = 40000 };

static int pipes[kThreads][2];

/* Work whose stack reaches `depth` frames down, so that the samples'
 * stacks end on many different pages. */
static unsigned long Work(int depth, unsigned long x) {
  volatile char pad[256];
  pad[0] = (char)x;
  if (depth > 0) return Work(depth - 1, x * 31 + (unsigned long)pad[0]);
  for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  return x;
}

static void Fail(const char* what) {
  (void)!write(2, what, strlen(what));
  _exit(3);
}

static void* Run(void* arg) {
  const long t = (long)arg;
  unsigned long x = (unsigned long)t;
  for (unsigned long i = 0; i < kMessages; ++i) {
    const unsigned long sent = i * kThreads + (unsigned long)t;
    if (write(pipes[t][1], &sent, sizeof sent) != sizeof sent) Fail("a write to my pipe failed\n");
    x ^= Work((int)(i % 64), x);
    unsigned long got = 0;
    const ssize_t n = read(pipes[t][0], &got, sizeof got);
    if (n != sizeof got) Fail("a message of mine is missing a byte\n");
    if (got != sent) Fail("a byte in my pipe that I did not write\n");
  }
  char extra;
  if (read(pipes[t][0], &extra, 1) == 1) Fail("a byte in my pipe that I did not write\n");
  return (void*)(x & 1);
}

int main(void) {
  for (int fd = 3; fd < 64; ++fd) close(fd);
  for (int t = 0; t < kThreads; ++t) {
    if (pipe2(pipes[t], O_NONBLOCK) != 0) Fail("no pipe\n");
  }
  printf("pipes on descriptors %d to %d\n", pipes[0][0], pipes[kThreads - 1][1]);
  pthread_t th[kThreads];
  for (long t = 0; t < kThreads; ++t) pthread_create(&th[t], NULL, Run, (void*)t);
  for (int t = 0; t < kThreads; ++t) pthread_join(th[t], NULL);
  printf("%d messages through each of %d pipes, all mine\n", kMessages, kThreads);
  return 0;
}
