#include "agent/preload/runtime/binder/elf_object.h"

#include "common/wire/key_rules.h"

namespace fieldprof::rt {
namespace {

// glibc relocates some d_ptr values of a loaded object's dynamic section in
// place (DT_SYMTAB, DT_STRTAB, DT_JMPREL, DT_GNU_HASH, DT_VERSYM) and not
// others (DT_VERNEED, DT_VERDEF): a value inside the mapping is an address
// already, anything else a virtual address to relocate.
uintptr_t Ptr(const ElfObject& o, uintptr_t p) {
  return p >= o.map_lo && p < o.map_hi ? p : p + o.base;
}

}  // namespace

bool LoadedAt(const dl_phdr_info& info, uintptr_t a) {
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const Elf64_Phdr& p = info.dlpi_phdr[i];
    if (p.p_type != PT_LOAD) continue;
    const uintptr_t lo = info.dlpi_addr + p.p_vaddr;
    if (a >= lo && a < lo + p.p_memsz) return true;
  }
  return false;
}

bool StrEq(const char* a, const char* b) {
  while (*a != 0 && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

uint32_t GnuHash(const char* name) {
  uint32_t h = 5381;
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(name); *p; ++p)
    h = h * 33 + *p;
  return h;
}

namespace {

// The mapping, the text and RELRO ranges from the program headers into
// `o`; the dynamic section, or null (also when nothing is loaded).
const Elf64_Dyn* ReadProgramHeaders(uintptr_t base, const Elf64_Phdr* phdr, int phnum,
                                    uintptr_t page_size, ElfObject* o) {
  const Elf64_Dyn* dyn = nullptr;
  bool first_load = true;
  for (int i = 0; i < phnum; ++i) {
    const Elf64_Phdr& p = phdr[i];
    const uintptr_t lo = base + p.p_vaddr, hi = lo + p.p_memsz;
    if (p.p_type == PT_LOAD) {
      if (first_load || lo < o->map_lo) o->map_lo = lo;
      if (first_load || hi > o->map_hi) o->map_hi = hi;
      first_load = false;
      if (p.p_flags & PF_X) {
        if (o->text_hi == 0 || lo < o->text_lo) o->text_lo = lo;
        if (hi > o->text_hi) o->text_hi = hi;
      }
    } else if (p.p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const Elf64_Dyn*>(lo);
    } else if (p.p_type == PT_GNU_RELRO) {
      o->relro_lo = lo & ~(page_size - 1);
      o->relro_hi = hi & ~(page_size - 1);
      if (o->relro_hi <= o->relro_lo) o->relro_lo = o->relro_hi = 0;
    }
  }
  return first_load ? nullptr : dyn;
}

// The dynamic section's tables into `o`; the sizes and the soname's
// offset (soname_set: there is one) for the caller to turn into counts.
void ReadDynamic(const Elf64_Dyn* dyn, ElfObject* o, uintptr_t* pltrelsz, uintptr_t* relasz,
                 uintptr_t* soname, bool* soname_set) {
  for (const Elf64_Dyn* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        o->symtab = reinterpret_cast<const Elf64_Sym*>(Ptr(*o, d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        o->strtab = reinterpret_cast<const char*>(Ptr(*o, d->d_un.d_ptr));
        break;
      case DT_JMPREL:
        o->jmprel = reinterpret_cast<const Elf64_Rela*>(Ptr(*o, d->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        *pltrelsz = d->d_un.d_val;
        break;
      case DT_RELA:
        o->rela = reinterpret_cast<const Elf64_Rela*>(Ptr(*o, d->d_un.d_ptr));
        break;
      case DT_RELASZ:
        *relasz = d->d_un.d_val;
        break;
      case DT_GNU_HASH:
        o->gnu_hash = reinterpret_cast<const uint32_t*>(Ptr(*o, d->d_un.d_ptr));
        break;
      case DT_VERSYM:
        o->versym = reinterpret_cast<const uint16_t*>(Ptr(*o, d->d_un.d_ptr));
        break;
      case DT_VERNEED:
        o->verneed = reinterpret_cast<const Elf64_Verneed*>(Ptr(*o, d->d_un.d_ptr));
        break;
      case DT_VERNEEDNUM:
        o->nverneed = d->d_un.d_val;
        break;
      case DT_VERDEF:
        o->verdef = reinterpret_cast<const Elf64_Verdef*>(Ptr(*o, d->d_un.d_ptr));
        break;
      case DT_VERDEFNUM:
        o->nverdef = d->d_un.d_val;
        break;
      case DT_SONAME:
        *soname = d->d_un.d_val;
        *soname_set = true;
        break;
      default:
        break;
    }
  }
}

}  // namespace

bool ParseElfObject(uintptr_t base, const char* path, const Elf64_Phdr* phdr, int phnum,
                    uintptr_t page_size, ElfObject* out) {
  ElfObject o;
  o.base = base;
  o.path = path != nullptr ? path : "";
  o.phdr = phdr;
  o.phnum = phnum;
  const Elf64_Dyn* dyn = ReadProgramHeaders(base, phdr, phnum, page_size, &o);
  if (dyn == nullptr) return false;
  uintptr_t soname = 0, pltrelsz = 0, relasz = 0;
  bool have_soname = false;
  ReadDynamic(dyn, &o, &pltrelsz, &relasz, &soname, &have_soname);
  if (o.symtab == nullptr || o.strtab == nullptr) return false;
  if (o.jmprel != nullptr) o.njmprel = pltrelsz / sizeof(Elf64_Rela);
  if (o.rela != nullptr) o.nrela = relasz / sizeof(Elf64_Rela);
  if (have_soname) o.soname = o.strtab + soname;
  *out = o;
  return true;
}

namespace {

// The part after the last '/', and its length.
const char* BaseName(const char* path, size_t* len) {
  const char* base = path;
  const char* p = path;
  for (; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  *len = static_cast<size_t>(p - base);
  return base;
}

}  // namespace

const char* ModuleName(const ElfObject& o) {
  size_t n = 0;
  if (o.soname != nullptr) {
    // A soname is chosen by whoever built the library: a path or a
    // stranger string in it is not trusted either.
    const char* base = BaseName(o.soname, &n);
    if (key_rules::ModuleOk(base, n)) return base;
  }
  const char* base = BaseName(o.path, &n);
  return key_rules::ModuleOk(base, n) ? base : nullptr;
}

const unsigned char* BuildIdBytes(const ElfObject& o, size_t* size) {
  for (int i = 0; i < o.phnum; ++i) {
    const Elf64_Phdr& ph = o.phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(o.base + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(Elf64_Nhdr) <= end) {
      const auto* n = reinterpret_cast<const Elf64_Nhdr*>(p);
      const char* name = p + sizeof(Elf64_Nhdr);
      const char* desc = name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && name[0] == 'G' && name[1] == 'N' &&
          name[2] == 'U' && name[3] == 0 && desc + n->n_descsz <= end && n->n_descsz > 0) {
        *size = n->n_descsz;
        return reinterpret_cast<const unsigned char*>(desc);
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  *size = 0;
  return nullptr;
}

void BuildIdHex(const ElfObject& o, char* out, size_t cap) {
  static const char kUnknown[] = "unknown";
  static const char kHex[] = "0123456789abcdef";
  size_t n = 0;
  if (const unsigned char* id = BuildIdBytes(o, &n); id != nullptr && 2 * n + 1 <= cap) {
    for (size_t j = 0; j < n; ++j) {
      out[2 * j] = kHex[id[j] >> 4];
      out[2 * j + 1] = kHex[id[j] & 15];
    }
    out[2 * n] = 0;
    return;
  }
  size_t i = 0;
  for (; i + 1 < cap && kUnknown[i]; ++i) out[i] = kUnknown[i];
  if (cap > 0) out[i] = 0;
}

VersionNeed NeededVersion(const ElfObject& o, uint32_t symidx) {
  VersionNeed v;
  if (o.versym == nullptr || o.verneed == nullptr) return v;
  const uint16_t ndx = o.versym[symidx] & 0x7fff;
  if (ndx <= 1) return v;
  const char* vn = reinterpret_cast<const char*>(o.verneed);
  for (size_t i = 0; i < o.nverneed; ++i) {
    const auto* need = reinterpret_cast<const Elf64_Verneed*>(vn);
    const char* va = vn + need->vn_aux;
    for (uint16_t j = 0; j < need->vn_cnt; ++j) {
      const auto* aux = reinterpret_cast<const Elf64_Vernaux*>(va);
      if ((aux->vna_other & 0x7fff) == ndx) {
        v.name = o.strtab + aux->vna_name;
        v.hash = aux->vna_hash;
        v.hidden = (aux->vna_other & 0x8000) != 0;
        return v;
      }
      if (aux->vna_next == 0) break;
      va += aux->vna_next;
    }
    if (need->vn_next == 0) break;
    vn += need->vn_next;
  }
  return v;
}

namespace {

// The version a definition has, by its .gnu.version index: name and hash
// from .gnu.version_d; the base version and the local/global indexes have
// none (hash 0), as in glibc's l_versions.
void DefinedVersion(const ElfObject& o, uint16_t ndx, const char** name, uint32_t* hash) {
  *name = nullptr;
  *hash = 0;
  if (o.verdef == nullptr || ndx <= 1) return;
  const char* vd = reinterpret_cast<const char*>(o.verdef);
  for (size_t i = 0; i < o.nverdef; ++i) {
    const auto* def = reinterpret_cast<const Elf64_Verdef*>(vd);
    if ((def->vd_ndx & 0x7fff) == ndx) {
      if (def->vd_flags & VER_FLG_BASE) return;
      const auto* aux = reinterpret_cast<const Elf64_Verdaux*>(vd + def->vd_aux);
      *name = o.strtab + aux->vda_name;
      *hash = def->vd_hash;
      return;
    }
    if (def->vd_next == 0) break;
    vd += def->vd_next;
  }
}

bool Bindable(const Elf64_Sym& s) {
  if (s.st_shndx == SHN_UNDEF) return false;  // also a program's canonical PLT entry
  if (s.st_value == 0 && s.st_shndx != SHN_ABS) return false;
  const int type = ELF64_ST_TYPE(s.st_info);
  if (type != STT_NOTYPE && type != STT_OBJECT && type != STT_FUNC && type != STT_COMMON &&
      type != STT_GNU_IFUNC) {
    return false;
  }
  const int bind = ELF64_ST_BIND(s.st_info);
  return bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE;
}

}  // namespace

const Elf64_Sym* FindDefinition(const ElfObject& o, const char* name, uint32_t hash,
                                const VersionNeed& need) {
  if (o.gnu_hash == nullptr) return nullptr;
  const uint32_t nbuckets = o.gnu_hash[0], symoffset = o.gnu_hash[1];
  const uint32_t bloom_size = o.gnu_hash[2], shift = o.gnu_hash[3];
  if (nbuckets == 0 || bloom_size == 0) return nullptr;
  const auto* bloom = reinterpret_cast<const uint64_t*>(o.gnu_hash + 4);
  const uint64_t word = bloom[(hash / 64) % bloom_size];
  const uint64_t mask = (uint64_t{1} << (hash % 64)) | (uint64_t{1} << ((hash >> shift) % 64));
  if ((word & mask) != mask) return nullptr;
  const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
  const uint32_t* chain = buckets + nbuckets;
  uint32_t i = buckets[hash % nbuckets];
  if (i < symoffset) return nullptr;
  const Elf64_Sym* only_version = nullptr;
  int versions = 0;
  for (;; ++i) {
    const uint32_t h = chain[i - symoffset];
    const Elf64_Sym& s = o.symtab[i];
    if ((h | 1) == (hash | 1) && Bindable(s) && StrEq(o.strtab + s.st_name, name)) {
      if (need.name != nullptr) {
        if (o.versym == nullptr) return &s;
        const uint16_t v = o.versym[i];
        const char* dname;
        uint32_t dhash;
        DefinedVersion(o, v & 0x7fff, &dname, &dhash);
        if (dname != nullptr && dhash == need.hash && StrEq(dname, need.name)) return &s;
        if (!need.hidden && dhash == 0 && !(v & 0x8000)) return &s;
      } else {
        if (o.versym == nullptr || (o.versym[i] & 0x7fff) < 3) return &s;
        if (!(o.versym[i] & 0x8000) && versions++ == 0) only_version = &s;
      }
    }
    if (h & 1) break;
  }
  return versions == 1 ? only_version : nullptr;
}

}  // namespace fieldprof::rt
