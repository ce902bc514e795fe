// libfieldprof_record.so: the in-process half of `fieldprof record`,
// preloaded into the command and every program it starts (issue #32).
//
// Every thread has its own timer (timer_create on CLOCK_THREAD_CPUTIME_ID,
// or CLOCK_MONOTONIC with --wall, delivered to that thread by
// SIGEV_THREAD_ID): SIGPROF about `hz` times per second of the thread's
// CPU time. A timer on the whole process was tried first: the kernel hands
// its signal to whichever thread it picks, and with two busy threads one
// got 70% of the samples. Threads started with pthread_create get their
// timer as they begin (the function is wrapped); the main thread at load. The handler unwinds the
// interrupted thread's stack with libunwind (DWARF CFI: through Debian's libraries, which have no
// frame pointers) into a ring of slots; a writer thread drains the ring every 20 ms into
// DIR/rec-PID-START.raw, with the loaded modules, so a killed program
// leaves a file readable up to its last drain. The command line turns the
// raw files into a recording (tools/local/recording.h).
//
// Safety: the handler takes no lock it can find held. It never runs while
// its thread is inside the dynamic linker (dlopen, dlclose,
// dl_iterate_phdr are wrapped), where libunwind's own lookup of unwind
// tables would wait on the lock that thread holds; such samples are
// counted as skipped. errno is kept. After fork the child starts its own
// file and timer.
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <fcntl.h>
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/local/raw_format.h"

namespace {

using fieldprof::local::raw::kMaxFrames;
using fieldprof::local::raw::SampleHeader;

constexpr uint32_t kSlots = 8192;

struct Slot {
  std::atomic<uint32_t> ready{0};
  SampleHeader h;
  uint64_t ips[kMaxFrames];
};

Slot* g_slots = nullptr;
std::atomic<uint64_t> g_head{0};
uint64_t g_tail = 0;  // the writer's
std::atomic<uint64_t> g_dropped{0}, g_skipped{0};
int g_fd = -1;
bool g_on = false;  // sampling in this process
std::atomic<bool> g_stop{false};
pthread_t g_writer{};
bool g_writer_on = false;
uint64_t g_period_ns = 0;
bool g_wall = false;
unsigned long long g_modules_adds = ~0ull;

thread_local int t_in_loader = 0;
thread_local int t_in_handler = 0;
thread_local uint32_t t_tid = 0;
thread_local timer_t t_timer{};
thread_local bool t_timer_on = false;

using PthreadCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
PthreadCreate RealPthreadCreate() {
  static const auto real = reinterpret_cast<PthreadCreate>(dlsym(RTLD_NEXT, "pthread_create"));
  return real;
}

// This thread's timer: SIGPROF to it every period of its CPU (or wall) time.
void StartThreadTimer() {
  if (!g_on || t_timer_on) return;
  sigevent ev{};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(g_wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ev, &t_timer) != 0) return;
  itimerspec its{};
  its.it_interval.tv_sec = static_cast<time_t>(g_period_ns / 1000000000ull);
  its.it_interval.tv_nsec = static_cast<long>(g_period_ns % 1000000000ull);
  its.it_value = its.it_interval;
  t_timer_on = timer_settime(t_timer, 0, &its, nullptr) == 0;
  if (!t_timer_on) timer_delete(t_timer);
}

