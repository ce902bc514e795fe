// The binder's object table, kept up with the dynamic linker's list of
// loaded objects, and lazy bindings resolved as the dynamic linker would.
// Work that reads other objects' memory runs inside dl_iterate_phdr,
// under the dynamic linker's lock, so no object is unmapped meanwhile.
#include <link.h>
#include <sys/auxv.h>

#include "agent/preload/base/fork_hooks.h"
#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/points/points.h"
#include "agent/preload/runtime/stacks/stack_samples.h"
#include "agent/preload/runtime/sys.h"

namespace fieldprof::rt {

namespace {

// Whether an object seen again at the same place is another load of it (a
// dlclose and dlopen in between): none of the entries we wrote is ours any
// more. Ours: a trapped entry points at its trampoline, and so does a bound
// one in RELRO pages (its stub is in the trampolines' table); another
// bound one at its stub. An entry sent straight to its API (or never
// trapped) holds what a new load's would: it tells nothing.
bool Reloaded(const Object& ob) {
  if (ob.block < 0 || ob.nslots == 0) return false;
  const TrampBlock& b = g_binder.blocks[ob.block];
  bool any = false;
  for (uint32_t j = ob.first_slot; j < ob.first_slot + ob.nslots; ++j) {
    const ImportSlot& s = b.slots[j];
    const uintptr_t tramp = reinterpret_cast<uintptr_t>(b.code + kTrampSize * j);
    uintptr_t ours;
    if (s.state == kTrapped || (s.state == kBound && s.relro)) {
      ours = tramp + (s.relro ? 0 : kTrampCallOffset);
    } else if (s.state == kBound) {
      ours = StubAddress(s.stub);
    } else {
      continue;
    }
    any = true;
    if (__atomic_load_n(s.got, __ATOMIC_RELAXED) == ours) return false;
  }
  return any;
}

// Whether the dynamic linker is done relocating an object that appeared
// after start. dl_iterate_phdr lists an object as soon as dlopen has mapped
// it, while that dlopen (in another thread, holding only the loader's own
// lock) may still be writing its relocations; the last thing it does is
// make the RELRO pages read-only, the pages whose entries TrapEntries makes
// writable and read-only again. Trapping before that would leave the loader
// writing into read-only pages, so such an object waits for a later look.
// An object without RELRO pages is never made read-only by either side.
// Without /proc, as before: taken.
bool RelocationDone(const ElfObject& e) {
  if (e.relro_hi <= e.relro_lo) return true;
  const int fd = sys::OpenAt(AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  // Each line: "START-END PERMS ...", by address. Read in pieces; a line
  // may span two.
  char buf[4096];
  uintptr_t lo = 0, hi = 0;
  int field = 0, perm = 0;  // field 0: START, 1: END, 2: PERMS, 3: the rest
  bool writable = false, found = false, done = false;
  while (!done) {
    const long n = sys::Read(fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long i = 0; i < n && !done; ++i) {
      const char c = buf[i];
      if (c == '\n') {
        field = 0, perm = 0, lo = hi = 0;
        continue;
      }
      if (field == 0 || field == 1) {
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d >= 0) {
          uintptr_t& v = field == 0 ? lo : hi;
          v = v << 4 | static_cast<uintptr_t>(d);
        } else {
          ++field;
          if (field == 2 && lo > e.relro_lo) done = true;  // past it: not mapped
        }
      } else if (field == 2) {
        if (c == ' ') {
          field = 3;
        } else if (++perm == 2 && lo <= e.relro_lo && e.relro_lo < hi) {
          writable = c == 'w';
          found = done = true;
        }
      }
    }
  }
  sys::Close(fd);
  return !found || !writable;
}

// Brings the object table up to the dynamic linker's list (g_seen[0..n)),
// under its lock and the binder's: objects gone are marked so, new ones are
// parsed and get their traps.
void Sync(uint32_t n, bool subs_changed) {
  for (uint32_t i = 0; i < g_binder.nobjects; ++i) g_binder.objects[i].alive = 0;
  const uint32_t first_new = g_binder.nobjects;
  // The vDSO is the object whose program headers are the ones its ELF
  // header names (ld.so is often mapped within a few pages of it).
  const uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
  const uintptr_t vdso_phdr =
      vdso != 0 ? vdso + reinterpret_cast<const Elf64_Ehdr*>(vdso)->e_phoff : 0;
  const uintptr_t rtld = getauxval(AT_BASE);
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
      Object& ob = g_binder.objects[found];
      ob.alive = 1;
      if (subs_changed && !ob.ours && !ob.vdso && !ob.rtld) RearmPoints(ob.elf);
      continue;
    }
    if (g_binder.nobjects == kMaxObjects) continue;
    Object& ob = g_binder.objects[g_binder.nobjects];
    ob = Object{};
    ob.block = -1;
    if (!ParseElfObject(e.base, e.name, e.phdr, e.phnum, g_page, &ob.elf)) continue;
    if (!g_starting && !RelocationDone(ob.elf)) {
      g_binder.deferred = true;  // a dlopen still under way: the next look
      continue;
    }
    ob.alive = 1;
    ob.initial = g_starting;
    ob.ours = self >= ob.elf.map_lo && self < ob.elf.map_hi;
    ob.vdso = vdso_phdr != 0 && reinterpret_cast<uintptr_t>(e.phdr) == vdso_phdr;
    // Its few PLT calls run inside dlopen with its locks held: not trapped.
    ob.rtld = rtld != 0 && e.base == rtld;
    if (!ob.ours && !ob.vdso && !ob.rtld) ArmPoints(ob.elf);
    // Published whole: a sample's handler reads the objects (stack_fold.h).
    __atomic_store_n(&g_binder.nobjects, g_binder.nobjects + 1, __ATOMIC_RELEASE);
    if (!g_starting) StackSamplesNoteObject(g_binder.nobjects - 1);
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
  g_binder.deferred = false;
  Sync(w.seen < static_cast<uint32_t>(kMaxObjects) ? w.seen : kMaxObjects, w.subs_changed);
  // An object left for later: the next look walks the list again.
  if (g_binder.deferred) g_binder.adds = ~uint64_t{0};
  w.fn(w.arg);
  BinderUnlock();
  w.ran = true;
  return 1;
}

}  // namespace

