// Stacks of points (stacks.h).
#include "agent/preload/points/stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>

#include "agent/include/fieldprof/points.h"
#include "agent/preload/base/fork_hooks.h"
#include "agent/preload/base/linker_lock.h"
#include "agent/preload/base/loader_calls.h"
#include "agent/preload/base/next_slots.h"
#include "agent/preload/base/unwinder_io.h"
#include "agent/preload/points/arming.h"
#include "agent/preload/points/ring.h"
#include "common/points/points_format.h"

namespace fieldprof::points {
namespace {

// Every distinct stack the points were passed at, numbered from 1, in
// memory mapped once: taking a stack never allocates, so a point passed in
// a signal handler that interrupted malloc is safe; and a thread never
// waits on the lock while holding it (fieldprof_point_hit is not entered
// twice on one thread with stacks on).
constexpr uint32_t kStackSlots = 1u << 14;            // open addressing
constexpr uint32_t kMaxStacks = kStackSlots / 4 * 3;  // distinct stacks kept
struct StackTable {
  std::atomic<int> lock;
  uint32_t count;                      // stacks 1..count are whole (past kMaxStacks: none kept)
  uint32_t written;                    // the drain's: 'K' records written for 1..written
  unsigned long long modules_written;  // the drain's: dl_iterate_phdr's counts then
  struct Slot {
    uint64_t hash;
    uint32_t id;  // 0: empty
  } slots[kStackSlots];
  uint16_t depth[kMaxStacks + 1];
  uint64_t ips[kMaxStacks + 1][kMaxStackDepth];
};
StackTable* g_stack_table;
// Set while the thread records a point with its stack (--stacks).
__thread int t_in_point __attribute__((tls_model("initial-exec")));

// Non-zero while the thread holds the table's lock or waits for it: the
// drain does so on a thread of the program too (before a dlclose or an
// exec), and a signal handler's point there takes no stack (PushStackOf):
// it would spin on the lock its own thread holds, for good.
__thread int t_at_table __attribute__((tls_model("initial-exec")));

// The table's spin lock: held by another thread for a lookup at most, or
// by the drain for a read.
void LockTable(StackTable* t) {
  ++t_at_table;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // said before taken
  while (t->lock.exchange(1, std::memory_order_acquire) != 0) __builtin_ia32_pause();
}
void UnlockTable(StackTable* t) {
  t->lock.store(0, std::memory_order_release);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  --t_at_table;
}

// A table mapped zeroed (its pages touched as used); null without memory.
StackTable* NewStackTable() {
  void* p = mmap(nullptr, sizeof(StackTable), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* t = new (p) StackTable;  // default-initialised: mmap's zeros stand
  t->modules_written = ~0ull;
  return t;
}

// libunwind's fast trace (its frame rules cached per return address),
// opened local to this library: its _Unwind_* would otherwise stand in
// for the program's own.
int (*g_unw_backtrace)(void** ips, int n);
// Whether the calling thread is inside the runtime's binder work, as the
// runtime says when it is loaded (a lab pass, --at:
// fieldprof_points_busy_from); null otherwise.
std::atomic<int (*)()> g_rt_busy{nullptr};

// Opens libunwind for --stacks; false, said once, when it cannot be had.
bool OpenUnwinder() {
  auto* real_dlopen = reinterpret_cast<void* (*)(const char*, int)>(dlsym(RTLD_NEXT, "dlopen"));
  void* h = real_dlopen != nullptr ? real_dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (h != nullptr) {
    g_unw_backtrace = reinterpret_cast<int (*)(void**, int)>(dlsym(h, "unw_backtrace"));
  }
  if (g_unw_backtrace == nullptr) {
    fprintf(stderr, "fieldprof points: no stacks: cannot load libunwind.so.8 (%s)\n", dlerror());
  }
  return g_unw_backtrace != nullptr;
}

// The id of the calling thread's stack, from `caller` (the return address
// into the code that passed the point) outwards; 0 when it cannot be had.
__attribute__((noinline)) uint32_t StackId(const void* caller) {
  StackTable* t = g_stack_table;
  if (t == nullptr) return 0;
  // The unwinder's first use on a thread allocates its thread-local data
  // (malloc, through ld.so): the recorder's own call, not the program's.
  static __thread bool unwinder_ready __attribute__((tls_model("initial-exec")));
  // libunwind's memory check on a pipe of ours, not the program's
  // descriptors; the program's errno kept (unwinder_io.h).
  int n = 0;
  void* ips[kMaxStackDepth + 8];
  {
    fieldprof::preload::UnwindScope unwinding;
    if (!unwinder_ready) {
      OwnWork own;
      void* ip[1];
      g_unw_backtrace(ip, 1);
      unwinder_ready = true;
    }
    n = g_unw_backtrace(ips, static_cast<int>(sizeof ips / sizeof ips[0]));
  }
  // The frames of the unwinder and of this library come first.
  int from = 0;
  while (from < n && ips[from] != caller) ++from;
  uint32_t id = 0;
  if (from < n) {
    const int depth = std::min<int>(n - from, kMaxStackDepth);
    const void* const* mine = ips + from;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(depth);
    for (int i = 0; i < depth; ++i) {
      h = (h ^ reinterpret_cast<uintptr_t>(mine[i])) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
    const size_t bytes = sizeof(void*) * static_cast<size_t>(depth);
    LockTable(t);
    for (uint32_t i = static_cast<uint32_t>(h) & (kStackSlots - 1);;
         i = (i + 1) & (kStackSlots - 1)) {
      StackTable::Slot& slot = t->slots[i];
      if (slot.id == 0) {
        if (t->count == kMaxStacks) break;  // full: the event goes without
        id = t->count + 1;
        t->depth[id] = static_cast<uint16_t>(depth);
        memcpy(t->ips[id], mine, bytes);
        slot = {h, id};
        t->count = id;
        break;
      }
      if (slot.hash == h && t->depth[slot.id] == depth &&
          memcmp(t->ips[slot.id], mine, bytes) == 0) {
        id = slot.id;
        break;
      }
    }
    UnlockTable(t);
  }
  return id;
}

// Each thread's time for taking stacks (kStackShare), in TSC ticks: it
// grows with the time that passes, up to the first allowance, and each
// stack taken spends what it took. Touched only inside HitWithStack and
// SpanWithStack, which a signal handler never enters twice.
uint64_t g_stack_burst_ticks;  // the first allowance, and the most saved
struct StackBudget {
  uint64_t last_tsc = 0;
  int64_t ticks = 0;
  bool gave_up = false;  // LoaderSafe's wait for a lock moment, until it is over
};
__thread StackBudget t_stack_budget __attribute__((tls_model("initial-exec")));

// Whether the thread has time left to take a stack at `now`.
bool MayTakeStack(uint64_t now) {
  StackBudget& b = t_stack_budget;
  if (b.last_tsc == 0) {
    b.ticks = static_cast<int64_t>(g_stack_burst_ticks);
  } else if (now > b.last_tsc) {
    const auto earned = static_cast<int64_t>((now - b.last_tsc) / kStackShare);
    b.ticks = std::min(b.ticks + earned, static_cast<int64_t>(g_stack_burst_ticks));
  }
  b.last_tsc = now;
  return b.ticks > 0;
}

// The longest wait for a moment of the linker's lock (LoaderSafe), in
// TSC ticks: kMomentWaitUs.
uint64_t g_moment_wait_ticks;
constexpr uint64_t kMomentWaitUs = 5;

// Whether this thread may walk the loaded objects now (fork_hooks.h's
// LoaderUnsafe). A moment of some thread's taking or giving the dynamic
// linker's lock (linker_lock.h's kMoment) is waited out: another thread's
// lasts a few instructions, and the recorder's own drain takes the lock
// often enough that, unwaited, about 1 event in 10,000 went without its
// stack. This thread's own moment (a handler's point cut in there) never
// ends while the handler runs, and nothing tells it from another's. So
// the wait is on the clock, at most kMomentWaitUs and no more than the
// thread's stack budget has, and once per moment: after a wait that gave
// up, the thread's events take no stack, unwaited, until a look finds the
// moment over (`gave_up`). A handler cutting into its own thread's moment
// again and again then costs the thread one wait, not one a signal.
bool LoaderSafe(int tid, uint64_t since) {
  if (fieldprof::preload::LoaderStuck()) return false;
  StackBudget& b = t_stack_budget;
  for (;;) {
    switch (fieldprof::preload::LookAtLinkerLock(tid, 0)) {
      case fieldprof::preload::LinkerLockLook::kSafe:
        b.gave_up = false;
        return true;
      case fieldprof::preload::LinkerLockLook::kUnsafe:
        b.gave_up = false;
        return false;
      case fieldprof::preload::LinkerLockLook::kMoment:
        break;
    }
    if (b.gave_up) return false;
    const uint64_t spent = __rdtsc() - since;
    if (spent >= g_moment_wait_ticks || static_cast<int64_t>(spent) >= b.ticks) {
      b.ticks -= static_cast<int64_t>(spent);
      b.gave_up = true;
      return false;
    }
    __builtin_ia32_pause();
  }
}

// The stack of the calling thread's event at `pushed` (Push's return; 0:
// the event was lost, and takes none), from `caller` (the return address
// into the code that made it) outwards, and how long taking it paused
// the thread: the reader takes that out of the thread's later times.
void PushStackOf(uint64_t pushed, const void* caller) {
  if (pushed == 0) return;
  const uint64_t tsc = __rdtsc();
  // Inside the dynamic linker's calls (InLinkerCall says why for
  // dl_iterate_phdr's callbacks), inside the runtime's binder work,
  // and inside libc's own loading (linker_lock.h), the thread may
  // hold, or be taking, the dynamic linker's lock, which the unwinder
  // takes (dl_iterate_phdr); in a fork child, a thread that did not come
  // along may hold it for good (fork_hooks.h): a signal handler's point cutting in there
  // would wait on its own thread for good. So would one cutting into the
  // recorder's own drain on this thread, at the stack table's lock. Its
  // event goes without a stack, counted.
  Ring* r = t_ring;  // made: the event is in it
  int (*const busy)() = g_rt_busy.load(std::memory_order_relaxed);
  if (fieldprof::preload::InLinkerCall() || t_at_table != 0 || (busy != nullptr && busy() != 0) ||
      !MayTakeStack(tsc) || !LoaderSafe(static_cast<int>(r->tid), tsc)) {
    r->stackless.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint32_t id = StackId(caller);
  const uint64_t pause = __rdtsc() - tsc;
  t_stack_budget.ticks -= static_cast<int64_t>(pause);
  if (id != 0) PushStack(tsc, id, pause, pushed - 1);
}

// One 'M' record per loaded module: its load bias, the span of its
// executable segments, and its path.
int PutModule(dl_phdr_info* info, size_t, void* arg) {
  auto& o = *static_cast<std::string*>(arg);
  uint64_t lo = ~uint64_t{0}, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    lo = std::min<uint64_t>(lo, info->dlpi_addr + ph.p_vaddr);
    hi = std::max<uint64_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  if (lo >= hi) return 0;
  std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (path.empty()) path = ProgramPath();
  const auto len = static_cast<uint16_t>(std::min<size_t>(path.size(), kMaxString));
  const uint64_t bias = info->dlpi_addr;
  o.push_back(kModule);
  o.append(reinterpret_cast<const char*>(&bias), 8);
  o.append(reinterpret_cast<const char*>(&lo), 8);
  o.append(reinterpret_cast<const char*>(&hi), 8);
  o.append(reinterpret_cast<const char*>(&len), 2);
  o.append(path, 0, len);
  return 0;
}

int ModulesGeneration(dl_phdr_info* info, size_t, void* arg) {
  *static_cast<unsigned long long*>(arg) = info->dlpi_adds * 1000003ull + info->dlpi_subs;
  return 1;  // the counts are the same in every entry
}

}  // namespace

bool StartStacks(uint64_t tsc_hz) {
  if (!OpenUnwinder()) return false;
  fieldprof::preload::OpenUnwinderPipe();
  fieldprof::preload::FindLinkerLock(fieldprof::preload::RealDlIteratePhdr);
  g_stack_table = NewStackTable();
  const uint64_t hz = tsc_hz > 0 ? tsc_hz : 3'000'000'000ull;
  g_stack_burst_ticks = hz / 1000 * kStackBurstMs;
  g_moment_wait_ticks = hz / 1'000'000 * kMomentWaitUs;
  return g_stack_table != nullptr;
}

bool RenewStacksAfterFork() {
  g_stack_table = NewStackTable();
  return g_stack_table != nullptr;
}

void SetRuntimeBusy(int (*busy)()) { g_rt_busy.store(busy, std::memory_order_relaxed); }

// A point with its stack. A signal handler's point while this thread
// records another point with its stack would come between the event and
// its stack in the ring, or inside the push itself: it is counted as lost
// instead. A scope's end takes no stack (its stack is its begin's).
void HitWithStack(const fieldprof_point_site* site, int kind, int64_t value, const void* caller) {
  if (t_in_point != 0) {
    CountLost();
    return;
  }
  t_in_point = 1;
  const uint64_t pushed =
      Push(0, reinterpret_cast<uint64_t>(site), value, static_cast<uint32_t>(kind));
  if (kind != FP_POINT_KIND_END) PushStackOf(pushed, caller);
  t_in_point = 0;
}

// A placed function's call (ring.cc's fieldprof_point_span, --stacks):
// its begin and end, then the begin's stack from the caller's return
// address outwards. The runtime lends the measured calls' return slots
// their callers' addresses meanwhile, where its stubs' unwind rules find
// them (agent/preload/runtime/lab/lab_exit.cc).
void SpanWithStack(uint64_t site, uint64_t tsc_begin, uint64_t tsc_end, const void* caller) {
  if (t_in_point != 0) {  // a signal handler's call, as at HitWithStack
    CountLost();
    CountLost();
    return;
  }
  t_in_point = 1;
  const uint64_t begun = Push(tsc_begin, site, 0, FP_POINT_KIND_BEGIN);
  Push(tsc_end, site, 0, FP_POINT_KIND_END);
  PushStackOf(begun, caller);
  t_in_point = 0;
}

// The stacks first seen since the last drain, after the modules when they
// changed (drain only).
void TakeStacks(std::string* out) {
  StackTable* t = g_stack_table;
  if (t == nullptr) return;
  LockTable(t);
  const uint32_t count = t->count;  // stacks up to it are whole and stay as they are
  UnlockTable(t);
  if (count == t->written) return;
  unsigned long long generation = 0;
  dl_iterate_phdr(ModulesGeneration, &generation);
  if (generation != t->modules_written) {
    std::string modules;
    dl_iterate_phdr(PutModule, &modules);
    out->append(modules);
    t->modules_written = generation;
  }
  for (uint32_t id = t->written + 1; id <= count; ++id) {
    out->push_back(static_cast<char>(kStack));
    out->append(reinterpret_cast<const char*>(&id), sizeof id);
    out->append(reinterpret_cast<const char*>(&t->depth[id]), sizeof t->depth[id]);
    out->append(reinterpret_cast<const char*>(t->ips[id]), sizeof(uint64_t) * t->depth[id]);
  }
  t->written = count;
}

}  // namespace fieldprof::points

// read(), wrapped for libunwind alone: while this library unwinds, its
// memory-check pipe's reads go to ours (unwinder_io.h); otherwise straight
// on.
namespace {
ssize_t (*g_next_read)(int, void*, size_t) = nullptr;
FP_NEXT_SLOT(g_next_read, "read");
}  // namespace

extern "C" __attribute__((visibility("default"))) ssize_t read(int fd, void* b, size_t n) {
  if (fieldprof::preload::t_unwinding > 0) return fieldprof::preload::UnwinderRead(b, n);
  return fieldprof::preload::Next(&g_next_read, "read")(fd, b, n);
}
