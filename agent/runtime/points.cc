// Instrumentation points in the field (issue #34): in a run the runtime
// measures, every module built with fieldprof/points.h is armed, and each
// point's time goes into a log2 histogram per (module, tag, from, to),
// which the run's record carries as metric point_ns beside its APIs.
//
// Arming. The header leaves a note in each module's loaded notes (PT_NOTE,
// owner "fieldprof") holding its semaphore's offset from the note, so the
// binder raises every module's semaphore as it first sees the module, at
// start and after dlopen, without reading a file.
//
// What is summed, as `fieldprof points` reads a recorded run
// (tools/local/points_report.h): within a tag, the time from each point
// (FP_POINT) to the next, whatever thread made them ("tag$from$to"); and
// each scope (FP_SCOPE, FP_BEGIN/FP_END), matched on its thread, inner
// ones first ("tag$name"). Integer values are not kept.
//
// Privacy: tags and names are held to the key rules' point names
// (common/key_rules.h) when they are first seen; a point that breaks them
// is counted and dropped, and never written.
//
// Cost: nothing in a run that is not measured (no module is armed). In a
// measured run, a point is a read of the run's clock (the TSC, as for the
// APIs' calls) and a short lock; the state is mapped at the first point.
// (The clock was CLOCK_MONOTONIC by the system call: some 0.3-0.5 us a
// point on this project's VM, inside the scopes around it.) A point made
// while the same thread is inside another (a signal handler) is dropped
// and counted.
#include "agent/runtime/points.h"

#include <string.h>
#include <sys/mman.h>

#include <atomic>
#include <new>

#include "agent/runtime/binder_internal.h"
#include "agent/runtime/companion.h"
#include "agent/runtime/hotpath.h"
#include "agent/runtime/lab.h"
#include "agent/runtime/lab_state.h"
#include "agent/runtime/sys.h"
#include "common/key_rules.h"

// As fieldprof/points.h declares it.
extern "C" struct fieldprof_point_site {
  const char* tag;
  const char* name;
};

