// Arming (arming.h).
#include "agent/preload/points/arming.h"

#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fieldprof::points {
namespace {

std::mutex g_arm_mu;  // arming (load, dlopen)
// Semaphores raised, with their modules; the modules read (ModuleKey).
// A module closed is forgotten (ForgetClosedModules), so that opened again
// it is armed again.
std::unordered_map<uintptr_t, std::string>* g_armed;
std::unordered_set<std::string>* g_scanned;
// Points placed by configuration (--at): the modules the plan names, and
// whether one of them is loaded. The file and the drain thread wait for
// that, so a process that never loads one (the shell around the program)
// leaves no file.
std::unordered_set<std::string>* g_placed_modules;
bool g_placed_loaded = false;

// DT_SONAME of the dynamic section `dyn`, whose strings are `strs`; "" if
// none. `read_at(p, n, offset)` reads the file.
template <typename ReadAt>
std::string SoName(const ReadAt& read_at, const ElfW(Shdr) & dyn, const ElfW(Shdr) & strs) {
  if (dyn.sh_size > (1u << 20) || strs.sh_size > (1u << 24)) return "";
  std::vector<ElfW(Dyn)> d(dyn.sh_size / sizeof(ElfW(Dyn)));
  if (!read_at(d.data(), d.size() * sizeof(ElfW(Dyn)), static_cast<off_t>(dyn.sh_offset))) {
    return "";
  }
  for (const ElfW(Dyn) & e : d) {
    if (e.d_tag == DT_NULL) break;
    if (e.d_tag != DT_SONAME || e.d_un.d_val >= strs.sh_size) continue;
    char name[256] = {};
    const size_t n = std::min<size_t>(sizeof name - 1, strs.sh_size - e.d_un.d_val);
    if (!read_at(name, n, static_cast<off_t>(strs.sh_offset + e.d_un.d_val))) return "";
    return std::string(name, strnlen(name, n));
  }
  return "";
}

// The fieldprof:point semaphores in the USDT notes of the ELF file at
// `path`, as addresses in the file (link-time); and its DT_SONAME, when
// `soname` is given and it has one.
std::vector<uint64_t> PointSemaphores(const char* path, std::string* soname) {
  std::vector<uint64_t> out;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  ElfW(Ehdr) eh;
  std::vector<ElfW(Shdr)> sh;
  std::vector<char> names;
  const auto read_at = [fd](void* p, size_t n, off_t off) {
    return pread(fd, p, n, off) == static_cast<ssize_t>(n);
  };
  if (read_at(&eh, sizeof eh, 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(ElfW(Shdr)) &&
      eh.e_shnum > 0 && eh.e_shnum < 65280 && eh.e_shstrndx < eh.e_shnum) {
    sh.resize(eh.e_shnum);
    if (read_at(sh.data(), sizeof(ElfW(Shdr)) * sh.size(), static_cast<off_t>(eh.e_shoff))) {
      const ElfW(Shdr)& strs = sh[eh.e_shstrndx];
      names.resize(strs.sh_size + 1);
      if (strs.sh_size < (1u << 24) &&
          read_at(names.data(), strs.sh_size, static_cast<off_t>(strs.sh_offset))) {
        names.back() = 0;
        for (const ElfW(Shdr) & s : sh) {
          if (s.sh_type == SHT_DYNAMIC && soname != nullptr && s.sh_link < sh.size()) {
            *soname = SoName(read_at, s, sh[s.sh_link]);
          }
          if (s.sh_type != SHT_NOTE || s.sh_name >= strs.sh_size ||
              strcmp(names.data() + s.sh_name, ".note.stapsdt") != 0 || s.sh_size > (1u << 26)) {
            continue;
          }
          std::vector<char> note(s.sh_size);
          if (!read_at(note.data(), note.size(), static_cast<off_t>(s.sh_offset))) continue;
          for (size_t at = 0; at + 12 <= note.size();) {
            uint32_t namesz, descsz, type;
            memcpy(&namesz, &note[at], 4);
            memcpy(&descsz, &note[at + 4], 4);
            memcpy(&type, &note[at + 8], 4);
            const size_t name_at = at + 12;
            const size_t desc_at = name_at + ((namesz + 3) & ~size_t{3});
            const size_t next = desc_at + ((descsz + 3) & ~size_t{3});
            if (next > note.size() || next <= at) break;
            if (type == 3 && namesz == 8 && memcmp(&note[name_at], "stapsdt", 8) == 0 &&
                descsz > 24) {
              uint64_t sem;
              memcpy(&sem, &note[desc_at + 16], 8);
              const std::string text(&note[desc_at + 24], descsz - 24);
              const std::string provider = text.c_str();
              const std::string probe = text.c_str() + std::min(text.size(), provider.size() + 1);
              if (provider == "fieldprof" && probe == "point" && sem != 0) out.push_back(sem);
            }
            at = next;
          }
        }
      }
    }
  }
  close(fd);
  return out;
}

// A loaded module as the recorder knows it: its path and load bias.
// The file a loaded module was read from: the program has no name in the
// list.
bool IsProgram(const dl_phdr_info* info) {
  return info->dlpi_name == nullptr || info->dlpi_name[0] == 0;
}
const char* ModulePath(const dl_phdr_info* info) {
  return IsProgram(info) ? "/proc/self/exe" : info->dlpi_name;
}
std::string ModuleKey(const dl_phdr_info* info) {
  return std::string(ModulePath(info)) + "@" + std::to_string(info->dlpi_addr);
}

// Whether the loaded module's dynamic symbols name fieldprof_point_hit,
// read in memory: a module with points refers to it (points.h), and one
// that does not can call no recorder, armed or not. Only such modules'
// files are read for their notes, and a process whose modules have none
// (every shell, compiler pass and coreutil under record) opens no file:
// that was most of what the recorder cost a short process. True when the
// module has no dynamic string table to look in; false for the recorder's
// own module.
bool NamesPointHit(const dl_phdr_info* info) {
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (dyn == nullptr) return true;
  // The recorder itself defines it, and has no points.
  const auto self = reinterpret_cast<uintptr_t>(&NamesPointHit);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && self >= lo && self - lo < ph.p_memsz) return false;
  }
  uintptr_t strtab = 0;
  size_t strsz = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
    if (d->d_tag == DT_STRSZ) strsz = d->d_un.d_val;
  }
  if (strtab == 0 || strsz == 0) return true;
  // The dynamic linker has made DT_STRTAB an address in most modules; the
  // vDSO's stays an offset from its base. Whichever lies in one of the
  // module's loaded segments, whole; neither: its file is read.
  const auto loaded = [info, strsz](uintptr_t at) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const ElfW(Phdr)& ph = info->dlpi_phdr[i];
      const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
      if (ph.p_type == PT_LOAD && at >= lo && at - lo <= ph.p_memsz &&
          strsz <= ph.p_memsz - (at - lo)) {
        return true;
      }
    }
    return false;
  };
  if (!loaded(strtab)) strtab += info->dlpi_addr;
  if (!loaded(strtab)) return true;
  // The name with the NUL that ends it: a longer name may end in it (a
  // linker merges such tails), which only costs a read of the file.
  static constexpr char kName[] = "fieldprof_point_hit";
  return memmem(reinterpret_cast<const void*>(strtab), strsz, kName, sizeof kName) != nullptr;
}

