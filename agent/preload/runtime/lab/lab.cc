// Lab mode's state, stubs, plan and record (lab.h). The per-call part,
// LabExit, is in lab_exit.cc (no floating point: it runs with a measured
// function's results live).
#include "agent/preload/runtime/lab/lab.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "agent/preload/runtime/binder/next_symbol.h"
#include "agent/preload/runtime/binder/state.h"
#include "agent/preload/runtime/front/decide.h"
#include "agent/preload/runtime/hotpath/clock.h"
#include "agent/preload/runtime/lab/lab_state.h"
#include "agent/preload/runtime/points/points.h"
#include "agent/preload/runtime/records/spool_encode.h"
#include "agent/preload/runtime/sys.h"
#include "common/points/points_format.h"

extern "C" void fp_empty_function();

namespace fieldprof::rt {

FP_HOT_DATA int g_lab_mode;
FP_HOT_DATA uintptr_t* g_lab_real;
FP_HOT_DATA uintptr_t g_lab_stubs;
FP_HOT_DATA uint64_t g_lab_probe_ticks;
FP_HOT_DATA LabApis* g_lab_apis;
FP_HOT_DATA LabCounts* g_lab_counts;
FP_HOT_DATA recorder_abi::SpanFn g_lab_span;
FP_HOT_DATA bool g_lab_stacks;
FP_HOT_DATA volatile int g_lab_lock;
__thread int t_in_lab FP_TLS;

namespace {

void* MapRw(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

const char* g_debug_log;

// The stubs: mov $slot, %r11d; jmp rel32 to a thunk that jumps to
// fp_lab_entry. Written whole, then made executable: never writable and
// executable at once.
bool MakeStubs() {
  const size_t code = size_t{kLabStubSize} * kLabMaxApis;
  const size_t bytes = code + 4096;
  auto* p = static_cast<uint8_t*>(MapRw(bytes));
  if (p == nullptr) return false;
  uint8_t* thunk = p + code;
  thunk[0] = 0xff;  // jmp *0(%rip), then the address
  thunk[1] = 0x25;
  memset(thunk + 2, 0, 4);
  const uintptr_t entry = reinterpret_cast<uintptr_t>(&fp_lab_entry);
  memcpy(thunk + 6, &entry, 8);
  for (uint32_t i = 0; i < kLabMaxApis; ++i) {
    uint8_t* s = p + size_t{kLabStubSize} * i;
    const uint32_t slot = kLabSlot0 + i;
    s[0] = 0x41;  // mov $slot, %r11d
    s[1] = 0xbb;
    memcpy(s + 2, &slot, 4);
    s[6] = 0xe9;  // jmp thunk
    const int32_t rel = static_cast<int32_t>(thunk - (s + 11));
    memcpy(s + 7, &rel, 4);
    memset(s + 11, 0xcc, kLabStubSize - 11);
  }
  if (mprotect(p, bytes, PROT_READ | PROT_EXEC) != 0) {
    munmap(p, bytes);
    return false;
  }
  g_lab_stubs = reinterpret_cast<uintptr_t>(p);
  return true;
}

uint64_t PlanKey(const char* module, size_t module_len, const char* symbol) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < module_len; ++i) {
    h ^= static_cast<unsigned char>(module[i]);
    h *= 1099511628211ull;
  }
  h = Mix64(h) ^ NameKey(symbol);
  return h == 0 ? 1 : h;
}

bool InPlan(uint64_t key) {
  const LabApis& a = *g_lab_apis;
  for (uint32_t i = static_cast<uint32_t>(key) & (kLabPlanCap - 1);;
       i = (i + 1) & (kLabPlanCap - 1)) {
    if (a.plan[i] == key) return true;
    if (a.plan[i] == 0) return false;
  }
}

// The timing plan: one API a line, "module:symbol" (the symbol may hold
// colons: C++ names do not, but the split is at the first one).
bool ReadPlan(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char* buf = g_lab_apis->plan_text;
  size_t n = 0;
  while (n < sizeof g_lab_apis->plan_text - 1) {
    const ssize_t r = read(fd, buf + n, sizeof g_lab_apis->plan_text - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += static_cast<size_t>(r);
  }
  close(fd);
  buf[n] = 0;
  g_lab_apis->plan_len = static_cast<uint32_t>(n);
  uint32_t count = 0;
  for (char* line = buf; *line;) {
    char* end = strchr(line, '\n');
    if (end != nullptr) *end = 0;
    const char* colon = strchr(line, ':');
    if (colon != nullptr && colon[1] != 0 && count < kLabPlanCap / 2) {
      const uint64_t key = PlanKey(line, static_cast<size_t>(colon - line), colon + 1);
      uint32_t i = static_cast<uint32_t>(key) & (kLabPlanCap - 1);
      while (g_lab_apis->plan[i] != 0 && g_lab_apis->plan[i] != key)
        i = (i + 1) & (kLabPlanCap - 1);
      if (g_lab_apis->plan[i] == 0) ++count;
      g_lab_apis->plan[i] = key;
    }
    if (end == nullptr) break;
    line = end + 1;
  }
  g_lab_apis->plan_size = count;
  return true;
}

const char* Save(const char* s) {
  LabApis& a = *g_lab_apis;
  const size_t n = strlen(s) + 1;
  if (a.arena_used + n > sizeof a.arena) return nullptr;
  char* p = a.arena + a.arena_used;
  memcpy(p, s, n);
  a.arena_used += n;
  return p;
}

}  // namespace

bool LabStart(char** envp, const char* debug_log) {
  g_debug_log = debug_log;
  const char* mode = sys::Env(envp, "FIELDPROF_LAB");
  const char* dir = sys::Env(envp, "FIELDPROF_LAB_DIR");
  if (mode == nullptr) return true;
  if (!strcmp(mode, "census")) {
    g_lab_mode = kLabCensus;
  } else if (!strcmp(mode, "time")) {
    g_lab_mode = kLabTime;
  } else if (!strcmp(mode, "points")) {
    g_lab_mode = kLabPoints;
  } else {
    DebugLine(debug_log, "FIELDPROF_LAB=%s: not census, time or points", mode);
    return false;
  }
  if (dir == nullptr || dir[0] == 0 || strlen(dir) >= sizeof(LabApis::dir)) {
    DebugLine(debug_log, "lab mode without a usable FIELDPROF_LAB_DIR");
    return false;
  }
  g_lab_apis = static_cast<LabApis*>(MapRw(sizeof(LabApis)));
  g_lab_counts = static_cast<LabCounts*>(MapRw(sizeof(LabCounts)));
  if (g_lab_apis == nullptr || g_lab_counts == nullptr || !MakeStubs()) {
    DebugLine(debug_log, "lab mode: no memory for its state");
    return false;
  }
  g_lab_real = g_lab_apis->real;
  g_lab_apis->n = 1;  // index 0: the lab probe
  if (g_lab_mode == kLabCensus) LabCountAllocations();
  strcpy(g_lab_apis->dir, dir);
  if (g_lab_mode == kLabTime || g_lab_mode == kLabPoints) {
    const char* plan = sys::Env(envp, "FIELDPROF_LAB_APIS");
    if (plan == nullptr || !ReadPlan(plan)) {
      DebugLine(debug_log, "lab %s pass without a readable FIELDPROF_LAB_APIS", mode);
      return false;
    }
  }
  if (g_lab_mode == kLabPoints) {
    static const char* const kSpan[] = {"fieldprof_point_span", "fieldprof_point_hit",
                                        "fieldprof_point_hit_from"};
    uintptr_t span[3] = {};
    ResolveNext(kSpan, span, 3);
    if (span[0] == 0) {
      DebugLine(debug_log, "lab points pass without the points recorder preloaded after it");
      return false;
    }
    g_lab_span = reinterpret_cast<recorder_abi::SpanFn>(span[0]);
    const char* stacks = sys::Env(envp, points::kStacksEnv);
    g_lab_stacks = stacks != nullptr && strcmp(stacks, "1") == 0 && span[2] != 0;
    // The program's own points go to the recorder too (points.cc).
    SetPointsForward(reinterpret_cast<void*>(span[1]),
                     g_lab_stacks ? reinterpret_cast<void*>(span[2]) : nullptr);
    static const char* const kBusy[] = {"fieldprof_points_busy_from"};
    uintptr_t busy_from = 0;
    ResolveNext(kBusy, &busy_from, 1);
    if (busy_from != 0) reinterpret_cast<recorder_abi::BusyFromFn>(busy_from)(InBinderWork);
  }
  DebugLine(debug_log, "lab mode: %s, writing to %s (%u APIs planned)", mode, dir,
            g_lab_apis->plan_size);
  return true;
}

void LabCalibrate() {
  if (g_lab_mode == kLabOff) return;
  g_lab_real[0] = reinterpret_cast<uintptr_t>(&fp_empty_function);
  uint64_t probes[kProbeCalls];
  ProbeDurations(reinterpret_cast<void (*)()>(LabStubAddress(0)), probes);
  const uint64_t typical = probes[kProbeCalls / 2];
  g_lab_probe_ticks = typical == ~uint64_t{0} ? 0 : typical;
}

int32_t LabBind(const char* module, const char* build_id, const char* symbol, uintptr_t real) {
  LabApis& a = *g_lab_apis;
  // A function whose entry measures it (LabDetoured): its callers go on to it.
  for (uint32_t d = 0; d < a.ndetoured; ++d) {
    if (a.detoured[d] == real) return -1;
  }
  // The same function reached again (another caller, or dlsym): its index.
  uint32_t i = static_cast<uint32_t>(Mix64(real)) & (kLabMapCap - 1);
  for (; a.map[i] != 0; i = (i + 1) & (kLabMapCap - 1)) {
    if (a.real[a.map[i]] == real) return static_cast<int32_t>(a.map[i]);
  }
  if ((g_lab_mode == kLabTime || g_lab_mode == kLabPoints) &&
      !InPlan(PlanKey(module, strlen(module), symbol))) {
    return -1;
  }
  if (a.n >= kLabMaxApis || a.n >= kLabMapCap / 2) {
    ++a.refused;
    return -1;
  }
  const char* m = Save(module);
  const char* b = Save(build_id);
  const char* s = Save(symbol);
  if (m == nullptr || b == nullptr || s == nullptr) {
    ++a.refused;
    return -1;
  }
  const uint32_t index = a.n;
  a.names[index] = {m, b, s};
  a.sites[index] = {m, s};
  __atomic_store_n(&a.real[index], real, __ATOMIC_RELEASE);
  a.map[i] = index;
  a.n = index + 1;
  DebugLine(g_debug_log, "lab: %s:%s is API %u", module, symbol, index);
  return static_cast<int32_t>(index);
}

bool LabPlanLine(uint32_t* pos, const char** line) {
  const LabApis& a = *g_lab_apis;
  while (*pos < a.plan_len) {
    const char* l = a.plan_text + *pos;
    *pos += static_cast<uint32_t>(strlen(l)) + 1;
    if (l[0] != 0) {
      *line = l;
      return true;
    }
  }
  return false;
}

bool LabDetourRoom() {
  return g_lab_apis->ndetoured < sizeof g_lab_apis->detoured / sizeof g_lab_apis->detoured[0];
}

uintptr_t* LabReal(uint32_t index) { return &g_lab_apis->real[index]; }

void LabDetoured(uint32_t index, uintptr_t fn, uintptr_t moved) {
  LabApis& a = *g_lab_apis;
  a.detoured[a.ndetoured++] = fn;
  __atomic_store_n(&a.real[index], moved, __ATOMIC_RELEASE);
}

void LabForgetDetour(uintptr_t fn) {
  LabApis& a = *g_lab_apis;
  for (uint32_t d = 0; d < a.ndetoured; ++d) {
    if (a.detoured[d] == fn) {
      a.detoured[d] = a.detoured[--a.ndetoured];
      return;
    }
  }
}

void LabSayPlaced(const char* line, const char* what, const char* why) {
  char path[sizeof(LabApis::dir) + 64];
  snprintf(path, sizeof path, "%s/placed-%d", g_lab_apis->dir, static_cast<int>(getpid()));
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  char text[2048];
  const int n =
      snprintf(text, sizeof text, "%s\t%s%s%s\n", line, what, why ? ": " : "", why ? why : "");
  if (n > 0) {
    const ssize_t w = write(fd, text, static_cast<size_t>(n) < sizeof text ? n : sizeof text - 1);
    (void)w;
  }
  close(fd);
  DebugLine(g_debug_log, "points: %s: %s%s%s", line, what, why ? ": " : "", why ? why : "");
}

namespace {

// What the allocator does for the innermost call on this thread goes to
// that call's depth; its exit takes it (AddPath in lab_exit.cc).
LabOwn* InnermostOwn() {
  const ShadowStack* ss = t_state.ss;
  LabCounts* c = g_lab_counts;
  if (t_in_lab || ss == nullptr || c == nullptr || ss->depth == 0) return nullptr;
  const long stack = ss - g_stacks;
  const uint32_t d = ss->depth - 1;
  if (stack < 0 || stack >= kShadowStacks || d >= kShadowDepth) return nullptr;
  return &c->own[stack][d];
}

}  // namespace

void LabAllocated(void* p) {
  if (LabOwn* o = InnermostOwn()) {
    o->alloc_bytes += malloc_usable_size(p);
    ++o->allocs;
  }
}

void LabFreeing(void* p) {
  if (LabOwn* o = InnermostOwn()) o->freed_bytes += malloc_usable_size(p);
}

uint64_t LabCalls() {
  return g_lab_counts == nullptr ? 0 : __atomic_load_n(&g_lab_counts->calls, __ATOMIC_RELAXED);
}

void LabResetCounts() {
  if (g_lab_mode == kLabOff || g_lab_counts == nullptr) return;
  // A fresh mapping, not a cleared one: clearing would copy every page the
  // parent recorded into.
  void* fresh = MapRw(sizeof(LabCounts));
  if (fresh == nullptr) {
    g_lab_counts->calls = 0;  // still counted into, but never written
    g_lab_mode = kLabOff;
    return;
  }
  munmap(g_lab_counts, sizeof(LabCounts));
  g_lab_counts = static_cast<LabCounts*>(fresh);
  g_lab_lock = 0;
  t_in_lab = 0;
}

namespace {

// Appends to the file through a buffer; a failed write marks it bad.
struct FileOut {
  int fd;
  char buf[1 << 16];
  size_t n = 0;
  bool bad = false;
  void Put(const char* p, size_t len) {
    if (n + len > sizeof buf) Flush();
    if (len > sizeof buf) {
      WriteAll(p, len);
      return;
    }
    memcpy(buf + n, p, len);
    n += len;
  }
  void Flush() {
    WriteAll(buf, n);
    n = 0;
  }
  void WriteAll(const char* p, size_t len) {
    while (len > 0 && !bad) {
      const ssize_t w = write(fd, p, len);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        bad = true;
        return;
      }
      p += w;
      len -= static_cast<size_t>(w);
    }
  }
  // A length-delimited field whose bytes are in `o`.
  void Field(int field, const ProtoOut& o) {
    char head[16];
    ProtoOut h{head, 0, sizeof head};
    h.Tag(field, 2);
    h.Varint(o.n);
    Put(head, h.n);
    Put(o.p, o.n);
  }
};

struct WriteScratch {
  FileOut file;
  char plat[64], key[2048], hist[16384], rec[16384 + 2048 + 64], small[256];
};

void Encode(FileOut& f, WriteScratch& w, const LabApis& a, const LabCounts& c) {
  ProtoOut po{w.plat, 0, sizeof w.plat};
  EncodePlatform(po);
  ProtoOut head{w.small, 0, sizeof w.small};
  head.U64(1, 1);  // schema_version
  head.Bytes(2, w.plat, po.n);
  head.U64(3, static_cast<uint64_t>(g_lab_mode));
  f.Put(w.small, head.n);
  const uint64_t resolution =
      g.calibrated ? std::max<uint64_t>(1, TicksToNs(g.resolution_ticks)) : 0;
  for (uint32_t i = 1; i < a.n; ++i) {
    ProtoOut ko{w.key, 0, sizeof w.key};
    ko.Str(1, a.names[i].module);
    ko.Str(2, a.names[i].build_id);
    ko.Str(3, a.names[i].symbol);
    ko.Bytes(5, w.plat, po.n);
    if (ko.bad) f.bad = true;
    f.Field(4, ko);
  }
  for (uint32_t i = 1; i < a.n; ++i) {
    for (int m = 0; m < FP_NUM_METRICS; ++m) {
      const Histogram& h = c.h[i][m];
      if (h.count() == 0) continue;
      ProtoOut ko{w.key, 0, sizeof w.key};
      ko.Str(1, a.names[i].module);
      ko.Str(2, a.names[i].build_id);
      ko.Str(3, a.names[i].symbol);
      ko.U64(4, static_cast<uint64_t>(m + 1));
      ko.Bytes(5, w.plat, po.n);
      ProtoOut ho{w.hist, 0, sizeof w.hist};
      EncodeHistogram(h, ho);
      ProtoOut ro{w.rec, 0, sizeof w.rec};
      ro.Bytes(1, w.key, ko.n);
      ro.Bytes(2, w.hist, ho.n);
      ro.U64(3, 1);  // runs
      if (m == 0) ro.U64(5, resolution);
      if (ko.bad || ho.bad || ro.bad) f.bad = true;
      f.Field(5, ro);
    }
  }
  for (uint32_t e = 0; e < kLabEdgeCap; ++e) {
    const LabEdgeSlot& s = c.edges[e];
    if (s.key == 0) continue;
    const uint64_t k = s.key - 1;
    ProtoOut eo{w.small, 0, sizeof w.small};
    eo.U64(1, k / kLabMaxApis - 1);  // positions in the apis list (index 0 is the probe's)
    eo.U64(2, k % kLabMaxApis - 1);
    eo.U64(3, s.direct);
    f.Field(6, eo);
  }
  for (uint32_t p = 1; p < c.npaths; ++p) {
    const LabPath& path = c.paths[p];
    ProtoOut lp{w.small, 0, sizeof w.small};
    lp.U64(1, path.parent);
    lp.U64(2, path.api - 1);  // a position in the apis list, as the edges' are
    lp.U64(3, path.calls);
    lp.U64(4, path.time_ns);
    lp.U64(5, path.timed_calls);
    lp.U64(6, path.alloc_bytes);
    lp.U64(7, path.allocs);
    lp.U64(8, path.freed_bytes);
    f.Field(11, lp);
  }
  ProtoOut co{w.small, 0, sizeof w.small};
  co.U64(1, c.calls);
  co.U64(2, g.abandoned.load());
  co.U64(3, c.dropped + g.dropped_depth.load() + g.dropped_no_slab.load() +
                g.dropped_uncalibrated.load());
  co.U64(4, g.calibrated ? TicksToNs(g_lab_probe_ticks) : 0);
  co.U64(5, a.n - 1);
  co.U64(8, g.calibrated ? static_cast<uint64_t>(sys::MonoNs() - g.mono0_ns) : 0);
  f.Field(7, co);
  ProtoOut tail{w.small, 0, sizeof w.small};
  tail.U64(8, c.max_depth);
  tail.U64(9, c.edges_lost);
  tail.U64(10, a.refused);
  tail.U64(12, c.paths_lost);
  f.Put(w.small, tail.n);
}

}  // namespace

