// libfieldprof-points.so: the in-process half of `fieldprof points record`,
// preloaded into the command and every program it starts.
//
// Arming. At load, and after each dlopen, every loaded module's USDT notes
// (.note.stapsdt, read from its file: the section is not loaded) are
// searched for the fieldprof:point probes of agent/include/fieldprof/
// points.h; their semaphore, one per module, is raised. From then on the
// module's points call fieldprof_point_hit, defined here. A process with
// no such module (a shell, make) gets no file and no thread.
//
// Recording. fieldprof_point_hit puts the event (TSC, site, value, kind)
// into its thread's ring: one writer (the thread), one reader (the drain
// thread), no lock, no system call. A full ring waits for the drain, 100
// ms at most, and counts the event as lost if no room came (ring.h).
// With points placed by configuration (--at) events are taken from the
// start, and the file and the drain thread wait for a module the plan
// names, so the processes around the program leave no file either.
// The drain thread empties every ring into DIR/points-PID-RAND.fppoints
// (points_format.h), a few bytes an event, naming each site the first time
// it sees it, with a clock pair (TSC, CLOCK_MONOTONIC) after each
// batch so the reader can turn ticks into ns. With FIELDPROF_POINTS_STACKS=1
// (points record --stacks) each event of a point in the program's code is
// followed in its ring by one of kind 3 naming its call stack: unwound by
// libunwind where the point is passed (0.2 us, several the first time
// through new code: docs/benchmarks-history.md), kept once
// per distinct stack ('K'), with the modules to read it against ('M').
// It wakes every 2 to 50 ms,
// so that the fullest ring is about a quarter full: each wake takes a CPU
// from the program. At exit the last events, the
// losses and an end mark are written; before an exec or _exit, the rings
// are drained. After fork the child starts its own file and drain thread.
//
// The parts: this file holds the process's state, the drain thread, the
// file's life and the library's entry points; arming.cc finds and raises
// the modules' switches; ring.cc is each thread's ring; drain.cc turns the
// rings into the file's batches; stacks.cc takes and keeps the stacks.
// The wrappers of exec, _exit, seccomp and the dynamic linker's calls are
// agent/preload/base/'s; this library's hooks are at the end.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "agent/include/fieldprof/points.h"
#include "agent/preload/base/fork_hooks.h"
#include "agent/preload/base/image_end.h"
#include "agent/preload/base/linker_lock.h"
#include "agent/preload/base/loader_calls.h"
#include "agent/preload/base/next_slots.h"
#include "agent/preload/base/recorder_abi.h"
#include "agent/preload/points/arming.h"
#include "agent/preload/points/auto_points.h"
#include "agent/preload/points/drain.h"
#include "agent/preload/points/ring.h"
#include "agent/preload/points/stacks.h"
#include "common/points/points_format.h"