void StopThreadTimer() {
  if (!t_timer_on) return;
  timer_delete(t_timer);
  t_timer_on = false;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void WriteAll(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0 && g_fd >= 0) {
    const ssize_t w = write(g_fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk: the program goes on, the file ends here
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void OnProf(int, siginfo_t*, void* uc) {
  const int saved = errno;
  if (t_in_loader > 0 || t_in_handler > 0 || g_slots == nullptr || !g_on) {
    g_skipped.fetch_add(1, std::memory_order_relaxed);
    errno = saved;
    return;
  }
  t_in_handler = 1;
  const uint64_t idx = g_head.fetch_add(1, std::memory_order_acq_rel);
  Slot& s = g_slots[idx % kSlots];
  if (s.ready.load(std::memory_order_acquire) != 0) {  // the writer is behind: drop
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    s.ready.store(2, std::memory_order_release);  // an empty slot, to keep the order
    t_in_handler = 0;
    errno = saved;
    return;
  }
  if (t_tid == 0) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  s.h.time_ns = NowNs();
  s.h.tid = t_tid;
  const int cpu = sched_getcpu();
  s.h.cpu = static_cast<uint16_t>(cpu < 0 ? 0xffff : cpu);
  uint16_t depth = 0;
  unw_cursor_t cursor;
  if (unw_init_local2(&cursor, static_cast<unw_context_t*>(uc), UNW_INIT_SIGNAL_FRAME) == 0) {
    do {
      unw_word_t ip = 0;
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
      s.ips[depth++] = ip;
    } while (depth < kMaxFrames && unw_step(&cursor) > 0);
  }
  s.h.depth = depth;
  s.ready.store(1, std::memory_order_release);
  t_in_handler = 0;
  errno = saved;
}

int OnModule(dl_phdr_info* info, size_t, void*) {
  uint64_t lo = ~0ull, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_LOAD || (p.p_flags & PF_X) == 0) continue;
    lo = std::min<uint64_t>(lo, info->dlpi_addr + p.p_vaddr);
    hi = std::max<uint64_t>(hi, info->dlpi_addr + p.p_vaddr + p.p_memsz);
  }
  if (hi == 0) return 0;
  char path[4096];
  const char* name = info->dlpi_name;
  if (name == nullptr || name[0] == 0) {  // the program itself
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n > 0 ? n : 0] = 0;
    name = path;
  }
  fieldprof::local::raw::ModuleHeader m{};
  m.bias = info->dlpi_addr;
  m.lo = lo;
  m.hi = hi;
  m.path_len = static_cast<uint16_t>(strnlen(name, 4095));
  const char tag = 'M';
  WriteAll(&tag, 1);
  WriteAll(&m, sizeof m);
  WriteAll(name, m.path_len);
  return 0;
}

// The writer's modules, when anything was loaded since the last look.
void WriteModules() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* a) {
        *static_cast<unsigned long long*>(a) = info->dlpi_adds;
        return 1;
      },
      &adds);
  if (adds == g_modules_adds) return;
  g_modules_adds = adds;
  dl_iterate_phdr(OnModule, nullptr);
}

void Drain() {
  WriteModules();
  const uint64_t head = g_head.load(std::memory_order_acquire);
  while (g_tail < head) {
    Slot& s = g_slots[g_tail % kSlots];
    const uint32_t r = s.ready.load(std::memory_order_acquire);
    if (r == 0) break;  // still being written: next time
    if (r == 1) {
      const char tag = 'S';
      WriteAll(&tag, 1);
      WriteAll(&s.h, sizeof s.h);
      WriteAll(s.ips, sizeof(uint64_t) * s.h.depth);
    }
    s.ready.store(0, std::memory_order_release);
    ++g_tail;
  }
}

void* WriterMain(void*) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // samples land on the program's threads
  while (!g_stop.load()) {
    timespec ts{0, 20 * 1000 * 1000};
    nanosleep(&ts, nullptr);
    Drain();
  }
  return nullptr;
}

void Start() {
  const char* dir = getenv("FIELDPROF_RECORD_DIR");
  if (dir == nullptr || dir[0] == 0) return;
  const char* hz_text = getenv("FIELDPROF_RECORD_HZ");
  const long hz = hz_text != nullptr ? strtol(hz_text, nullptr, 10) : 999;
  if (hz < 1 || hz > 100000) return;
  g_period_ns = 1000000000ull / static_cast<uint64_t>(hz);
  const char* wall = getenv("FIELDPROF_RECORD_WALL");
  g_wall = wall != nullptr && wall[0] == '1';
  if (g_slots == nullptr) {
    g_slots = static_cast<Slot*>(calloc(kSlots, sizeof(Slot)));
    if (g_slots == nullptr) return;
  }
  char path[4096];
  const uint64_t start = NowNs();
  snprintf(path, sizeof path, "%s/rec-%d-%llu.raw", dir, static_cast<int>(getpid()),
           static_cast<unsigned long long>(start));
  g_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (g_fd < 0) return;
  fieldprof::local::raw::FileHeader fh{};
  memcpy(fh.magic, fieldprof::local::raw::kMagic, sizeof fh.magic);
  fh.pid = static_cast<uint32_t>(getpid());
  fh.start_ns = start;
  fh.hz = static_cast<uint32_t>(hz);
  fh.wall = g_wall ? 1 : 0;
  WriteAll(&fh, sizeof fh);
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  struct sigaction sa {};
  sa.sa_sigaction = OnProf;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  g_stop = false;
  g_writer_on = RealPthreadCreate()(&g_writer, nullptr, WriterMain, nullptr) == 0;
  g_on = true;
  StartThreadTimer();
}

