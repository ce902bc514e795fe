#include "tools/record/command_points.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "tools/shared/spawn.h"

namespace fieldprof::tools {
namespace {

// The name with the NUL that ends it, as a dynamic string table holds it.
constexpr char kPointHit[] = "fieldprof_point_hit";

// `path` opened for reading if it is a regular file, else -1 (a FIFO's
// opening would wait for a writer).
int OpenRegular(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -1;
  }
  return fd;
}

// What one ELF file says: whether its dynamic symbols name
// fieldprof_point_hit, and its program interpreter (PT_INTERP), if any.
struct ElfFacts {
  bool points = false;
  std::string interpreter;
};

ElfFacts ReadFacts(const std::string& path) {
  ElfFacts out;
  const int fd = OpenRegular(path);
  if (fd < 0) return out;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (elf != nullptr && elf_kind(elf) == ELF_K_ELF) {
    size_t phnum = 0;
    if (elf_getphdrnum(elf, &phnum) == 0) {
      for (size_t i = 0; i < phnum; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_INTERP) {
          continue;
        }
        size_t size = 0;
        const char* image = elf_rawfile(elf, &size);
        if (image != nullptr && ph.p_offset < size && ph.p_filesz <= size - ph.p_offset) {
          out.interpreter.assign(image + ph.p_offset, strnlen(image + ph.p_offset, ph.p_filesz));
        }
      }
    }
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr && !out.points;
         scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_DYNSYM) continue;
      Elf_Data* strs = elf_getdata(elf_getscn(elf, sh.sh_link), nullptr);
      out.points = strs != nullptr && strs->d_buf != nullptr &&
                   memmem(strs->d_buf, strs->d_size, kPointHit, sizeof kPointHit) != nullptr;
    }
  }
  if (elf != nullptr) elf_end(elf);
  close(fd);
  return out;
}

// argv[0] as execvp would find it: itself when it holds a '/', else the
// first executable regular file of that name in PATH; "" when none.
std::string FindProgram(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return name;
  const char* env = std::getenv("PATH");
  std::stringstream path(env != nullptr ? env : "/bin:/usr/bin");
  for (std::string dir; std::getline(path, dir, ':');) {
    const std::string file = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0) {
      return file;
    }
  }
  return "";
}

// Whether `path` names a dynamic linker, which takes --list: an absolute
// path whose file is ld-*.so* or ld64.so* (glibc's and musl's). Any other
// interpreter a program names is not run with arguments of ours.
bool IsDynamicLinker(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  const std::string name = path.substr(path.rfind('/') + 1);
  return (name.rfind("ld-", 0) == 0 || name.rfind("ld64.so", 0) == 0) &&
         name.find(".so") != std::string::npos;
}

// The files of the libraries the dynamic linker `interpreter` loads with
// `program` at start, as its --list prints them (what ldd runs): lines
// "\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" and
// "\t/lib64/ld-linux-x86-64.so.2 (0x...)". The program's code does not
// run; the user's LD_PRELOAD and LD_LIBRARY_PATH count, as they will.
std::vector<std::string> StartLibraries(const std::string& interpreter,
                                        const std::string& program) {
  std::vector<std::string> out;
  if (!IsDynamicLinker(interpreter)) return out;
  const int fd = memfd_create("fieldprof-list", MFD_CLOEXEC);
  if (fd < 0) return out;
  SpawnOptions so;
  so.out_fd = fd;
  so.err_fd = kDevNull;
  std::string error;
  if (SpawnAndWait({interpreter, "--list", program}, so, &error) == 0) {
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = pread(fd, buf, sizeof buf, static_cast<off_t>(text.size()))) > 0;) {
      text.append(buf, static_cast<size_t>(n));
    }
    std::stringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const size_t arrow = line.find(" => ");
      size_t from = arrow != std::string::npos ? arrow + 4 : line.find('/');
      if (from == std::string::npos || from >= line.size() || line[from] != '/') continue;
      const size_t to = line.rfind(" (0x");
      if (to == std::string::npos || to <= from) continue;
      out.push_back(line.substr(from, to - from));
    }
  }
  close(fd);
  return out;
}

}  // namespace

bool ModuleHasPoints(const std::string& path) { return ReadFacts(path).points; }

std::string CommandModuleWithPoints(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  const std::string program = FindProgram(argv[0]);
  if (program.empty()) return "";
  const ElfFacts facts = ReadFacts(program);
  if (facts.points) return program;
  for (const std::string& lib : StartLibraries(facts.interpreter, program)) {
    if (ModuleHasPoints(lib)) return lib;
  }
  return "";
}

std::vector<std::string> ModulesWithPoints(const std::vector<std::string>& paths) {
  std::set<std::string> seen, named;
  std::vector<std::string> out;
  for (const std::string& path : paths) {
    if (!seen.insert(path).second || !ModuleHasPoints(path)) continue;
    const std::string name = path.substr(path.rfind('/') + 1);
    if (named.insert(name).second) out.push_back(name);
  }
  return out;
}

}  // namespace fieldprof::tools
