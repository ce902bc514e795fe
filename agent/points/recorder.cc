// libfieldprof_points.so: the in-process half of `fieldprof points record`,
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
// losses and an end mark are written; before an exec, the rings are
// drained. After fork the child starts its own file and drain thread.
#include <cpuid.h>
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
#include <vector>

#include "agent/include/fieldprof/points.h"
#include "agent/inprocess/image_end.h"
#include "agent/inprocess/linker_lock.h"
#include "agent/inprocess/loader_calls.h"
#include "agent/inprocess/next_slots.h"
#include "agent/inprocess/recorder_abi.h"
#include "agent/points/ring.h"
#include "common/points_format.h"

namespace {

namespace pf = fieldprof::local::points;

// The drain sleeps so that the fullest ring is about a quarter full when
// it wakes, between these: each wake takes a CPU from the program.
constexpr uint64_t kMinSleepNs = 2'000'000, kMaxSleepNs = 50'000'000;

using Event = pf::Event;
using pf::g_recording;
using pf::g_rings;
using pf::kRingEvents;
using pf::Ring;

// The recorder's own work on a thread of the program, for its span: the
// functions placed with --at that it calls (malloc, say) are not recorded
// as the program's (ring.h).
struct OwnWork {
  OwnWork() { ++pf::t_own; }
  ~OwnWork() { --pf::t_own; }
  OwnWork(const OwnWork&) = delete;
  OwnWork& operator=(const OwnWork&) = delete;
};

// The dynamic linker's calls are agent/inprocess/loader_calls.h's: a
// point's stack is not taken while the thread is inside one
// (t_in_linker), nor while it may hold the linker's lock (PushStackOf).
using fieldprof::inproc::Next;
using fieldprof::inproc::t_in_linker;
using fieldprof::inproc::t_iterating;

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
std::mutex g_arm_mu;  // arming (load, dlopen)
// Semaphores raised, with their modules; the modules read (ModuleKey).
// A module closed is forgotten (ForgetClosedModules), so that opened again
// it is armed again.
std::unordered_map<uintptr_t, std::string>* g_armed;
std::unordered_set<std::string>* g_scanned;
// Points placed by configuration (--at): the modules the plan names, and
// whether one of them is loaded. The file and the drain thread wait for
// that, so a process that never loads one (the shell around the program)
// leaves no file.
std::unordered_set<std::string>* g_placed_modules;
bool g_placed_loaded = false;

uint64_t ClockNs(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}
uint64_t MonoNs() { return ClockNs(CLOCK_MONOTONIC); }

// ---------------------------------------------------------------- the file

// What the drain thread writes, gathered and written in one go.
class Out {
 public:
  void Put(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    buf_.insert(buf_.end(), c, c + n);  // no zero fill first, as resize would
  }
  template <typename T>
  void Put(T v) {
    Put(&v, sizeof v);
  }
  void Str(const char* s) {
    const size_t n = s == nullptr ? 0 : strnlen(s, pf::kMaxString);
    Put(static_cast<uint16_t>(n));
    Put(s, n);
  }
  void Clock() {
    Put(pf::kClock);
    Put(static_cast<uint64_t>(__rdtsc()));
    Put(MonoNs());
  }
  void Flush() {
    size_t off = 0;
    while (off < buf_.size() && g_fd >= 0) {
      const ssize_t w = write(g_fd, buf_.data() + off, buf_.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // a full disk: the rest of this batch is gone
      off += static_cast<size_t>(w);
    }
    buf_.clear();
  }

 private:
  std::vector<char> buf_;
};

// Sites by their address, numbered in the file as they are first seen
// (drain only), with a small cache of the last ones seen in front. A
// module's sites are forgotten before it is closed (ForgetSites): its
// memory goes, and another module may come to the same addresses. Their
// numbers are not used again in the file, whose reader keeps the first
// name of each.
std::unordered_map<uint64_t, uint32_t>* g_sites;
std::pair<uint64_t, uint32_t> g_site_cache[64];
uint32_t g_next_site;

void ForgetSites() {
  g_sites->clear();
  for (auto& c : g_site_cache) c = {0, 0};
}

// Up to `n` bytes of this process's memory at `at` into `out`, through
// the kernel, so that an address no longer mapped is an error, not a
// crash: how many were read (those up to the first page not mapped).
size_t ReadOwnMemory(uintptr_t at, void* out, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t split = std::min<uintptr_t>(n, page - at % page);
  char* dst = static_cast<char*>(out);
  iovec local[2] = {{dst, split}, {dst + split, n - split}};
  iovec remote[2] = {{reinterpret_cast<void*>(at), split},
                     {reinterpret_cast<void*>(at + split), n - split}};
  const unsigned long parts = n > split ? 2 : 1;
  const ssize_t r = process_vm_readv(getpid(), local, parts, remote, parts, 0);
  return r < 0 ? 0 : static_cast<size_t>(r);
}

// A site's tag or name, cut at pf::kMaxString as Out::Str cuts it; false
// when it cannot be read whole.
bool ReadOwnString(const char* at, std::string* out) {
  out->clear();
  if (at == nullptr) return true;
  char buf[pf::kMaxString];
  const size_t n = ReadOwnMemory(reinterpret_cast<uintptr_t>(at), buf, sizeof buf);
  const size_t len = strnlen(buf, n);
  if (len == n && n < sizeof buf) return false;  // its end is not mapped
  out->assign(buf, len);
  return true;
}

// A site's index when the cache has it not: numbered, and named in `o`.
// Its names are read where the point was passed: in a module the program
// may have closed since (a point passed after the module's last drain:
// one built with an older points.h, or a thread still inside it as it
// was closed). Such a site goes unnamed, and the reader counts its events
// as lost.
__attribute__((noinline)) uint32_t NewSiteIndex(Out& o, uint64_t site) {
  auto [it, fresh] = g_sites->try_emplace(site, g_next_site);
  if (fresh) {
    ++g_next_site;
    fieldprof_point_site s{};
    std::string tag, name;
    if (ReadOwnMemory(site, &s, sizeof s) == sizeof s && ReadOwnString(s.tag, &tag) &&
        ReadOwnString(s.name, &name)) {
      o.Put(pf::kSite);
      o.Put(it->second);
      o.Str(tag.c_str());
      o.Str(name.c_str());
    }
  }
  g_site_cache[(site >> 4) & 63] = {site, it->second};
  return it->second;
}

inline uint32_t SiteIndex(Out& o, uint64_t site) {
  const auto& c = g_site_cache[(site >> 4) & 63];
  return __builtin_expect(c.first == site, 1) ? c.second : NewSiteIndex(o, site);
}

// ---------------------------------------------------------------- stacks

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
  uint64_t ips[kMaxStacks + 1][pf::kMaxStackDepth];
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
  if (!unwinder_ready) {
    OwnWork own;
    void* ip[1];
    g_unw_backtrace(ip, 1);
    unwinder_ready = true;
  }
  void* ips[pf::kMaxStackDepth + 8];
  const int n = g_unw_backtrace(ips, static_cast<int>(sizeof ips / sizeof ips[0]));
  // The frames of the unwinder and of this library come first.
  int from = 0;
  while (from < n && ips[from] != caller) ++from;
  uint32_t id = 0;
  if (from < n) {
    const int depth = std::min<int>(n - from, pf::kMaxStackDepth);
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

// Each thread's time for taking stacks (pf::kStackShare), in TSC ticks: it
// grows with the time that passes, up to the first allowance, and each
// stack taken spends what it took. Touched only inside HitWithStack and
// SpanWithStack, which a signal handler never enters twice.
uint64_t g_stack_burst_ticks;  // the first allowance, and the most saved
struct StackBudget {
  uint64_t last_tsc = 0;
  int64_t ticks = 0;
};
__thread StackBudget t_stack_budget __attribute__((tls_model("initial-exec")));

// Whether the thread has time left to take a stack at `now`.
bool MayTakeStack(uint64_t now) {
  StackBudget& b = t_stack_budget;
  if (b.last_tsc == 0) {
    b.ticks = static_cast<int64_t>(g_stack_burst_ticks);
  } else if (now > b.last_tsc) {
    const auto earned = static_cast<int64_t>((now - b.last_tsc) / pf::kStackShare);
    b.ticks = std::min(b.ticks + earned, static_cast<int64_t>(g_stack_burst_ticks));
  }
  b.last_tsc = now;
  return b.ticks > 0;
}

// The stack of the calling thread's event at `pushed` (Push's return; 0:
// the event was lost, and takes none), from `caller` (the return address
// into the code that made it) outwards, and how long taking it paused
// the thread: the reader takes that out of the thread's later times.
void PushStackOf(uint64_t pushed, const void* caller) {
  if (pushed == 0) return;
  const uint64_t tsc = __rdtsc();
  // Inside the dynamic linker's calls, inside the runtime's binder work,
  // and inside libc's own loading (linker_lock.h), the thread may
  // hold, or be taking, the dynamic linker's lock, which the unwinder
  // takes (dl_iterate_phdr): a signal handler's point cutting in there
  // would wait on its own thread for good. So would one cutting into the
  // recorder's own drain on this thread, at the stack table's lock. Its
  // event goes without a stack, counted.
  pf::Ring* r = pf::t_ring;  // made: the event is in it
  int (*const busy)() = g_rt_busy.load(std::memory_order_relaxed);
  if (t_in_linker != 0 || t_at_table != 0 || (busy != nullptr && busy() != 0) ||
      fieldprof::inproc::LinkerLockUnsafe(static_cast<int>(r->tid), t_iterating) ||
      !MayTakeStack(tsc)) {
    r->stackless.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint32_t id = StackId(caller);
  const uint64_t pause = __rdtsc() - tsc;
  t_stack_budget.ticks -= static_cast<int64_t>(pause);
  if (id != 0) pf::PushStack(tsc, id, pause, pushed - 1);
}

// A point with its stack. A signal handler's point while this thread
// records another point with its stack would come between the event and
// its stack in the ring, or inside the push itself: it is counted as lost
// instead. A scope's end takes no stack (its stack is its begin's).
void HitWithStack(const fieldprof_point_site* site, int kind, int64_t value, const void* caller) {
  if (t_in_point != 0) {
    pf::CountLost();
    return;
  }
  t_in_point = 1;
  const uint64_t pushed =
      pf::Push(0, reinterpret_cast<uint64_t>(site), value, static_cast<uint32_t>(kind));
  if (kind != FP_POINT_KIND_END) PushStackOf(pushed, caller);
  t_in_point = 0;
}

// A placed function's call (ring.cc's fieldprof_point_span, --stacks):
// its begin and end, then the begin's stack from the caller's return
// address outwards. The runtime lends the measured calls' return slots
// their callers' addresses meanwhile, where its stubs' unwind rules find
// them (agent/runtime/lab_exit.cc).
void SpanWithStack(uint64_t site, uint64_t tsc_begin, uint64_t tsc_end, const void* caller) {
  if (t_in_point != 0) {  // a signal handler's call, as at HitWithStack
    pf::CountLost();
    pf::CountLost();
    return;
  }
  t_in_point = 1;
  const uint64_t begun = pf::Push(tsc_begin, site, 0, FP_POINT_KIND_BEGIN);
  pf::Push(tsc_end, site, 0, FP_POINT_KIND_END);
  PushStackOf(begun, caller);
  t_in_point = 0;
}

// The program's file, as /proc/self/exe names it; empty when it cannot.
std::string ProgramPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
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
  const auto len = static_cast<uint16_t>(std::min<size_t>(path.size(), pf::kMaxString));
  const uint64_t bias = info->dlpi_addr;
  o.push_back(pf::kModule);
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

// The stacks first seen since the last drain, after the modules when they
// changed (drain only).
void TakeStacks(Out& o) {
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
    o.Put(modules.data(), modules.size());
    t->modules_written = generation;
  }
  for (uint32_t id = t->written + 1; id <= count; ++id) {
    o.Put(pf::kStack);
    o.Put(id);
    o.Put(t->depth[id]);
    o.Put(t->ips[id], sizeof(uint64_t) * t->depth[id]);
  }
  t->written = count;
}

// One event packed (points_format.h, 'P'): three fields, each stored as
// 8 bytes and kept as long as it needs, so that no branch depends on the
// data. `p` has kPackedSlack bytes beyond the event.
__attribute__((always_inline)) inline char* PutPacked(char* p, uint64_t delta, uint64_t site_kind,
                                                      uint64_t zigzag) {
  const uint32_t lt = pf::BytesFor(delta), ls = pf::BytesFor(site_kind);
  const uint32_t lz = pf::PackedValueBytes(zigzag);
  *p = static_cast<char>(pf::PackedControl(lt, ls, lz));
  std::memcpy(p + 1, &delta, 8);
  p += 1 + lt;
  std::memcpy(p, &site_kind, 8);
  p += ls;
  std::memcpy(p, &zigzag, 8);
  return p + lz;
}

// The site_kind of event `n` of `ev` (a ring's) when it is whole (its
// tsc and value then read right), else ~0.
__attribute__((always_inline)) inline uint64_t WholeSiteKind(const Event* ev, uint64_t n) {
  const uint64_t site_kind =
      __atomic_load_n(&ev[n & (kRingEvents - 1)].site_kind, __ATOMIC_ACQUIRE);
  return pf::IsWhole(site_kind, n) ? site_kind & pf::kSiteKindBits : ~uint64_t{0};
}

// Packs events [tail, tail + *n) of `ev` (a ring's) at `p`, up to the
// first not yet whole (*n: how many were), naming in `o` the sites they
// are the first of; returns the end. The first event, whole, is the
// batch's head's tsc: it goes as a delta of 0.
__attribute__((always_inline)) inline char* PackEvents(Out& o, const Event* ev, uint64_t tail,
                                                       uint32_t* n, char* p) {
  uint64_t prev = ev[tail & (kRingEvents - 1)].tsc;
  // The last site seen, kept in registers: the packing stores alias
  // everything in memory.
  uint64_t last_site = ~uint64_t{0}, last_index = 0;
  // In runs that stay within one round of the ring: their events lie one
  // after another, and share the mark that tells them whole.
  uint64_t k = tail;
  const uint64_t end = tail + *n;
  while (k != end) {
    const uint64_t run_end = std::min(end, (k | (kRingEvents - 1)) + 1);
    const uint64_t mark = pf::WholeMark(k);
    const Event* e = &ev[k & (kRingEvents - 1)];
    const Event* const stop = e + (run_end - k);
    for (; e != stop; ++e) {
      const uint64_t raw = __atomic_load_n(&e->site_kind, __ATOMIC_ACQUIRE);
      if (__builtin_expect(!pf::HasMark(raw, mark), 0)) break;
      // The thread wrote these lines from its own CPU: ask for them ahead
      // (past the ring's end, a prefetch is only a hint).
      __builtin_prefetch(e + 64);
      const uint64_t site_kind = raw & pf::kSiteKindBits;
      const uint64_t tsc = e->tsc;
      const auto value = static_cast<uint64_t>(e->value);
      const uint64_t site = site_kind & ~uint64_t{3};
      if (__builtin_expect(site != last_site, 0)) {
        if ((site_kind & 3) == pf::kStackKind) {  // the stack of the event before: its id
          last_index = site >> 1;
          last_site = ~uint64_t{0};
        } else {
          last_index = uint64_t{SiteIndex(o, site)} << 2;
          last_site = site;
        }
      }
      // The delta is mod 2^64: an earlier TSC on another CPU wraps back.
      p = PutPacked(p, tsc - prev, last_index | (site_kind & 3),
                    (value << 1) ^ (0 - (value >> 63)));
      prev = tsc;
    }
    k += static_cast<uint64_t>(e - &ev[k & (kRingEvents - 1)]);
    if (k != run_end) break;
  }
  *n = static_cast<uint32_t>(k - tail);
  return p;
}

// The same, built for each kind of CPU: most of packing's time is the
// three counts of leading zeros an event takes, which BSR (every x86-64)
// does in several micro-ops and LZCNT (most since 2013) in one. Packing
// took 32 TSC ticks an event with BSR and 17-20 with LZCNT on this
// project's AMD EPYC VM (docs/benchmarks-history.md).
char* PackEventsBsr(Out& o, const Event* ev, uint64_t tail, uint32_t* n, char* p) {
  return PackEvents(o, ev, tail, n, p);
}
__attribute__((target("lzcnt"))) char* PackEventsLzcnt(Out& o, const Event* ev, uint64_t tail,
                                                       uint32_t* n, char* p) {
  return PackEvents(o, ev, tail, n, p);
}

using PackFn = char* (*)(Out&, const Event*, uint64_t, uint32_t*, char*);
PackFn ChoosePacking() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & bit_LZCNT) != 0 ? PackEventsLzcnt
                                                                         : PackEventsBsr;
}

// How long the drain waits on a slot claimed and not yet whole before it
// counts it as lost: its push was cut off by a signal handler that has not
// returned (a siglongjmp out of it, or a handler that waits), or its
// thread was stopped in the middle of it. Should the push end after all,
// the drain has passed the slot and does not read it again.
constexpr uint64_t kWaitOnSlotNs = 10000000;

// Whether the drain passes by `r`'s slot `tail`, not yet whole, counting it
// as lost: `last` (the drain at exit or exec: the rest is never written),
// or the slot was claimed kWaitOnSlotNs ago or more: the drain has waited
// that long on it, or on one before it while its head was already past it.
bool PassBy(Ring* r, uint64_t tail, uint64_t head, bool last) {
  if (!last && tail >= r->passable_below) {
    const uint64_t now = MonoNs();
    if (r->waits_on != tail) {
      r->waits_on = tail;
      r->waits_since_ns = now;
      r->head_at_wait = head;
      return false;
    }
    if (now - r->waits_since_ns < kWaitOnSlotNs) return false;
    r->passable_below = r->head_at_wait;
  }
  ++r->never_whole;
  return true;
}

// Takes every ring's whole events into `o` as batches (points_format.h),
// the sites they name first, then frees their slots; true when there were
// any. `fullest`: the most events one ring held. `last`: the drain at exit
// or before an exec, which counts the slots not yet whole as lost.
bool DrainInto(Out& o, uint64_t* fullest = nullptr, bool last = false) {
  // Drain only; never destroyed: the last drain runs at exit.
  static auto* batch = new std::vector<char>();
  static const PackFn pack = ChoosePacking();
  TakeStacks(o);  // before the events that name them
  bool any = false;
  for (Ring* r = g_rings.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    const uint64_t head = r->head.load(std::memory_order_acquire);
    uint64_t tail = r->tail.load(std::memory_order_relaxed);
    if (fullest != nullptr) *fullest = std::max(*fullest, head - tail);
    if (head == tail) {
      pf::FreeIfEnded(r, tail);
      continue;
    }
    any = true;
    while (tail != head) {
      if (WholeSiteKind(r->ev, tail) == ~uint64_t{0}) {
        if (!PassBy(r, tail, head, last)) break;
        ++tail;
        continue;
      }
      uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(head - tail, pf::kMaxBatch));
      const size_t most = 1 + 4 + 4 + 8 + size_t{n} * pf::kMaxPackedEvent + pf::kPackedSlack;
      if (batch->size() < most) batch->resize(most);
      char* p = batch->data();
      *p++ = pf::kPackedBatch;
      std::memcpy(p, &r->tid, 4);
      std::memcpy(p + 8, &r->ev[tail & (kRingEvents - 1)].tsc, 8);
      p = pack(o, r->ev, tail, &n, p + 16);
      std::memcpy(batch->data() + 1 + 4, &n, 4);
      o.Put(batch->data(), static_cast<size_t>(p - batch->data()));  // after the sites it named
      tail += n;
    }
    r->tail.store(tail, std::memory_order_seq_cst);  // before `waiting` is read (WaitForRoom)
    pf::WakeWaiting(r);
    pf::FreeIfEnded(r, tail);
  }
  return any;
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
      o.Flush();
    }
    const uint64_t want = slept * (kRingEvents / 4) / std::max<uint64_t>(fullest, 1);
    sleep_ns = std::clamp(want, kMinSleepNs, kMaxSleepNs);
  }
  return nullptr;
}

