// Folding a run's stacks into the records of packaged modules
// (stack_samples.h): which frames are kept, how they are named.
#include "agent/runtime/stack_fold.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/runtime/binder.h"
#include "agent/runtime/binder_internal.h"
#include "agent/runtime/companion.h"
#include "common/key_rules.h"

namespace fieldprof::rt {
namespace {

uint64_t HashWords(const uint64_t* w, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) h = Mix64(h ^ w[i]);
  return h < 2 ? h + 2 : h;
}

uint64_t HashText(uint64_t h, const char* s) {
  for (; *s; ++s) {
    h ^= static_cast<unsigned char>(*s);
    h *= 1099511628211ull;
  }
  return h;
}

bool SameStack(const StackEntry& e, const uint64_t* ips, int n) {
  if (e.depth != static_cast<uint32_t>(n)) return false;
  for (int i = 0; i < n; ++i) {
    if (e.ips[i] != ips[i]) return false;
  }
  return true;
}

constexpr int kProbes = 32;
constexpr int kMaxSeries = 256;
constexpr int kSeriesIndex = 1024;  // a power of two, four times kMaxSeries

// A frame's object: an index into the binder's objects when it belongs to
// a module whose frames are kept, else one of these.
enum : int32_t { kNone = -4, kOurs = -3, kUnpackaged = -2, kProgram = -1 };

struct FoldMemory {
  SpoolStack series[kMaxSeries];
  int16_t index[kSeriesIndex];  // series + 1, by hash
  uint64_t hash[kMaxSeries];
  uint8_t kind[kMaxObjects];  // per object: 0 not looked at, 1 kept, 2 the program, 3 not kept
  int nseries;
  uint64_t series_lost;
};
FP_COLD_BSS FoldMemory* g_fold;

bool IsProgram(const Object& o) {
  return o.elf.path != nullptr && o.elf.path[0] == 0 && o.initial &&
         (o.elf.soname == nullptr || o.elf.soname[0] == 0);
}

// Whether a module's frames may be kept: a library file that a system
// package can have installed (root's, in a system directory; the agent
// then keeps only modules a package holds), with a key's name and build id.
uint8_t KindOf(const Object& o) {
  if (IsProgram(o)) return 2;
  if (o.vdso || o.elf.path == nullptr || o.elf.path[0] != '/') return 3;
  const char* module = ModuleName(o.elf);
  if (module == nullptr || !ModuleAllowed(module)) return 3;
  char id[80];
  KeyBuildId(&o, id, sizeof id);
  if (strcmp(id, "unknown") == 0) return 3;
  return SystemFile(o.elf.path) ? 1 : 3;
}

int32_t FrameObject(uintptr_t a, FoldMemory& m) {
  const Object* o = ObjectContaining(a);
  if (o == nullptr) return kUnpackaged;
  if (o->ours) return kOurs;
  const auto i = static_cast<int32_t>(o - g_binder.objects);
  if (m.kind[i] == 0) m.kind[i] = KindOf(*o);
  if (m.kind[i] == 1) return i;
  return m.kind[i] == 2 ? kProgram : kUnpackaged;
}

size_t Hex(uint64_t v, char* out) {
  char d[16];
  size_t n = 0;
  do {
    d[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  for (size_t i = 0; i < n; ++i) out[i] = d[n - 1 - i];
  return n;
}

// The frame at `a` in `o`: the exported symbol whose extent covers it, else
// "+offset" from the object's load bias (an address of its ELF file).
size_t FrameName(const Object& o, uintptr_t a, char* out, size_t cap) {
  Dl_info info{};
  void* entry = nullptr;
  if (dladdr1(reinterpret_cast<void*>(a), &info, &entry, RTLD_DL_SYMENT) != 0 &&
      info.dli_sname != nullptr && entry != nullptr &&
      static_cast<const ElfW(Sym)*>(entry)->st_size > 0) {
    const ElfW(Sym)* sym = static_cast<const ElfW(Sym)*>(entry);
    const auto s = reinterpret_cast<uintptr_t>(info.dli_saddr);
    const size_t n = strlen(info.dli_sname);
    if (s >= o.elf.map_lo && s < o.elf.map_hi && a >= s && a - s < sym->st_size && n < cap &&
        key_rules::SymbolOk(info.dli_sname, n)) {
      memcpy(out, info.dli_sname, n);
      return n;
    }
  }
  out[0] = '+';
  return 1 + Hex(a - o.elf.base, out + 1);
}

// The last frame: where the time went from the module's innermost frame.
size_t Mark(int32_t callee, char* out, size_t cap) {
  const char* name = callee == kProgram      ? "program"
                     : callee == kUnpackaged ? "unpackaged"
                                             : nullptr;
  if (callee >= 0) name = ModuleName(g_binder.objects[callee].elf);
  if (name == nullptr) return 0;
  const size_t n = strlen(name);
  if (n + 2 > cap) return 0;
  out[0] = '[';
  memcpy(out + 1, name, n);
  out[n + 1] = ']';
  return n + 2;
}

void AddSeries(FoldMemory& m, int32_t obj, const char* symbol, uint64_t ns) {
  const Object& o = g_binder.objects[obj];
  char id[80];
  KeyBuildId(&o, id, sizeof id);
  const char* module = ModuleName(o.elf);
  const uint64_t h = HashText(HashText(HashText(1469598103934665603ull, module), id), symbol);
  for (uint32_t i = static_cast<uint32_t>(h) & (kSeriesIndex - 1);;
       i = (i + 1) & (kSeriesIndex - 1)) {
    const int s = m.index[i] - 1;
    if (s < 0) {
      if (m.nseries == kMaxSeries) {
        ++m.series_lost;
        return;
      }
      SpoolStack& n = m.series[m.nseries];
      n.module = module;
      CopyName(n.build_id, sizeof n.build_id, id);
      CopyName(n.symbol, sizeof n.symbol, symbol);
      n.ns = ns;
      m.hash[m.nseries] = h;
      m.index[i] = static_cast<int16_t>(++m.nseries);
      return;
    }
    SpoolStack& e = m.series[s];
    if (m.hash[s] == h && e.module == module && strcmp(e.build_id, id) == 0 &&
        strcmp(e.symbol, symbol) == 0) {
      e.ns += ns;
      return;
    }
  }
}

// The stack of module `obj` from its frames addr[inner..outer], outermost
// first, and the mark of `callee`, the object its innermost frame called.
void AddModuleStack(FoldMemory& m, int32_t obj, const uintptr_t* addr, int inner, int outer,
                    int32_t callee, uint64_t ns) {
  constexpr size_t kMax = key_rules::kMaxSymbol;
  constexpr char kDeeper[] = "[deeper]";
  char symbol[kMax + 1];
  size_t len = 0;
  bool deeper = false;
  for (int k = outer; k >= inner; --k) {
    char name[kMax + 1];
    const size_t n = FrameName(g_binder.objects[obj], addr[k], name, sizeof name);
    if (len + (len != 0) + n + sizeof kDeeper > kMax) {
      deeper = true;
      break;
    }
    if (len != 0) symbol[len++] = key_rules::kStackSeparator;
    memcpy(symbol + len, name, n);
    len += n;
  }
  if (len == 0) return;
  char mark[260];
  size_t mark_len = 0;
  if (deeper) {
    memcpy(mark, kDeeper, sizeof kDeeper - 1);
    mark_len = sizeof kDeeper - 1;
  } else if (callee != kNone) {
    mark_len = Mark(callee, mark, sizeof mark);
  }
  if (mark_len != 0 && len + 1 + mark_len <= kMax) {
    symbol[len++] = key_rules::kStackSeparator;
    memcpy(symbol + len, mark, mark_len);
    len += mark_len;
  }
  symbol[len] = 0;
  if (key_rules::StackSymbolOk(symbol, len)) AddSeries(m, obj, symbol, ns);
}

// One sampled stack: for each module kept, its innermost stretch of frames.
void FoldEntry(const StackEntry& e, FoldMemory& m) {
  int32_t obj[kStackDepth];
  uintptr_t addr[kStackDepth];
  int n = 0;
  // Whether the walk stopped short of the thread's first frame: at the
  // depth bound, or at the runtime's return point (a measured call's
  // return address, which has no unwind information: the walk ends there).
  bool cut = e.depth >= static_cast<uint32_t>(kStackDepth);
  for (uint32_t i = 0; i < e.depth && i < kStackDepth; ++i) {
    // A return address is the instruction after the call: the call's own
    // place is one byte before.
    const uintptr_t a = i == 0 ? e.ips[0] : e.ips[i] - 1;
    const int32_t c = FrameObject(a, m);
    if (c == kOurs) {  // the runtime's own frames are not the program's
      cut = cut || i + 1 == e.depth;
      continue;
    }
    obj[n] = c;
    addr[n++] = a;
  }
  int32_t seen[kStackDepth];
  int nseen = 0;
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && obj[j + 1] == obj[i]) ++j;
    bool again = false;
    for (int s = 0; s < nseen; ++s) again = again || seen[s] == obj[i];
    // The outermost kept stretch handing on to the program (libc's
    // __libc_start_main under the program's _start, start_thread) is
    // where every program's time passes: it says nothing of the module,
    // and is left out. Not in a walk cut short: its outermost stretch is
    // where the walk stopped (qsort's, under a measured qsort, calling
    // the program's comparator).
    bool outermost = !cut;
    for (int k = j + 1; k < n && outermost; ++k) outermost = obj[k] < 0;
    const bool entry = outermost && i > 0 && obj[i - 1] < 0;
    if (obj[i] >= 0 && !again && !entry) {
      seen[nseen++] = obj[i];
      AddModuleStack(m, obj[i], addr, i, j, i > 0 ? obj[i - 1] : kNone, e.ns);
    }
    i = j + 1;
  }
}

}  // namespace