bool WithObjects(void (*fn)(void*), void* arg) {
  // A fork child whose parent had another thread in the dynamic linker:
  // the walk would wait for good. The work is not done (a trapped call
  // passes on unmeasured, fp_trap_slow).
  if (preload::LoaderStuck()) return false;
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

const Object* Ours() {
  for (uint32_t i = 0; i < g_binder.nobjects; ++i) {
    if (g_binder.objects[i].ours && g_binder.objects[i].alive) return &g_binder.objects[i];
  }
  return nullptr;
}

namespace {

// The definition the dynamic linker would bind import `s` to: an object
// loaded at start searches the global scope (the objects loaded at start,
// in order); one loaded later also its own dependencies, which this does
// not order, so every definition found must agree. nullptr: none, or
// definitions that disagree.
const Object* FindDefiner(const ImportSlot& s, const Elf64_Sym** sym) {
  const Object& from = g_binder.objects[s.object];
  const ElfObject& e = from.elf;
  const char* name = e.strtab + e.symtab[s.symidx].st_name;
  const uint32_t h = GnuHash(name);
  const VersionNeed need = NeededVersion(e, s.symidx);
  const Object* def = nullptr;
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
      *sym = d;
      if (from.initial) break;
    } else if (a != found) {
      return nullptr;
    }
  }
  return def;
}

}  // namespace

uintptr_t ResolveLazy(const ImportSlot& s) {
  const Elf64_Sym* sym = nullptr;
  const Object* def = FindDefiner(s, &sym);
  if (def == nullptr) return 0;
  const uintptr_t found = def->elf.base + sym->st_value;
  if (ELF64_ST_TYPE(sym->st_info) == STT_GNU_IFUNC) {
    return reinterpret_cast<uintptr_t (*)()>(found)();
  }
  return found;
}

const Object* DefinerOf(const ImportSlot& s, uintptr_t target) {
  if (const Object* in = ObjectContaining(target); in != nullptr) return in;
  const Elf64_Sym* sym = nullptr;
  return FindDefiner(s, &sym);
}

const Object* DefinerByName(const char* name, uintptr_t addr) {
  if (const Object* in = ObjectContaining(addr); in != nullptr) return in;
  const uint32_t h = GnuHash(name);
  for (uint32_t i = 0; i < g_binder.nobjects; ++i) {
    const Object& ob = g_binder.objects[i];
    if (ob.alive && !ob.ours && !ob.vdso && FindDefinition(ob.elf, name, h, VersionNeed{})) {
      return &ob;
    }
  }
  return nullptr;
}

}  // namespace fieldprof::rt