std::string ProgramName() {
  const std::string path = ProgramPath();
  if (path.empty()) return "?";
  return path.substr(path.rfind('/') + 1);
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
  o.Flush();
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
  g_stop.store(0);
  // The drain thread takes no signal meant for the program.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  g_drain_started = pthread_create(&g_drain, nullptr, DrainLoop, nullptr) == 0;
  pf::g_drain_running.store(g_drain_started, std::memory_order_release);
  // Named before anything else runs: the runtime places a detour only while
  // no thread but this one and the program's first runs (agent/runtime/detour.h).
  if (g_drain_started) pthread_setname_np(g_drain, "fieldprof-drain");
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// Before an exec replaces the program, or _exit ends it: what the rings
// hold goes to the file now (the file closes with the image; no end mark,
// as for a kill).
// Not in a vfork child, which shares the parent's memory and file.
void DrainBeforeImageEnds() {
  if (!g_recording.load() || getpid() != g_pid) return;
  OwnWork own;
  std::lock_guard<std::mutex> l(g_drain_mu);
  if (g_fd < 0 && (!AnythingRecorded() || !OpenFile())) return;
  Out o;
  DrainInto(o, nullptr, true);
  o.Clock();
  o.Flush();
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
  o.Flush();
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
  for (Ring* r = g_rings.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    const uint64_t lost = r->lost.load(std::memory_order_relaxed) + r->never_whole;
    for (const auto& [type, n] : {std::pair{pf::kLost, lost},
                                  {pf::kStackless, r->stackless.load(std::memory_order_relaxed)}}) {
      if (n == 0) continue;
      o.Put(type);
      o.Put(r->tid);
      o.Put(n);
    }
  }
  o.Put(pf::kEnd);
  o.Flush();
  close(g_fd);
  g_fd = -1;
}

// ---------------------------------------------------------------- arming

// DT_SONAME of the dynamic section `dyn`, whose strings are `strs`; "" if
// none. `read_at(p, n, offset)` reads the file.
template <typename ReadAt>
std::string SoName(const ReadAt& read_at, const ElfW(Shdr) & dyn, const ElfW(Shdr) & strs) {
  if (dyn.sh_size > (1u << 20) || strs.sh_size > (1u << 24)) return "";
  std::vector<ElfW(Dyn)> d(dyn.sh_size / sizeof(ElfW(Dyn)));
  if (!read_at(d.data(), d.size() * sizeof(ElfW(Dyn)), static_cast<off_t>(dyn.sh_offset))) {
    return "";
  }
  for (const ElfW(Dyn) & e : d) {
    if (e.d_tag == DT_NULL) break;
    if (e.d_tag != DT_SONAME || e.d_un.d_val >= strs.sh_size) continue;
    char name[256] = {};
    const size_t n = std::min<size_t>(sizeof name - 1, strs.sh_size - e.d_un.d_val);
    if (!read_at(name, n, static_cast<off_t>(strs.sh_offset + e.d_un.d_val))) return "";
    return std::string(name, strnlen(name, n));
  }
  return "";
}

// The fieldprof:point semaphores in the USDT notes of the ELF file at
// `path`, as addresses in the file (link-time); and its DT_SONAME, when
// `soname` is given and it has one.
std::vector<uint64_t> PointSemaphores(const char* path, std::string* soname) {
  std::vector<uint64_t> out;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  ElfW(Ehdr) eh;
  std::vector<ElfW(Shdr)> sh;
  std::vector<char> names;
  const auto read_at = [fd](void* p, size_t n, off_t off) {
    return pread(fd, p, n, off) == static_cast<ssize_t>(n);
  };
  if (read_at(&eh, sizeof eh, 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(ElfW(Shdr)) &&
      eh.e_shnum > 0 && eh.e_shnum < 65280 && eh.e_shstrndx < eh.e_shnum) {
    sh.resize(eh.e_shnum);
    if (read_at(sh.data(), sizeof(ElfW(Shdr)) * sh.size(), static_cast<off_t>(eh.e_shoff))) {
      const ElfW(Shdr)& strs = sh[eh.e_shstrndx];
      names.resize(strs.sh_size + 1);
      if (strs.sh_size < (1u << 24) &&
          read_at(names.data(), strs.sh_size, static_cast<off_t>(strs.sh_offset))) {
        names.back() = 0;
        for (const ElfW(Shdr) & s : sh) {
          if (s.sh_type == SHT_DYNAMIC && soname != nullptr && s.sh_link < sh.size()) {
            *soname = SoName(read_at, s, sh[s.sh_link]);
          }
          if (s.sh_type != SHT_NOTE || s.sh_name >= strs.sh_size ||
              strcmp(names.data() + s.sh_name, ".note.stapsdt") != 0 || s.sh_size > (1u << 26)) {
            continue;
          }
          std::vector<char> note(s.sh_size);
          if (!read_at(note.data(), note.size(), static_cast<off_t>(s.sh_offset))) continue;
          for (size_t at = 0; at + 12 <= note.size();) {
            uint32_t namesz, descsz, type;
            memcpy(&namesz, &note[at], 4);
            memcpy(&descsz, &note[at + 4], 4);
            memcpy(&type, &note[at + 8], 4);
            const size_t name_at = at + 12;
            const size_t desc_at = name_at + ((namesz + 3) & ~size_t{3});
            const size_t next = desc_at + ((descsz + 3) & ~size_t{3});
            if (next > note.size() || next <= at) break;
            if (type == 3 && namesz == 8 && memcmp(&note[name_at], "stapsdt", 8) == 0 &&
                descsz > 24) {
              uint64_t sem;
              memcpy(&sem, &note[desc_at + 16], 8);
              const std::string text(&note[desc_at + 24], descsz - 24);
              const std::string provider = text.c_str();
              const std::string probe = text.c_str() + std::min(text.size(), provider.size() + 1);
              if (provider == "fieldprof" && probe == "point" && sem != 0) out.push_back(sem);
            }
            at = next;
          }
        }
      }
    }
  }
  close(fd);
  return out;
}

// A loaded module as the recorder knows it: its path and load bias.
// The file a loaded module was read from: the program has no name in the
// list.
bool IsProgram(const dl_phdr_info* info) {
  return info->dlpi_name == nullptr || info->dlpi_name[0] == 0;
}
const char* ModulePath(const dl_phdr_info* info) {
  return IsProgram(info) ? "/proc/self/exe" : info->dlpi_name;
}
std::string ModuleKey(const dl_phdr_info* info) {
  return std::string(ModulePath(info)) + "@" + std::to_string(info->dlpi_addr);
}

int ArmModule(dl_phdr_info* info, size_t, void*) {
  const char* path = ModulePath(info);
  const std::string key = ModuleKey(info);
  if (!g_scanned->insert(key).second) return 0;
  const bool placing = g_placed_modules != nullptr && !g_placed_loaded;
  std::string soname;
  for (uint64_t sem : PointSemaphores(path, placing ? &soname : nullptr)) {
    const uintptr_t at = info->dlpi_addr + sem;
    if (!g_armed->try_emplace(at, key).second) continue;
    auto* s = reinterpret_cast<volatile unsigned short*>(at);
    *s = static_cast<unsigned short>(*s + 1);
  }
  if (placing) {
    // A module as the runtime's plan may name it: a library by its soname
    // (or its file's name), the program by its file's name or as "main".
    const bool program = IsProgram(info);
    const char* slash = strrchr(path, '/');
    const std::string file = program ? ProgramName() : slash != nullptr ? slash + 1 : path;
    for (const std::string& name : {file, soname, std::string(program ? "main" : "")}) {
      if (!name.empty() && g_placed_modules->count(name) != 0) g_placed_loaded = true;
    }
  }
  return 0;
}

// Arms what is loaded; true when some module has points, or one of the
// modules the --at plan names is loaded.
bool ArmAll() {
  std::lock_guard<std::mutex> l(g_arm_mu);
  if (g_armed == nullptr) return false;
  dl_iterate_phdr(ArmModule, nullptr);
  return !g_armed->empty() || g_placed_loaded;
}

// After a dlclose: the modules no longer loaded are forgotten, with their
// semaphores, so that one opened again (at the same address, say) is read
// and armed again.
void ForgetClosedModules() {
  std::lock_guard<std::mutex> l(g_arm_mu);
  if (g_armed == nullptr) return;
  std::unordered_set<std::string> loaded;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        static_cast<std::unordered_set<std::string>*>(out)->insert(ModuleKey(info));
        return 0;
      },
      &loaded);
  std::erase_if(*g_scanned, [&](const std::string& key) { return loaded.count(key) == 0; });
  std::erase_if(*g_armed, [&](const auto& armed) { return loaded.count(armed.second) == 0; });
}