void LabWriteRecord() {
  if (g_lab_mode == kLabOff || g_lab_apis == nullptr) return;
  // No call may record while the file is written (other threads carry on
  // unrecorded): the lock is held to the end, and this thread's own calls
  // made from here (libc's) are not lab calls.
  t_in_lab = 1;
  while (__atomic_exchange_n(&g_lab_lock, 1, __ATOMIC_ACQUIRE) != 0) __builtin_ia32_pause();
  auto* w = static_cast<WriteScratch*>(MapRw(sizeof(WriteScratch)));
  if (w == nullptr) {
    DebugLine(g_debug_log, "lab: no memory to write the record");
  } else {
    new (w) WriteScratch();
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd) rnd = ts.tv_nsec;
    const long long ms = static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
    char tmp[1200], path[1200];
    snprintf(tmp, sizeof tmp, "%s/.tmp-lab-%d-%lld-%08x", g_lab_apis->dir, getpid(), ms, rnd);
    snprintf(path, sizeof path, "%s/lab-%d-%lld-%08x.fplab", g_lab_apis->dir, getpid(), ms, rnd);
    const int saved = errno;
    w->file.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (w->file.fd < 0) {
      DebugLine(g_debug_log, "lab: cannot create %s", tmp);
    } else {
      w->file.Put(kLabRunMagic, sizeof kLabRunMagic - 1);
      Encode(w->file, *w, *g_lab_apis, *g_lab_counts);
      w->file.Flush();
      const bool ok = !w->file.bad && close(w->file.fd) == 0;
      if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        DebugLine(g_debug_log, "lab: cannot write %s (disk full?)", path);
      } else {
        DebugLine(g_debug_log, "lab: wrote %s (%u APIs, %llu calls)", path, g_lab_apis->n - 1,
                  static_cast<unsigned long long>(g_lab_counts->calls));
      }
    }
    munmap(w, sizeof(WriteScratch));
    errno = saved;
  }
  __atomic_store_n(&g_lab_lock, 0, __ATOMIC_RELEASE);
  t_in_lab = 0;
}

}  // namespace fieldprof::rt
