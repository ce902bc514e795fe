// Stack samples of a measured run (stack_samples.h): the timers, the
// handler and the table of distinct stacks.
#include "agent/preload/runtime/stacks/stack_samples.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "agent/preload/base/go_program.h"
#include "agent/preload/base/owned_signals.h"
#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/companion.h"
#include "agent/preload/runtime/lab/lab.h"
#include "agent/preload/runtime/records/live_file.h"
#include "agent/preload/runtime/stacks/stack_fold.h"
#include "agent/preload/runtime/sys.h"

namespace fieldprof::rt {
namespace {

// Everything here is zero until a measured run samples (FP_COLD_BSS: off
// the page every process writes).
// SIGURG: a signal whose default action is to be ignored, so that a
// program that resets it behind the wrapped sigaction() (by the raw
// system call) is not killed by a sample still on its way; few programs
// use it (out-of-band socket data), and those that set a handler through
// sigaction() keep it, and never see ours.
constexpr int kSampleSignal = SIGURG;

using BacktraceFn = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void*);
using GetIpFn = _Unwind_Ptr (*)(_Unwind_Context*);

FP_COLD_BSS BacktraceFn g_backtrace;
FP_COLD_BSS GetIpFn g_get_ip;
FP_COLD_BSS bool g_on;             // sampling in this process
FP_COLD_BSS uint64_t g_period_ns;  // of a thread's CPU time
FP_COLD_BSS StackTable* g_table;   // mapped at the first sample
FP_COLD_BSS int g_marker;          // our timers' sigev_value: its address
FP_COLD_BSS pid_t g_pid;           // the process sampling (a vfork child is not)
// Its destructor deletes a thread's timer as the thread ends, also by
// pthread_exit. (Not __cxa_thread_atexit_impl: it takes the dynamic
// linker's lock, which a dlopen waiting for this thread may hold.)
FP_COLD_BSS pthread_key_t g_thread_key;
FP_COLD_BSS bool g_have_key;

// The timers of the process's threads, so that all of them can be stopped
// at once (an exec, the end). 0 free, 1 being set up, 2 armed.
constexpr int kMaxTimers = 1024;
struct TimerSlot {
  int state;
  timer_t id;
};
FP_COLD_BSS TimerSlot g_timers[kMaxTimers];

__thread int t_timer FP_TLS = -1;  // this thread's slot, or -1
__thread int t_in_sample FP_TLS;

bool IsOurs(const siginfo_t* si) {
  return si != nullptr && si->si_code == SI_TIMER && si->si_value.sival_ptr == &g_marker;
}

// The return addresses from the interrupted instruction out: the walk
// begins in the handler, and counts from the frame whose address is the
// interrupted one (the signal frame's).
struct Walk {
  uintptr_t pc;
  int n, before;
  bool found;
  uint64_t* ips;
};

_Unwind_Reason_Code Collect(_Unwind_Context* c, void* arg) {
  Walk& w = *static_cast<Walk*>(arg);
  const uintptr_t ip = g_get_ip(c);
  if (!w.found) {
    if (ip != w.pc) return ++w.before > 8 ? _URC_END_OF_STACK : _URC_NO_REASON;
    w.found = true;
  }
  if (ip == 0) return _URC_END_OF_STACK;
  w.ips[w.n++] = ip;
  return w.n == kStackDepth ? _URC_END_OF_STACK : _URC_NO_REASON;
}

// The live file's samples the table is in (nullptr: anonymous memory),
// which of their pages are allocated, and how many of the binder's
// objects the module table has looked at.
FP_COLD_BSS LiveSamples* g_samples;
constexpr size_t kSamplePages = (sizeof(LiveSamples) + 4095) / 4096;
FP_COLD_BSS uint64_t g_backed[(kSamplePages + 63) / 64];
FP_COLD_BSS uint32_t g_noted_objects;
FP_COLD_BSS int g_noting;

// Whether the live file's pages under [p, p + bytes) are allocated: with
// `allocate`, allocating those not yet (before they are first touched: a
// full file system fails here, never a write with SIGBUS); without, only
// those are read (on tmpfs a read of any other would allocate it). False
// for memory that is not this image's live file (let go of before a
// seccomp filter; a fork child's parent's).
bool Pages(const void* p, size_t bytes, bool allocate) {
  const LiveSamples* const s = LiveSamplesOf(__atomic_load_n(&g_live, __ATOMIC_ACQUIRE));
  const char* const at = static_cast<const char*>(p);
  const char* const lo = reinterpret_cast<const char*>(s);
  if (s == nullptr || at < lo || at + bytes > lo + sizeof(LiveSamples)) return false;
  const size_t from = static_cast<size_t>(at - lo);
  for (size_t page = from / 4096; page <= (from + bytes - 1) / 4096; ++page) {
    const uint64_t bit = uint64_t{1} << (page % 64);
    if (__atomic_load_n(&g_backed[page / 64], __ATOMIC_RELAXED) & bit) continue;
    if (!allocate || !LiveAllocate(kLiveSamplesOffset + page * 4096, 4096)) return false;
    __atomic_fetch_or(&g_backed[page / 64], bit, __ATOMIC_RELAXED);
  }
  return true;
}
bool Back(const void* p, size_t bytes) { return Pages(p, bytes, true); }
bool Backed(const void* p, size_t bytes) { return Pages(p, bytes, false); }

// The table, by whichever thread samples first (a system call is safe in a
// handler): in the live file when the run has one, so that the agent can
// fold the stacks of a run that was killed; else mapped anonymous. A run
// shorter than one period takes neither.
StackTable* Table() {
  StackTable* t = __atomic_load_n(&g_table, __ATOMIC_ACQUIRE);
  if (t != nullptr) return t;
  LiveSamples* const live = LiveSamplesOf(__atomic_load_n(&g_live, __ATOMIC_ACQUIRE));
  void* p = MAP_FAILED;
  if (live != nullptr) {
    LiveSamples* expected = nullptr;
    __atomic_compare_exchange_n(&g_samples, &expected, live, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    if (g_samples == live && Back(live, sizeof(uint64_t)) &&
        Back(&live->table.samples, 2 * sizeof(uint64_t))) {
      p = &live->table;
    }
  }
  const bool anonymous = p == MAP_FAILED;
  if (anonymous) {
    p = mmap(nullptr, sizeof(StackTable), PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
  }
  StackTable* expected = nullptr;
  if (!__atomic_compare_exchange_n(&g_table, &expected, static_cast<StackTable*>(p), false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    if (anonymous) munmap(p, sizeof(StackTable));
    return expected;
  }
  return static_cast<StackTable*>(p);
}

// The objects loaded at start (never unloaded: their headers may be read
// in a handler) into the live file's module table, by one thread at a
// time (another's sample goes on without), before a sample's stack is
// kept, so that its frames' modules are there for the agent. Objects
// loaded later are noted as the binder finds them (StackSamplesNoteObject).
void NoteStartModules() {
  LiveSamples* const s = g_samples;
  if (s == nullptr || __atomic_load_n(&g_table, __ATOMIC_RELAXED) != &s->table ||
      __atomic_load_n(&g_binder.nobjects, __ATOMIC_ACQUIRE) == g_noted_objects ||
      __atomic_exchange_n(&g_noting, 1, __ATOMIC_ACQUIRE) != 0) {
    return;
  }
  const uint32_t objects = __atomic_load_n(&g_binder.nobjects, __ATOMIC_ACQUIRE);
  for (; g_noted_objects < objects; ++g_noted_objects) {
    if (!g_binder.objects[g_noted_objects].initial) continue;
    if (!NoteModule(g_noted_objects, s->modules, LiveSamples::kModules,
                    const_cast<uint32_t*>(&s->nmodules), Back)) {
      break;
    }
  }
  __atomic_store_n(&g_noting, 0, __ATOMIC_RELEASE);
}

void OnSample(int, siginfo_t* si, void* uc) {
  if (!__atomic_load_n(&g_on, __ATOMIC_RELAXED) || t_in_sample != 0) return;
  const int saved = errno;
  t_in_sample = 1;
  StackTable* t = Table();
  if (t != nullptr) {
    uint64_t ips[kStackDepth];
    Walk w{static_cast<uintptr_t>(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]), 0, 0,
           false, ips};
    g_backtrace(Collect, &w);
    if (!w.found) {  // no unwind information where it stopped: the instruction alone
      ips[0] = w.pc;
      w.n = 1;
    }
    const uint64_t periods = 1 + static_cast<uint64_t>(si->si_overrun > 0 ? si->si_overrun : 0);
    NoteStartModules();
    AddStack(t, ips, w.n, g_period_ns * periods,
             g_samples != nullptr && t == &g_samples->table ? Back : nullptr);
  }
  t_in_sample = 0;
  errno = saved;
}

void ArmThisThread() {
  if (!__atomic_load_n(&g_on, __ATOMIC_RELAXED) || t_timer >= 0) return;
  int slot = -1;
  for (int i = 0; i < kMaxTimers && slot < 0; ++i) {
    int free = 0;
    if (__atomic_compare_exchange_n(&g_timers[i].state, &free, 1, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
      slot = i;
    }
  }
  if (slot < 0) return;  // a thousand threads sampled: the others are not
  struct sigevent sev {};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = kSampleSignal;
  sev.sigev_value.sival_ptr = &g_marker;
  sev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  timer_t id{};
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &id) != 0) {
    __atomic_store_n(&g_timers[slot].state, 0, __ATOMIC_RELEASE);
    return;
  }
  struct itimerspec its {};
  its.it_interval.tv_sec = static_cast<time_t>(g_period_ns / 1000000000);
  its.it_interval.tv_nsec = static_cast<long>(g_period_ns % 1000000000);
  its.it_value = its.it_interval;
  g_timers[slot].id = id;
  __atomic_store_n(&g_timers[slot].state, 2, __ATOMIC_RELEASE);
  timer_settime(id, 0, &its, nullptr);
  t_timer = slot;
}

// At the thread's end (also by pthread_exit): its timer goes.
void ThreadEnds(void*) {
  const int slot = t_timer;
  if (slot < 0) return;
  t_timer = -1;
  int armed = 2;
  if (__atomic_compare_exchange_n(&g_timers[slot].state, &armed, 1, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_RELAXED)) {
    timer_delete(g_timers[slot].id);
    __atomic_store_n(&g_timers[slot].state, 0, __ATOMIC_RELEASE);
  }
}

}  // namespace

// GCC's unwinder, linked in under names of the runtime's own
// (CMakeLists.txt: libfp_unwind.a).
extern "C" _Unwind_Reason_Code fp__Unwind_Backtrace(_Unwind_Trace_Fn, void*);
extern "C" _Unwind_Ptr fp__Unwind_GetIP(_Unwind_Context*);

namespace {

// The first frame is enough: the unwinder's one-time set-up runs before it.
_Unwind_Reason_Code FirstFrameOnly(_Unwind_Context*, void*) { return _URC_END_OF_STACK; }

}  // namespace

void StackSamplesStart(int hz) {
  if (hz <= 0 || g_lab_mode != kLabOff) return;  // a lab pass has its own census
  const uint64_t t0 = Rdtsc();
  if (preload::IsGoProgram()) {
    DebugLog("stacks: a Go program (its runtime owns every signal): not sampled");
    return;
  }
  const uint64_t t1 = Rdtsc();
  g_backtrace = fp__Unwind_Backtrace;
  g_get_ip = fp__Unwind_GetIP;
  const uint64_t t2 = Rdtsc();
  // The unwinder initialises itself once, under a once-lock: here, and not
  // in a handler that interrupted the program's first throw in the middle
  // of it.
  g_backtrace(FirstFrameOnly, nullptr);
  const uint64_t t3 = Rdtsc();
  if (!preload::OwnSignal(kSampleSignal, IsOurs, OnSample)) {
    DebugLog("stacks: SIGURG cannot be handled: not sampled");
    return;
  }
  g_have_key = pthread_key_create(&g_thread_key, ThreadEnds) == 0;
  g_period_ns = 1000000000ull / static_cast<uint64_t>(hz);
  g_pid = sys::Getpid();
  __atomic_store_n(&g_on, true, __ATOMIC_RELEASE);
  ArmThisThread();
  DebugLog(
      "stacks: %d a CPU second; in ticks: go check %llu, unwinder set-up %llu, "
      "signal and timer %llu",
      hz, static_cast<unsigned long long>(t1 - t0), static_cast<unsigned long long>(t3 - t2),
      static_cast<unsigned long long>(Rdtsc() - t3));
}

bool StackSamplesTaken() {
  const StackTable* t = __atomic_load_n(&g_table, __ATOMIC_ACQUIRE);
  return t != nullptr && __atomic_load_n(&t->samples, __ATOMIC_RELAXED) != 0;
}

bool StackSamplesOn() { return __atomic_load_n(&g_on, __ATOMIC_RELAXED); }

void StackSamplesNoteObject(uint32_t i) {
  if (!__atomic_load_n(&g_on, __ATOMIC_RELAXED) || sys::Getpid() != g_pid) return;
  LiveSamples* const s = LiveSamplesOf(__atomic_load_n(&g_live, __ATOMIC_ACQUIRE));
  if (s == nullptr) return;
  NoteModule(i, s->modules, LiveSamples::kModules, const_cast<uint32_t*>(&s->nmodules), Back);
}

void StackSamplesThreadBegins() {
  if (!__atomic_load_n(&g_on, __ATOMIC_RELAXED)) return;
  ArmThisThread();
  // A low key's value sits in the thread's own descriptor: no allocation.
  if (t_timer >= 0 && g_have_key) pthread_setspecific(g_thread_key, &g_marker);
}

void StackSamplesQuiet() {
  if (!__atomic_load_n(&g_on, __ATOMIC_RELAXED) || sys::Getpid() != g_pid) return;
  preload::ReturnSignalBeforeExec(kSampleSignal);
  __atomic_store_n(&g_on, false, __ATOMIC_RELEASE);
  struct itimerspec off {};
  for (TimerSlot& s : g_timers) {
    if (__atomic_load_n(&s.state, __ATOMIC_ACQUIRE) == 2) timer_settime(s.id, 0, &off, nullptr);
  }
  // A sample of ours still pending on this thread is taken now, so that no
  // image after an exec receives it; one of the program's goes on to it.
  sigset_t prof, old;
  sigemptyset(&prof);
  sigaddset(&prof, kSampleSignal);
  pthread_sigmask(SIG_BLOCK, &prof, &old);
  const struct timespec now {};
  siginfo_t si;
  bool theirs = false;
  while (sigtimedwait(&prof, &si, &now) == kSampleSignal) theirs = theirs || !IsOurs(&si);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (theirs) raise(kSampleSignal);
}

void StackSamplesAfterFork() {
  if (!__atomic_load_n(&g_on, __ATOMIC_RELAXED)) return;
  // The child has no timer; the parent's table is the parent's.
  for (TimerSlot& s : g_timers) s.state = 0;
  t_timer = -1;
  // (One in the parent's live file went with the parent's mapping of it:
  // live_file.h LiveOpenInForkChild.)
  if (StackTable* t = __atomic_exchange_n(&g_table, nullptr, __ATOMIC_ACQ_REL);
      t != nullptr && (g_samples == nullptr || t != &g_samples->table)) {
    munmap(t, sizeof(StackTable));
  }
  g_samples = nullptr;
  for (uint64_t& w : g_backed) w = 0;
  g_noted_objects = 0;
  g_pid = sys::Getpid();
  ArmThisThread();
}

void AddStackRecords(SpoolRun* run) {
  StackSamplesQuiet();
  if (sys::Getpid() != g_pid) return;  // a vfork child: the table is its parent's
  // Folded once: a program that goes on after a failed exec does not
  // report these samples again.
  StackTable* t = __atomic_exchange_n(&g_table, nullptr, __ATOMIC_ACQ_REL);
  if (t == nullptr) return;
  const bool live = g_samples != nullptr && t == &g_samples->table;
  FoldStacks(*t, run, live ? Backed : nullptr);
  if (!live) munmap(t, sizeof(StackTable));
}

}  // namespace fieldprof::rt