void AddStack(StackTable* t, const uint64_t* ips, int n, uint64_t ns) {
  if (n <= 0) return;
  const uint64_t h = HashWords(ips, n);
  __atomic_add_fetch(&t->samples, 1, __ATOMIC_RELAXED);
  for (int p = 0; p < kProbes; ++p) {
    StackEntry& e = t->e[(h + static_cast<uint64_t>(p)) & (StackTable::kEntries - 1)];
    uint32_t state = __atomic_load_n(&e.state, __ATOMIC_ACQUIRE);
    if (state == 0) {
      if (!__atomic_compare_exchange_n(&e.state, &state, 1, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE)) {
        continue;  // taken just now by another thread's sample
      }
      e.hash = h;
      e.depth = static_cast<uint32_t>(n);
      for (int i = 0; i < n; ++i) e.ips[i] = ips[i];
      e.ns = ns;
      __atomic_store_n(&e.state, 2, __ATOMIC_RELEASE);
      return;
    }
    if (state == 2 && e.hash == h && SameStack(e, ips, n)) {
      __atomic_add_fetch(&e.ns, ns, __ATOMIC_RELAXED);
      return;
    }
  }
  __atomic_add_fetch(&t->lost, 1, __ATOMIC_RELAXED);
}

void FoldStacks(const StackTable& t, SpoolRun* run) {
  if (g_fold == nullptr) {
    void* p = mmap(nullptr, sizeof(FoldMemory), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) return;
    g_fold = static_cast<FoldMemory*>(p);
  }
  FoldMemory& m = *g_fold;
  memset(m.index, 0, sizeof m.index);
  memset(m.kind, 0, sizeof m.kind);
  m.nseries = 0;
  m.series_lost = 0;
  BinderNoticeNewObjects();  // libraries opened since the binder last looked
  uint32_t stacks = 0;
  for (const StackEntry& e : t.e) {
    if (__atomic_load_n(&e.state, __ATOMIC_ACQUIRE) != 2) continue;
    FoldEntry(e, m);
    ++stacks;
  }
  run->stacks = m.series;
  run->nstacks = m.nseries;
  DebugLog("stacks: %llu samples, %u distinct, %llu lost; %d series, %llu not kept",
           static_cast<unsigned long long>(t.samples), stacks,
           static_cast<unsigned long long>(t.lost), m.nseries,
           static_cast<unsigned long long>(m.series_lost));
}

}  // namespace fieldprof::rt