namespace {

namespace pf = fieldprof::points;

// The drain sleeps so that the fullest ring is about a quarter full when
// it wakes, between these: each wake takes a CPU from the program.
constexpr uint64_t kMinSleepNs = 2'000'000, kMaxSleepNs = 50'000'000;

using Event = pf::Event;
using pf::ArmAll;
using pf::ClockNs;
using pf::DrainInto;
using pf::ForgetClosedModules;
using pf::ForgetSites;
using pf::g_recording;
using pf::g_rings;
using pf::kRingEvents;
using pf::MonoNs;
using pf::Out;
using pf::ProgramName;
using pf::ProgramPath;
using pf::Ring;

using pf::OwnWork;

// The dynamic linker's calls are agent/preload/base/loader_calls.h's: a
// point's stack is not taken while the thread is inside one, nor while it
// may hold the linker's lock (stacks.cc).
using fieldprof::preload::Next;

// 1: the drain stops; its sleep is a futex wait on this word, so that
// stopping never waits out a sleep, and a thread filling its ring fast
// wakes it early (ring.h).
std::atomic<int>& g_stop = pf::g_drain_word;
std::mutex g_drain_mu;  // one drain at a time: the drain thread's, or one before exec
pid_t g_pid;            // the process recording (a vfork child is not)
pthread_t g_drain;
bool g_drain_started = false;
int g_fd = -1;
uint64_t g_began_ns;  // CLOCK_REALTIME as the process began (or forked): its file says so
// FIELDPROF_POINTS_DIR. Not a std::string: its initializer would run after
// Start (this file's constructor), and empty it.
const char* g_dir;
bool g_stacks = false;  // FIELDPROF_POINTS_STACKS: each event's stack too
// What fieldprof_point_hit does, in one load: 0 nothing, 1 record the
// event, 2 record it with its stack. Follows g_recording and g_stacks.
std::atomic<uint8_t> g_hit{0};
void SetHit() {
  g_hit.store(!g_recording.load() ? 0 : g_stacks ? 2 : 1, std::memory_order_relaxed);
}
void* DrainLoop(void*) {
  pf::t_own = 1;  // for good: no call of this thread is the program's
  Out o;
  uint64_t last_clock = MonoNs(), sleep_ns = kMinSleepNs;
  while (g_stop.load(std::memory_order_acquire) == 0) {
    timespec ts{static_cast<time_t>(sleep_ns / 1000000000),
                static_cast<long>(sleep_ns % 1000000000)};
    const uint64_t slept_from = MonoNs();
    syscall(SYS_futex, reinterpret_cast<int*>(&g_stop), FUTEX_WAIT_PRIVATE, 0, &ts, nullptr, 0);
    const uint64_t slept = MonoNs() - slept_from;  // less than asked when a thread woke it
    uint64_t fullest = 0;
    {
      std::lock_guard<std::mutex> l(g_drain_mu);
      // A clock pair with every batch of events, so the file of a process
      // killed later still turns its ticks into time; one a second else.
      if (DrainInto(o, &fullest) || MonoNs() - last_clock > 1000000000ull) {
        o.Clock();
        last_clock = MonoNs();
      }
      o.Flush(g_fd);
    }
    const uint64_t want = slept * (kRingEvents / 4) / std::max<uint64_t>(fullest, 1);
    sleep_ns = std::clamp(want, kMinSleepNs, kMaxSleepNs);
  }
  return nullptr;
}

bool OpenFile() {
  uint32_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd)
    rnd = static_cast<uint32_t>(MonoNs());
  char path[4200];
  snprintf(path, sizeof path, "%s/points-%d-%08x.fppoints", g_dir, getpid(), rnd);
  g_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  g_pid = getpid();
  if (g_fd < 0) {
    fprintf(stderr, "fieldprof points: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  Out o;
  o.Put(pf::kMagic, pf::kMagicSize);
  o.Put(pf::kHeader);
  o.Put(static_cast<uint32_t>(getpid()));
  o.Put(g_began_ns);
  o.Str(ProgramName().c_str());
  if (const char* hz = getenv("FIELDPROF_TSC_HZ")) {
    const uint64_t rate = strtoull(hz, nullptr, 10);
    if (rate > 0) {
      o.Put(pf::kRate);
      o.Put(rate);
    }
  }
  o.Clock();
  o.Flush(g_fd);
  return true;
}

// Whether the rings hold anything to write: events not yet taken, or
// losses. A process recording without its file (Arm) opens it only then.
bool AnythingRecorded() {
  for (Ring* r = g_rings.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    if (r->head.load(std::memory_order_acquire) != r->tail.load(std::memory_order_relaxed) ||
        r->lost.load(std::memory_order_relaxed) != 0 ||
        r->stackless.load(std::memory_order_relaxed) != 0) {
      return true;
    }
  }
  return false;
}

void StartDrain() {
  OwnWork own;  // not one of the program's threads (auto_points.cc's pthread_create)
  g_stop.store(0);
  // The drain thread takes no signal meant for the program.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  g_drain_started = pthread_create(&g_drain, nullptr, DrainLoop, nullptr) == 0;
  pf::g_drain_running.store(g_drain_started, std::memory_order_release);
  // Named before anything else runs: the runtime places a detour only while
  // no thread but this one and the program's first runs (agent/preload/runtime/points/detour.h).
  if (g_drain_started) pthread_setname_np(g_drain, "fieldprof-drain");
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// Before an exec replaces the program, or _exit ends it: what the rings
// hold goes to the file now (the file closes with the image; no end mark,
// as for a kill).
// Not in a vfork child, which shares the parent's memory and file.
// Each thread's events lost and those that went without their stack,
// since they were last put: the reader adds them up.
void PutRingCounts(Out& o) {
  for (Ring* r = g_rings.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    const uint64_t lost =
        r->lost.exchange(0, std::memory_order_relaxed) + std::exchange(r->never_whole, 0);
    const uint64_t stackless = r->stackless.exchange(0, std::memory_order_relaxed);
    for (const auto& [type, n] : {std::pair{pf::kLost, lost}, {pf::kStackless, stackless}}) {
      if (n == 0) continue;
      o.Put(type);
      o.Put(r->tid);
      o.Put(n);
    }
  }
}

void DrainBeforeImageEnds() {
  if (!g_recording.load() || getpid() != g_pid) return;
  OwnWork own;
  std::lock_guard<std::mutex> l(g_drain_mu);
  if (g_fd < 0 && (!AnythingRecorded() || !OpenFile())) return;
  Out o;
  DrainInto(o, nullptr, true);
  o.Clock();
  PutRingCounts(o);  // an _exit or exec ends the image without Finish
  o.Flush(g_fd);
}

// Before the program closes a module (dlclose): the events the rings hold
// go to the file now, while the names of their points can still be read
// in the module's memory, and the sites are forgotten. Left out: events
// of the module's points passed after this, by a thread still running it
// as it is closed.
void DrainBeforeClose() {
  if (!g_recording.load() || getpid() != g_pid || g_fd < 0) return;
  OwnWork own;
  std::lock_guard<std::mutex> l(g_drain_mu);
  Out o;
  if (DrainInto(o)) o.Clock();
  o.Flush(g_fd);
  ForgetSites();
}

void Finish() {
  if (!g_recording.exchange(false)) return;
  SetHit();
  if (g_drain_started) {
    g_stop.store(1, std::memory_order_release);
    pf::g_drain_running.store(false, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<int*>(&g_stop), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    pthread_join(g_drain, nullptr);
    g_drain_started = false;
  }
  // A process that never opened its file and recorded nothing leaves none.
  if (g_fd < 0 && (!AnythingRecorded() || !OpenFile())) return;
  Out o;
  DrainInto(o, nullptr, true);
  o.Clock();
  PutRingCounts(o);
  o.Put(pf::kEnd);
  o.Flush(g_fd);
  close(g_fd);
  g_fd = -1;
}

void AtForkChild() {
  if (!g_recording.load()) return;
  OwnWork own;
  pf::g_drain_running.store(false);  // the parent's thread is not here; StartDrain below
  // The parent's events are its own: this process starts empty.
  for (Ring* r = g_rings.load(); r != nullptr; r = r->next) {
    r->tail.store(r->head.load());
    r->seen_tail = r->head.load();
    r->lost.store(0);
    r->stackless.store(0);
    r->waits_on = ~0ull;
    r->passable_below = 0;
    r->never_whole = 0;
    r->waiting.store(0);
    r->gave_up_at = ~0ull;
  }
  pf::FreeRingsAfterFork();  // this thread's carries the parent's tid, the others' no thread's
  new (&g_drain_mu) std::mutex();  // the parent's drain thread may have held it
  const bool had_file = g_fd >= 0;
  g_drain_started = false;
  g_pid = getpid();
  g_began_ns = ClockNs(CLOCK_REALTIME);
  pf::ForgetSites(/*renumber=*/true);
  if (g_stacks) g_stacks = pf::RenewStacksAfterFork();  // the parent's lock may have been held
  pf::AutoForked();
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
  if (!had_file) return;  // a placed module not loaded yet: as in the parent (Arm)
  if (!OpenFile()) {
    g_recording.store(false);
    SetHit();
    return;
  }
  SetHit();
  StartDrain();
}

// Events are taken from here on, into the rings; the file and the drain
// thread wait for Begin. Points placed with --at are taken so from the
// start: should the runtime place a function in a module this recorder did
// not see come in (not through dlopen below), its calls still go into the
// rings, and the file is opened at exit (or before an exec) if anything
// was recorded.
void Arm() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_pid = getpid();
    g_recording.store(true);
    SetHit();
    atexit(Finish);
  });
}

// The file and the drain thread, once a module with points, or one the
// --at plan names, is loaded: a process without any (a shell, make, the
// shell script around the program) leaves no file and gets no thread.
void Begin() {
  static std::once_flag once;
  std::call_once(once, [] {
    Arm();
    {
      std::lock_guard<std::mutex> l(g_drain_mu);
      if (g_fd < 0 && !OpenFile()) {
        g_recording.store(false);
        SetHit();
        return;
      }
    }
    StartDrain();
  });
}

// At load; or before, from the first module with points whose constructors
// run before this library's (fieldprof_point_module): a library the
// program needs at start.
__attribute__((constructor)) void Start() {
  static bool started = false;  // constructors run one at a time
  if (started) return;
  started = true;
  fieldprof::preload::FillEveryNextIfStale();
  // AtForkChild does nothing until armed.
  fieldprof::preload::AtFork(fieldprof::preload::RealDlIteratePhdr, nullptr, AtForkChild);
  const char* dir = getenv(pf::kDirEnv);
  if (dir == nullptr || dir[0] == 0) return;
  OwnWork own;
  g_dir = strdup(dir);
  g_began_ns = ClockNs(CLOCK_REALTIME);
  pf::StartArming();
  pf::StartSites();
  if (const char* hz = getenv("FIELDPROF_TSC_HZ"); hz != nullptr && strtoull(hz, nullptr, 10) > 0) {
    pf::g_ticks_per_ms = strtoull(hz, nullptr, 10) / 1000;
  }
  if (const char* st = getenv(pf::kStacksEnv); st != nullptr && strcmp(st, "1") == 0) {
    const char* hz = getenv("FIELDPROF_TSC_HZ");  // set by the command; else a guess
    g_stacks = pf::StartStacks(hz != nullptr ? strtoull(hz, nullptr, 10) : 0);
    if (g_stacks) pf::g_span_with_stack = pf::SpanWithStack;
  }
  // Points placed by configuration (the runtime's points pass) are taken
  // whether or not any module has points of its own (Arm).
  const char* lab = getenv("FIELDPROF_LAB");
  if (lab != nullptr && strcmp(lab, "points") == 0) {
    pf::PlaceModulesOf(getenv("FIELDPROF_LAB_APIS"));
    Arm();
  }
  // Points of the recorder's own (auto_points.h): every process has them,
  // into its rings from here; its file is opened at its end, or by Begin.
  pf::StartAutoPoints();
  if (pf::AutoPointsOn()) {
    Arm();
    pf::AutoStart();
  }
  if (ArmAll()) Begin();
}

__attribute__((destructor)) void Stop() { Finish(); }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void fieldprof_point_hit(const fieldprof_point_site* site,
                                                                int kind, int64_t value) {
  const uint8_t hit = g_hit.load(std::memory_order_relaxed);
  if (__builtin_expect(hit == 1, 1)) {
    pf::Push(0, reinterpret_cast<uint64_t>(site), value, static_cast<uint32_t>(kind));
    return;
  }
  if (hit == 2) pf::HitWithStack(site, kind, value, __builtin_return_address(0));
}

// A point the runtime passes on in a points pass with stacks (its
// fieldprof_point_hit, agent/preload/runtime/points/points.cc): `caller` is the return
// address into the code that passed it, and the measured calls around it
// have their callers' addresses in their return slots meanwhile.
__attribute__((visibility("default"))) void fieldprof_point_hit_from(
    const fieldprof_point_site* site, int kind, int64_t value, const void* caller) {
  const uint8_t hit = g_hit.load(std::memory_order_relaxed);
  if (hit == 1) {  // no unwinder to be had (said at start)
    pf::Push(0, reinterpret_cast<uint64_t>(site), value, static_cast<uint32_t>(kind));
  } else if (hit == 2) {
    pf::HitWithStack(site, kind, value, caller);
  }
}

// The runtime, in a points pass, hands over its test of whether the
// calling thread is inside its binder work (PushStackOf says why).
__attribute__((visibility("default"))) void fieldprof_points_busy_from(int (*busy)()) {
  pf::SetRuntimeBusy(busy);
}

// A module built with points.h, before its own constructors run
// (`arriving`), and after its own destructors: armed before its
// constructors pass their points, and the events of its destructors
// written while their names can still be read (NewSiteIndex).
__attribute__((visibility("default"))) void fieldprof_point_module(volatile unsigned short*,
                                                                   int arriving) {
  if (arriving == 0) {
    DrainBeforeClose();
    return;
  }
  Start();
  OwnWork own;
  if (ArmAll()) Begin();
}

}  // extern "C"

