// The binder's parts that may call libc (see binder.h and binder_state.h):
// start, the look at the loaded objects, trampolines, resolving lazily
// bound imports, the slow half of the first-call trap, dlsym results and
// rebinding.
#include "agent/runtime/binder.h"

#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/platform/x86.h>
#include <unistd.h>

#include "agent/runtime/binder_state.h"
#include "agent/runtime/decide.h"
#include "agent/runtime/lab.h"
#include "agent/runtime/next_symbol.h"
#include "agent/runtime/sys.h"
#include "common/key_rules.h"

extern "C" {
// Read by trap_x86_64.S.
FP_HIDDEN uint64_t fp_xsave_size = 512;
FP_HIDDEN FP_HOT_DATA uint32_t fp_xsave_mask = 0;
FP_HIDDEN FP_HOT_DATA uint8_t fp_use_xsave = 0;
FP_HIDDEN FP_HOT_DATA uint8_t fp_binder_on = 0;
FP_HIDDEN FP_HOT_DATA uintptr_t fp_real_dlsym = 0;
FP_HIDDEN FP_HOT_DATA uintptr_t fp_real_dlvsym = 0;
FP_HIDDEN void fp_trap();
}

namespace fieldprof::rt {
namespace {

struct ApiNames {
  char module[256];
  char build_id[96];
  char symbol[1025];
};
struct Seen {
  uintptr_t base;
  const char* name;
  const Elf64_Phdr* phdr;
  int phnum;
};

// The binder's fixed-size tables, one mapping made at start (only the
// pages a run uses are ever touched).
struct BinderTables {
  TrampBlock blocks[kMaxBlocks];
  ForcedApi forced[FP_MAX_APIS];
  char force[1024];  // the `force` setting, split in place
  // The chosen APIs' names, copied: the defining library may be dlclose'd
  // before the record is written.
  ApiNames names[FP_MAX_SLOTS];
  Seen seen[kMaxObjects];  // the objects of one look
  Object objects[kMaxObjects];
};
FP_HOT_DATA BinderTables* g_tables;
FP_HOT_DATA ApiNames* api_names;
FP_HOT_DATA Seen* g_seen;
FP_HOT_DATA bool g_starting;
FP_HOT_DATA uintptr_t g_page;

// Each first touch of a fresh page is a page fault: ~10 us on the virtual
// machines measured, against ~1.5 us a page when the kernel fills a range
// in one call (docs/benchmarks.md). So a small table the binder will use
// whole is mapped populated, and of a big one the parts about to be used
// are populated (MADV_POPULATE_WRITE, Linux 5.14; older kernels fault the
// pages in one by one, as before).
constexpr size_t kPopulateAtMost = 64 << 10;

void* MapZero(size_t bytes) {
  const int populate = bytes <= kPopulateAtMost ? MAP_POPULATE : 0;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | populate, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

void Populate(const void* from, size_t bytes) {
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE
  const uintptr_t lo = reinterpret_cast<uintptr_t>(from) & ~(g_page - 1);
  const uintptr_t hi = RoundUp(reinterpret_cast<uintptr_t>(from) + bytes, g_page);
  madvise(reinterpret_cast<void*>(lo), hi - lo, kPopulateWrite);
}

// The extended register state the trap's slow half saves: XSAVE of what
// the dynamic linker's lazy binding saves (SSE, AVX, MPX, AVX-512), else
// FXSAVE. No CPUID instruction (a VM exit, ~6 us on a VM): the feature
// bits glibc read at start, and XCR0.
void SetUpRegisterSave() {
  if (!CPU_FEATURE_PRESENT(OSXSAVE)) return;
  uint32_t lo, hi;
  __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  // The area XSAVE writes for these components ends, in the standard
  // layout, at most where Intel's ends (AMD's is no larger): AVX-512's
  // high ZMM state at 2688 bytes, opmask... at 1152, MPX at 1088, AVX at
  // 832, the legacy area and header at 576.
  size_t size = 576;
  if (lo & (1u << 2)) size = 832;
  if (lo & (3u << 3)) size = 1088;
  if (lo & (7u << 5)) size = 2688;
  fp_xsave_size = size;
  fp_xsave_mask = (1u << 1) | (1u << 2) | (1u << 3) | (1u << 5) | (1u << 6) | (1u << 7);
  fp_use_xsave = 1;
}

bool InList(const char* list, const char* module) {
  const size_t n = strlen(module);
  for (const char* p = list; *p;) {
    const char* comma = strchr(p, ',');
    const size_t len = comma ? static_cast<size_t>(comma - p) : strlen(p);
    if (len == n && !strncmp(p, module, n)) return true;
    if (!comma) break;
    p = comma + 1;
  }
  return false;
}

// Functions a return-address wrapper must never sit in front of, whatever
// the choice or `force` says:
// - they return twice (vfork: the child returns through the stub on the
//   parent's stack; setjmp/getcontext: the saved return address would be
//   the stub's);
// - they look at their own return address to find their caller (dlopen
//   searches the caller's RUNPATH, dlsym(RTLD_NEXT) starts after it).
bool UnsafeToWrap(const char* name) {
  static const char* const kNames[] = {
      "vfork",       "__vfork",    "clone",       "__clone",    "clone3",
      "setjmp",      "_setjmp",    "__setjmp",    "sigsetjmp",  "__sigsetjmp",
      "savectx",     "getcontext", "swapcontext", "setcontext", "makecontext",
      "dlopen",      "dlmopen",    "dlsym",       "dlvsym",     "__libc_dlopen_mode",
      "__libc_dlsym"};
  for (const char* n : kNames) {
    if (!strcmp(name, n)) return true;
  }
  return false;
}

const Object* Ours() {
  for (uint32_t i = 0; i < g_binder.nobjects; ++i) {
    if (g_binder.objects[i].ours && g_binder.objects[i].alive) return &g_binder.objects[i];
  }
  return nullptr;
}

// Never a candidate: what this library defines (its interposers: callers
// bind to it, and fieldprof's own code is never measured), the unwinder and
// the C++ ABI, the dynamic linker's own, vector-ABI functions (arguments
// and results in registers a slow path's FXSAVE would not keep), and
// UnsafeToWrap.
bool Excluded(const char* name, uint32_t gnu, const Object* ours) {
  if (ours != nullptr && FindDefinition(ours->elf, name, gnu, VersionNeed{}) != nullptr)
    return true;
  if (name[0] == '_') {
    if (!strncmp(name, "_Unwind", 7) || !strncmp(name, "__cxa_", 6) || !strncmp(name, "_dl_", 4) ||
        !strncmp(name, "_ZGV", 4) || !strcmp(name, "__tls_get_addr") ||
        !strcmp(name, "__libc_start_main")) {
      return true;
    }
  }
  return UnsafeToWrap(name);
}

int32_t FindApiIndex(uint64_t key) {
  if (g_binder.apis == nullptr) return -1;
  const uint32_t mask = g_binder.api_cap - 1;
  for (uint32_t i = static_cast<uint32_t>(key) & mask;; i = (i + 1) & mask) {
    const uint64_t k = g_binder.apis[i].name_key;
    if (k == key) return static_cast<int32_t>(i);
    if (k == 0) return -1;
  }
}

// Room for `more` names in the API table (at most half full). The indexes
// the binder keeps (random_api) are redone when it grows.
bool ApiRoom(uint32_t more) {
  const uint64_t need = (uint64_t{g_binder.napis} + more) * 2;
  if (g_binder.apis != nullptr && need <= g_binder.api_cap) return true;
  // Sized to the need (a page holds 256 entries): a table bigger than the
  // names it holds would be touched all over by its hashing.
  uint32_t cap = 64;
  while (cap < need) cap *= 2;
  auto* fresh = static_cast<Api*>(MapZero(sizeof(Api) * cap));
  if (fresh == nullptr) return false;
  uint64_t chosen[FP_MAX_APIS];
  for (int j = 0; j < g_binder.nrandom; ++j) {
    chosen[j] = g_binder.apis[g_binder.random_api[j]].name_key;
  }
  for (uint32_t i = 0; g_binder.apis != nullptr && i < g_binder.api_cap; ++i) {
    const Api& a = g_binder.apis[i];
    if (a.name_key == 0) continue;
    uint32_t j = static_cast<uint32_t>(a.name_key) & (cap - 1);
    while (fresh[j].name_key != 0) j = (j + 1) & (cap - 1);
    fresh[j] = a;
  }
  Api* old = g_binder.apis;
  const uint32_t old_cap = g_binder.api_cap;
  g_binder.apis = fresh;
  g_binder.api_cap = cap;
  for (int j = 0; j < g_binder.nrandom; ++j) g_binder.random_api[j] = FindApiIndex(chosen[j]);
  if (old != nullptr) munmap(old, sizeof(Api) * old_cap);
  return true;
}

bool IsForced(uint64_t key) {
  for (int f = 0; f < g_binder.nforced; ++f) {
    if (g_binder.forced[f].name_key == key) return true;
  }
  return false;
}

int32_t ApiFor(uint64_t key) {
  int32_t i = FindApiIndex(key);
  if (i >= 0) return i;
  const uint32_t mask = g_binder.api_cap - 1;
  uint32_t j = static_cast<uint32_t>(key) & mask;
  while (g_binder.apis[j].name_key != 0) j = (j + 1) & mask;
  Api& a = g_binder.apis[j];
  a.name_key = key;
  a.stub = -1;
  for (int f = 0; f < g_binder.nforced; ++f) {
    if (g_binder.forced[f].name_key != key) continue;
    a.flags |= kApiForced;
    a.force = static_cast<uint8_t>(f);
    if (g_binder.forced[f].module[0]) a.flags |= kApiForcedModule;
  }
  ++g_binder.napis;
  return static_cast<int32_t>(j);
}

void WriteTrampoline(uint8_t* code, uintptr_t* table, uint32_t j, uintptr_t thunk) {
  uint8_t* t = code + kTrampSize * j;
  t[0] = 0xff;  // jmp *table[j](%rip)
  t[1] = 0x25;
  int32_t rel = static_cast<int32_t>(reinterpret_cast<intptr_t>(&table[j]) -
                                     reinterpret_cast<intptr_t>(t + kTrampCallOffset));
  memcpy(t + 2, &rel, 4);
  t[6] = 0xe8;  // call thunk
  rel = static_cast<int32_t>(static_cast<intptr_t>(thunk) -
                             reinterpret_cast<intptr_t>(t + kTrampMarkerOffset));
  memcpy(t + 7, &rel, 4);
  memset(t + kTrampMarkerOffset, 0xcc, kTrampSize - kTrampMarkerOffset);
  table[j] = reinterpret_cast<uintptr_t>(t + kTrampCallOffset);
}

// Trampolines for the candidate imports of objects[first..]: one block,
// made executable before any entry points at it, then the entries (RELRO
// pages made writable for the writes and read-only again).
void BuildTraps(uint32_t first) {
  if (g_binder.nblocks == kMaxBlocks) return;
  const Object* ours = Ours();
  uint64_t most = 0;
  for (uint32_t o = first; o < g_binder.nobjects; ++o) {
    const Object& ob = g_binder.objects[o];
    if (!ob.ours && !ob.vdso) most += ob.elf.njmprel;
  }
  if (most == 0 || most > (1u << 24)) return;
  uint64_t expect = 0;  // names this call will likely trap: the API table's size
  if (g_starting && g_binder.lab) {
    g_binder.trap_below = ~uint64_t{0};  // the lab observes every API
    expect = most;
  } else if (g_starting) {
    // The threshold, once, from the imports at start (binder.h).
    // Small programs (up to kTrapAll imports) keep every name: one that
    // calls a handful of APIs still measures some.
    uint64_t want = uint64_t{kTrapPerApi} * static_cast<uint64_t>(g_binder.k_random);
    if (g_binder.k_random > 0 && want < kTrapAll) want = kTrapAll;
    g_binder.trap_below =
        want >= most ? ~uint64_t{0}
                     : static_cast<uint64_t>((static_cast<unsigned __int128>(want) << 64) / most);
    // Sized once (a table grown while trapping costs a mapping and a copy).
    expect = want >= most ? most : want + want / 8;
  }
  if (!ApiRoom(static_cast<uint32_t>(expect))) return;
  const size_t data = RoundUp(most * (sizeof(ImportSlot) + sizeof(uintptr_t)), g_page);
  const size_t code_bytes = RoundUp(most * kTrampSize + 16, g_page);
  auto* base = static_cast<uint8_t*>(MapZero(data + code_bytes));
  if (base == nullptr) return;
  TrampBlock& b = g_binder.blocks[g_binder.nblocks];
  b.slots = reinterpret_cast<ImportSlot*>(base);
  b.table = reinterpret_cast<uintptr_t*>(base + most * sizeof(ImportSlot));
  b.code = base + data;
  b.count = 0;
  uint8_t* thunk = b.code + most * kTrampSize;
  thunk[0] = 0xff;  // jmp *0(%rip), then fp_trap's address
  thunk[1] = 0x25;
  memset(thunk + 2, 0, 4);
  const uintptr_t trap = reinterpret_cast<uintptr_t>(&fp_trap);
  memcpy(thunk + 6, &trap, 8);

  for (uint32_t o = first; o < g_binder.nobjects; ++o) {
    Object& ob = g_binder.objects[o];
    ob.block = static_cast<int16_t>(g_binder.nblocks);
    ob.first_slot = b.count;
    if (ob.ours || ob.vdso) continue;
    const ElfObject& e = ob.elf;
    for (size_t r = 0; r < e.njmprel; ++r) {
      const Elf64_Rela& rel = e.jmprel[r];
      if (ELF64_R_TYPE(rel.r_info) != R_X86_64_JUMP_SLOT) continue;
      const uint32_t symidx = static_cast<uint32_t>(ELF64_R_SYM(rel.r_info));
      const Elf64_Sym& sym = e.symtab[symidx];
      if (sym.st_shndx != SHN_UNDEF || ELF64_ST_TYPE(sym.st_info) == STT_GNU_IFUNC) continue;
      const char* name = e.strtab + sym.st_name;
      if (*name == 0) continue;
      auto* got = reinterpret_cast<uintptr_t*>(e.base + rel.r_offset);
      const uintptr_t orig = __atomic_load_n(got, __ATOMIC_ACQUIRE);
      if (orig == 0) continue;  // a weak import that resolved to nothing
      const bool lazy = orig >= e.text_lo && orig < e.text_hi;
      if (!lazy && ours != nullptr && orig >= ours->elf.map_lo && orig < ours->elf.map_hi) continue;
      const uint64_t key = NameKey(name);
      if (Mix64(g_binder.seed ^ key) >= g_binder.trap_below && !IsForced(key)) continue;
      if (Excluded(name, GnuHash(name), ours)) continue;
      if (!ApiRoom(1)) break;
      ApiFor(key);
      const uint32_t j = b.count++;
      ImportSlot& s = b.slots[j];
      s.got = got;
      s.name_key = key;
      s.orig = orig;
      s.object = o;
      s.symidx = symidx;
      s.state = kTrapped;
      s.lazy = lazy;
      s.relro = reinterpret_cast<uintptr_t>(got) >= e.relro_lo &&
                reinterpret_cast<uintptr_t>(got) < e.relro_hi;
      s.stub = -1;
      WriteTrampoline(b.code, b.table, j, reinterpret_cast<uintptr_t>(thunk));
    }
    ob.nslots = b.count - ob.first_slot;
  }
  if (b.count == 0 || mprotect(b.code, code_bytes, PROT_READ | PROT_EXEC) != 0) {
    munmap(base, data + code_bytes);
    for (uint32_t o = first; o < g_binder.nobjects; ++o) g_binder.objects[o].nslots = 0;
    return;
  }
  ++g_binder.nblocks;
  g_binder.imports += b.count;
  for (uint32_t o = first; o < g_binder.nobjects; ++o) {
    Object& ob = g_binder.objects[o];
    if (ob.nslots == 0) continue;
    const ElfObject& e = ob.elf;
    const bool relro = e.relro_hi > e.relro_lo;
    bool writable = !relro;
    if (relro) {
      writable = mprotect(reinterpret_cast<void*>(e.relro_lo), e.relro_hi - e.relro_lo,
                          PROT_READ | PROT_WRITE) == 0;
    }
    for (uint32_t j = ob.first_slot; j < ob.first_slot + ob.nslots; ++j) {
      ImportSlot& s = b.slots[j];
      if (s.relro && !writable) {
        s.state = kDirect;  // cannot be trapped: left alone
        continue;
      }
      const uintptr_t to =
          reinterpret_cast<uintptr_t>(b.code + kTrampSize * j + (s.relro ? 0 : kTrampCallOffset));
      // The dynamic linker may bind a lazy entry meanwhile: trap what is there.
      uintptr_t expected = s.orig;
      while (!__atomic_compare_exchange_n(s.got, &expected, to, false, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE)) {
        s.orig = expected;
        s.lazy = expected >= e.text_lo && expected < e.text_hi;
      }
    }
    if (relro && writable) {
      mprotect(reinterpret_cast<void*>(e.relro_lo), e.relro_hi - e.relro_lo, PROT_READ);
    }
  }
}

// Whether an object seen again at the same place is another load of it (a
// dlclose and dlopen in between): none of its trapped entries is ours any
// more.
bool Reloaded(const Object& ob) {
  if (ob.block < 0 || ob.nslots == 0) return false;
  const TrampBlock& b = g_binder.blocks[ob.block];
  bool any_trapped = false;
  for (uint32_t j = ob.first_slot; j < ob.first_slot + ob.nslots; ++j) {
    const ImportSlot& s = b.slots[j];
    if (s.state != kTrapped) continue;
    any_trapped = true;
    const uintptr_t ours =
        reinterpret_cast<uintptr_t>(b.code + kTrampSize * j + (s.relro ? 0 : kTrampCallOffset));
    if (__atomic_load_n(s.got, __ATOMIC_RELAXED) == ours) return false;
  }
  return any_trapped;
}

// Brings the object table up to the dynamic linker's list (g_seen[0..n)),
// under its lock and the binder's: objects gone are marked so, new ones are
// parsed and get their traps.
void Sync(uint32_t n, bool subs_changed) {
  for (uint32_t i = 0; i < g_binder.nobjects; ++i) g_binder.objects[i].alive = 0;
  const uint32_t first_new = g_binder.nobjects;
  const uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
  const uintptr_t self = reinterpret_cast<uintptr_t>(&fp_trap);
  for (uint32_t k = 0; k < n; ++k) {
    const Seen& e = g_seen[k];
    int32_t found = -1;
    for (uint32_t i = 0; i < first_new; ++i) {
      const Object& ob = g_binder.objects[i];
      if (ob.elf.base == e.base && ob.elf.path == e.name && ob.elf.phdr == e.phdr &&
          ob.elf.path != nullptr) {
        found = static_cast<int32_t>(i);
        break;
      }
    }
    if (found >= 0 && subs_changed && Reloaded(g_binder.objects[found])) {
      g_binder.objects[found].elf.path = nullptr;  // never matches again
      found = -1;
    }
    if (found >= 0) {
      g_binder.objects[found].alive = 1;
      continue;
    }
    if (g_binder.nobjects == kMaxObjects) continue;
    Object& ob = g_binder.objects[g_binder.nobjects];
    ob = Object{};
    ob.block = -1;
    if (!ParseElfObject(e.base, e.name, e.phdr, e.phnum, g_page, &ob.elf)) continue;
    ob.alive = 1;
    ob.initial = g_starting;
    ob.ours = self >= ob.elf.map_lo && self < ob.elf.map_hi;
    ob.vdso = vdso != 0 && reinterpret_cast<uintptr_t>(e.phdr) >= vdso &&
              reinterpret_cast<uintptr_t>(e.phdr) < vdso + 4 * g_page;
    ++g_binder.nobjects;
  }
  if (g_binder.nobjects > first_new) BuildTraps(first_new);
}

// Runs fn(arg) under the dynamic linker's lock and the binder's, after
// bringing the object table up to date (unless nothing was loaded or
// unloaded since the last look). False when it could not run.
struct Walk {
  void (*fn)(void*);
  void* arg;
  uint32_t expected = 0, seen = 0;
  bool started = false, ran = false, subs_changed = false;
};

int OnObject(dl_phdr_info* info, size_t, void* data) {
  Walk& w = *static_cast<Walk*>(data);
  if (!w.started) {
    w.started = true;
    const bool same = info->dlpi_adds == g_binder.adds && info->dlpi_subs == g_binder.subs &&
                      g_binder.nobjects > 0;
    if (same) {
      BinderLock();
      w.fn(w.arg);
      BinderUnlock();
      w.ran = true;
      return 1;
    }
    w.subs_changed = info->dlpi_subs != g_binder.subs;
    g_binder.adds = info->dlpi_adds;
    g_binder.subs = info->dlpi_subs;
    // dl_iterate_phdr reports the caller's namespace, the program's: the
    // list _r_debug starts.
    for (const link_map* m = _r_debug.r_map; m != nullptr; m = m->l_next) ++w.expected;
    if (g_starting) {  // the table entries this look fills
      const uint32_t n = w.expected < kMaxObjects ? w.expected : kMaxObjects;
      Populate(g_seen, n * sizeof(Seen));
      Populate(g_binder.objects, n * sizeof(Object));
      Populate(g_binder.blocks, sizeof(TrampBlock));
    }
  }
  if (w.seen < static_cast<uint32_t>(kMaxObjects)) {
    g_seen[w.seen] = {info->dlpi_addr, info->dlpi_name, info->dlpi_phdr, info->dlpi_phnum};
  }
  ++w.seen;
  if (w.seen < w.expected) return 0;
  BinderLock();
  Sync(w.seen < static_cast<uint32_t>(kMaxObjects) ? w.seen : kMaxObjects, w.subs_changed);
  w.fn(w.arg);
  BinderUnlock();
  w.ran = true;
  return 1;
}

bool WithObjects(void (*fn)(void*), void* arg) {
  Walk w;
  w.fn = fn;
  w.arg = arg;
  dl_iterate_phdr(OnObject, &w);
  if (!w.ran) g_binder.adds = g_binder.subs = ~uint64_t{0};  // look again next time
  return w.ran;
}

const Object* ObjectContaining(uintptr_t a) {
  for (uint32_t i = 0; i < g_binder.nobjects; ++i) {
    const Object& ob = g_binder.objects[i];
    if (ob.alive && !ob.vdso && a >= ob.elf.map_lo && a < ob.elf.map_hi) return &ob;
  }
  return nullptr;
}

// Where a lazily bound import will lead, found as the dynamic linker would:
// an object loaded at start searches the global scope (the objects loaded
// at start, in order); one loaded later also its own dependencies, which
// this does not order, so every definition found must agree. 0: unknown.
uintptr_t ResolveLazy(const ImportSlot& s) {
  const Object& from = g_binder.objects[s.object];
  const ElfObject& e = from.elf;
  const char* name = e.strtab + e.symtab[s.symidx].st_name;
  const uint32_t h = GnuHash(name);
  const VersionNeed need = NeededVersion(e, s.symidx);
  const Object* def = nullptr;
  const Elf64_Sym* sym = nullptr;
  uintptr_t found = 0;
  for (uint32_t i = 0; i < g_binder.nobjects; ++i) {
    const Object& ob = g_binder.objects[i];
    if (!ob.alive || ob.ours || ob.vdso) continue;
    if (from.initial && !ob.initial) continue;
    const Elf64_Sym* d = FindDefinition(ob.elf, name, h, need);
    if (d == nullptr) continue;
    const uintptr_t a = ob.elf.base + d->st_value;
    if (found == 0) {
      found = a;
      def = &ob;
      sym = d;
      if (from.initial) break;
    } else if (a != found) {
      return 0;
    }
  }
  if (found == 0) return 0;
  (void)def;
  if (ELF64_ST_TYPE(sym->st_info) == STT_GNU_IFUNC) {
    found = reinterpret_cast<uintptr_t (*)()>(found)();
  }
  return found;
}

bool CopyName(char* dst, size_t cap, const char* src) {
  const size_t n = strlen(src);
  if (n + 1 > cap) return false;
  memcpy(dst, src, n + 1);
  return true;
}

// Whether `path` is an executable that belongs to the system: under a
// system directory, owned by root and writable by nobody else, as is the
// directory that holds it.
bool SystemExecutable(char* path, size_t len) {
  static const char* const kDirs[] = {"/usr/bin/", "/usr/sbin/",    "/bin/",       "/sbin/",
                                      "/usr/lib/", "/usr/libexec/", "/usr/games/", "/lib/"};
  bool under = false;
  for (const char* d : kDirs) {
    const size_t n = strlen(d);
    if (len > n && strncmp(path, d, n) == 0) under = true;
  }
  if (!under) return false;
  constexpr unsigned kOthersWrite = S_IWGRP | S_IWOTH;
  struct stat st;
  if (sys::Stat(path, &st) != 0 || st.st_uid != 0 || (st.st_mode & kOthersWrite) != 0) {
    return false;
  }
  char* slash = strrchr(path, '/');
  *slash = 0;
  const bool dir_ok = sys::Stat(path, &st) == 0 && st.st_uid == 0 && (st.st_mode & S_IWOTH) == 0;
  *slash = '/';
  return dir_ok;
}

// The module name of the program's own exports (python3's PyErr_Occurred):
// its executable's file name when the executable belongs to the system
// (python3.11), else "main": the name of a user's own program stays home.
const char* MainModule() {
  static char name[256];
  if (name[0] != 0) return name;
  CopyName(name, sizeof name, "main");
  char path[4096];
  const long n = sys::Readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return name;
  path[n] = 0;
  if (!SystemExecutable(path, static_cast<size_t>(n))) return name;
  const char* base = strrchr(path, '/') + 1;
  if (key_rules::ModuleOk(base, strlen(base))) CopyName(name, sizeof name, base);
  return name;
}

// The module a key names for an API defined in `def` (nullptr: not known),
// or nullptr when no name can be given that keeps the key rules.
const char* KeyModule(const Object* def) {
  if (def == nullptr) return "unknown";
  if (def->elf.path != nullptr && def->elf.path[0] == 0 && def->initial &&
      (def->elf.soname == nullptr || def->elf.soname[0] == 0)) {
    return MainModule();
  }
  return ModuleName(def->elf);
}

// Slot `stub` measures `symbol` at `real` from now on.
bool BindStub(int stub, uintptr_t real, const Object* def, const char* symbol) {
  ApiNames& n = api_names[stub];
  const char* module = KeyModule(def);
  // Only names that keep the key rules are recorded (common/key_rules.h).
  if (module == nullptr || !key_rules::SymbolOk(symbol, strlen(symbol)) ||
      !CopyName(n.module, sizeof n.module, module) ||
      !CopyName(n.symbol, sizeof n.symbol, symbol)) {
    return false;  // left unmeasured
  }
  if (def != nullptr) BuildIdHex(def->elf, n.build_id, sizeof n.build_id);
  if (def == nullptr || !key_rules::ModuleVersionOk(n.build_id, strlen(n.build_id))) {
    CopyName(n.build_id, sizeof n.build_id, "unknown");
  }
  g.apis[stub] = FpApi{n.module, n.build_id, n.symbol, real};
  __atomic_store_n(&fp_real[stub], real, __ATOMIC_RELEASE);
  g.bound[stub] = 1;
  fp_measuring[stub] = 1;
  DebugLine(g_binder.debug_log, "bound %s:%s (build %s) to slot %d", n.module, n.symbol, n.build_id,
            stub);
  return true;
}

// Callers bound to the stubs in pending_rebind go straight to the API.
int RebindPending() {
  const uint32_t pending = g_binder.pending_rebind;
  if (pending == 0) return 0;
  int done = 0;
  for (int n = 0; n < g_binder.nblocks; ++n) {
    TrampBlock& b = g_binder.blocks[n];
    for (uint32_t i = 0; i < b.count; ++i) {
      ImportSlot& s = b.slots[i];
      if (s.state != kBound || !(pending & (uint32_t{1} << s.stub))) continue;
      if (!s.relro && !g_binder.objects[s.object].alive) continue;
      if (s.target == 0) s.target = fp_real[s.stub];
      s.state = kDirect;
      WriteEntry(b, i, s.target);
      ++done;
    }
  }
  g_binder.pending_rebind = 0;
  return done;
}

struct SlowWork {
  TrampBlock* block;
  uint32_t index;
  uintptr_t result;
};

uintptr_t Direct(TrampBlock& b, uint32_t i) {
  ImportSlot& s = b.slots[i];
  s.state = kDirect;
  WriteEntry(b, i, DirectTarget(s));
  return DirectTarget(s);
}

// Lab mode: the lab index of `real`, defined in `def` as `symbol`, when
// the names keep the key rules, the module filters let it through and the
// lab observes it in this pass; else -1.
int32_t BindLab(const Object* def, const char* symbol, uintptr_t real) {
  const char* module = KeyModule(def);
  if (module == nullptr || !key_rules::SymbolOk(symbol, strlen(symbol))) return -1;
  if ((g_binder.allow_modules[0] && !InList(g_binder.allow_modules, module)) ||
      (g_binder.deny_modules[0] && InList(g_binder.deny_modules, module))) {
    return -1;
  }
  char build_id[96];
  if (def != nullptr) BuildIdHex(def->elf, build_id, sizeof build_id);
  if (def == nullptr || !key_rules::ModuleVersionOk(build_id, strlen(build_id))) {
    CopyName(build_id, sizeof build_id, "unknown");
  }
  return LabBind(module, build_id, symbol, real);
}

// Lab mode's first call of an import: to its lab stub, or straight on.
uintptr_t LabFirstCall(TrampBlock& b, uint32_t i) {
  ImportSlot& s = b.slots[i];
  const uintptr_t target = s.lazy ? ResolveLazy(s) : s.orig;
  if (target == 0) return Direct(b, i);  // a lazy entry goes on to the dynamic linker
  const ElfObject& e = g_binder.objects[s.object].elf;
  const int32_t index =
      BindLab(ObjectContaining(target), e.strtab + e.symtab[s.symidx].st_name, target);
  if (index < 0) return Direct(b, i);
  s.target = target;
  s.state = kLab;
  s.lab = static_cast<uint32_t>(index);
  WriteEntry(b, i, LabStubAddress(s.lab));
  return LabStubAddress(s.lab);
}

// The first call of a slot that needs more than fp_trap_fast could do.
uintptr_t FirstCallSlow(TrampBlock& b, uint32_t i) {
  ImportSlot& s = b.slots[i];
  if (g_binder.lab) return LabFirstCall(b, i);
  const int32_t ai = FindApiIndex(s.name_key);
  if (ai < 0) return Direct(b, i);
  Api& a = g_binder.apis[ai];
  if (a.flags & (kApiExcluded | kApiEvicted)) return Direct(b, i);
  if (a.stub >= 0 && g.bound[a.stub] && !fp_measuring[a.stub]) return Direct(b, i);
  const uintptr_t target = s.lazy ? ResolveLazy(s) : s.orig;
  if (target == 0) {
    Unchoose(ai);
    return Direct(b, i);  // a lazy entry goes on to the dynamic linker
  }
  const Object* def = ObjectContaining(target);
  const char* module = KeyModule(def);
  if (module == nullptr || (g_binder.allow_modules[0] && !InList(g_binder.allow_modules, module)) ||
      (g_binder.deny_modules[0] && InList(g_binder.deny_modules, module))) {
    a.flags |= kApiExcluded;
    Unchoose(ai);
    return Direct(b, i);
  }
  if ((a.flags & kApiForcedModule) && strcmp(module, g_binder.forced[a.force].module) != 0) {
    return Direct(b, i);
  }
  if (!Choose(ai)) return Direct(b, i);
  const int stub = a.stub;
  if (!g.bound[stub]) {
    const ElfObject& e = g_binder.objects[s.object].elf;
    if (!BindStub(stub, target, def, e.strtab + e.symtab[s.symidx].st_name)) {
      Unchoose(ai);
      a.flags |= kApiExcluded;
      return Direct(b, i);
    }
  } else if (fp_real[stub] != target) {
    return Direct(b, i);  // another definition of the name
  }
  s.target = target;
  s.state = kBound;
  s.stub = static_cast<int8_t>(stub);
  WriteEntry(b, i, StubAddress(stub));
  return StubAddress(stub);
}

void DoSlowWork(void* arg) {
  auto& w = *static_cast<SlowWork*>(arg);
  ImportSlot& s = w.block->slots[w.index];
  w.result = s.state == kTrapped ? FirstCallSlow(*w.block, w.index) : CurrentTarget(s);
  RebindPending();
}

void Nothing(void*) {}

struct DlsymWork {
  const char* name;
  uintptr_t addr;
  uintptr_t result;
};

void DoDlsymWork(void* arg) {
  auto& w = *static_cast<DlsymWork*>(arg);
  w.result = w.addr;
  if (g_binder.lab) {
    // A function another object defines (never data: its address is used
    // as such), reached through dlsym: observed like an import.
    const Object* def = ObjectContaining(w.addr);
    if (def == nullptr || def->ours) return;
    const uint32_t h = GnuHash(w.name);
    const Elf64_Sym* sym = FindDefinition(def->elf, w.name, h, VersionNeed{});
    if (sym == nullptr || ELF64_ST_TYPE(sym->st_info) != STT_FUNC ||
        def->elf.base + sym->st_value != w.addr || Excluded(w.name, h, Ours())) {
      return;
    }
    const int32_t index = BindLab(def, w.name, w.addr);
    if (index >= 0) w.result = LabStubAddress(static_cast<uint32_t>(index));
    return;
  }
  const int32_t ai = FindApiIndex(NameKey(w.name));
  if (ai < 0) return;
  Api& a = g_binder.apis[ai];
  if (a.flags & (kApiExcluded | kApiEvicted)) return;
  const Object* def = ObjectContaining(w.addr);
  const char* module = KeyModule(def);
  if (module == nullptr) return;
  if ((a.flags & kApiForcedModule) && strcmp(module, g_binder.forced[a.force].module) != 0) return;
  if (a.stub >= 0 && g.bound[a.stub]) {
    const int stub = a.stub;
    if (fp_real[stub] != w.addr) {
      // Bound before to a definition that is gone (dlclose, then dlopen
      // again): the same API, somewhere else now.
      if (ObjectContaining(fp_real[stub]) != nullptr) return;
      __atomic_store_n(&fp_real[stub], w.addr, __ATOMIC_RELEASE);
      g.apis[stub].real = w.addr;
    }
    if (fp_measuring[stub]) w.result = StubAddress(stub);
    return;
  }
  // A forced API first reached through dlsym.
  if (!(a.flags & kApiForced) || !Choose(ai)) return;
  if (!BindStub(a.stub, w.addr, def, w.name)) {
    Unchoose(ai);
    return;
  }
  w.result = StubAddress(a.stub);
}

struct RebindWork {
  int slot;
  int done;
};

void DoRebindWork(void* arg) {
  auto& w = *static_cast<RebindWork*>(arg);
  g_binder.pending_rebind |= uint32_t{1} << w.slot;
  w.done = RebindPending();
}

// The `force` setting: "sym" or "module:sym", comma-separated, split in
// place in the tables' copy.
void ParseForced(const BinderConfig& c) {
  char* force = g_tables->force;
  CopyName(force, sizeof g_tables->force, c.force);
  for (char* p = force; *p && g_binder.nforced < FP_MAX_APIS;) {
    char* comma = strchr(p, ',');
    if (comma) *comma = 0;
    char* colon = strchr(p, ':');
    const char* sym = colon ? colon + 1 : p;
    if (UnsafeToWrap(sym)) {
      DebugLine(c.debug_log, "not measuring %s: it cannot be wrapped safely", p);
    } else if (*sym) {
      ForcedApi& f = g_binder.forced[g_binder.nforced++];
      f.name_key = NameKey(sym);
      f.module[0] = 0;
      if (colon) {
        *colon = 0;
        CopyName(f.module, sizeof f.module, p);
      }
    }
    if (!comma) break;
    p = comma + 1;
  }
}

}  // namespace

bool BinderStart(const BinderConfig& c) {
  g_page = static_cast<uintptr_t>(getpagesize());
  SetUpRegisterSave();
  g_tables = static_cast<BinderTables*>(MapZero(sizeof(BinderTables)));
  if (g_tables == nullptr) return false;
  g_binder.blocks = g_tables->blocks;
  g_binder.forced = g_tables->forced;
  g_binder.objects = g_tables->objects;
  g_seen = g_tables->seen;
  api_names = g_tables->names;
  g_binder.seed = c.seed;
  g_binder.allow_modules = c.allow_modules;
  g_binder.deny_modules = c.deny_modules;
  g_binder.debug_log = c.debug_log;
  g_binder.filters = c.allow_modules[0] != 0 || c.deny_modules[0] != 0;
  g_binder.lab = c.lab;
  // Its copy's page stays untouched when there is none (most runs).
  if (c.force[0] != 0) ParseForced(c);
  const int k = c.k > g_binder.nforced ? c.k : g_binder.nforced;
  g_binder.k_random = k - g_binder.nforced;
  // Forced APIs are known by name from the start (dlsym may be the only
  // way they are reached). Otherwise the table is made to the imports'
  // measure by the first BuildTraps.
  if (g_binder.nforced > 0 && !ApiRoom(static_cast<uint32_t>(g_binder.nforced))) return false;
  for (int f = 0; f < g_binder.nforced; ++f) ApiFor(g_binder.forced[f].name_key);
  g_starting = true;
  t_in_binder = 1;
  const bool ok = WithObjects(Nothing, nullptr);
  t_in_binder = 0;
  g_starting = false;
  if (!ok) return false;
  fp_binder_on = 1;  // the caller logs what was trapped (outside its timing)
  return true;
}

void BinderNoticeNewObjects() {
  if (!fp_binder_on || t_in_binder) return;
  t_in_binder = 1;
  WithObjects(Nothing, nullptr);
  t_in_binder = 0;
}

uintptr_t BinderDlsymResult(const char* name, uintptr_t addr) {
  if (!fp_binder_on || t_in_binder || name == nullptr || addr == 0) return addr;
  DlsymWork w{name, addr, addr};
  t_in_binder = 1;
  WithObjects(DoDlsymWork, &w);
  t_in_binder = 0;
  return w.result;
}

int BinderRebindSlot(int slot) {
  if (!fp_binder_on || t_in_binder || slot < 0 || slot >= FP_MAX_SLOTS) return 0;
  RebindWork w{slot, 0};
  t_in_binder = 1;
  WithObjects(DoRebindWork, &w);
  t_in_binder = 0;
  return w.done;
}

void BinderAfterFork() {
  g_binder.lock = 0;
  t_in_binder = 0;
}

BinderStats GetBinderStats() {
  return {static_cast<uint64_t>(g_binder.nforced),
          g_binder.nobjects,
          g_binder.imports,
          g_binder.first_calls,
          g_binder.apis_called,
          g_binder.evictions,
          g_binder.refused_no_stub};
}

}  // namespace fieldprof::rt

using fieldprof::rt::t_in_binder;

// The trap's slow half (trap_x86_64.S, extended register state saved).
extern "C" FP_HIDDEN uintptr_t fp_trap_slow(uintptr_t marker, uintptr_t proposed) {
  fieldprof::rt::TrampBlock* b = nullptr;
  uint32_t i = 0;
  fieldprof::rt::ImportSlot* s = fieldprof::rt::SlotOfMarker(marker, &b, &i);
  if (s == nullptr) __builtin_trap();
  if (t_in_binder) return proposed != 0 ? proposed : fieldprof::rt::CurrentTarget(*s);
  fieldprof::rt::SlowWork w{b, i, 0};
  t_in_binder = 1;
  const bool ran = fieldprof::rt::WithObjects(fieldprof::rt::DoSlowWork, &w);
  t_in_binder = 0;
  if (!ran) return proposed != 0 ? proposed : fieldprof::rt::CurrentTarget(*s);
  return w.result;
}

// The real dlsym and dlvsym, for the hooks in trap_x86_64.S.
extern "C" FP_HIDDEN void fp_resolve_dl() {
  static const char* const kNames[] = {"dlsym", "dlvsym"};
  uintptr_t found[2] = {fp_real_dlsym, fp_real_dlvsym};
  fieldprof::rt::ResolveNext(kNames, found, 2);
  if (found[0] == 0 || found[1] == 0) __builtin_trap();  // no libc dlsym: cannot go on
  __atomic_store_n(&fp_real_dlvsym, found[1], __ATOMIC_RELEASE);
  __atomic_store_n(&fp_real_dlsym, found[0], __ATOMIC_RELEASE);
}

extern "C" FP_HIDDEN void fp_notice_objects() { fieldprof::rt::BinderNoticeNewObjects(); }

extern "C" FP_HIDDEN void* fp_dlsym_hook(void* handle, const char* name) {
  auto* real = reinterpret_cast<void* (*)(void*, const char*)>(fp_real_dlsym);
  void* r = real(handle, name);
  return reinterpret_cast<void*>(
      fieldprof::rt::BinderDlsymResult(name, reinterpret_cast<uintptr_t>(r)));
}

extern "C" FP_HIDDEN void* fp_dlvsym_hook(void* handle, const char* name, const char* version) {
  auto* real = reinterpret_cast<void* (*)(void*, const char*, const char*)>(fp_real_dlvsym);
  void* r = real(handle, name, version);
  return reinterpret_cast<void*>(
      fieldprof::rt::BinderDlsymResult(name, reinterpret_cast<uintptr_t>(r)));
}
