// Instrumentation points in the field: in a run the runtime
// measures, every module built with fieldprof/points.h is armed, and each
// point's time goes into a log2 histogram per (module, tag, from, to),
// which the run's record carries as metric point_ns beside its APIs.
//
// Arming (each module's switch raised from its notes): arming.cc.
//
// What is summed, as `fieldprof points` reads a recorded run
// (tools/points/points_report.h): within a tag, the time from each point
// (FP_POINT) to the next, whatever thread made them ("tag$from$to"); and
// each scope (FP_SCOPE, FP_BEGIN/FP_END), matched on its thread, inner
// ones first ("tag$name"). Integer values are not kept.
//
// Privacy: tags and names are held to the key rules' point names
// (common/wire/key_rules.h) when a site is first seen; a point that breaks them
// is counted and dropped, and never written.
//
// Cost: nothing in a run that is not measured (no module is armed). In a
// measured run, a point is a read of the run's clock (the TSC, as for the
// APIs' calls), a look-up of its site and series in tables read without a
// lock, and a histogram update in its thread's own table: threads that
// pass points at once share no line they write, but for the last point of
// a tag both pass (one atomic exchange). A site is checked and named once,
// under the lock, when first passed; so is a new series. A thread's table
// goes back at its end, for a thread that starts later. The first
// kTablesPerChunk tables are in the state; the others, in chunks of as
// many, are mapped as threads come to need them. Past kPointThreads
// threads at once, the others share one table under the lock. A
// point made while the same thread is inside another (a signal handler)
// is dropped and counted. The state is mapped at the first point.
#include "agent/preload/runtime/points/points.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>
#include <new>

#include "agent/preload/base/recorder_abi.h"
#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/companion.h"
#include "agent/preload/runtime/hotpath/hotpath.h"
#include "agent/preload/runtime/lab/lab.h"
#include "agent/preload/runtime/lab/lab_state.h"
#include "agent/preload/runtime/sys.h"
#include "common/wire/key_rules.h"