// The modules the --at plan at `path` names ("MODULE:SYMBOL" lines).
std::unordered_set<std::string>* PlacedModules(const char* path) {
  auto* out = new std::unordered_set<std::string>();
  FILE* f = path != nullptr ? fopen(path, "re") : nullptr;
  if (f == nullptr) return out;
  char line[4096];
  while (fgets(line, sizeof line, f) != nullptr) {
    if (const char* colon = strchr(line, ':'); colon != nullptr && colon != line) {
      out->emplace(line, static_cast<size_t>(colon - line));
    }
  }
  fclose(f);
  return out;
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
  ForgetSites();
  g_next_site = 0;
  if (g_stack_table != nullptr) {  // the parent's lock may have been held
    g_stack_table = NewStackTable();
    g_stacks = g_stack_table != nullptr;
  }
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
    pthread_atfork(nullptr, nullptr, AtForkChild);
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
  fieldprof::inproc::FillEveryNextIfStale();
  pthread_atfork(fieldprof::inproc::FillEveryNextIfStale, nullptr, nullptr);
  const char* dir = getenv(pf::kDirEnv);
  if (dir == nullptr || dir[0] == 0) return;
  OwnWork own;
  g_dir = strdup(dir);
  g_began_ns = ClockNs(CLOCK_REALTIME);
  g_armed = new std::unordered_map<uintptr_t, std::string>();
  g_scanned = new std::unordered_set<std::string>();
  g_sites = new std::unordered_map<uint64_t, uint32_t>();
  if (const char* hz = getenv("FIELDPROF_TSC_HZ"); hz != nullptr && strtoull(hz, nullptr, 10) > 0) {
    pf::g_ticks_per_ms = strtoull(hz, nullptr, 10) / 1000;
  }
  if (const char* st = getenv(pf::kStacksEnv);
      st != nullptr && strcmp(st, "1") == 0 && OpenUnwinder()) {
    fieldprof::inproc::FindLinkerLock(fieldprof::inproc::RealDlIteratePhdr);
    g_stack_table = NewStackTable();
    g_stacks = g_stack_table != nullptr;
    if (g_stacks) pf::g_span_with_stack = SpanWithStack;
    const char* hz = getenv("FIELDPROF_TSC_HZ");  // set by the command; else a guess
    const uint64_t rate = hz != nullptr ? strtoull(hz, nullptr, 10) : 0;
    g_stack_burst_ticks = (rate > 0 ? rate : 3'000'000'000ull) / 1000 * pf::kStackBurstMs;
  }
  // Points placed by configuration (the runtime's points pass) are taken
  // whether or not any module has points of its own (Arm).
  const char* lab = getenv("FIELDPROF_LAB");
  if (lab != nullptr && strcmp(lab, "points") == 0) {
    g_placed_modules = PlacedModules(getenv("FIELDPROF_LAB_APIS"));
    Arm();
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
  if (hit == 2) HitWithStack(site, kind, value, __builtin_return_address(0));
}

// A point the runtime passes on in a points pass with stacks (its
// fieldprof_point_hit, agent/runtime/points.cc): `caller` is the return
// address into the code that passed it, and the measured calls around it
// have their callers' addresses in their return slots meanwhile.
__attribute__((visibility("default"))) void fieldprof_point_hit_from(
    const fieldprof_point_site* site, int kind, int64_t value, const void* caller) {
  const uint8_t hit = g_hit.load(std::memory_order_relaxed);
  if (hit == 1) {  // no unwinder to be had (said at start)
    pf::Push(0, reinterpret_cast<uint64_t>(site), value, static_cast<uint32_t>(kind));
  } else if (hit == 2) {
    HitWithStack(site, kind, value, caller);
  }
}

// The runtime, in a points pass, hands over its test of whether the
// calling thread is inside its binder work (PushStackOf says why).
__attribute__((visibility("default"))) void fieldprof_points_busy_from(int (*busy)()) {
  g_rt_busy.store(busy, std::memory_order_relaxed);
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
// calls, are agent/inprocess/'s (image_end.cc, seccomp_hooks.cc,
// loader_calls.cc); what the recorder does at each:
namespace fieldprof::inproc {

int BeforeExec() {
  DrainBeforeImageEnds();
  return 0;
}

// The exec failed: the rings go on filling, the file stays open.
void AfterFailedExec(int) {}

// _exit runs no destructor, nor the atexit handler (Finish): the rings go
// to the file now, as before an exec. Not from the recorder's own work.
void BeforeExit() {
  if (pf::t_own == 0) DrainBeforeImageEnds();
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
  pf::t_own += runtime;
  return runtime;
}
void AfterDlopen(void* handle, int before_dlopen) {
  pf::t_own -= before_dlopen;
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

}  // namespace fieldprof::inproc