// ------------------------------------------------------- pthread_create

namespace {

using PthreadCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
FP_HOT_DATA PthreadCreate next_pthread_create;
FP_NEXT_SLOT(next_pthread_create, "pthread_create");

// A thread's start routine and argument, between pthread_create and the
// thread's start; a slot is free again once the thread has begun.
struct Begin {
  int used;
  void* (*fn)(void*);
  void* arg;
};
constexpr int kBegins = 256;
FP_COLD_BSS Begin g_begins[kBegins];

void* BeginThread(void* p) {
  auto* b = static_cast<Begin*>(p);
  void* (*const fn)(void*) = b->fn;
  void* const arg = b->arg;
  __atomic_store_n(&b->used, 0, __ATOMIC_RELEASE);
  fieldprof::rt::StackSamplesThreadBegins();
  return fn(arg);
}

}  // namespace

// Each thread the program starts gets its sampling timer as it begins.
extern "C" FP_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                                        void* (*fn)(void*), void* arg) {
  const PthreadCreate real = fieldprof::rt::Next(&next_pthread_create, "pthread_create");
  if (!fieldprof::rt::StackSamplesOn()) return real(thread, attr, fn, arg);
  for (Begin& b : g_begins) {
    int free = 0;
    if (!__atomic_compare_exchange_n(&b.used, &free, 1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED)) {
      continue;
    }
    b.fn = fn;
    b.arg = arg;
    const int rc = real(thread, attr, BeginThread, &b);
    if (rc != 0) __atomic_store_n(&b.used, 0, __ATOMIC_RELEASE);
    return rc;
  }
  return real(thread, attr, fn, arg);  // every slot taken: that thread is not sampled
}