namespace fieldprof::rt {
namespace {

constexpr int kKindPoint = 0, kKindBegin = 1, kKindEnd = 2;
constexpr int kMaxSeries = FP_MAX_POINT_SERIES, kMaxTags = 64;
constexpr int kMaxNames = 1024;    // distinct point names, all tags
constexpr int kSiteSlots = 4096;   // sites passed (a power of 2)
constexpr int kSeriesSlots = 256;  // series' index (a power of 2, > kMaxSeries)
// Threads with a table of their own: a chunk in the state, and chunks
// mapped as more threads pass points at once (a table is some 200 KB,
// touched as its series are used).
constexpr int kTablesPerChunk = 16, kTableChunks = 16;
constexpr int kPointThreads = kTablesPerChunk * kTableChunks;
static_assert(kPointThreads % 64 == 0, "free_tables: 64 tables a word");
constexpr int kThreadOpen = 64;  // scopes open at once on a thread
constexpr size_t kName = key_rules::kMaxPointName + 1;
// A name id that is no name: the `to` of a scope's series.
constexpr uint32_t kNoName = kMaxNames;
// A site's ids when its names break the key rules, or when its tag or
// name is new and there is no room left for it.
constexpr uint32_t kRefusedSite = ~uint32_t{0}, kNoRoomSite = kRefusedSite - 1;
// A tag's last point: its name id + 1 above kLastTickBits of the run's
// clock (kept modulo 2^kLastTickBits: some 34 days of TSC at 3 GHz).
constexpr int kLastTickBits = 53;
constexpr uint64_t kLastTickMask = (uint64_t{1} << kLastTickBits) - 1;

struct Series {
  uint32_t tag, from, to;  // name ids; to kNoName: a scope
  uintptr_t site;          // of the later point: its module
  // That module's key name and build id ("": not named yet), named from
  // the binder's object table, brought up to date, before a module is
  // closed and at the record (NamePointSeries): a plugin closed before
  // the record is written still has its series. Never at the point: the
  // table may be behind the dynamic linker's list there, and an entry of
  // a module gone names memory unmapped.
  char module[sizeof SpoolPoint::module], build_id[sizeof SpoolPoint::build_id];
  Histogram h;  // the threads' tables summed, at the record
};
// A site passed: its tag's and name's ids (or kRefusedSite, kNoRoomSite).
// `site` is written last, with release: a reader that finds it finds the
// ids.
struct SiteSlot {
  std::atomic<const fieldprof_point_site*> site;
  uint32_t tag, name;
};
// A series' key (SeriesKey, never 0) to its index, written last likewise.
struct SeriesSlot {
  std::atomic<uint32_t> key;
  uint32_t index;
};
struct alignas(64) TagLast {
  std::atomic<uint64_t> last;  // 0: no point of the tag yet
};
struct Open {       // a scope begun and not yet ended
  const void* who;  // the thread (the shared table's scopes)
  uint32_t tag, name;
  uint64_t ticks;
};
// A thread's points: only it writes here (the shared one: under the lock).
struct PointThread {
  int nopen;
  Open open[kThreadOpen];
  Histogram h[kMaxSeries];  // by series index
};
struct TableChunk {
  PointThread t[kTablesPerChunk];
};
// Zero bytes are an empty state (and chunk): mapped zero-filled, nothing
// constructed, so pages no thread uses are never touched.
struct PointsState {
  std::atomic<int> lock;  // the slow paths: a new site, tag, name or series; `shared`
  int ntags, nnames;
  std::atomic<int> nseries;      // published after the series is filled
  std::atomic<int> next_thread;  // tables handed out so far
  // Bit i % 64 of word i / 64: table i's thread has ended.
  std::atomic<uint64_t> free_tables[kPointThreads / 64];
  std::atomic<uint64_t> threads_seen, threads_shared;
  std::atomic<uint64_t> dropped, refused;
  char tags[kMaxTags][kName];
  char names[kMaxNames][kName];
  Series series[kMaxSeries];
  SiteSlot sites[kSiteSlots];
  SeriesSlot series_index[kSeriesSlots];
  TagLast last[kMaxTags];
  PointThread shared;                    // the threads past kPointThreads
  PointThread threads[kTablesPerChunk];  // tables 0 to kTablesPerChunk - 1
  // The tables after, kTablesPerChunk a chunk (chunks[0] unused); null
  // until a thread needs one of them.
  std::atomic<TableChunk*> chunks[kTableChunks];
};

std::atomic<PointsState*> g_points{nullptr};
// A lab pass: the points recorder's entry (lab.cc finds it), which gets
// every point; the lab's files are not the field's.
recorder_abi::HitFn g_next_hit = nullptr;
recorder_abi::HitFromFn g_next_hit_from = nullptr;
thread_local int t_in_point = 0;  // its address also names the thread
// The thread's table, and the state it is in (a fork child's state is a
// new one: the table of the state before is not the thread's).
thread_local PointThread* t_points = nullptr;
thread_local PointsState* t_points_of = nullptr;
// Its value in a thread with a table: the table's index + 1, so that the
// table is given back when the thread ends (GiveBackTable).
pthread_key_t g_table_key;
std::atomic<int> g_table_key_made{0};  // 0 no, 1 being made, 2 made, 3 failed

PointsState* State() {
  PointsState* p = g_points.load(std::memory_order_acquire);
  if (p != nullptr) [[likely]]
    return p;
  void* m = mmap(nullptr, sizeof(PointsState), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* fresh = static_cast<PointsState*>(m);  // zero bytes: empty (above)
  if (g_points.compare_exchange_strong(p, fresh)) return fresh;
  munmap(m, sizeof(PointsState));  // another thread's came first
  return p;
}

// Spins a little, then lets the holder run (a holder taken off its CPU
// would otherwise have the spinners give up on a busy machine); false only
// after a long wait, which nothing should need (no holder waits on
// anything).
bool Lock(PointsState& p) {
  for (int tries = 0; tries < 200000; ++tries) {
    int free = 0;
    if (p.lock.compare_exchange_weak(free, 1, std::memory_order_acquire)) return true;
    if (tries < 1000) {
      __builtin_ia32_pause();
    } else {
      sched_yield();
    }
  }
  return false;
}
void Unlock(PointsState& p) { p.lock.store(0, std::memory_order_release); }

// Table `i` (below p.next_thread); nullptr when its chunk is not mapped:
// with `map`, it is mapped then (nullptr if it cannot be).
PointThread* TableAt(PointsState& p, int i, bool map) {
  if (i < kTablesPerChunk) return &p.threads[i];
  std::atomic<TableChunk*>& slot = p.chunks[i / kTablesPerChunk];
  TableChunk* c = slot.load(std::memory_order_acquire);
  if (c == nullptr && map) {
    void* m = mmap(nullptr, sizeof(TableChunk), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    auto* fresh = static_cast<TableChunk*>(m);  // zero bytes: empty
    if (slot.compare_exchange_strong(c, fresh, std::memory_order_acq_rel)) {
      c = fresh;
    } else {
      munmap(m, sizeof(TableChunk));  // another thread's came first
    }
  }
  return c != nullptr ? &c->t[i % kTablesPerChunk] : nullptr;
}

inline uint32_t Mix(uint64_t x) { return static_cast<uint32_t>((x * 0x9E3779B97F4A7C15ull) >> 32); }

// Under the lock: the id of `s` in `table` (added if new); kRefused when
// it breaks the key rules, kNoRoom when the table is full.
constexpr int kRefused = -1, kNoRoom = -2;
int Intern(char (*table)[kName], int* n, int cap, const char* s) {
  if (s == nullptr) return kRefused;
  const size_t len = strnlen(s, kName);
  if (!key_rules::PointNameOk(s, len)) return kRefused;
  for (int i = 0; i < *n; ++i) {
    if (strncmp(table[i], s, kName) == 0) return i;
  }
  if (*n == cap) return kNoRoom;
  memcpy(table[*n], s, len);
  table[*n][len] = 0;
  return (*n)++;
}

// The slow path of SiteIds: a site passed for the first time.
[[gnu::noinline]] const SiteSlot* AddSite(PointsState& p, const fieldprof_point_site* site) {
  if (!Lock(p)) return nullptr;
  const SiteSlot* found = nullptr;
  const uint32_t h = Mix(reinterpret_cast<uintptr_t>(site));
  for (int probe = 0; probe < kSiteSlots; ++probe) {
    SiteSlot& s = p.sites[(h + probe) & (kSiteSlots - 1)];
    const fieldprof_point_site* at = s.site.load(std::memory_order_relaxed);
    if (at == site) {
      found = &s;
      break;
    }
    if (at != nullptr) continue;
    const int tag = Intern(p.tags, &p.ntags, kMaxTags, site->tag);
    const int name = Intern(p.names, &p.nnames, kMaxNames, site->name);
    if (tag == kRefused || name == kRefused) {
      s.tag = kRefusedSite;
    } else if (tag == kNoRoom || name == kNoRoom) {
      s.tag = kNoRoomSite;
    } else {
      s.tag = static_cast<uint32_t>(tag);
      s.name = static_cast<uint32_t>(name);
    }
    s.site.store(site, std::memory_order_release);
    found = &s;
    break;
  }
  Unlock(p);
  return found;  // nullptr: the table is full
}

inline const SiteSlot* SiteIds(PointsState& p, const fieldprof_point_site* site) {
  const uint32_t h = Mix(reinterpret_cast<uintptr_t>(site));
  for (int probe = 0; probe < kSiteSlots; ++probe) {
    const SiteSlot& s = p.sites[(h + probe) & (kSiteSlots - 1)];
    const fieldprof_point_site* at = s.site.load(std::memory_order_acquire);
    if (at == site) [[likely]]
      return &s;
    if (at == nullptr) break;
  }
  return AddSite(p, site);
}

inline uint32_t SeriesKey(uint32_t tag, uint32_t from, uint32_t to) {
  return (tag << 22 | from << 11 | to) + 1;
}

// The slow path of SeriesIndex: a series seen for the first time.
[[gnu::noinline]] int AddSeries(PointsState& p, bool locked, uint32_t key, uint32_t tag,
                                uint32_t from, uint32_t to, uintptr_t site) {
  if (!locked && !Lock(p)) return -1;
  int index = -1;
  const uint32_t h = Mix(key);
  for (int probe = 0; probe < kSeriesSlots; ++probe) {
    SeriesSlot& s = p.series_index[(h + probe) & (kSeriesSlots - 1)];
    const uint32_t at = s.key.load(std::memory_order_relaxed);
    if (at == key) {
      index = static_cast<int>(s.index);
      break;
    }
    if (at != 0) continue;
    const int n = p.nseries.load(std::memory_order_relaxed);
    if (n == kMaxSeries) break;
    Series& fresh = p.series[n];
    fresh.tag = tag;
    fresh.from = from;
    fresh.to = to;
    fresh.site = site;
    fresh.module[0] = 0;
    p.nseries.store(n + 1, std::memory_order_release);
    s.index = static_cast<uint32_t>(n);
    s.key.store(key, std::memory_order_release);
    index = n;
    break;
  }
  if (!locked) Unlock(p);
  return index;  // -1: no room left
}

inline int SeriesIndex(PointsState& p, bool locked, uint32_t tag, uint32_t from, uint32_t to,
                       uintptr_t site) {
  const uint32_t key = SeriesKey(tag, from, to), h = Mix(key);
  for (int probe = 0; probe < kSeriesSlots; ++probe) {
    const SeriesSlot& s = p.series_index[(h + probe) & (kSeriesSlots - 1)];
    const uint32_t at = s.key.load(std::memory_order_acquire);
    if (at == key) [[likely]]
      return static_cast<int>(s.index);
    if (at == 0) break;
  }
  return AddSeries(p, locked, key, tag, from, to, site);
}

// `ticks`: the run's clock (Ticks), as the APIs' durations; from one
// thread's point to another's it may read a little below 0 (then 0).
void Add(PointsState& p, PointThread& t, uint32_t tag, uint32_t from, uint32_t to,
         const fieldprof_point_site* site, uint64_t ticks) {
  // The shared table's user holds the lock already.
  const int i = SeriesIndex(p, &t == &p.shared, tag, from, to, reinterpret_cast<uintptr_t>(site));
  if (i < 0) {
    p.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!g.calibrated) [[unlikely]] {
    p.dropped.fetch_add(1, std::memory_order_relaxed);  // no rate to say it in ns (CalibrateAt)
    return;
  }
  t.h[i].Record(TicksToNs(ticks));
}

// The clock's rate, for the points' durations in ns: taken at the first
// point if no measured call has taken it yet (a program whose points come
// before any API's call, or with none), and again as the run grows, as the
// APIs' flush does (hotpath.cc). Only if another thread is taking it just
// then is it still unknown: those points are counted as dropped.
inline void CalibrateAt(uint64_t now) {
  if (!g.calibrated || (g.rate_span_ticks < (uint64_t{1} << 36) &&
                        now - g.rate_tsc0 > 4 * g.rate_span_ticks)) [[unlikely]]
    CalibrateNow();
}

void OnPoint(PointsState& p, PointThread& t, const SiteSlot& ids, const fieldprof_point_site* site,
             uint64_t now) {
  const uint64_t mine = (uint64_t{ids.name} + 1) << kLastTickBits | (now & kLastTickMask);
  const uint64_t before = p.last[ids.tag].last.exchange(mine, std::memory_order_relaxed);
  if (before == 0) return;
  // Modulo 2^kLastTickBits; a point of another thread stamped a little
  // later, but exchanged first, reads as a wrap: 0.
  const uint64_t ticks = (now - before) & kLastTickMask;
  Add(p, t, ids.tag, static_cast<uint32_t>(before >> kLastTickBits) - 1, ids.name, site,
      ticks < kLastTickMask / 2 ? ticks : 0);
}

void OnBegin(PointsState& p, PointThread& t, const SiteSlot& ids, uint64_t now) {
  if (t.nopen == kThreadOpen) {
    p.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Open& o = t.open[t.nopen++];
  o.who = &t_in_point;
  o.tag = ids.tag;
  o.name = ids.name;
  o.ticks = now;
}

void OnEnd(PointsState& p, PointThread& t, const SiteSlot& ids, const fieldprof_point_site* site,
           uint64_t now) {
  for (int i = t.nopen - 1; i >= 0; --i) {
    const Open& o = t.open[i];
    if (o.tag != ids.tag || o.name != ids.name || o.who != &t_in_point) continue;
    Add(p, t, ids.tag, ids.name, kNoName, site, now - o.ticks);
    t.open[i] = t.open[--t.nopen];  // order among the open ones does not matter
    return;
  }
  p.dropped.fetch_add(1, std::memory_order_relaxed);  // begun before the run was armed
}

// At a thread's end: its table goes back for a thread that starts later
// (its histograms stay where they are, and the next thread adds to them;
// the record sums every table). A point the thread passes after this (in
// another key's destructor) goes to the shared table.
void GiveBackTable(void* value) {
  const uintptr_t i = reinterpret_cast<uintptr_t>(value) - 1;
  PointsState* p = g_points.load(std::memory_order_acquire);
  t_points = nullptr;
  if (p == nullptr || t_points_of != p || i >= kPointThreads) return;
  p->free_tables[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_release);
}

bool TableKeyMade() {
  int made = g_table_key_made.load(std::memory_order_acquire);
  if (made == 0 && g_table_key_made.compare_exchange_strong(made, 1)) {
    made = pthread_key_create(&g_table_key, GiveBackTable) == 0 ? 2 : 3;
    g_table_key_made.store(made, std::memory_order_release);
  }
  return made == 2;
}

// A thread's first point (in this state): a table given back by a thread
// that has ended, or one never handed out, or none (the shared one).
[[gnu::noinline]] PointThread* TakeTable(PointsState& p) {
  p.threads_seen.fetch_add(1, std::memory_order_relaxed);
  int i = -1;
  for (int w = 0; w < kPointThreads / 64 && i < 0; ++w) {
    for (uint64_t free = p.free_tables[w].load(std::memory_order_acquire); free != 0;) {
      const int bit = __builtin_ctzll(free);
      if (p.free_tables[w].compare_exchange_weak(free, free & ~(uint64_t{1} << bit),
                                                 std::memory_order_acquire)) {
        i = w * 64 + bit;
        break;
      }
    }
  }
  if (i < 0) {
    i = p.next_thread.fetch_add(1, std::memory_order_relaxed);
    if (i >= kPointThreads) i = -1;
  }
  // A table given back is mapped already; a new one's chunk may not be (a
  // table whose chunk cannot be mapped is never handed out again).
  PointThread* const table = i >= 0 ? TableAt(p, i, true) : nullptr;
  t_points_of = &p;
  if (table == nullptr) {
    p.threads_shared.fetch_add(1, std::memory_order_relaxed);
    t_points = nullptr;
    return nullptr;
  }
  PointThread& t = *table;
  t.nopen = 0;  // scopes a thread that ended left open never end
  t_points = &t;
  if (TableKeyMade()) {
    pthread_setspecific(g_table_key, reinterpret_cast<void*>(static_cast<uintptr_t>(i) + 1));
  }
  return &t;
}

// The thread's own table; nullptr when every one is taken (then the shared
// one, under the lock).
inline PointThread* MyTable(PointsState& p) {
  if (t_points_of == &p) [[likely]]
    return t_points;
  return TakeTable(p);
}

void Hit(PointsState& p, PointThread& t, const SiteSlot& ids, const fieldprof_point_site* site,
         int kind, uint64_t now) {
  if (kind == kKindPoint) {
    OnPoint(p, t, ids, site, now);
  } else if (kind == kKindBegin) {
    OnBegin(p, t, ids, now);
  } else if (kind == kKindEnd) {
    OnEnd(p, t, ids, site, now);
  }
}

// Under WithObjects (the object table up to date, the dynamic linker's
// lock held, so no module goes meanwhile): the series not named yet get
// the module their later point is in, if it is loaded.
void NameSeries(void* arg) {
  PointsState& p = *static_cast<PointsState*>(arg);
  if (!Lock(p)) return;
  const int n = p.nseries.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    Series& s = p.series[i];
    if (s.module[0] != 0) continue;
    const Object* def = ObjectContaining(s.site);
    const char* module = def != nullptr ? KeyModule(def) : nullptr;
    // Only the system's code names its points in the field (a user's own
    // program built with points.h keeps its tags at home), or a module
    // the volunteer shares.
    if (module != nullptr && !SystemModule(def) && !SharedByVolunteer(def, module))
      module = nullptr;
    if (module == nullptr || !CopyName(s.module, sizeof s.module, module)) {
      s.module[0] = 0;
      continue;
    }
    KeyBuildId(def, s.build_id, sizeof s.build_id);
  }
  Unlock(p);
}

}  // namespace

void NamePointSeries() {
  PointsState* p = g_points.load(std::memory_order_acquire);
  if (p == nullptr || t_in_binder) return;
  bool unnamed = false;
  const int n = p->nseries.load(std::memory_order_acquire);
  for (int i = 0; i < n && !unnamed; ++i) unnamed = p->series[i].module[0] == 0;
  if (!unnamed) return;
  t_in_binder = 1;
  WithObjects(NameSeries, p);
  t_in_binder = 0;
}

void PointModuleComesOrGoes(volatile unsigned short*, int arriving) {
  if (!g.active) return;
  if (arriving != 0) {
    BinderNoticeNewObjects();
  } else {
    NamePointSeries();
  }
}

void SetPointsForward(void* next_hit, void* next_hit_from) {
  g_next_hit = reinterpret_cast<recorder_abi::HitFn>(next_hit);
  g_next_hit_from = reinterpret_cast<recorder_abi::HitFromFn>(next_hit_from);
}

int InBinderWork() { return t_in_binder; }

void ForgetPoints(bool after_fork) {
  PointsState* p = g_points.load();
  if (p == nullptr) return;
  if (after_fork) {
    // The child's one thread is the forking one; the other threads' tables
    // and scopes are gone with them. A fresh state, not a cleared one:
    // clearing would copy every page the parent wrote, and most children
    // exec at once.
    g_points.store(nullptr);
    for (std::atomic<TableChunk*>& c : p->chunks) {
      if (c.load() != nullptr) munmap(c.load(), sizeof(TableChunk));
    }
    munmap(p, sizeof(PointsState));
    t_points = nullptr;
    t_points_of = nullptr;
    if (g_table_key_made.load() == 2) pthread_setspecific(g_table_key, nullptr);
    return;
  }
  // After a failed exec: the same threads go on, into a record of their
  // own. What holds data is cleared; sites and series stay known.
  const int threads = std::min(p->next_thread.load(), kPointThreads);
  for (int t = -1; t < threads; ++t) {
    PointThread* const table = t < 0 ? &p->shared : TableAt(*p, t, false);
    if (table == nullptr) continue;
    table->nopen = 0;
    for (Histogram& h : table->h) {
      if (h.count() != 0) new (&h) Histogram();
    }
  }
  for (TagLast& l : p->last) l.last.store(0, std::memory_order_relaxed);
  p->dropped = 0;
  p->refused = 0;
}

int AddPointRecords(SpoolRun* run) {
  NamePointSeries();
  PointsState* p = g_points.load();
  if (p == nullptr || !Lock(*p)) return 0;
  int added = 0;
  const int n = p->nseries.load(std::memory_order_acquire);
  const int threads = std::min(p->next_thread.load(), kPointThreads);
  uint64_t dropped = p->dropped.load();
  for (int i = 0; i < n && run->npoints < kMaxSeries; ++i) {
    Series& s = p->series[i];
    // The module of the later point (NamePointSeries, just now).
    if (s.module[0] == 0) {
      ++dropped;
      continue;
    }
    // The threads' tables, summed; threads still passing points go on
    // counting into theirs (as the APIs' slabs are summed).
    new (&s.h) Histogram();
    s.h.Merge(p->shared.h[i]);
    for (int t = 0; t < threads; ++t) {
      const PointThread* const table = TableAt(*p, t, false);
      if (table != nullptr && table->h[i].count() != 0) s.h.Merge(table->h[i]);
    }
    if (s.h.count() == 0) continue;
    SpoolPoint& out = run->points[run->npoints];
    strcpy(out.module, s.module);
    strcpy(out.build_id, s.build_id);
    strcpy(out.symbol, p->tags[s.tag]);
    strcat(out.symbol, "$");
    strcat(out.symbol, p->names[s.from]);
    if (s.to != kNoName) {
      strcat(out.symbol, "$");
      strcat(out.symbol, p->names[s.to]);
    }
    out.h = &s.h;
    ++run->npoints;
    ++added;
  }
  DebugLog("points: %llu threads passed points, %llu of them in the shared table",
           static_cast<unsigned long long>(p->threads_seen.load()),
           static_cast<unsigned long long>(p->threads_shared.load()));
  const uint64_t refused = p->refused.load();
  if (dropped + refused > 0) {
    DebugLog("points: %llu dropped, %llu refused by the key rules",
             static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(refused));
  }
  Unlock(*p);
  return added;
}

bool AddApiPoint(SpoolRun* run, const FpApi& api, const Histogram& time) {
  if (run->npoints >= kMaxSeries) return false;
  char tag[kName];
  size_t n = 0;
  for (const char* c = api.module; *c != 0 && n + 1 < kName; ++c, ++n) {
    tag[n] = key_rules::PointNameChar(*c) ? *c : '_';
  }
  tag[n] = 0;
  if (!key_rules::PointNameOk(tag, n) ||
      !key_rules::PointNameOk(api.symbol, strnlen(api.symbol, kName))) {
    DebugLog("points: %s:%s is timed but breaks the point-name rule", api.module, api.symbol);
    return false;
  }
  SpoolPoint& out = run->points[run->npoints];
  if (!CopyName(out.module, sizeof out.module, api.module) ||
      !CopyName(out.build_id, sizeof out.build_id, api.build_id)) {
    return false;
  }
  strcpy(out.symbol, tag);
  strcat(out.symbol, "$");
  strcat(out.symbol, api.symbol);
  out.h = &time;
  ++run->npoints;
  return true;
}

}  // namespace fieldprof::rt

using namespace fieldprof::rt;  // NOLINT: the runtime's own parts

extern "C" FP_EXPORT void fieldprof_point_hit(const fieldprof_point_site* site, int kind,
                                              int64_t value) {
  if (g_lab_mode != kLabOff) {
    if (g_next_hit_from != nullptr) {
      // The stack of the code that passed the point (this call's return
      // address) goes on through the measured calls around it.
      ShadowStack* ss = t_state.ss;
      const uint64_t lent =
          ss == nullptr
              ? 0
              : LendReturnAddresses(*ss, ss->depth,
                                    reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
      g_next_hit_from(site, kind, value, __builtin_return_address(0));
      if (ss != nullptr) GiveBackReturnAddresses(*ss, lent);
    } else if (g_next_hit != nullptr) {
      g_next_hit(site, kind, value);
    }
    return;
  }
  if (!g.active || site == nullptr || t_in_point != 0) return;
  t_in_point = 1;
  const uint64_t now = Ticks();
  CalibrateAt(now);
  PointsState* p = State();
  const SiteSlot* ids = p != nullptr ? SiteIds(*p, site) : nullptr;
  if (ids == nullptr || ids->tag == kNoRoomSite) {
    if (p != nullptr) p->dropped.fetch_add(1, std::memory_order_relaxed);
  } else if (ids->tag == kRefusedSite) {
    p->refused.fetch_add(1, std::memory_order_relaxed);
  } else if (PointThread* mine = MyTable(*p); mine != nullptr) [[likely]] {
    Hit(*p, *mine, *ids, site, kind, now);
  } else if (Lock(*p)) {
    Hit(*p, p->shared, *ids, site, kind, now);
    Unlock(*p);
  } else {
    p->dropped.fetch_add(1, std::memory_order_relaxed);
  }
  t_in_point = 0;
}

// A module about to be closed: the point series its points began are
// named first, while it is still in the table (a plugin that passes its
// points and is closed before the program ends). Once it is closed, the
// sites known are forgotten: another module may be loaded where its
// were, with other names at the same addresses.
namespace {
int (*next_dlclose)(void*) = nullptr;
FP_NEXT_SLOT(next_dlclose, "dlclose");
}  // namespace
extern "C" FP_EXPORT int dlclose(void* handle) {
  NamePointSeries();
  const int rc = Next(&next_dlclose, "dlclose")(handle);
  PointsState* p = g_points.load(std::memory_order_acquire);
  if (p != nullptr && Lock(*p)) {
    for (SiteSlot& s : p->sites) {
      if (s.site.load(std::memory_order_relaxed) != nullptr) s.site.store(nullptr);
    }
    Unlock(*p);
  }
  return rc;
}
