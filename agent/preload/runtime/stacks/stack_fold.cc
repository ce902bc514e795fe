// Folding a run's stacks into the records of packaged modules
// (stack_samples.h): which frames are kept, how they are named.
#include "agent/preload/runtime/stacks/stack_fold.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/preload/runtime/binder/binder.h"
#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/companion.h"
#include "common/wire/key_rules.h"

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
constexpr int kMaxSeries = stack_folding::kMaxRunStacks;
constexpr int kSeriesIndex = 1024;  // a power of two, four times kMaxSeries

using stack_folding::kOurs;
using stack_folding::kProgram;
using stack_folding::kUnpackaged;

struct FoldMemory {
  SpoolStack series[kMaxSeries];
  int16_t index[kSeriesIndex];  // series + 1, by hash
  uint64_t hash[kMaxSeries];
  uint8_t kind[kMaxObjects];  // per object: 0 not looked at, else a LiveModule kind
  int nseries;
  uint64_t series_lost;
};
FP_COLD_BSS FoldMemory* g_fold;

bool IsProgram(const Object& o) {
  return o.elf.path != nullptr && o.elf.path[0] == 0 && o.initial &&
         (o.elf.soname == nullptr || o.elf.soname[0] == 0);
}

// Whether a module's frames may be kept: a library whose file is the
// system's code (SystemFile and InSystemCode: a file an installed package
// of a known archive holds, unchanged; the agent checks again), or one the
// volunteer shares, with a key's name and build id. Any other module's
// frames are [unpackaged], and no mark names it.
uint8_t KindOf(const Object& o) {
  if (o.ours) return kLiveModuleOurs;
  if (IsProgram(o)) return kLiveModuleProgram;
  if (o.vdso || o.elf.path == nullptr || o.elf.path[0] != '/') return kLiveModuleOther;
  const char* module = ModuleName(o.elf);
  if (module == nullptr || !ModuleAllowed(module)) return kLiveModuleOther;
  char id[80];
  KeyBuildId(&o, id, sizeof id);
  if (strcmp(id, "unknown") == 0) return kLiveModuleOther;
  if (SharedByVolunteer(&o, module)) return kLiveModuleKept;
  return SystemFile(o.elf.path) && InSystemCode(o.elf) ? kLiveModuleKept : kLiveModuleOther;
}

// The exported symbol whose extent covers `a` in `o`, else "+offset" from
// the object's load bias (an address of its ELF file).
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
  return stack_folding::OffsetName(a - o.elf.base, out);
}

// The run's modules as the binder knows them (stack_folding.h's Frames).
struct BinderFrames {
  FoldMemory& m;

  int32_t ObjectOf(uintptr_t a) {
    const Object* o = ObjectContaining(a);
    if (o == nullptr) return kUnpackaged;
    const auto i = static_cast<int32_t>(o - g_binder.objects);
    if (m.kind[i] == 0) m.kind[i] = KindOf(*o);
    return FoldCode(m.kind[i], i);
  }
  size_t FrameName(int32_t obj, uintptr_t a, char* out, size_t cap) {
    return rt::FrameName(g_binder.objects[obj], a, out, cap);
  }
  const char* ModuleOf(int32_t obj) { return ModuleName(g_binder.objects[obj].elf); }
  void Add(int32_t obj, const char* stack, uint64_t ns);
};

void BinderFrames::Add(int32_t obj, const char* stack, uint64_t ns) {
  const Object& o = g_binder.objects[obj];
  char id[80];
  KeyBuildId(&o, id, sizeof id);
  const char* module = ModuleName(o.elf);
  const uint64_t h = HashText(HashText(HashText(1469598103934665603ull, module), id), stack);
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
      CopyName(n.symbol, sizeof n.symbol, stack);
      n.ns = ns;
      m.hash[m.nseries] = h;
      m.index[i] = static_cast<int16_t>(++m.nseries);
      return;
    }
    SpoolStack& e = m.series[s];
    if (m.hash[s] == h && e.module == module && strcmp(e.build_id, id) == 0 &&
        strcmp(e.symbol, stack) == 0) {
      e.ns += ns;
      return;
    }
  }
}

}  // namespace

void AddStack(StackTable* t, const uint64_t* ips, int n, uint64_t ns, BackFn back) {
  if (n <= 0) return;
  const uint64_t h = HashWords(ips, n);
  __atomic_add_fetch(&t->samples, 1, __ATOMIC_RELAXED);
  for (int p = 0; p < kProbes; ++p) {
    StackEntry& e = t->e[(h + static_cast<uint64_t>(p)) & (StackTable::kEntries - 1)];
    if (back != nullptr && !back(&e, sizeof e)) break;
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

bool NoteModule(uint32_t i, LiveModule* table, uint32_t cap, uint32_t* claimed, BackFn back) {
  const Object& o = g_binder.objects[i];
  if (o.vdso) return true;  // never a frame's (ObjectContaining)
  const uint32_t k = __atomic_fetch_add(claimed, 1, __ATOMIC_ACQ_REL);
  if (k >= cap) return false;
  LiveModule& m = table[k];
  if (!back(&m, sizeof m)) return false;
  m.lo = o.elf.map_lo;
  m.hi = o.elf.map_hi;
  m.base = o.elf.base;
  const uint32_t kind = KindOf(o);
  // Names only for a module whose frames are kept: of the others the fold
  // needs nothing but where they are.
  m.module[0] = m.build_id[0] = m.path[0] = 0;
  if (kind == kLiveModuleKept) {
    CopyName(m.module, sizeof m.module, ModuleName(o.elf));
    KeyBuildId(&o, m.build_id, sizeof m.build_id);
    if (!CopyName(m.path, sizeof m.path, o.elf.path)) m.path[0] = 0;
  }
  __atomic_store_n(&m.kind, kind, __ATOMIC_RELEASE);
  return true;
}

void FoldStacks(const StackTable& t, SpoolRun* run, BackFn backed) {
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
  BinderFrames frames{m};
  uint32_t stacks = 0;
  for (const StackEntry& e : t.e) {
    if (backed != nullptr && !backed(&e, sizeof e)) continue;
    if (__atomic_load_n(&e.state, __ATOMIC_ACQUIRE) != 2) continue;
    stack_folding::FoldStack(frames, e.ips, e.depth, e.ns);
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