void Stop() {
  StopThreadTimer();
  g_on = false;  // other threads' timers fire into a handler that takes nothing
  if (g_writer_on) {
    g_stop = true;
    pthread_join(g_writer, nullptr);
    g_writer_on = false;
  }
  if (g_fd >= 0 && g_slots != nullptr) {
    Drain();
    fieldprof::local::raw::Trailer t{};
    t.end_ns = NowNs();
    t.dropped = g_dropped.load();
    t.skipped = g_skipped.load();
    const char tag = 'E';
    WriteAll(&tag, 1);
    WriteAll(&t, sizeof t);
    close(g_fd);
    g_fd = -1;
  }
}

void AfterForkInChild() {
  // The parent's timers and writer are not the child's: start anew.
  t_timer_on = false;
  g_on = false;
  g_writer_on = false;
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
  g_head = 0;
  g_tail = 0;
  g_modules_adds = ~0ull;
  if (g_slots != nullptr) {
    for (uint32_t i = 0; i < kSlots; ++i) g_slots[i].ready.store(0);
  }
  t_tid = 0;
  Start();
}

__attribute__((constructor)) void Init() {
  Start();
  pthread_atfork(nullptr, nullptr, AfterForkInChild);
}

__attribute__((destructor)) void Fini() { Stop(); }

template <typename F>
F Next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

struct ThreadStart {
  void* (*fn)(void*);
  void* arg;
};

void* StartWithTimer(void* p) {
  const ThreadStart start = *static_cast<ThreadStart*>(p);
  free(p);
  StartThreadTimer();
  void* r = start.fn(start.arg);
  StopThreadTimer();
  return r;
}

}  // namespace

extern "C" {

// Threads begin with their own timer. (A thread that exits through
// pthread_exit keeps its timer until the process ends; its signals find
// no thread and are dropped by the kernel.)
__attribute__((visibility("default"))) int pthread_create(pthread_t* t, const pthread_attr_t* attr,
                                                          void* (*fn)(void*), void* arg) {
  auto* start = static_cast<ThreadStart*>(malloc(sizeof(ThreadStart)));
  if (start == nullptr || !g_on) {
    free(start);
    return RealPthreadCreate()(t, attr, fn, arg);
  }
  *start = {fn, arg};
  const int r = RealPthreadCreate()(t, attr, StartWithTimer, start);
  if (r != 0) free(start);
  return r;
}

// The dynamic linker's entry points that hold its locks, wrapped so that no
// sample unwinds (and looks up unwind tables) while they are held.

__attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  static auto real = Next<void* (*)(const char*, int)>("dlopen");
  ++t_in_loader;
  void* r = real(file, mode);
  --t_in_loader;
  return r;
}

__attribute__((visibility("default"))) int dlclose(void* handle) {
  static auto real = Next<int (*)(void*)>("dlclose");
  ++t_in_loader;
  const int r = real(handle);
  --t_in_loader;
  return r;
}

__attribute__((visibility("default"))) int dl_iterate_phdr(int (*cb)(dl_phdr_info*, size_t, void*),
                                                           void* data) {
  static auto real = Next<int (*)(int (*)(dl_phdr_info*, size_t, void*), void*)>("dl_iterate_phdr");
  ++t_in_loader;
  const int r = real(cb, data);
  --t_in_loader;
  return r;
}

}  // extern "C"
