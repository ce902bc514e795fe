// A program with points in two phases (tests/agent/preload/points/points_test.cc):
//   fieldprof_pointsprog N [--arm|--exec|--bad]
// runs N rounds of a "load" point, a "parse" scope and a point with a
// value, and prints one result line. --arm raises the module's semaphore
// itself first, as a tracer or the runtime would. --exec then execs
// /bin/true (tests/tools/points/points_record_test.cc). --bad also makes
// points whose tag is a path or whose name is free text, which the field
// refuses.
//   fieldprof_pointsprog N --until FILE
// runs N rounds every 20 ms until FILE exists (a program that runs on),
// and prints how many rounds it ran.
//   fieldprof_pointsprog 0 --values
// makes a point "edge"/"v" for each value of kEdgeValues, 20 ms apart
// from the 4th on, printing "edge VALUE" for each, then 80 points
// "many"/"p10" ... "many"/"p89", each its own site
// (tests/tools/points/points_record_test.cc reads them back).
//   fieldprof_pointsprog N --quiet-first MS
// passes no point for MS ms, then runs N rounds with about 1 us of work
// between them (a program quiet at first, then busy), and prints the sum.
//   fieldprof_pointsprog N --jump-out MS
// passes N points "jump"/"tick" (value: the point's number from 0) while a
// SIGPROF handler, every 20 us, jumps out of whatever it cut into
// (siglongjmp), a point's push too; then, without the handler, passes
// points about 1 us apart for MS ms more, and prints "points P jumps J":
// the points begun, and the jumps (each cut off at most one point).
//   fieldprof_pointsprog N --threads T
// runs T threads at once (none goes on past its first point before all
// have passed theirs), each a "threads"/"thread" scope around N rounds
// of a "threads"/"work" scope and a point "threads"/"step" (one tag across
// the threads), and prints the sum. With --threads-in-turn T, the same T
// threads one after the other, each started when the one before ended,
// and it prints the threads' ids in turn ("tids T1 T2 ...") and how much
// its resident memory grew meanwhile ("rss_growth_kib K") too.
//   fieldprof_pointsprog N --fork
// begins "fork"/"around", runs N rounds of a "fork"/"parent" scope, forks
// a child that runs N/2 rounds of "fork"/"child" and ends "around" too,
// then, once the child has exited, N more rounds and the end of "around".
#include <fieldprof/points.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/support/sigprof_timer.h"

