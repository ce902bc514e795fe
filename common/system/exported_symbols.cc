#include "common/system/exported_symbols.h"

#include <elf.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <tuple>

namespace fieldprof {

std::string FileBuildId(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  elf_version(EV_CURRENT);
  std::string out;
  if (Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr); elf != nullptr) {
    const void* id = nullptr;
    const ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    static const char kHex[] = "0123456789abcdef";
    for (ssize_t i = 0; i < n; ++i) {
      const auto b = static_cast<const unsigned char*>(id)[i];
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
    elf_end(elf);
  }
  close(fd);
  return out;
}

bool ExportedSymbols::Load(const std::string& path, const std::string& build_id) {
  syms_.clear();
  max_size_ = 0;
  // A regular file only (a damaged live file's path could name a FIFO,
  // whose opening would wait for a writer).
  struct stat st {};
  if (path.empty() || build_id.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      FileBuildId(path) != build_id) {
    return false;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  bool found = false;
  for (Elf_Scn* scn = elf != nullptr ? elf_nextscn(elf, nullptr) : nullptr; scn != nullptr;
       scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0) {
      continue;
    }
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr) continue;
    found = true;
    const size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t i = 1; i < n; ++i) {
      GElf_Sym s;
      if (gelf_getsym(data, static_cast<int>(i), &s) == nullptr) continue;
      // dladdr's candidates: defined (or with an address), not absolute,
      // not thread-local.
      const bool undef = s.st_shndx == SHN_UNDEF;
      if ((undef && s.st_value == 0) || s.st_shndx == SHN_ABS ||
          GELF_ST_TYPE(s.st_info) == STT_TLS) {
        continue;
      }
      const char* name = elf_strptr(elf, sh.sh_link, s.st_name);
      if (name == nullptr || name[0] == 0) continue;
      syms_.push_back({s.st_value, undef ? 0 : s.st_size, i, name});
      max_size_ = std::max<uint64_t>(max_size_, syms_.back().size);
    }
  }
  if (elf != nullptr) elf_end(elf);
  ::close(fd);
  std::sort(syms_.begin(), syms_.end(), [](const Sym& a, const Sym& b) {
    return std::tie(a.value, a.index) < std::tie(b.value, b.index);
  });
  return found;
}

const std::string* ExportedSymbols::At(uint64_t offset) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), offset,
                             [](uint64_t v, const Sym& s) { return v < s.value; });
  const Sym* best = nullptr;
  while (it != syms_.begin()) {
    const Sym& s = *--it;
    if (best != nullptr && s.value < best->value) break;
    if (best == nullptr && s.value < offset && s.value + max_size_ <= offset) break;
    const bool covers = s.size == 0 ? offset == s.value : offset < s.value + s.size;
    if (covers) best = &s;  // going down: an equal one found later has the lower index
  }
  if (best == nullptr || best->size == 0) return nullptr;
  return &best->name;
}

namespace {

// The defined global or weak functions of a .dynsym section.
size_t CountExportedFunctions(Elf_Scn* scn, const GElf_Shdr& sh) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr) return 0;
  size_t n = 0;
  for (size_t i = 1; i < sh.sh_size / sh.sh_entsize; ++i) {
    GElf_Sym s;
    if (gelf_getsym(data, static_cast<int>(i), &s) == nullptr) continue;
    const int bind = GELF_ST_BIND(s.st_info);
    if (s.st_shndx != SHN_UNDEF && GELF_ST_TYPE(s.st_info) == STT_FUNC &&
        (bind == STB_GLOBAL || bind == STB_WEAK)) {
      ++n;
    }
  }
  return n;
}

// Whether a .dynsym section has an undefined symbol named `name`.
bool ImportsSymbol(Elf* elf, Elf_Scn* scn, const GElf_Shdr& sh, const char* name) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr) return false;
  for (size_t i = 1; i < sh.sh_size / sh.sh_entsize; ++i) {
    GElf_Sym s;
    if (gelf_getsym(data, static_cast<int>(i), &s) == nullptr || s.st_shndx != SHN_UNDEF) {
      continue;
    }
    const char* n = elf_strptr(elf, sh.sh_link, s.st_name);
    if (n != nullptr && std::strcmp(n, name) == 0) return true;
  }
  return false;
}

}  // namespace

ElfFacts ReadElfFacts(const std::string& path) {
  ElfFacts f;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return f;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return f;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  GElf_Ehdr eh;
  if (elf != nullptr && gelf_getehdr(elf, &eh) != nullptr) {
    f.read = true;
    bool interp = false;
    size_t nph = 0;
    if (elf_getphdrnum(elf, &nph) == 0) {
      for (size_t i = 0; i < nph; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_INTERP) {
          continue;
        }
        interp = true;
        size_t size = 0;
        const char* image = elf_rawfile(elf, &size);
        if (image != nullptr && ph.p_offset < size && ph.p_filesz <= size - ph.p_offset) {
          const char* at = image + ph.p_offset;
          f.interpreter.assign(at, strnlen(at, ph.p_filesz));
        }
      }
    }
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_entsize == 0) continue;
      if (sh.sh_type == SHT_DYNSYM) {
        f.exported_functions += CountExportedFunctions(scn, sh);
        f.imports_point_hit |= ImportsSymbol(elf, scn, sh, "fieldprof_point_hit");
        continue;
      }
      if (sh.sh_type != SHT_DYNAMIC) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data == nullptr) continue;
      for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
        GElf_Dyn d;
        if (gelf_getdyn(data, static_cast<int>(i), &d) == nullptr) break;
        if (d.d_tag == DT_SONAME) {
          if (const char* s = elf_strptr(elf, sh.sh_link, d.d_un.d_val); s != nullptr) f.soname = s;
        }
      }
    }
    f.program = f.soname.empty() && (interp || eh.e_type == ET_EXEC);
    const void* id = nullptr;
    const ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    static const char kHex[] = "0123456789abcdef";
    for (ssize_t i = 0; i < n; ++i) {
      const auto b = static_cast<const unsigned char*>(id)[i];
      f.build_id += kHex[b >> 4];
      f.build_id += kHex[b & 15];
    }
  }
  if (elf != nullptr) elf_end(elf);
  ::close(fd);
  return f;
}

}  // namespace fieldprof
