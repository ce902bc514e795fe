// A loaded ELF object as the runtime sees it: its dynamic section parsed
// once (symbols, PLT relocations, GNU hash, versions, RELRO range), and the
// dynamic linker's symbol matching rules, so that the binder can find the
// definition a lazily bound import will resolve to without calling dlsym.
//
// Everything here is pure: no libc call, no floating point, no allocation
// (built with -mgeneral-regs-only), so it may run inside a first-call trap
// with the interrupted call's argument registers still live.
//
//   ElfObject o;
//   if (ParseElfObject(info->dlpi_addr, info->dlpi_name, info->dlpi_phdr,
//                      info->dlpi_phnum, &o)) { ... o.jmprel[i] ... }
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_ELF_OBJECT_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_ELF_OBJECT_H_

#include <elf.h>
#include <link.h>

#include <cstddef>
#include <cstdint>

namespace fieldprof::rt {

struct ElfObject {
  uintptr_t base = 0;            // load bias (l_addr)
  const char* path = nullptr;    // as the dynamic linker has it ("" for the program)
  const char* soname = nullptr;  // DT_SONAME, or nullptr
  const Elf64_Sym* symtab = nullptr;
  const char* strtab = nullptr;
  const Elf64_Rela* jmprel = nullptr;
  size_t njmprel = 0;
  // The other relocations (DT_RELA): GLOB_DAT entries, addresses in data.
  const Elf64_Rela* rela = nullptr;
  size_t nrela = 0;
  const uint32_t* gnu_hash = nullptr;
  const uint16_t* versym = nullptr;
  const Elf64_Verneed* verneed = nullptr;
  size_t nverneed = 0;
  const Elf64_Verdef* verdef = nullptr;
  size_t nverdef = 0;
  const Elf64_Phdr* phdr = nullptr;
  int phnum = 0;
  // Executable segments, and all loaded ones: [lo, hi).
  uintptr_t text_lo = 0, text_hi = 0;
  uintptr_t map_lo = 0, map_hi = 0;
  // What the dynamic linker made read-only after relocation (PT_GNU_RELRO,
  // rounded down to pages at both ends as it does); empty when none.
  uintptr_t relro_lo = 0, relro_hi = 0;
};

// True when `a` is in one of the loaded segments of the object `info`
// describes (dl_iterate_phdr's view).
bool LoadedAt(const dl_phdr_info& info, uintptr_t a);

// Reads the object's program headers and dynamic section. False when it has
// no dynamic section or no symbol table (nothing to bind).
bool ParseElfObject(uintptr_t base, const char* path, const Elf64_Phdr* phdr, int phnum,
                    uintptr_t page_size, ElfObject* out);

// The module name used in keys: the soname's base name, else the file's
// base name, whichever keeps common/wire/key_rules.h's module rule; nullptr when
// neither does (the program itself has neither: binder.cc names it).
const char* ModuleName(const ElfObject& o);

// Writes the object's GNU build id in hex into out[0..cap) ("unknown" when it
// has none, or when it does not fit).
void BuildIdHex(const ElfObject& o, char* out, size_t cap);
// The object's GNU build id, as it is in its note: its bytes (in the
// mapped object) and their number; nullptr when it has none.
const unsigned char* BuildIdBytes(const ElfObject& o, size_t* n);

uint32_t GnuHash(const char* name);
bool StrEq(const char* a, const char* b);

// The version an import asks for (from .gnu.version and .gnu.version_r);
// name == nullptr when unversioned.
struct VersionNeed {
  const char* name = nullptr;
  uint32_t hash = 0;
  bool hidden = false;
};
VersionNeed NeededVersion(const ElfObject& o, uint32_t symidx);

// The definition of `name` in `o` that the dynamic linker would bind a PLT
// reference asking for `need` to, or nullptr: defined, global or weak, a
// type a reference may bind to, and the version rules of glibc's
// check_match (a versioned reference takes the matching version or an
// unversioned definition; an unversioned one takes a base definition, else
// the only non-hidden version).
const Elf64_Sym* FindDefinition(const ElfObject& o, const char* name, uint32_t hash,
                                const VersionNeed& need);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_ELF_OBJECT_H_