namespace {

unsigned long Mix(unsigned long x, int rounds) {
  for (int i = 0; i < rounds; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

unsigned long Parse(unsigned long x) {
  FP_SCOPE("startup", "parse");
  return Mix(x, 100);
}

// What a packed event's fields must hold: 0, each byte length's edges,
// and both ends of int64_t.
const int64_t kEdgeValues[] = {0,
                               1,
                               -1,
                               63,
                               -64,
                               64,
                               127,
                               128,
                               -129,
                               1 << 20,
                               -(1 << 23),
                               INT32_MAX,
                               INT32_MIN,
                               int64_t{1} << 40,
                               -(int64_t{1} << 47),
                               int64_t{1} << 50,
                               int64_t{1} << 55,
                               INT64_MAX,
                               INT64_MIN,
                               0};

#define FP_MANY1(n) FP_POINT("many", "p" #n)
#define FP_MANY10(d) \
  do {               \
    FP_MANY1(d##0);  \
    FP_MANY1(d##1);  \
    FP_MANY1(d##2);  \
    FP_MANY1(d##3);  \
    FP_MANY1(d##4);  \
    FP_MANY1(d##5);  \
    FP_MANY1(d##6);  \
    FP_MANY1(d##7);  \
    FP_MANY1(d##8);  \
    FP_MANY1(d##9);  \
  } while (0)

void Values() {
  int n = 0;
  for (const int64_t v : kEdgeValues) {
    if (++n > 3) {
      const timespec pause{0, 20 * 1000 * 1000};  // a TSC delta of 4 bytes or more
      nanosleep(&pause, nullptr);
    }
    FP_POINT_V("edge", "v", v);
    std::printf("edge %lld\n", static_cast<long long>(v));
  }
  FP_MANY10(1);
  FP_MANY10(2);
  FP_MANY10(3);
  FP_MANY10(4);
  FP_MANY10(5);
  FP_MANY10(6);
  FP_MANY10(7);
  FP_MANY10(8);
}

sigjmp_buf g_out;
void JumpOut(int) { siglongjmp(g_out, 1); }

int JumpOutOfPoints(long n, long ms) {
  // Kept in memory: a jump back leaves registers as they were at the set.
  static volatile long begun = 0, jumps = 0;  // (no ++ on volatile: C++20)
  static timer_t timer{};
  // The jump keeps SIGPROF blocked, as in the handler, and it is let in
  // here: siglongjmp's own unblocking, in the handler's frame, would let
  // the next one in on top of it, and so on.
  sigset_t prof;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  if (sigsetjmp(g_out, 0) != 0) {
    jumps = jumps + 1;
    sigprocmask(SIG_UNBLOCK, &prof, nullptr);
  } else if (!StartSigprofEvery20us(JumpOut, 0, &timer)) {  // it has somewhere to jump to now
    return 1;
  }
  while (begun < n) {
    const long i = begun;
    begun = i + 1;
    FP_POINT_V("jump", "tick", i);
  }
  timer_delete(timer);
  signal(SIGPROF, SIG_IGN);  // one may be on its way
  timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  unsigned long sum = 0;
  do {
    for (int k = 0; k < 1000; ++k) {
      const long i = begun;
      begun = i + 1;
      FP_POINT_V("jump", "tick", i);
      sum += Mix(sum, 300) & 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
  std::printf("points %ld jumps %ld sum %lu\n", static_cast<long>(begun), static_cast<long>(jumps),
              sum);
  return 0;
}

// The process's resident memory, KiB (VmRSS); -1 if unknown.
long RssKib() {
  FILE* f = std::fopen("/proc/self/status", "re");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

int Threads(long n, int threads, bool in_turn) {
  const long rss0 = RssKib();
  std::vector<unsigned long> sums(static_cast<size_t>(threads));
  std::vector<long> tids(static_cast<size_t>(threads));
  std::vector<std::thread> running;
  // At once: no thread goes on past its first point before every thread
  // has passed its own.
  std::barrier all_begun(in_turn ? 1 : threads);
  for (int t = 0; t < threads; ++t) {
    running.emplace_back(
        [n, &all_begun, &sum = sums[static_cast<size_t>(t)], &tid = tids[static_cast<size_t>(t)]] {
          tid = gettid();
          FP_SCOPE("threads", "thread");
          all_begun.arrive_and_wait();
          for (long i = 0; i < n; ++i) {
            FP_SCOPE("threads", "work");
            sum += Mix(sum + static_cast<unsigned long>(i), 20) & 1;
            FP_POINT("threads", "step");
          }
        });
    if (in_turn) running.back().join();
  }
  unsigned long sum = 0;
  for (int t = 0; t < threads; ++t) {
    if (!in_turn) running[static_cast<size_t>(t)].join();
    sum += sums[static_cast<size_t>(t)];
  }
  std::printf("sum %lu\n", sum);
  if (in_turn) {
    std::printf("rss_growth_kib %ld\ntids", RssKib() - rss0);
    for (const long tid : tids) std::printf(" %ld", tid);
    std::printf("\n");
  }
  return 0;
}

unsigned long Rounds(long n, bool child) {
  unsigned long sum = 0;
  for (long i = 0; i < n; ++i) {
    if (child) {
      FP_SCOPE("fork", "child");
      sum += Mix(sum, 20) & 1;
    } else {
      FP_SCOPE("fork", "parent");
      sum += Mix(sum, 20) & 1;
    }
  }
  return sum;
}

int Fork(long n) {
  FP_BEGIN("fork", "around");
  unsigned long sum = Rounds(n, false);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    sum += Rounds(n / 2, true);
    FP_END("fork", "around");
    std::printf("child %lu\n", sum);
    return 0;
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return 1;
  }
  sum += Rounds(n, false);
  FP_END("fork", "around");
  std::printf("parent %lu\n", sum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (argc > 2 && !std::strcmp(argv[2], "--values")) {
    Values();
    return 0;
  }
  if (argc > 3 && !std::strcmp(argv[2], "--until")) {
    const long n = std::atol(argv[1]);
    unsigned long sum = 0;
    long rounds = 0;
    while (access(argv[3], F_OK) != 0) {
      for (long i = 0; i < n; ++i, ++rounds) {
        FP_POINT("startup", "load");
        sum += Parse(static_cast<unsigned long>(i)) & 0xff;
        FP_POINT_V("startup", "parsed", i);
      }
      const timespec pause{0, 20 * 1000 * 1000};
      nanosleep(&pause, nullptr);
    }
    std::printf("sum %lu rounds %ld\n", sum, rounds);
    return 0;
  }
  if (argc > 3 && !std::strcmp(argv[2], "--threads")) {
    return Threads(std::atol(argv[1]), std::atoi(argv[3]), false);
  }
  if (argc > 3 && !std::strcmp(argv[2], "--threads-in-turn")) {
    return Threads(std::atol(argv[1]), std::atoi(argv[3]), true);
  }
  if (argc > 2 && !std::strcmp(argv[2], "--fork")) return Fork(std::atol(argv[1]));
  if (argc > 3 && !std::strcmp(argv[2], "--jump-out")) {
    return JumpOutOfPoints(std::atol(argv[1]), std::atol(argv[3]));
  }
  if (argc > 3 && !std::strcmp(argv[2], "--quiet-first")) {
    const long ms = std::atol(argv[3]);
    const timespec quiet{ms / 1000, ms % 1000 * 1000 * 1000};
    nanosleep(&quiet, nullptr);
    const long n = std::atol(argv[1]);
    unsigned long sum = 0;
    for (long i = 0; i < n; ++i) {
      FP_POINT("startup", "load");
      sum += Parse(static_cast<unsigned long>(i)) & 0xff;
      FP_POINT_V("startup", "parsed", i);
      sum += Mix(sum, 600) & 1;
    }
    std::printf("sum %lu\n", sum);
    return 0;
  }
  if (argc > 2 && !std::strcmp(argv[2], "--arm")) fieldprof_point_semaphore = 1;
  const long n = std::atol(argv[1]);
  const bool bad = argc > 2 && !std::strcmp(argv[2], "--bad");
  unsigned long sum = 0;
  for (long i = 0; i < n; ++i) {
    FP_POINT("startup", "load");
    sum += Parse(static_cast<unsigned long>(i)) & 0xff;
    FP_POINT_V("startup", "parsed", i);
    if (bad) {
      FP_POINT("/home/alice/notes", "load");
      FP_POINT("startup2", "alice wrote this");
    }
  }
  std::printf("sum %lu\n", sum);
  if (argc > 2 && !std::strcmp(argv[2], "--exec")) {
    std::fflush(stdout);
    execl("/bin/true", "true", static_cast<char*>(nullptr));
    return 127;
  }
  return 0;
}
