// libfieldprof-sampler.so: the in-process half of `fieldprof record`,
// preloaded into the command and every program it starts.
//
// Every thread has its own sampling clock, which signals that thread about
// `hz` times per second of its CPU time: a perf_event task-clock counter on
// the thread, by synchronous SIGTRAP where the kernel can (sigtrap.cc),
// else SIGURG (an hrtimer either way, so the rate asked for;
// user time only where perf_event_paranoid is 2 and the kernel refuses
// more), else a timer_create timer on CLOCK_THREAD_CPUTIME_ID, which fires
// at most once per kernel tick (about 250 samples per CPU second here,
// whatever the rate asked). --wall uses CLOCK_MONOTONIC timers. A timer on
// the whole process was tried first: the kernel hands its signal to
// whichever thread it picks, and with two busy threads one got 70% of the
// samples. Threads started with pthread_create get their clock as they
// begin (the function is wrapped); the main thread at load. Each thread
// also gets its switch ring (switches.cc) unless idle transitions are off. The handler unwinds the
// interrupted thread's stack with libunwind (DWARF CFI: through Debian's libraries, which have no
// frame pointers) into the thread's ring (stack_rings.cc), drained into DIR/rec-PID-START.raw
// with the loaded modules, so a killed program leaves a file readable up
// to its last drain. A process that never starts a thread of its own is
// drained by its own thread, from the handler and after a wait, every 50
// ms or 512 records: a thread of ours would make it multi-threaded, and
// glibc then takes its locks (malloc's, every pthread mutex) with atomic
// instructions, about 4% of sqlite3's time. At the program's first
// pthread_create a writer thread takes over and drains every 20 ms. The command line turns the
// raw files into a recording (tools/record/recording.h).
//
// Safety: the handler takes no lock it can find held. It never runs while
// its thread holds the dynamic linker's lock, or takes it (seen by the
// lock itself, linker_lock.h: inside dl_iterate_phdr, the stretches of
// dlopen and dlclose that change the list of loaded objects, and libc's
// own loading; where the lock is not found, all of dlopen and dlclose),
// where libunwind's own lookup of unwind tables would wait on the lock
// that thread holds, or walk the list of loaded objects in the middle of
// a change; such samples are counted as skipped. errno is kept. After
// fork the child starts its own file and timer.
#define UNW_LOCAL_ONLY
#include "agent/preload/sampler/sampler.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <libunwind.h>
#include <link.h>
#include <linux/futex.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "agent/preload/base/fork_hooks.h"
#include "agent/preload/base/image_end.h"
#include "agent/preload/base/linker_lock.h"
#include "agent/preload/base/loader_calls.h"
#include "agent/preload/base/unwinder_io.h"
#include "common/stacks/sampler_format.h"

namespace fieldprof::sampler {
thread_local int t_in_loader = 0;
thread_local int t_in_handler = 0;
}  // namespace fieldprof::sampler