int ArmModule(dl_phdr_info* info, size_t, void*) {
  const char* path = ModulePath(info);
  const std::string key = ModuleKey(info);
  if (!g_scanned->insert(key).second) return 0;
  const bool placing = g_placed_modules != nullptr && !g_placed_loaded;
  if (!placing && !NamesPointHit(info)) return 0;
  std::string soname;
  for (uint64_t sem : PointSemaphores(path, placing ? &soname : nullptr)) {
    const uintptr_t at = info->dlpi_addr + sem;
    if (!g_armed->try_emplace(at, key).second) continue;
    auto* s = reinterpret_cast<volatile unsigned short*>(at);
    *s = static_cast<unsigned short>(*s + 1);
  }
  if (placing) {
    // A module as the runtime's plan may name it: a library by its soname
    // (or its file's name), the program by its file's name or as "main".
    const bool program = IsProgram(info);
    const char* slash = strrchr(path, '/');
    const std::string file = program ? ProgramName() : slash != nullptr ? slash + 1 : path;
    for (const std::string& name : {file, soname, std::string(program ? "main" : "")}) {
      if (!name.empty() && g_placed_modules->count(name) != 0) g_placed_loaded = true;
    }
  }
  return 0;
}

// The modules the --at plan at `path` names ("MODULE:SYMBOL" lines).
std::unordered_set<std::string>* ReadPlacedModules(const char* path) {
  auto* out = new std::unordered_set<std::string>();
  FILE* f = path != nullptr ? fopen(path, "re") : nullptr;
  if (f == nullptr) return out;
  char line[4096];
  while (fgets(line, sizeof line, f) != nullptr) {
    if (const char* colon = strchr(line, ':'); colon != nullptr && colon != line) {
      out->emplace(line, static_cast<size_t>(colon - line));
    }
  }
  fclose(f);
  return out;
}

}  // namespace

// The program's file, as /proc/self/exe names it; empty when it cannot.
std::string ProgramPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string ProgramName() {
  const std::string path = ProgramPath();
  if (path.empty()) return "?";
  return path.substr(path.rfind('/') + 1);
}

void StartArming() {
  g_armed = new std::unordered_map<uintptr_t, std::string>();
  g_scanned = new std::unordered_set<std::string>();
}

void PlaceModulesOf(const char* plan) { g_placed_modules = ReadPlacedModules(plan); }

// Arms what is loaded; true when some module has points, or one of the
// modules the --at plan names is loaded.
bool ArmAll() {
  std::lock_guard<std::mutex> l(g_arm_mu);
  if (g_armed == nullptr) return false;
  dl_iterate_phdr(ArmModule, nullptr);
  return !g_armed->empty() || g_placed_loaded;
}

// After a dlclose: the modules no longer loaded are forgotten, with their
// semaphores, so that one opened again (at the same address, say) is read
// and armed again.
void ForgetClosedModules() {
  std::lock_guard<std::mutex> l(g_arm_mu);
  if (g_armed == nullptr) return;
  std::unordered_set<std::string> loaded;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        static_cast<std::unordered_set<std::string>*>(out)->insert(ModuleKey(info));
        return 0;
      },
      &loaded);
  std::erase_if(*g_scanned, [&](const std::string& key) { return loaded.count(key) == 0; });
  std::erase_if(*g_armed, [&](const auto& armed) { return loaded.count(armed.second) == 0; });
}

}  // namespace fieldprof::points
