#include "tools/shared/symbolizer.h"

#include <elfutils/libdwfl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "common/stacks/cxx_names.h"

namespace fieldprof::tools {

// The vDSO has no file. The kernel maps the same image into every process,
// so this process's own copy, in a memory file, stands in for the recorded
// one's: its frames read as __vdso_clock_gettime, not linux-vdso.so.1+0xb46.
// (A recording read under another kernel than the one it was made under
// may name them wrongly.) -1 when there is none.
int VdsoImageFd() {
  const auto* ehdr = reinterpret_cast<const ElfW(Ehdr)*>(getauxval(AT_SYSINFO_EHDR));
  if (ehdr == nullptr) return -1;
  const char* base = reinterpret_cast<const char*>(ehdr);
  size_t size = ehdr->e_shoff + size_t{ehdr->e_shnum} * ehdr->e_shentsize;
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(base + ehdr->e_phoff);
  for (int i = 0; i < ehdr->e_phnum; ++i) {
    size = std::max<size_t>(size, ph[i].p_offset + ph[i].p_filesz);
  }
  const int fd = memfd_create("vdso", MFD_CLOEXEC);
  if (fd < 0) return -1;
  for (size_t off = 0; off < size;) {
    const ssize_t w = write(fd, base + off, size - off);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    off += static_cast<size_t>(w);
  }
  return fd;
}

bool IsVdso(const std::string& path) { return path == "linux-vdso.so.1" || path == "[vdso]"; }

Symbolizer::Symbolizer(const std::vector<LoadedModule>& modules, uint32_t pid) : pid_(pid) {
  static const Dwfl_Callbacks callbacks = {
      .find_elf = dwfl_build_id_find_elf,
      .find_debuginfo = dwfl_standard_find_debuginfo,
      .section_address = dwfl_offline_section_address,
      .debuginfo_path = nullptr,
  };
  std::map<uint64_t, const LoadedModule*> latest;  // the last report of each load
  for (const LoadedModule& m : modules) latest[m.lo] = &m;
  for (const auto& [lo, m] : latest) modules_.push_back(*m);
  dwfl_ = dwfl_begin(&callbacks);
  if (dwfl_ == nullptr) return;
  dwfl_report_begin(dwfl_);
  std::set<std::string> reported;
  for (const LoadedModule& m : modules_) {
    // A file mapped executable a second time elsewhere (node maps its own
    // text again, high up) is reported once: libdwfl cannot place a
    // non-PIE executable twice, and the second report lost the first.
    // Frames in the second mapping are named by its offset below.
    if (!reported.insert(m.path).second) continue;
    // libdwfl takes the descriptor it is given.
    const int fd = IsVdso(m.path) ? VdsoImageFd() : -1;
    dwfl_report_elf(dwfl_, m.path.c_str(), m.path.c_str(), fd, m.bias, false);
  }
  dwfl_report_end(dwfl_, nullptr, nullptr);
}

Symbolizer::~Symbolizer() {
  if (dwfl_ != nullptr) dwfl_end(dwfl_);
}

bool Symbolizer::InModuleNamed(uint64_t ip, const char* file_name) const {
  for (const LoadedModule& m : modules_) {
    if (ip >= m.lo && ip < m.hi) return std::filesystem::path(m.path).filename() == file_name;
  }
  return false;
}

std::string Symbolizer::Name(uint64_t ip, bool return_address) {
  const uint64_t at = return_address ? ip - 1 : ip;
  if (auto it = memo_.find(at); it != memo_.end()) return it->second;
  std::string name;
  if (dwfl_ != nullptr) {
    if (Dwfl_Module* mod = dwfl_addrmodule(dwfl_, at); mod != nullptr) {
      if (const char* sym = dwfl_module_addrname(mod, at); sym != nullptr) {
        std::string plain = sym;
        plain = plain.substr(0, plain.find('@'));  // "__libc_start_main@@GLIBC_2.34"
        name = Demangle(plain);
      } else {
        Dwarf_Addr start = 0;
        const char* mname =
            dwfl_module_info(mod, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
        char off[32];
        std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(at - start));
        name = std::filesystem::path(mname != nullptr ? mname : "?").filename().string() + off;
      }
    }
  }
  if (name.empty()) {  // a module with no file (the vDSO): its name and offset
    for (const LoadedModule& m : modules_) {
      if (at >= m.lo && at < m.hi) {
        char off[32];
        std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(at - m.bias));
        name = std::filesystem::path(m.path).filename().string() + off;
        break;
      }
    }
  }
  if (name.empty()) {
    if (const JitSymbol* j = FindJit(at); j != nullptr) name = j->name;
  }
  if (name.empty()) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(at));
    name = hex;
  }
  memo_.emplace(at, name);
  return name;
}

const Symbolizer::JitSymbol* Symbolizer::FindJit(uint64_t at) {
  if (!jit_read_) {
    jit_read_ = true;
    const std::string path = "/tmp/perf-" + std::to_string(pid_) + ".map";
    struct stat st {};
    // As perf: only a file of this user's (or root's), not one planted.
    FILE* f = pid_ != 0 && stat(path.c_str(), &st) == 0 &&
                      (st.st_uid == geteuid() || st.st_uid == 0) && S_ISREG(st.st_mode)
                  ? std::fopen(path.c_str(), "re")
                  : nullptr;
    if (f != nullptr) {
      char* line = nullptr;
      size_t cap = 0;
      ssize_t n;
      while ((n = getline(&line, &cap, f)) > 0) {
        char* end = nullptr;
        const uint64_t lo = std::strtoull(line, &end, 16);
        char* end2 = nullptr;
        const uint64_t size = std::strtoull(end, &end2, 16);
        if (end == line || end2 == end || size == 0) continue;
        std::string name(end2);
        while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
        const size_t first = name.find_first_not_of(' ');
        if (first == std::string::npos) continue;
        jit_.push_back({lo, lo + size, name.substr(first)});
      }
      std::free(line);
      std::fclose(f);
      // Code moved or replaced later is listed later: the later entry of
      // one address stands.
      std::stable_sort(jit_.begin(), jit_.end(),
                       [](const JitSymbol& a, const JitSymbol& b) { return a.lo < b.lo; });
    }
  }
  auto it = std::upper_bound(jit_.begin(), jit_.end(), at,
                             [](uint64_t a, const JitSymbol& j) { return a < j.lo; });
  while (it != jit_.begin()) {
    --it;
    if (at < it->hi) return &*it;
    if (it->hi + (1ull << 20) < at) break;  // no entry this far back can still cover it
  }
  return nullptr;
}

}  // namespace fieldprof::tools
