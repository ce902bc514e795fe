#include "agent/preload/runtime/binder/late_interpose.h"

#include <link.h>
#include <stddef.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/preload/runtime/binder/elf_object.h"
#include "agent/preload/runtime/binder/next_symbol.h"

namespace fieldprof::rt {
namespace {

uintptr_t Self() { return reinterpret_cast<uintptr_t>(&DetectLoadedLate); }

// This library, parsed once (under dl_iterate_phdr's lock).
struct Ours {
  ElfObject elf;
  bool found = false;
};

int FindOurs(dl_phdr_info* info, size_t, void* data) {
  auto& o = *static_cast<Ours*>(data);
  if (!LoadedAt(*info, Self())) return 0;
  o.found = ParseElfObject(info->dlpi_addr, info->dlpi_name, info->dlpi_phdr, info->dlpi_phnum,
                           static_cast<uintptr_t>(getpagesize()), &o.elf);
  return 1;
}

struct FirstMalloc {
  bool ours = false;
  bool done = false;
};

int OnFirstMalloc(dl_phdr_info* info, size_t, void* data) {
  auto& f = *static_cast<FirstMalloc*>(data);
  ElfObject o;
  if (!ParseElfObject(info->dlpi_addr, info->dlpi_name, info->dlpi_phdr, info->dlpi_phnum,
                      static_cast<uintptr_t>(getpagesize()), &o)) {
    return 0;
  }
  if (FindDefinition(o, "malloc", GnuHash("malloc"), VersionNeed{}) == nullptr) return 0;
  f.ours = LoadedAt(*info, Self());
  f.done = true;
  return 1;
}

struct Patch {
  const ElfObject* ours;
  uintptr_t vdso_phdr;
  uintptr_t rtld;
  int written;
};

// Our definition for the import `symidx` of `o`, or 0.
uintptr_t OurDefinition(const ElfObject& ours, const ElfObject& o, uint32_t symidx) {
  const Elf64_Sym& sym = o.symtab[symidx];
  if (sym.st_shndx != SHN_UNDEF) return 0;
  const char* name = o.strtab + sym.st_name;
  if (*name == 0) return 0;
  const Elf64_Sym* d = FindDefinition(ours, name, GnuHash(name), NeededVersion(o, symidx));
  if (d == nullptr || ELF64_ST_TYPE(d->st_info) != STT_FUNC) return 0;
  return ours.base + d->st_value;
}

// The entries of `o` to point at us, written (RELRO made writable for the
// writes, and read-only again).
void PatchObject(const ElfObject& ours, const ElfObject& o, int* written) {
  bool opened = false;
  auto write = [&](uintptr_t* entry, uintptr_t to) {
    if (__atomic_load_n(entry, __ATOMIC_ACQUIRE) == to) return;
    const auto at = reinterpret_cast<uintptr_t>(entry);
    if (!opened && at >= o.relro_lo && at < o.relro_hi) {
      if (mprotect(reinterpret_cast<void*>(o.relro_lo), o.relro_hi - o.relro_lo,
                   PROT_READ | PROT_WRITE) != 0) {
        return;  // left as it is: that object's calls are not counted
      }
      opened = true;
    }
    __atomic_store_n(entry, to, __ATOMIC_RELEASE);
    ++*written;
  };
  for (size_t r = 0; r < o.njmprel; ++r) {
    const Elf64_Rela& rel = o.jmprel[r];
    if (ELF64_R_TYPE(rel.r_info) != R_X86_64_JUMP_SLOT) continue;
    const uintptr_t to = OurDefinition(ours, o, static_cast<uint32_t>(ELF64_R_SYM(rel.r_info)));
    if (to != 0) write(reinterpret_cast<uintptr_t*>(o.base + rel.r_offset), to);
  }
  for (size_t r = 0; r < o.nrela; ++r) {
    const Elf64_Rela& rel = o.rela[r];
    const uint32_t type = static_cast<uint32_t>(ELF64_R_TYPE(rel.r_info));
    if (type != R_X86_64_GLOB_DAT && !(type == R_X86_64_64 && rel.r_addend == 0)) continue;
    const uintptr_t to = OurDefinition(ours, o, static_cast<uint32_t>(ELF64_R_SYM(rel.r_info)));
    if (to != 0) write(reinterpret_cast<uintptr_t*>(o.base + rel.r_offset), to);
  }
  if (opened) {
    mprotect(reinterpret_cast<void*>(o.relro_lo), o.relro_hi - o.relro_lo, PROT_READ);
  }
}

int OnObject(dl_phdr_info* info, size_t, void* data) {
  auto& p = *static_cast<Patch*>(data);
  if (LoadedAt(*info, Self())) return 0;
  if (p.vdso_phdr != 0 && reinterpret_cast<uintptr_t>(info->dlpi_phdr) == p.vdso_phdr) return 0;
  if (p.rtld != 0 && info->dlpi_addr == p.rtld) return 0;
  ElfObject o;
  if (!ParseElfObject(info->dlpi_addr, info->dlpi_name, info->dlpi_phdr, info->dlpi_phnum,
                      static_cast<uintptr_t>(getpagesize()), &o)) {
    return 0;
  }
  PatchObject(*p.ours, o, &p.written);
  return 0;
}

int OnAdds(dl_phdr_info* info, size_t size, void* data) {
  if (size >= offsetof(dl_phdr_info, dlpi_subs)) {
    *static_cast<unsigned long long*>(data) = info->dlpi_adds;
  }
  return 1;
}

// How many objects the dynamic linker has loaded so far, in all.
unsigned long long ObjectsAdded() {
  unsigned long long adds = 0;
  dl_iterate_phdr(OnAdds, &adds);
  return adds;
}

unsigned long long last_adds = 0;

}  // namespace

int InterposeLateOnNewObjects() {
  if (!g_loaded_late || ObjectsAdded() == last_adds) return 0;
  return InterposeLate();
}

bool DetectLoadedLate() {
  FirstMalloc f;
  dl_iterate_phdr(OnFirstMalloc, &f);
  g_loaded_late = f.done && !f.ours;
  return g_loaded_late;
}

int InterposeLate() {
  last_adds = ObjectsAdded();
  Ours ours;
  dl_iterate_phdr(FindOurs, &ours);
  if (!ours.found) return 0;
  const uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
  Patch p{&ours.elf, vdso != 0 ? vdso + reinterpret_cast<const Elf64_Ehdr*>(vdso)->e_phoff : 0,
          getauxval(AT_BASE), 0};
  dl_iterate_phdr(OnObject, &p);
  return p.written;
}

}  // namespace fieldprof::rt