// The exec family, _exit, prctl and syscall, and the dynamic linker's
// calls, are agent/preload/base/'s (image_end.cc, seccomp_hooks.cc,
// loader_calls.cc); what the recorder does at each:
namespace fieldprof::preload {

int BeforeExec() {
  if (g_recording.load() && getpid() == g_pid) pf::AutoExec();  // not a vfork child's
  DrainBeforeImageEnds();
  return 0;
}

// The exec failed: the rings go on filling, the file stays open.
void AfterFailedExec(int) {}

// _exit runs no destructor, nor the atexit handler (Finish): the rings go
// to the file now, as before an exec. Not from the recorder's own work.
void BeforeExit() {
  if (pf::t_own != 0) return;
  if (g_recording.load() && getpid() == g_pid) pf::AutoExit();  // not a vfork child's
  DrainBeforeImageEnds();
}

// The drain thread's writes are calls the program never makes: before a
// filter is installed the file ends, whole, and nothing more is recorded
// in this process (nor in its children, which inherit the filter).
void BeforeSeccomp() {
  if (getpid() == g_pid) Finish();
}

// Modules opened later are armed as they come (those built with an older
// points.h: fieldprof_point_module arms the others earlier). The runtime's
// front opening the runtime makes no call of the program's.
int BeforeDlopen(const char* file) {
  const char* base = file != nullptr ? strrchr(file, '/') : nullptr;
  const bool runtime = base != nullptr && strcmp(base + 1, pf::kRuntimeLibName) == 0;
  pf::AutoDlopenBegin(runtime ? nullptr : file);
  pf::t_own += runtime;
  return runtime;
}
void AfterDlopen(void* handle, int before_dlopen) {
  pf::t_own -= before_dlopen;
  pf::AutoDlopenEnd();
  OwnWork own;
  if (handle != nullptr && ArmAll()) Begin();
}

// The events so far are drained before the close, while the names of a
// module built with an older points.h can still be read. A module built
// with the current one drains again after its destructors
// (fieldprof_point_module).
void BeforeDlclose() { DrainBeforeClose(); }
void AfterDlclose() {
  OwnWork own;
  ForgetClosedModules();
}

void FindNext(const char* const* names, uintptr_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    if (out[i] == 0) out[i] = reinterpret_cast<uintptr_t>(dlsym(RTLD_NEXT, names[i]));
  }
}

}  // namespace fieldprof::preload