namespace {

using fieldprof::raw::BlockedHeader;
using fieldprof::raw::kMaxFrames;
using fieldprof::raw::SampleHeader;
using namespace fieldprof::sampler;  // NOLINT: this library's own parts

std::atomic<uint64_t> g_skipped{0}, g_throttled{0};
// Records committed since the last drain, counted only while the process
// has no writer thread (its one thread records and drains).
uint64_t g_pending_records = 0;
// The process's raw file, DIR/rec-PID-START.raw. Sampled from outside
// (fieldprof record's default), it holds only the process's idle
// transitions, and most short processes (a compiler's passes, a shell's
// children before their exec) have none: then the file is made at the
// first flush with a record in it (g_has_records), or at the end if the
// trailer counts anything, and a process with nothing to say leaves none.
// Making a file took 0.6-1 ms of the program's system time on a fresh VM
// whose ext4 still initialised its inode tables, 11-25 us once settled
// (reading one: 3 us). Its path is absolute, so a program that changes
// its directory first (make -C) still makes it. (Not a directory
// descriptor held from the start: a program that closes the descriptors
// it did not open, closefrom(3), would take it, or have its own number
// closed by us.)
int g_fd = -1;
bool g_recording = false;    // a file is written, or to be made when needed
bool g_has_records = false;  // a record past the header and the modules
char g_path[4096];
bool g_on = false;  // sampling in this process
// 1: the writer stops. A futex word, so that Stop() wakes the writer at
// once instead of waiting out its sleep (each process's exit did: up to
// 20 ms on the program's wall time).
std::atomic<int> g_stop{0};
static_assert(sizeof(std::atomic<int>) == sizeof(int));
pthread_t g_writer{};
bool g_writer_on = false;
uint64_t g_last_drain_ns = 0;  // while there is no writer: the last drain by the program's thread
uint64_t g_period_ns = 0;
bool g_wall = false;
bool g_idle = false;  // watch switches off and onto the CPU
pid_t g_pid = 0;      // the process recording (a vfork child shares our memory, not our pid)
uint32_t g_source = fieldprof::raw::kThreadTimers;
bool g_trap = false;           // task-clock events signal by SIGTRAP (sigtrap.cc)
bool g_stepped_aside = false;  // no samples: the program owns their signals
bool g_aside = false;          // a seccomp filter: nothing more in this process
unsigned long long g_modules_adds = ~0ull;

thread_local uint32_t t_tid = 0;
// No sample on this thread before this time (see OnSample's throttle).
thread_local uint64_t t_resume_ns = 0;
thread_local timer_t t_timer{};
thread_local bool t_timer_on = false;
thread_local int t_clock_fd = -1;  // the thread's task-clock event
// The thread's sampling clock at its previous sample (SampleClockNs).
thread_local uint64_t t_last_clock_ns = 0;
thread_local bool t_clock_seen = false;
using preload::InLinkerCall;

using PthreadCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
PthreadCreate g_real_pthread_create = nullptr;
FP_NEXT_SLOT(g_real_pthread_create, "pthread_create");
PthreadCreate RealPthreadCreate() { return Next(&g_real_pthread_create, "pthread_create"); }

void StopThreadTimer();

// Stops a thread's sampling when it ends, also by pthread_exit.
struct ThreadEnd {
  bool armed = false;
  ~ThreadEnd() {
    if (armed) StopThreadTimer();
  }
};
thread_local ThreadEnd t_end;

// This thread's sampling clock and switch ring.
void StartThreadTimer() {
  if (!g_on || t_end.armed) return;
  t_end.armed = true;
  OpenStackRing();
  if (g_idle) WatchThreadSwitches();
  using fieldprof::raw::kNoSamples;
  using fieldprof::raw::kTaskClock;
  using fieldprof::raw::kTaskClockUser;
  if (g_source == kNoSamples) return;  // sampled from outside, or stepped aside
  if (g_source == kTaskClock || g_source == kTaskClockUser) {
    t_clock_fd = OpenTaskClock(g_period_ns, g_source == kTaskClockUser, g_trap);
    if (t_clock_fd >= 0) return;
  }
  sigevent ev{};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = kSampleSignal;
  ev.sigev_value.sival_ptr = reinterpret_cast<void*>(kProfTimerValue);  // IsSampleSignal
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
  UnwatchThreadSwitches();
  if (t_clock_fd >= 0) {
    ioctl(t_clock_fd, PERF_EVENT_IOC_DISABLE, 0);
    if (IsPerfEvent(t_clock_fd)) close(t_clock_fd);
    t_clock_fd = -1;
  }
  if (t_timer_on) {
    timer_delete(t_timer);
    t_timer_on = false;
  }
  CloseStackRing();  // after the clock: no sample of the thread is lost to a closed ring
  t_end.armed = false;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The raw file's writes go through a buffer, flushed after each drain: at
// tens of thousands of switch records a second, a write per record took
// the writer thread more CPU than the program had to spare. The writer
// thread's only (and the process's end, after the writer stopped).
char g_buf[1 << 16];
size_t g_buf_len = 0;

bool MakeFile() {
  const int fd = open(g_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  g_fd = MoveFdHigh(fd);
  return true;
}

// `must`: the buffer is full, or the process ends with something to say.
void Flush(bool must = false) {
  if (g_fd < 0) {
    if (g_recording && !g_has_records && !must) return;  // kept: not worth a file yet
    // A vfork child (our memory, not our descriptors) leaves the file to
    // the parent, and the buffer and the state as they are.
    if (g_recording && getpid() != g_pid) return;
    if (!g_recording || !MakeFile()) {
      g_recording = false;
      g_buf_len = 0;
      return;
    }
  }
  const char* c = g_buf;
  size_t n = g_buf_len;
  g_buf_len = 0;
  while (n > 0 && g_fd >= 0) {
    // Not through the library's own write wrapper.
    const ssize_t w = syscall(SYS_write, g_fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk: the program goes on, the file ends here
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void WriteAll(const void* p, size_t n) {
  if (n > sizeof g_buf - g_buf_len) Flush(true);
  // Not flushed (in a vfork child), or no record is this large.
  if (n > sizeof g_buf - g_buf_len) return;
  memcpy(g_buf + g_buf_len, p, n);
  g_buf_len += n;
}

void DrainIfDue();

// Copies a sample (its header and `depth` return addresses) into the
// thread's ring.
void PutSample(const SampleHeader& h, const uint64_t* ips) {
  if (PutRecord('S', &h, sizeof h, ips, h.depth) && !g_writer_on) ++g_pending_records;
}

// The return addresses from the cursor's frame out.
uint16_t Unwind(unw_cursor_t* cursor, uint64_t* ips) {
  uint16_t depth = 0;
  do {
    unw_word_t ip = 0;
    if (unw_get_reg(cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    ips[depth++] = ip;
  } while (depth < kMaxFrames && unw_step(cursor) > 0);
  return depth;
}

constexpr int kHandlerFrames = 8;  // at most this many above the interrupted one

// libunwind's fast trace (unw_backtrace: each return address's frame rule
// cached after its first walk) from the handler itself, through the
// signal frame, into `ips`; returns where the interrupted instruction is in
// it (the stack is from there out), or -1 when the trace does not reach it
// (the slow walk then does it). A full unw_step walk from the signal's
// context cost about 115 us a sample on sqlite3 (80 ms of CPU in 690
// samples); this, a few.
int FastUnwind(const ucontext_t* uc, uint64_t* ips, int* n) {
  static_assert(sizeof(void*) == sizeof(uint64_t));
  *n = unw_backtrace(reinterpret_cast<void**>(ips), kMaxFrames + kHandlerFrames);
  const auto pc = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
  for (int i = 0; i < *n && i < kHandlerFrames; ++i) {
    if (ips[i] == pc) return i;
  }
  return -1;
}

// The clock the thread is sampled on, now: wall time (`now_ns`) with
// --wall; else its task-clock event's count (user time only where that is
// all it counts), or its CPU time.
uint64_t SampleClockNs(uint64_t now_ns) {
  if (g_wall) return now_ns;
  uint64_t count = 0;
  if (t_clock_fd >= 0 && read(t_clock_fd, &count, sizeof count) == sizeof count) return count;
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// What a sample taken now stands for: the clock since the thread's
// previous sample (for its first, since the thread began; with --wall,
// one period).
uint64_t SampleWeightNs(uint64_t now_ns) {
  const uint64_t clock = SampleClockNs(now_ns);
  const uint64_t weight = !t_clock_seen              ? (g_wall ? g_period_ns : clock)
                          : clock >= t_last_clock_ns ? clock - t_last_clock_ns
                                                     : 0;
  t_last_clock_ns = clock;
  t_clock_seen = true;
  return weight;
}

void OnSample(int, siginfo_t*, void* uc) {
  const int saved = errno;
  if (t_in_loader > 0 || InLinkerCall() || t_in_handler > 0 || !g_on) {
    g_skipped.fetch_add(1, std::memory_order_relaxed);
    errno = saved;
    return;
  }
  // The throttle: a sample whose unwind took longer than the period (a
  // cold unwind cache, a slow walk from a PLT stub through a hundred
  // frames) left the next signal pending as it returned, which then
  // interrupted the same instruction, took the same slow walk, and so on:
  // a program of 16 threads sampled at 10 kHz stopped making progress.
  // So after such a sample the thread runs three times what it cost before
  // the next is taken (sampling then keeps to about a quarter of its time,
  // as perf's default perf_cpu_time_max_percent); the samples held off are
  // counted. Not on the time alone: a thread descheduled in its handler
  // (a loaded machine) has no signal waiting, and keeps its samples.
  const uint64_t now_ns = NowNs();
  if (now_ns < t_resume_ns) {
    g_throttled.fetch_add(1, std::memory_order_relaxed);
    errno = saved;
    return;
  }
  t_in_handler = 1;
  if (t_tid == 0) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  // Inside libc's own loading (iconv, NSS), which passes no wrapper: the
  // thread may hold the dynamic linker's lock, or be taking it; in a fork
  // child, a thread that did not come along may hold it for good.
  if (fieldprof::preload::LoaderUnsafe(static_cast<int>(t_tid), 0)) {
    g_skipped.fetch_add(1, std::memory_order_relaxed);
    t_in_handler = 0;
    errno = saved;
    return;
  }
  SampleHeader h{};
  h.time_ns = now_ns;
  h.tid = t_tid;
  h.weight_ns = SampleWeightNs(now_ns);
  const int cpu = sched_getcpu();
  h.cpu = static_cast<uint16_t>(cpu < 0 ? 0xffff : cpu);
  uint64_t ips[kMaxFrames + kHandlerFrames];
  int n = 0;
  {
    // libunwind's memory check off the program's descriptors, errno clear.
    fieldprof::preload::UnwindScope unwinding;
    const int first = FastUnwind(static_cast<const ucontext_t*>(uc), ips, &n);
    if (first >= 0) {
      h.depth = static_cast<uint16_t>(std::min(n - first, kMaxFrames));
      PutSample(h, ips + first);
    } else {
      unw_cursor_t cursor;
      if (unw_init_local2(&cursor, static_cast<unw_context_t*>(uc), UNW_INIT_SIGNAL_FRAME) == 0) {
        h.depth = Unwind(&cursor, ips);
      }
      PutSample(h, ips);
    }
  }
  DrainIfDue();  // also when the ring was full
  if (const uint64_t end_ns = NowNs(); end_ns - now_ns > g_period_ns / 2) {
    sigset_t pending;  // a system call, on slow samples only
    if (sigpending(&pending) == 0 && sigismember(&pending, g_trap ? SIGTRAP : kSampleSignal) == 1) {
      t_resume_ns = end_ns + 3 * (end_ns - now_ns);
    }
  }
  t_in_handler = 0;
  errno = saved;
}

// The writer's modules, when anything was loaded since the last look. A
// fork child whose parent had another thread in the dynamic linker at the
// fork lists none until it execs (fork_hooks.h).
void WriteModules() {
  if (preload::LoaderStuck()) return;
  ListModulesIfChanged(&g_modules_adds, WriteAll);
}

// Returns whether a switch ring or the ring was filling up (drain again
// soon).
bool Drain() {
  WriteModules();
  const bool full = DrainStackRings();
  g_pending_records = 0;
  // Switch records after the stacks: a blocked call's stack is recorded
  // after its switches, and the reader pairs them wherever they lie.
  const bool busy = DrainSwitches();
  Flush();
  return busy || full;
}

// While the process has no writer thread, its one thread drains what is
// due: 50 ms after the last drain, or 512 records waiting (a blocked call's
// record stands for two switch records: 512 fill a quarter of the switch
// ring). From the handler, or after a blocked call (the handler held off).
void DrainIfDue() {
  if (g_writer_on || !g_recording) return;  // the writer drains; no clock read
  if (g_pending_records < 512) {
    const uint64_t now_ns = NowNs();
    if (now_ns - g_last_drain_ns < 50 * 1000 * 1000) return;
  }
  g_last_drain_ns = NowNs();
  Drain();
}

void* WriterMain(void*) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // samples land on the program's threads
  bool busy = false;
  while (g_stop.load() == 0) {
    // 20 ms, or 2 when a thread's switches fill its ring fast; a raw
    // futex, not through the wrappers.
    timespec ts{0, (busy ? 2 : 20) * 1000 * 1000};
    syscall(SYS_futex, reinterpret_cast<int*>(&g_stop), FUTEX_WAIT_PRIVATE, 0, &ts, nullptr, 0);
    busy = Drain();
  }
  return nullptr;
}

// Whether the program has put its own handler on kSampleSignal, the signal
// the in-process clocks sample by, with the raw system call (past the wrapped
// sigaction): its samples then went to the program, but none to us, and
// fieldprof record says so.
bool SamplingSignalTaken() {
  using fieldprof::raw::kNoSamples;
  if (g_trap || g_source == kNoSamples) return false;
  return SampleSignalTaken();
}

// The program starts its first thread: the writer takes over the drains
// (no sample drains on this thread while it starts).
void StartWriter() {
  if (g_writer_on || !g_recording) return;
  ++t_in_loader;
  g_stop = 0;
  g_writer_on = RealPthreadCreate()(&g_writer, nullptr, WriterMain, nullptr) == 0;
  --t_in_loader;
}

void Start() {
  if (g_aside) return;
  g_modules_adds = ~0ull;  // a new file lists the modules again
  const char* dir = getenv("FIELDPROF_RECORD_DIR");
  if (dir == nullptr || dir[0] == 0) return;
  const char* hz_text = getenv("FIELDPROF_RECORD_HZ");
  const long hz = hz_text != nullptr ? strtol(hz_text, nullptr, 10) : 999;
  if (hz < 1 || hz > 100000) return;
  g_period_ns = 1000000000ull / static_cast<uint64_t>(hz);
  const char* wall = getenv("FIELDPROF_RECORD_WALL");
  g_wall = wall != nullptr && wall[0] == '1';
  const char* idle = getenv("FIELDPROF_RECORD_IDLE");
  g_idle = idle == nullptr || idle[0] != '0';
  const SourceChoice choice = ChooseSource(g_period_ns, g_wall);
  g_source = choice.source;
  g_trap = choice.trap;
  g_stepped_aside = choice.stepped_aside;
  const uint64_t start = NowNs();
  g_pid = getpid();
  // fieldprof record passes it absolute; one set by hand is taken from
  // where the process starts.
  char cwd[2048] = "";
  if (dir[0] != '/' && getcwd(cwd, sizeof cwd) == nullptr) return;
  const int len =
      snprintf(g_path, sizeof g_path, "%s%s%s/rec-%d-%llu.raw", cwd, cwd[0] != 0 ? "/" : "", dir,
               static_cast<int>(g_pid), static_cast<unsigned long long>(start));
  if (len < 0 || static_cast<size_t>(len) >= sizeof g_path) return;
  const bool lazy = g_source == fieldprof::raw::kNoSamples && !g_stepped_aside;
  g_has_records = false;
  if (!lazy && !MakeFile()) return;
  g_recording = true;
  fieldprof::raw::FileHeader fh{};
  memcpy(fh.magic, fieldprof::raw::kMagic, sizeof fh.magic);
  fh.pid = static_cast<uint32_t>(g_pid);
  fh.start_ns = start;
  fh.hz = static_cast<uint32_t>(hz);
  fh.wall = g_wall ? 1 : 0;
  fh.source = g_source;
  fh.idle = g_idle ? 1 : 0;
  fh.flags = g_stepped_aside ? fieldprof::raw::kSteppedAside : 0;
  WriteAll(&fh, sizeof fh);
  Flush();
  {
    // libunwind opens its memory-check pipe at its first use: ours.
    fieldprof::preload::OpenUnwinderPipe();
    fieldprof::preload::UnwindScope unwinding;
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  }
  if (g_trap && !OwnTrapSignal(OnSample)) g_trap = false;
  if (!g_trap && g_source != fieldprof::raw::kNoSamples) {
    OwnSampleSignal(OnSample);
  }
  g_stop = 0;
  g_last_drain_ns = start;
  g_on = true;
  StartThreadTimer();
}

void Stop() {
  // Under a seccomp filter, once stopped: not a call more. (A file that
  // could not be made when first needed leaves the sampler on, and its
  // writer running, until then.)
  if (g_aside && !g_on) return;
  ++t_in_handler;  // a signal's handler that calls _exit meanwhile leaves the file to us
  StopThreadTimer();
  g_on = false;  // other threads' timers fire into a handler that takes nothing
  if (g_writer_on) {
    g_stop = 1;
    syscall(SYS_futex, reinterpret_cast<int*>(&g_stop), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    pthread_join(g_writer, nullptr);
    g_writer_on = false;
  }
  if (g_recording) {
    Drain();
    fieldprof::raw::Trailer t{};
    t.end_ns = NowNs();
    t.dropped = StackRecordsDropped();
    t.skipped = g_skipped.load();
    t.throttled = g_throttled.load();
    t.switches_lost = SwitchesLost();
    t.threads_unwatched = ThreadsUnwatched();
    t.signal_taken = SamplingSignalTaken() ? 1 : 0;
    t.seccomp_aside = g_aside ? 1 : 0;
    const char tag = 'E';
    WriteAll(&tag, 1);
    WriteAll(&t, sizeof t);
    Flush(t.dropped != 0 || t.skipped != 0 || t.throttled != 0 || t.switches_lost != 0 ||
          t.threads_unwatched != 0 || t.signal_taken != 0 || t.seccomp_aside != 0);
    if (g_fd >= 0) close(g_fd);
    g_fd = -1;
    g_buf_len = 0;  // a file not made: the process had nothing to say
    g_recording = false;
  }
  // Other threads' switch rings stay mapped: they may be in a wrapped call
  // as the process ends (or the exec fails), and exit or exec frees them.
  --t_in_handler;
}

void AfterForkInChild() {
  // The parent's timers, clocks, rings and writer are not the child's:
  // start anew.
  ForgetSwitchesAfterFork();
  if (t_clock_fd >= 0 && IsPerfEvent(t_clock_fd)) close(t_clock_fd);
  t_clock_fd = -1;
  t_timer_on = false;
  t_end.armed = false;
  g_on = false;
  g_writer_on = false;
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
  g_recording = false;
  g_buf_len = 0;  // the parent's, not yet written
  ForgetStackRingsAfterFork();
  g_pending_records = 0;
  g_skipped = 0;  // the parent's, in its own trailer
  g_throttled = 0;
  g_modules_adds = ~0ull;
  t_tid = 0;
  t_last_clock_ns = 0;  // the child's clocks start anew
  t_clock_seen = false;
  Start();
}

__attribute__((constructor)) void Init() {
  preload::FillEveryNextIfStale();
  fieldprof::preload::FindLinkerLock(fieldprof::preload::RealDlIteratePhdr);
  Start();
  preload::AtFork(preload::RealDlIteratePhdr, nullptr, AfterForkInChild);
}

__attribute__((destructor)) void Fini() { Stop(); }

// A wrapper's next definition: filled at start and before a fork
// (preload::FillEveryNextIfStale); looked up at its first call only if
// missing then.
#define FP_NEXT(name, ...)       \
  using RealFn = __VA_ARGS__;    \
  static RealFn real_ = nullptr; \
  FP_NEXT_SLOT(real_, name);     \
  const auto real = Next(&real_, name)

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

// Before an exec: the process's recording ends here, whole (its last
// samples and a trailer), and no sample's signal is left pending for the
// new image, which gets the default action until the sampler loads in it
// again (SIGTRAP's ends the process); SIGTRAP's and kSampleSignal's dispositions are the program's
// again. Returns whether to Start() again if the exec fails.
bool EndBeforeExec() {
  if (!g_on || getpid() != g_pid) return false;  // not recording, or a vfork child
  Stop();
  sigset_t ours, old;
  sigemptyset(&ours);
  sigaddset(&ours, kSampleSignal);
  sigaddset(&ours, SIGTRAP);
  pthread_sigmask(SIG_BLOCK, &ours, &old);
  const timespec now{0, 0};
  // A pending signal that is not ours stays the program's.
  bool program_trap = false, program_sample = false;
  for (siginfo_t si; sigtimedwait(&ours, &si, &now) > 0;) {
    program_trap |= si.si_signo == SIGTRAP && !IsSampleTrap(&si);
    program_sample |= si.si_signo == kSampleSignal && !IsSampleSignal(&si);
  }
  ReturnTrapSignal();
  ReturnSampleSignal();
  if (program_trap) raise(SIGTRAP);  // pending again, blocked until the mask is back
  if (program_sample) raise(kSampleSignal);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return true;
}

}  // namespace

namespace fieldprof::sampler {

bool On() { return g_on; }

void WriteRecord(char tag, const void* p, size_t n) {
  g_has_records = true;
  WriteAll(&tag, 1);
  WriteAll(p, n);
}

__attribute__((noinline)) void RecordBlockedCall(uint32_t ring, uint64_t from, uint64_t to) {
  if (t_in_loader > 0 || InLinkerCall() || t_in_handler > 0 || !g_on) return;
  t_in_handler = 1;  // no sample while this unwinds
  if (t_tid == 0) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  if (fieldprof::preload::LoaderUnsafe(static_cast<int>(t_tid), 0)) {  // as in OnSample
    t_in_handler = 0;
    return;
  }
  // libunwind's fast trace, which caches each return address's frame
  // rule (a full unw_step walk cost ~10 us a wait); from the wrapper's
  // frame: this function's own is dropped.
  void* ips[kMaxFrames + 1];
  int n = 0;
  {
    fieldprof::preload::UnwindScope unwinding;  // as in OnSample
    n = unw_backtrace(ips, kMaxFrames + 1);
  }
  BlockedHeader b{};
  b.from = from;
  b.to = to;
  b.ring = ring;
  b.tid = t_tid;
  b.depth = static_cast<uint16_t>(n > 1 ? n - 1 : 0);
  if (PutRecord('B', &b, sizeof b, reinterpret_cast<const uint64_t*>(ips + 1), b.depth) &&
      !g_writer_on) {
    ++g_pending_records;
  }
  DrainIfDue();
  t_in_handler = 0;
}

}  // namespace fieldprof::sampler

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
  StartWriter();
  const int r = RealPthreadCreate()(t, attr, StartWithTimer, start);
  if (r != 0) free(start);
  return r;
}

}  // extern "C"

// The exec family, _exit, prctl and syscall, and the dynamic linker's
// calls, are agent/preload/base/'s (image_end.cc, seccomp_hooks.cc,
// loader_calls.cc); what the sampler does at each:
namespace fieldprof::preload {

// No sample unwinds inside the linker's calls (loader_calls.h, OnSample);
// nothing else to do around them.
int BeforeDlopen(const char*) { return 0; }
void AfterDlopen(void*, int) {}
void BeforeDlclose() {}
void AfterDlclose() {}

int BeforeExec() { return EndBeforeExec() ? 1 : 0; }

void AfterFailedExec(int was_on) {
  if (was_on != 0) Start();  // the exec failed: record on, into a new file
}

// _exit runs no destructor. A process with a writer thread keeps what the
// writer drained (up to 20 ms old); a process of one thread has no writer
// and would lose up to 50 ms, so it ends its file here, whole. Not in a
// vfork child (the parent's memory) nor from inside our own drains.
void BeforeExit() {
  if (g_on && !g_writer_on && t_in_handler == 0 && getpid() == g_pid) Stop();
}

// The sampler's writer, timers and unwinder make calls the program never
// does: before a filter is installed, the sampler ends its file (whole)
// and steps aside for the rest of the process. Forked children inherit
// the filter: they stay aside too.
void BeforeSeccomp() {
  if (!g_on || getpid() != g_pid) return;
  g_aside = true;
  Stop();
  StopWatchingSwitches();
}

// The lookup counts as being in the loader: no sample unwinds during it.
void FindNext(const char* const* names, uintptr_t* out, int n) {
  ++t_in_loader;
  for (int i = 0; i < n; ++i) {
    if (out[i] == 0) out[i] = reinterpret_cast<uintptr_t>(dlsym(RTLD_NEXT, names[i]));
  }
  --t_in_loader;
}

}  // namespace fieldprof::preload