namespace fieldprof::rt {
namespace {

constexpr uint32_t kNoteType = 0x46500001;
constexpr int kKindPoint = 0, kKindBegin = 1, kKindEnd = 2;
constexpr int kMaxSeries = FP_MAX_POINT_SERIES, kMaxTags = 64, kMaxOpen = 256;
constexpr size_t kName = key_rules::kMaxPointName + 1;

struct Series {
  char tag[kName], from[kName], to[kName];  // to "": a scope
  uintptr_t site;                           // of the later point: its module
  // That module's key name and build id ("": not named yet), named from
  // the binder's object table, brought up to date, before a module is
  // closed and at the record (NamePointSeries): a plugin closed before
  // the record is written still has its series. Never at the point: the
  // table may be behind the dynamic linker's list there, and an entry of
  // a module gone names memory unmapped.
  char module[sizeof SpoolPoint::module], build_id[sizeof SpoolPoint::build_id];
  Histogram h;
};
struct Tag {
  char tag[kName], last[kName];  // last "": no point of the tag yet
  int64_t last_ticks;
};
struct Open {  // a scope begun and not yet ended
  const void* thread;
  char tag[kName], name[kName];
  int64_t ticks;
};
struct PointsState {
  std::atomic<int> lock;
  int nseries, ntags, nopen;
  uint64_t dropped, refused;
  Series series[kMaxSeries];
  Tag tags[kMaxTags];
  Open open[kMaxOpen];
};

std::atomic<PointsState*> g_points{nullptr};
// A lab pass: the points recorder's entry (lab.cc finds it), which gets
// every point; the lab's files are not the field's.
void (*g_next_hit)(const fieldprof_point_site*, int, int64_t) = nullptr;
LabHitFromFn g_next_hit_from = nullptr;
thread_local int t_in_point = 0;  // its address also names the thread

PointsState* State() {
  PointsState* p = g_points.load(std::memory_order_acquire);
  if (p != nullptr) return p;
  void* m = mmap(nullptr, sizeof(PointsState), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  PointsState* fresh = new (m) PointsState();
  if (g_points.compare_exchange_strong(p, fresh)) return fresh;
  munmap(m, sizeof(PointsState));  // another thread's came first
  return p;
}

bool CopyPointName(char* out, const char* s) {
  if (s == nullptr) return false;
  const size_t n = strnlen(s, kName);
  if (!key_rules::PointNameOk(s, n)) return false;
  memcpy(out, s, n);
  out[n] = 0;
  return true;
}

// `ticks`: the run's clock (Ticks), as the APIs' durations; from one
// thread's point to another's it may read a little below 0.
void Add(PointsState& p, const char* tag, const char* from, const char* to, uintptr_t site,
         int64_t ticks) {
  const uint64_t ns = TicksToNs(ticks > 0 ? static_cast<uint64_t>(ticks) : 0);
  for (int i = 0; i < p.nseries; ++i) {
    Series& s = p.series[i];
    if (strcmp(s.tag, tag) == 0 && strcmp(s.from, from) == 0 && strcmp(s.to, to) == 0) {
      s.h.Record(ns);
      return;
    }
  }
  if (p.nseries == kMaxSeries) {
    ++p.dropped;
    return;
  }
  Series& s = p.series[p.nseries++];
  strcpy(s.tag, tag);
  strcpy(s.from, from);
  strcpy(s.to, to);
  s.site = site;
  s.module[0] = 0;
  new (&s.h) Histogram();
  s.h.Record(ns);
}

void OnPoint(PointsState& p, const fieldprof_point_site* site, const char* tag, const char* name,
             int64_t now) {
  Tag* t = nullptr;
  for (int i = 0; i < p.ntags && t == nullptr; ++i) {
    if (strcmp(p.tags[i].tag, tag) == 0) t = &p.tags[i];
  }
  if (t == nullptr) {
    if (p.ntags == kMaxTags) {
      ++p.dropped;
      return;
    }
    t = &p.tags[p.ntags++];
    strcpy(t->tag, tag);
    t->last[0] = 0;
  }
  if (t->last[0] != 0)
    Add(p, tag, t->last, name, reinterpret_cast<uintptr_t>(site), now - t->last_ticks);
  strcpy(t->last, name);
  t->last_ticks = now;
}

void OnEnd(PointsState& p, const fieldprof_point_site* site, const char* tag, const char* name,
           int64_t now) {
  for (int i = p.nopen - 1; i >= 0; --i) {
    Open& o = p.open[i];
    if (o.thread != &t_in_point || strcmp(o.tag, tag) != 0 || strcmp(o.name, name) != 0) continue;
    Add(p, tag, name, "", reinterpret_cast<uintptr_t>(site), now - o.ticks);
    p.open[i] = p.open[--p.nopen];  // order among the open ones does not matter
    return;
  }
  ++p.dropped;  // an end without its begin (begun before the run was armed)
}

bool Lock(PointsState& p) {
  for (int spins = 0; spins < 100000; ++spins) {
    int free = 0;
    if (p.lock.compare_exchange_weak(free, 1, std::memory_order_acquire)) return true;
    __builtin_ia32_pause();
  }
  return false;
}

// Raises the semaphores `e`'s notes name (only those at 0 with
// `only_lowered`); how many.
int ArmNotes(const ElfObject& e, bool only_lowered) {
  int armed = 0;
  for (int i = 0; i < e.phnum; ++i) {
    const Elf64_Phdr& ph = e.phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const uintptr_t lo = e.base + ph.p_vaddr, hi = lo + ph.p_memsz;
    for (uintptr_t at = lo; at + 12 <= hi;) {
      const uint32_t* h = reinterpret_cast<const uint32_t*>(at);
      const uint32_t namesz = h[0], descsz = h[1], type = h[2];
      const uintptr_t name = at + 12, desc = name + ((namesz + 3) & ~3u);
      const uintptr_t next = desc + ((descsz + 3) & ~3u);
      if (next > hi || next <= at) break;
      if (type == kNoteType && namesz == 10 && descsz == 4 &&
          memcmp(reinterpret_cast<const char*>(name), "fieldprof", 10) == 0) {
        int32_t off;
        memcpy(&off, reinterpret_cast<const void*>(desc), sizeof off);
        const uintptr_t sem = desc + static_cast<intptr_t>(off);
        auto* word = reinterpret_cast<unsigned short*>(sem);
        if (sem >= e.map_lo && sem + 2 <= e.map_hi && sem % 2 == 0 &&
            !(only_lowered && __atomic_load_n(word, __ATOMIC_RELAXED) != 0)) {
          __atomic_add_fetch(word, 1, __ATOMIC_RELAXED);
          ++armed;
        }
      }
      at = next;
    }
  }
  return armed;
}

// Under WithObjects (the object table up to date, the dynamic linker's
// lock held, so no module goes meanwhile): the series not named yet get
// the module their later point is in, if it is loaded.
void NameSeries(void* arg) {
  PointsState& p = *static_cast<PointsState*>(arg);
  if (!Lock(p)) return;
  for (int i = 0; i < p.nseries; ++i) {
    Series& s = p.series[i];
    if (s.module[0] != 0) continue;
    const Object* def = ObjectContaining(s.site);
    const char* module = def != nullptr ? KeyModule(def) : nullptr;
    if (module == nullptr || !CopyName(s.module, sizeof s.module, module)) {
      s.module[0] = 0;
      continue;
    }
    KeyBuildId(def, s.build_id, sizeof s.build_id);
  }
  p.lock.store(0, std::memory_order_release);
}

}  // namespace

void NamePointSeries() {
  PointsState* p = g_points.load(std::memory_order_acquire);
  if (p == nullptr || t_in_binder) return;
  bool unnamed = false;
  for (int i = 0; i < p->nseries && !unnamed; ++i) unnamed = p->series[i].module[0] == 0;
  if (!unnamed) return;
  t_in_binder = 1;
  WithObjects(NameSeries, p);
  t_in_binder = 0;
}

void ArmPoints(const ElfObject& e) {
  if (g_lab_mode != kLabOff && g_lab_mode != kLabPoints) return;  // the census and timing passes
  if (ArmNotes(e, false) > 0) DebugLog("points: armed %s", e.path[0] != 0 ? e.path : "the program");
}

void RearmPoints(const ElfObject& e) {
  if (g_lab_mode != kLabOff && g_lab_mode != kLabPoints) return;
  if (ArmNotes(e, true) > 0) {
    DebugLog("points: armed again %s (opened again)", e.path[0] != 0 ? e.path : "the program");
  }
}

void SetPointsForward(void* next_hit, void* next_hit_from) {
  g_next_hit = reinterpret_cast<void (*)(const fieldprof_point_site*, int, int64_t)>(next_hit);
  g_next_hit_from = reinterpret_cast<LabHitFromFn>(next_hit_from);
}

void ForgetPoints() {
  PointsState* p = g_points.load();
  if (p == nullptr) return;
  p->lock.store(0);
  p->nseries = p->ntags = p->nopen = 0;
  p->dropped = p->refused = 0;
}

int AddPointRecords(SpoolRun* run) {
  NamePointSeries();
  PointsState* p = g_points.load();
  if (p == nullptr || !Lock(*p)) return 0;
  int added = 0;
  for (int i = 0; i < p->nseries && run->npoints < kMaxSeries; ++i) {
    const Series& s = p->series[i];
    SpoolPoint& out = run->points[run->npoints];
    // The module of the later point (NamePointSeries, just now).
    if (s.module[0] == 0) {
      ++p->dropped;
      continue;
    }
    strcpy(out.module, s.module);
    strcpy(out.build_id, s.build_id);
    strcpy(out.symbol, s.tag);
    strcat(out.symbol, "$");
    strcat(out.symbol, s.from);
    if (s.to[0] != 0) {
      strcat(out.symbol, "$");
      strcat(out.symbol, s.to);
    }
    out.h = &s.h;
    ++run->npoints;
    ++added;
  }
  if (p->dropped + p->refused > 0) {
    DebugLog("points: %llu dropped, %llu refused by the key rules",
             static_cast<unsigned long long>(p->dropped),
             static_cast<unsigned long long>(p->refused));
  }
  p->lock.store(0, std::memory_order_release);
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
  const auto now = static_cast<int64_t>(Ticks());
  PointsState* p = State();
  char tag[kName], name[kName];
  if (p != nullptr && Lock(*p)) {
    if (!CopyPointName(tag, site->tag) || !CopyPointName(name, site->name)) {
      ++p->refused;
    } else if (kind == kKindPoint) {
      OnPoint(*p, site, tag, name, now);
    } else if (kind == kKindBegin) {
      if (p->nopen < kMaxOpen) {
        Open& o = p->open[p->nopen++];
        o.thread = &t_in_point;
        strcpy(o.tag, tag);
        strcpy(o.name, name);
        o.ticks = now;
      } else {
        ++p->dropped;
      }
    } else if (kind == kKindEnd) {
      OnEnd(*p, site, tag, name, now);
    }
    p->lock.store(0, std::memory_order_release);
  }
  t_in_point = 0;
}

// A module about to be closed: the point series its points began are
// named first, while it is still in the table (a plugin that passes its
// points and is closed before the program ends).
extern "C" FP_EXPORT int dlclose(void* handle) {
  static int (*next)(void*) = nullptr;
  NamePointSeries();
  return Next(&next, "dlclose")(handle);
}
