#include "tools/points/at_names.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "common/base/durable_file.h"
#include "common/stacks/cxx_names.h"
#include "tools/shared/program_files.h"
#include "tools/shared/spawn.h"

namespace fieldprof::tools {
namespace {

// `d` without the clone suffixes GCC adds to copies it made
// (" [clone .isra.0]", " [clone .constprop.0] [clone .cold]").
std::string WithoutClones(std::string d) {
  for (size_t at; (at = d.rfind(" [clone ")) != std::string::npos && d.back() == ']';) {
    d.erase(at);
  }
  return d;
}

// Whether demangled `d` names the function `name`: the same, or `name`
// followed by its parameter list.
bool Names(const std::string& d, const std::string& name) {
  const std::string base = WithoutClones(d);
  if (base == name) return true;
  return base.size() > name.size() && base.compare(0, name.size(), name) == 0 &&
         base[name.size()] == '(';
}

// The last part of a C++ name: "load" of "Config::load(int)".
std::string LastPart(const std::string& name) {
  std::string s = name.substr(0, name.find('('));
  const size_t colons = s.rfind("::");
  return colons == std::string::npos ? s : s.substr(colons + 2);
}

// " libfoo.so.1 (libc6,x86-64) => /path" lines (ldconfig -p): the path
// after "=> " on the line whose first word is `soname`.
std::string PathAfterArrow(const std::string& listing, const std::string& soname) {
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first != soname) continue;
    const size_t arrow = line.find("=> ");
    if (arrow == std::string::npos) continue;
    std::string path = line.substr(arrow + 3);
    path = path.substr(0, path.find(" ("));
    if (!path.empty() && path[0] == '/') return path;
  }
  return "";
}

}  // namespace

bool IsPlainSymbol(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  });
}

StatusOr<std::vector<CxxMatch>> FunctionsNamed(const std::string& path, const std::string& name,
                                               std::vector<std::string>* near) {
  near->clear();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IOError("cannot read " + path + ": " + std::strerror(errno));
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (elf == nullptr || elf_kind(elf) != ELF_K_ELF) {
    if (elf != nullptr) elf_end(elf);
    close(fd);
    return IOError(path + " is not an ELF file");
  }
  std::set<std::string> seen;
  std::vector<CxxMatch> out;
  std::set<std::string> nearby;
  const std::string last = LastPart(name);
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || sh.sh_entsize == 0) continue;
    const size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < n; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
      const int type = GELF_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
          sym.st_value == 0) {
        continue;
      }
      const char* raw = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (raw == nullptr || std::strncmp(raw, "_Z", 2) != 0 || !seen.insert(raw).second) continue;
      const std::string demangled = Demangle(raw);
      if (Names(demangled, name)) {
        out.push_back({raw, demangled});
      } else if (nearby.size() < 5 && LastPart(WithoutClones(demangled)) == last) {
        nearby.insert(WithoutClones(demangled));
      }
    }
  }
  elf_end(elf);
  close(fd);
  std::sort(out.begin(), out.end(),
            [](const CxxMatch& a, const CxxMatch& b) { return a.symbol < b.symbol; });
  if (out.empty()) near->assign(nearby.begin(), nearby.end());
  return out;
}

std::string ModuleFile(const std::string& program, const std::string& module) {
  namespace fs = std::filesystem;
  if (fs::path(program).filename() == module) return program;
  for (const StartLibrary& lib : StartLibraries(program)) {
    if (lib.name == module) return lib.file;
  }
  return PathAfterArrow(OutputOf({"/sbin/ldconfig", "-p"}).value_or(""), module);
}

}  // namespace fieldprof::tools
