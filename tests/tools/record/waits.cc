// Programs that wait in known places, for fieldprof record's idle
// transitions:
//   waits pingpong N  two threads hand a turn back and forth N times over a
//                     mutex and condition variable (2N waits)
//   waits pingpong-rings N
//                     the same, each player with its own context-switch
//                     perf_event ring (as fieldprof record opens), whose
//                     records it discards after each turn: what the
//                     kernel's switch records cost by themselves
//   waits sleeper N   N sleeps of 1 ms in nanosleep
//   waits pipe N      a reader reads N messages from a pipe, each written
//                     by a second thread 1 ms after the last
//   waits locks N     N locks and unlocks of a mutex on the one thread: no
//                     lock can wait, what a wrapper of pthread_mutex_lock
//                     costs by itself (sqlite3 takes 1.6 million in the
//                     sqlite3 workload)
// Each prints what it did and exits 0. On stderr: how long the waits took,
// and each thread's voluntary and involuntary context switches as the
// kernel counts them (/proc/thread-self/status), to check a recording's
// switch counts against; for the players also as their own code began
// ("started TID VOLUNTARY INVOLUNTARY"): a switch before then may come
// before a sampler in the program watches the thread.
#include <linux/perf_event.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

struct Switches {
  long tid = 0, voluntary = 0, involuntary = 0;
};

// The calling thread's context switches so far, as the kernel counts them.
// Not inlined: its own waits (opening and reading /proc, while the other
// player exits) are told apart from the turns' by its frame.
__attribute__((noinline)) Switches ReadSwitches() {
  std::ifstream in("/proc/thread-self/status");
  std::string line, tid, vol, invol;
  while (std::getline(in, line)) {
    auto value = [&](const char* key) {
      return line.rfind(key, 0) == 0 ? line.substr(line.find(':') + 1) : std::string();
    };
    if (line.rfind("Pid:", 0) == 0) tid = value("Pid:");
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) vol = value("voluntary_ctxt_switches:");
    if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
      invol = value("nonvoluntary_ctxt_switches:");
    }
  }
  return {std::stol(tid), std::stol(vol), std::stol(invol)};
}

// "switches TID VOLUNTARY INVOLUNTARY"
void Print(const Switches& s) {
  std::fprintf(stderr, "switches %ld %ld %ld\n", s.tid, s.voluntary, s.involuntary);
}

void PrintSwitches() { Print(ReadSwitches()); }

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
long g_turn = 0;  // even: the first thread's turn, odd: the second's
long g_rounds = 0;

__attribute__((noinline)) void WaitForTurn(long parity) {
  pthread_mutex_lock(&g_mu);
  while (g_turn % 2 != parity && g_turn < 2 * g_rounds) pthread_cond_wait(&g_cv, &g_mu);
  ++g_turn;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

// Both players begin their turns once both exist: the second's creation
// (its stack mapped, the recorder's rings opened for it) can make the
// first wait on the process's memory map at a page fault, a wait at no
// lock call.
pthread_barrier_t g_start;

Switches g_players[2];
Switches g_started[2];  // each player's count as its own code began
bool g_rings = false;   // pingpong-rings

// This thread's context-switch ring, as the sampler opens it (switches.cc);
// null when the kernel refuses.
perf_event_mmap_page* OpenSwitchRing() {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_DUMMY;
  a.context_switch = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.sample_id_all = 1;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  const int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  if (fd < 0) return nullptr;
  void* map = mmap(nullptr, 65 * static_cast<size_t>(sysconf(_SC_PAGESIZE)), PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
  return map == MAP_FAILED ? nullptr : static_cast<perf_event_mmap_page*>(map);
}

// Each player reads its count last, and main prints it: a thread's own
// printing could wait on stdio's lock after the count was read.
void* Player(void* arg) {
  const long parity = reinterpret_cast<long>(arg);
  g_started[parity] = ReadSwitches();
  perf_event_mmap_page* ring = g_rings ? OpenSwitchRing() : nullptr;
  if (g_rings && ring == nullptr) {
    std::fprintf(stderr, "waits: perf_event_open refused a switch ring\n");
    std::exit(1);
  }
  pthread_barrier_wait(&g_start);
  for (long i = 0; i < g_rounds; ++i) {
    WaitForTurn(parity);
    if (ring != nullptr) {  // consumed unread
      __atomic_store_n(&ring->data_tail, __atomic_load_n(&ring->data_head, __ATOMIC_ACQUIRE),
                       __ATOMIC_RELEASE);
    }
  }
  g_players[parity] = ReadSwitches();
  return nullptr;
}

__attribute__((noinline)) void SleepAWhile() {
  timespec ts{0, 1000 * 1000};
  nanosleep(&ts, nullptr);
}

int g_pipe[2];

void* Writer(void* arg) {
  const long n = reinterpret_cast<long>(arg);
  for (long i = 0; i < n; ++i) {
    SleepAWhile();
    const char c = 'x';
    if (write(g_pipe[1], &c, 1) != 1) return nullptr;
  }
  close(g_pipe[1]);
  PrintSwitches();
  return nullptr;
}

__attribute__((noinline)) long ReadMessages() {
  long got = 0;
  char c;
  while (read(g_pipe[0], &c, 1) == 1) ++got;
  return got;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: waits pingpong|pingpong-rings|sleeper|pipe|locks N\n");
    return 2;
  }
  const long n = std::atol(argv[2]);
  const auto start = std::chrono::steady_clock::now();
  g_rings = std::strcmp(argv[1], "pingpong-rings") == 0;
  if (std::strcmp(argv[1], "pingpong") == 0 || g_rings) {
    g_rounds = n;
    pthread_t a, b;
    pthread_barrier_init(&g_start, nullptr, 2);
    pthread_create(&a, nullptr, Player, reinterpret_cast<void*>(0L));
    pthread_create(&b, nullptr, Player, reinterpret_cast<void*>(1L));
    pthread_join(a, nullptr);
    pthread_join(b, nullptr);
    std::printf("pingpong: %ld turns\n", g_turn);
    for (const Switches& s : g_started) {
      std::fprintf(stderr, "started %ld %ld %ld\n", s.tid, s.voluntary, s.involuntary);
    }
    Print(g_players[0]);
    Print(g_players[1]);
  } else if (std::strcmp(argv[1], "sleeper") == 0) {
    for (long i = 0; i < n; ++i) SleepAWhile();
    std::printf("sleeper: %ld sleeps\n", n);
  } else if (std::strcmp(argv[1], "pipe") == 0) {
    if (pipe(g_pipe) != 0) return 1;
    pthread_t w;
    pthread_create(&w, nullptr, Writer, reinterpret_cast<void*>(n));
    const long got = ReadMessages();
    pthread_join(w, nullptr);
    std::printf("pipe: %ld messages\n", got);
  } else if (std::strcmp(argv[1], "locks") == 0) {
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    for (long i = 0; i < n; ++i) {
      pthread_mutex_lock(&m);
      pthread_mutex_unlock(&m);
    }
    std::printf("locks: %ld\n", n);
  } else {
    std::fprintf(stderr, "waits: unknown mode %s\n", argv[1]);
    return 2;
  }
  std::fprintf(
      stderr, "elapsed %.3f ms\n",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  PrintSwitches();
  return 0;
}
