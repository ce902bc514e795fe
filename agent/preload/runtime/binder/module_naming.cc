// The module name a key may carry, and whether a module is the system's
// code (docs/privacy.md): nothing that identifies a person or a machine
// leaves. A library is named by its soname or file name (elf_object.h
// ModuleName); the program's own exports by its executable's file name
// only when the executable belongs to the system, else "main".
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/sys.h"
#include "common/system/system_code_list.h"
#include "common/system/system_path.h"
#include "common/wire/key_rules.h"

namespace fieldprof::rt {

namespace {

// Whether `path` belongs to the system (common/system/system_path.h).
bool SystemExecutable(char* path, size_t len) {
  return SystemPath(path, len, [](const char* p, struct stat* st) { return sys::Stat(p, st); });
}

// The module name of the program's own exports (python3's PyErr_Occurred):
// its executable's file name when the executable belongs to the system
// (python3.11) or the volunteer shares it by that name, else "main": the
// name of a user's own program stays home.
const char* MainModule() {
  static char name[256];
  if (name[0] != 0) return name;
  CopyName(name, sizeof name, "main");
  char path[4096];
  const long n = sys::Readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return name;
  path[n] = 0;
  const char* base = strrchr(path, '/') + 1;
  const char* share = g_binder.share_modules;
  const bool shared = share != nullptr && share[0] != 0 && InList(share, base);
  if (!shared && !SystemExecutable(path, static_cast<size_t>(n))) return name;
  if (key_rules::ModuleOk(base, strlen(base))) CopyName(name, sizeof name, base);
  return name;
}

// The agent's list of the system's code, mapped at the first ask (in a
// measured run, at the first call of an API or the first stack folded):
// an open, an fstat and a mapping of ~80 KB, read where a binary search
// lands. Not there, or not a list: nothing is the system's code.
void MapSystemCode() {
  g_binder.system_ids_read = 2;
  const char* path = g_binder.system_code;
  if (path == nullptr || path[0] != '/') return;
  const int fd = sys::OpenAt(AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat st;
  void* map = MAP_FAILED;
  if (sys::Fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  }
  sys::Close(fd);
  if (map == MAP_FAILED) return;
  uint32_t n = 0;
  const unsigned char* entries =
      system_code_list::Entries(map, static_cast<size_t>(st.st_size), &n);
  if (entries == nullptr) {
    munmap(map, static_cast<size_t>(st.st_size));
    return;
  }
  g_binder.system_ids = entries;
  g_binder.nsystem_ids = n;
  g_binder.system_ids_read = 1;
}

}  // namespace

bool InSystemCode(const ElfObject& e) {
  if (g_binder.system_ids_read == 0) MapSystemCode();
  if (g_binder.system_ids_read != 1) return false;
  size_t n = 0;
  const unsigned char* id = BuildIdBytes(e, &n);
  if (id == nullptr) return false;
  unsigned char entry[system_code_list::kEntryBytes];
  system_code_list::EntryOf(id, n, entry);
  return system_code_list::Contains(g_binder.system_ids, g_binder.nsystem_ids, entry);
}

bool SharedByVolunteer(const Object* def, const char* module) {
  const char* list = g_binder.share_modules;
  if (list == nullptr || list[0] == 0) return false;
  if (module != nullptr && InList(list, module)) return true;
  return def != nullptr && def->elf.path != nullptr && def->elf.path[0] == 0 && def->initial &&
         InList(list, ProgramFileName());
}

bool SystemFile(const char* path) {
  char copy[4096];
  const size_t n = strlen(path);
  if (n + 1 > sizeof copy) return false;
  memcpy(copy, path, n + 1);
  return SystemExecutable(copy, n);
}

bool SystemModule(const Object* def) {
  if (def == nullptr || def->vdso) return false;
  // Once per object (two stats): a program calls hundreds of APIs of a
  // few libraries.
  uint8_t& seen = g_binder.objects[def - g_binder.objects].system;
  if (seen == 0) {
    bool system;
    if (def->elf.path != nullptr && def->elf.path[0] == 0 && def->initial &&
        (def->elf.soname == nullptr || def->elf.soname[0] == 0)) {
      system = strcmp(MainModule(), "main") != 0;  // the program: its executable's
    } else {
      system = def->elf.path != nullptr && def->elf.path[0] == '/' && SystemFile(def->elf.path);
    }
    system = system && InSystemCode(def->elf);
    seen = system ? 1 : 2;
  }
  return seen == 1;
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

bool ModuleAllowed(const char* module) {
  return !(g_binder.allow_modules[0] && !InList(g_binder.allow_modules, module)) &&
         !(g_binder.deny_modules[0] && InList(g_binder.deny_modules, module));
}

bool CopyName(char* dst, size_t cap, const char* src) {
  const size_t n = strlen(src);
  if (n + 1 > cap) return false;
  memcpy(dst, src, n + 1);
  return true;
}

void KeyBuildId(const Object* def, char* out, size_t cap) {
  if (def != nullptr) BuildIdHex(def->elf, out, cap);
  if (def == nullptr || !key_rules::ModuleVersionOk(out, strlen(out)))
    CopyName(out, cap, "unknown");
}

}  // namespace fieldprof::rt
