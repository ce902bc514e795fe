// libfieldprof_audit.so: the rtld-audit module of the fieldprof runtime.
//
// Loaded with LD_AUDIT next to the companion (LD_PRELOAD=libfieldprof.so).
// It decides once per run whether to measure (consent, a free machine-wide
// slot, system load), collects the candidate APIs (functions that one
// object imports from another through its PLT), chooses k of them at
// random, and in la_symbind64 binds callers of a chosen API to one of the
// companion's stubs. Every other symbol is bound exactly as without
// fieldprof. When the run is not measured, la_objopen asks for no binding
// callbacks at all.
//
// Runs in its own link namespace with its own libc; uses no C++ runtime.
// Never writes to stdout/stderr; diagnostics go to $FIELDPROF_DEBUG.
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/runtime/runtime.h"

namespace {

// ---------------------------------------------------------------- settings

struct Settings {
  int consent = 0;
  int k = 2;
  int slots = 6;
  double max_load_per_cpu = 1.5;
  double overhead_budget = 0.01;
  char spool_dir[512] = "";
  uint64_t spool_cap_bytes = 16ull << 20;
  char allow_modules[1024] = "";  // comma-separated sonames; empty = all
  char deny_modules[1024] = "";
  char slot_dir[512] = "/tmp/fieldprof-slots";
  char force[1024] = "";  // "sym" or "module:sym", comma-separated
  uint64_t seed = 0;
  int have_seed = 0;
};

Settings s;
FpRunConfig run_config;
FILE* debug_log;

void Debug(const char* fmt, ...) {
  if (debug_log == nullptr) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(debug_log, fmt, ap);
  va_end(ap);
  fputc('\n', debug_log);
  fflush(debug_log);
}

bool ParseInt(const char* v, long lo, long hi, long* out) {
  char* end = nullptr;
  long x = strtol(v, &end, 10);
  if (end == v || *end != 0 || x < lo || x > hi) return false;
  *out = x;
  return true;
}

bool ParseDouble(const char* v, double lo, double hi, double* out) {
  char* end = nullptr;
  double x = strtod(v, &end);
  if (end == v || *end != 0 || !(x >= lo && x <= hi)) return false;
  *out = x;
  return true;
}

void CopyString(char* dst, size_t cap, const char* v) { snprintf(dst, cap, "%s", v); }

// One `name = value` setting. False: unknown name or bad value.
bool Apply(const char* name, const char* v) {
  long n = 0;
  if (!strcmp(name, "consent")) {
    if (!strcmp(v, "yes"))
      s.consent = 1;
    else if (!strcmp(v, "no"))
      s.consent = 0;
    else
      return false;
  } else if (!strcmp(name, "k")) {
    if (!ParseInt(v, 1, FP_MAX_APIS, &n)) return false;
    s.k = static_cast<int>(n);
  } else if (!strcmp(name, "slots")) {
    if (!ParseInt(v, 1, 1024, &n)) return false;
    s.slots = static_cast<int>(n);
  } else if (!strcmp(name, "max_load_per_cpu")) {
    if (!ParseDouble(v, 0, 1e6, &s.max_load_per_cpu)) return false;
  } else if (!strcmp(name, "overhead_budget")) {
    // A fraction of run time; above 1 the cap is off (tests, benchmarks).
    if (!ParseDouble(v, 0, 1000, &s.overhead_budget)) return false;
  } else if (!strcmp(name, "spool_dir")) {
    CopyString(s.spool_dir, sizeof s.spool_dir, v);
  } else if (!strcmp(name, "spool_cap_mib")) {
    if (!ParseInt(v, 0, 1 << 20, &n)) return false;
    s.spool_cap_bytes = static_cast<uint64_t>(n) << 20;
  } else if (!strcmp(name, "allow_modules")) {
    CopyString(s.allow_modules, sizeof s.allow_modules, v);
  } else if (!strcmp(name, "deny_modules")) {
    CopyString(s.deny_modules, sizeof s.deny_modules, v);
  } else if (!strcmp(name, "slot_dir")) {
    CopyString(s.slot_dir, sizeof s.slot_dir, v);
  } else if (!strcmp(name, "force")) {
    CopyString(s.force, sizeof s.force, v);
  } else if (!strcmp(name, "seed")) {
    char* end = nullptr;
    s.seed = strtoull(v, &end, 10);
    if (end == v || *end != 0) return false;
    s.have_seed = 1;
  } else {
    return false;
  }
  return true;
}

char* Trim(char* p) {
  while (*p == ' ' || *p == '\t') ++p;
  char* e = p + strlen(p);
  while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = 0;
  return p;
}

// The settings file the agent keeps (consent included). Missing or corrupt:
// false, and the run is not measured.
bool ReadSettingsFile(const char* path) {
  FILE* f = fopen(path, "re");
  if (f == nullptr) return false;
  char line[2048];
  bool ok = true;
  while (ok && fgets(line, sizeof line, f) != nullptr) {
    char* p = Trim(line);
    if (*p == 0 || *p == '#') continue;
    char* eq = strchr(p, '=');
    if (eq == nullptr) {
      ok = false;
      break;
    }
    *eq = 0;
    ok = Apply(Trim(p), Trim(eq + 1));
  }
  fclose(f);
  if (!ok) Debug("settings file %s is corrupt: not measuring", path);
  return ok;
}

bool LoadSettings() {
  char path[1024];
  const char* explicit_path = getenv("FIELDPROF_SETTINGS");
  const char* xdg = getenv("XDG_CONFIG_HOME");
  const char* home = getenv("HOME");
  if (explicit_path != nullptr) {
    CopyString(path, sizeof path, explicit_path);
  } else if (xdg != nullptr && *xdg) {
    snprintf(path, sizeof path, "%s/fieldprof/runtime.conf", xdg);
  } else if (home != nullptr) {
    snprintf(path, sizeof path, "%s/.config/fieldprof/runtime.conf", home);
  } else {
    path[0] = 0;
  }
  const bool file_ok = path[0] != 0 && ReadSettingsFile(path);
  // `fieldprof run` is an explicit request: consent for this run, and its
  // options come in FIELDPROF_* variables on top of the file.
  const char* run = getenv("FIELDPROF_RUN");
  if (run == nullptr || strcmp(run, "1") != 0) return file_ok && s.consent;
  static const struct {
    const char* env;
    const char* name;
  } kEnv[] = {{"FIELDPROF_K", "k"},
              {"FIELDPROF_SEED", "seed"},
              {"FIELDPROF_FORCE", "force"},
              {"FIELDPROF_SPOOL", "spool_dir"},
              {"FIELDPROF_SLOTS", "slots"},
              {"FIELDPROF_SLOT_DIR", "slot_dir"},
              {"FIELDPROF_MAX_LOAD", "max_load_per_cpu"},
              {"FIELDPROF_BUDGET", "overhead_budget"}};
  for (const auto& e : kEnv) {
    const char* v = getenv(e.env);
    if (v != nullptr && !Apply(e.name, v)) {
      Debug("bad %s=%s: not measuring", e.env, v);
      return false;
    }
  }
  return true;
}

void DefaultSpoolDir() {
  if (s.spool_dir[0]) return;
  const char* xdg = getenv("XDG_STATE_HOME");
  const char* home = getenv("HOME");
  if (xdg != nullptr && *xdg) {
    snprintf(s.spool_dir, sizeof s.spool_dir, "%s/fieldprof/spool", xdg);
  } else if (home != nullptr) {
    snprintf(s.spool_dir, sizeof s.spool_dir, "%s/.local/state/fieldprof/spool", home);
  }
}

// A machine-wide slot: one of `slots` lock files, held (flock) for the life
// of the process. A crashed process's lock goes away with it.
// mkdir -p: a configured slot_dir may be under a directory that does not
// exist yet.
void MakeDirs(const char* dir, mode_t mode) {
  char p[512];
  CopyString(p, sizeof p, dir);
  for (char* q = p + 1; *q; ++q) {
    if (*q != '/') continue;
    *q = 0;
    mkdir(p, 0755);
    *q = '/';
  }
  // Shared by every user's programs: sticky and world-writable like /tmp,
  // whatever the umask.
  if (mkdir(p, mode) == 0) chmod(p, mode);
}

int TakeSlot() {
  MakeDirs(s.slot_dir, 01777);
  char path[640];
  for (int i = 0; i < s.slots; ++i) {
    snprintf(path, sizeof path, "%s/slot-%d", s.slot_dir, i);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    close(fd);
  }
  return -1;
}

bool LoadTooHigh() {
  int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  const double load = strtod(buf, nullptr);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) cpus = 1;
  return load / static_cast<double>(cpus) > s.max_load_per_cpu;
}

// ------------------------------------------------------------ random choice

uint64_t rng_state;
uint64_t Next() {  // splitmix64
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }

// ------------------------------------------------------------ ELF helpers

struct DynInfo {
  const Elf64_Sym* symtab = nullptr;
  const char* strtab = nullptr;
  const Elf64_Rela* jmprel = nullptr;
  size_t jmprel_bytes = 0;
  const uint32_t* gnu_hash = nullptr;
  const char* soname = nullptr;
};

uintptr_t Adjust(const link_map* m, uintptr_t p) {
  // glibc relocates these d_ptr values in place; be safe if it did not.
  return p < m->l_addr ? p + m->l_addr : p;
}

DynInfo ReadDyn(const link_map* m) {
  DynInfo d;
  size_t soname_off = 0;
  bool have_soname = false;
  if (m->l_ld == nullptr) return d;
  for (const ElfW(Dyn)* e = m->l_ld; e->d_tag != DT_NULL; ++e) {
    switch (e->d_tag) {
      case DT_SYMTAB:
        d.symtab = reinterpret_cast<const Elf64_Sym*>(Adjust(m, e->d_un.d_ptr));
        break;
      case DT_STRTAB:
        d.strtab = reinterpret_cast<const char*>(Adjust(m, e->d_un.d_ptr));
        break;
      case DT_JMPREL:
        d.jmprel = reinterpret_cast<const Elf64_Rela*>(Adjust(m, e->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        d.jmprel_bytes = e->d_un.d_val;
        break;
      case DT_GNU_HASH:
        d.gnu_hash = reinterpret_cast<const uint32_t*>(Adjust(m, e->d_un.d_ptr));
        break;
      case DT_SONAME:
        soname_off = e->d_un.d_val;
        have_soname = true;
        break;
      default:
        break;
    }
  }
  if (have_soname && d.strtab != nullptr) d.soname = d.strtab + soname_off;
  return d;
}

uint32_t GnuHash(const char* name) {
  uint32_t h = 5381;
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(name); *p; ++p)
    h = h * 33 + *p;
  return h;
}

// Address of a defined symbol of `m`, through its GNU hash table.
uintptr_t LookUp(const link_map* m, const DynInfo& d, const char* name) {
  if (d.gnu_hash == nullptr || d.symtab == nullptr || d.strtab == nullptr) return 0;
  const uint32_t nbuckets = d.gnu_hash[0], symoffset = d.gnu_hash[1], bloom_size = d.gnu_hash[2];
  const uint64_t* bloom = reinterpret_cast<const uint64_t*>(d.gnu_hash + 4);
  const uint32_t* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
  const uint32_t* chain = buckets + nbuckets;
  const uint32_t h = GnuHash(name);
  uint32_t i = buckets[h % nbuckets];
  if (i < symoffset) return 0;
  for (;; ++i) {
    const uint32_t ch = chain[i - symoffset];
    if ((ch | 1) == (h | 1)) {
      const Elf64_Sym& sym = d.symtab[i];
      if (sym.st_shndx != SHN_UNDEF && !strcmp(d.strtab + sym.st_name, name)) {
        return m->l_addr + sym.st_value;
      }
    }
    if (ch & 1) return 0;
  }
}

const char* BaseName(const char* p) {
  const char* slash = strrchr(p, '/');
  return slash ? slash + 1 : p;
}

// Hex GNU build id from the object's program headers, or "unknown".
const char* BuildId(const link_map* m) {
  if (m->l_addr == 0) return "unknown";
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(m->l_addr);
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return "unknown";
  const auto* ph = reinterpret_cast<const Elf64_Phdr*>(m->l_addr + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(m->l_addr + ph[i].p_vaddr);
    const char* end = p + ph[i].p_memsz;
    while (p + sizeof(Elf64_Nhdr) <= end) {
      const auto* n = reinterpret_cast<const Elf64_Nhdr*>(p);
      const char* name = p + sizeof(Elf64_Nhdr);
      const char* desc = name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
        char* hex = static_cast<char*>(malloc(2 * n->n_descsz + 1));
        if (hex == nullptr) return "unknown";
        for (uint32_t j = 0; j < n->n_descsz; ++j) {
          snprintf(hex + 2 * j, 3, "%02x", static_cast<unsigned char>(desc[j]));
        }
        return hex;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  return "unknown";
}

// ------------------------------------------------------------ objects

struct Object {
  link_map* map;
  const char* module;    // soname or file name
  const char* build_id;  // computed on first bind
  bool ours;             // the companion or ld.so: never a candidate, never bound
};

constexpr int kMaxObjects = 1024;
Object objects[kMaxObjects];
int nobjects;

link_map* companion;
DynInfo companion_dyn;
FpConfigureFn configure_fn;
FpBindFn bind_fn;
FpRetireFn retire_fn;
FpAddGotFn add_got_fn;
FpMeasuringFn measuring_fn;

// Candidate names (copied), deduplicated with an open-addressing set that
// grows with the program (a fixed table big enough for large programs cost
// every small one ~130 page faults: hashed inserts touch all of its pages).
struct SeenName {
  uint64_t hash;
  const char* name;  // nullptr: free
};
constexpr size_t kMaxNames = size_t{1} << 20;
SeenName* seen_names;
size_t seen_cap, seen_size;
uint64_t candidates_seen;
const char** pending;  // names not yet offered to the choice
size_t npending, pending_cap;

struct Choice {
  const char* symbol;
  const char* module;  // forced module, or null
  int bound_object;    // index into objects, -1 until bound
  bool retired;
};
Choice chosen[FP_MAX_APIS];
int nchosen;

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

// Functions a return-address wrapper must never sit in front of, whatever
// the choice or --force says:
// - they return twice (vfork: the child returns through the stub on the
//   parent's stack and consumes its entry; setjmp/getcontext: the saved
//   return address would be the stub's);
// - they look at their own return address to find their caller (dlopen
//   searches the caller's RUNPATH, dlsym(RTLD_NEXT) starts after the caller):
//   through the stub the caller would look like libfieldprof.
bool UnsafeToWrap(const char* name) {
  static const char* const kNames[] = {
      "vfork",       "__vfork",    "clone",       "__clone",    "clone3",
      "setjmp",      "_setjmp",    "__setjmp",    "sigsetjmp",  "__sigsetjmp",
      "savectx",     "getcontext", "swapcontext", "setcontext", "makecontext",
      "dlopen",      "dlmopen",    "dlsym",       "dlvsym",     "__libc_dlopen_mode",
      "__libc_dlsym"};
  for (const char* n : kNames) {
    if (!strcmp(name, n)) return true;
  }
  return false;
}

bool Excluded(const char* name) {
  // Names the companion defines bind to the companion (allocation, I/O,
  // unwinder hooks): fieldprof's own code is never measured.
  if (companion != nullptr && LookUp(companion, companion_dyn, name) != 0) return true;
  return !strncmp(name, "_Unwind", 7) || !strncmp(name, "__cxa_", 6) ||
         !strcmp(name, "__tls_get_addr") || !strncmp(name, "_dl_", 4) ||
         !strcmp(name, "__libc_start_main") || UnsafeToWrap(name);
}

bool GrowSeen() {
  const size_t cap = seen_cap == 0 ? 1024 : seen_cap * 2;
  auto* fresh = static_cast<SeenName*>(calloc(cap, sizeof(SeenName)));
  if (fresh == nullptr) return false;
  for (size_t i = 0; i < seen_cap; ++i) {
    if (seen_names[i].name == nullptr) continue;
    size_t j = seen_names[i].hash & (cap - 1);
    while (fresh[j].name != nullptr) j = (j + 1) & (cap - 1);
    fresh[j] = seen_names[i];
  }
  free(seen_names);
  seen_names = fresh;
  seen_cap = cap;
  return true;
}

void AddCandidate(const char* name) {
  if (seen_size >= kMaxNames) return;
  if ((seen_size + 1) * 2 > seen_cap && !GrowSeen()) return;
  if (npending == pending_cap) {
    const size_t cap = pending_cap == 0 ? 512 : pending_cap * 2;
    auto* p = static_cast<const char**>(realloc(pending, cap * sizeof(const char*)));
    if (p == nullptr) return;
    pending = p;
    pending_cap = cap;
  }
  const uint64_t h = GnuHash(name);
  size_t i = h & (seen_cap - 1);
  for (; seen_names[i].name != nullptr; i = (i + 1) & (seen_cap - 1)) {
    if (seen_names[i].hash == h && !strcmp(seen_names[i].name, name)) return;
  }
  const char* copy = strdup(name);
  if (copy == nullptr) return;
  seen_names[i] = {h, copy};
  ++seen_size;
  pending[npending++] = copy;
}

void CollectImports(const link_map* m) {
  DynInfo d = ReadDyn(m);
  if (d.jmprel == nullptr || d.symtab == nullptr || d.strtab == nullptr) return;
  const size_t n = d.jmprel_bytes / sizeof(Elf64_Rela);
  for (size_t i = 0; i < n; ++i) {
    const Elf64_Rela& r = d.jmprel[i];
    if (ELF64_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT) continue;
    const Elf64_Sym& sym = d.symtab[ELF64_R_SYM(r.r_info)];
    if (sym.st_shndx != SHN_UNDEF || ELF64_ST_TYPE(sym.st_info) == STT_GNU_IFUNC) continue;
    const char* name = d.strtab + sym.st_name;
    if (*name) AddCandidate(name);
  }
}

// Reservoir sampling over all candidates seen so far (those of objects
// loaded later by dlopen included): every candidate is chosen with the same
// probability k/n. A replaced choice that is already bound stops measuring.
void ChooseFromPending() {
  for (size_t i = 0; i < npending; ++i) {
    const char* name = pending[i];
    if (Excluded(name)) continue;
    ++candidates_seen;
    if (nchosen < s.k) {
      chosen[nchosen++] = {name, nullptr, -1, false};
      continue;
    }
    const uint64_t j = Below(candidates_seen);
    if (j < static_cast<uint64_t>(s.k) && chosen[j].module == nullptr) {
      if (chosen[j].bound_object >= 0 && retire_fn != nullptr) retire_fn(static_cast<int>(j));
      if (chosen[j].bound_object >= 0) {
        chosen[j].retired = true;  // its stub stays bound; slot not reused
        continue;
      }
      chosen[j] = {name, nullptr, -1, false};
    }
  }
  npending = 0;
}

void ApplyForced() {
  for (char* p = s.force; *p && nchosen < FP_MAX_APIS;) {
    char* comma = strchr(p, ',');
    if (comma) *comma = 0;
    char* colon = strchr(p, ':');
    if (UnsafeToWrap(colon ? colon + 1 : p)) {
      Debug("not measuring %s: it cannot be wrapped safely", p);
    } else if (colon) {
      *colon = 0;
      chosen[nchosen++] = {strdup(colon + 1), strdup(p), -1, false};
    } else if (*p) {
      chosen[nchosen++] = {strdup(p), "", -1, false};
    }
    if (!comma) break;
    p = comma + 1;
  }
  if (nchosen > 0 && s.k < nchosen) s.k = nchosen;
}

int FindObject(uintptr_t cookie) {
  for (int i = 0; i < nobjects; ++i) {
    if (reinterpret_cast<uintptr_t>(objects[i].map) == cookie) return i;
  }
  return -1;
}

// The caller's GOT entries for `symname` (its PLT relocations), so the
// companion can point them at the API once the slot stops measuring.
void TellGots(uintptr_t refcook, int slot, const char* symname) {
  if (add_got_fn == nullptr) return;
  const auto* m = reinterpret_cast<const link_map*>(refcook);
  const DynInfo d = ReadDyn(m);
  if (d.jmprel == nullptr || d.symtab == nullptr || d.strtab == nullptr) return;
  const size_t n = d.jmprel_bytes / sizeof(Elf64_Rela);
  for (size_t i = 0; i < n; ++i) {
    const Elf64_Rela& r = d.jmprel[i];
    if (ELF64_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT) continue;
    if (strcmp(d.strtab + d.symtab[ELF64_R_SYM(r.r_info)].st_name, symname) != 0) continue;
    add_got_fn(slot, reinterpret_cast<uintptr_t*>(m->l_addr + r.r_offset));
  }
}

bool decided;
bool measuring;
bool configured;

void Decide() {
  decided = true;
  const char* dbg = getenv("FIELDPROF_DEBUG");
  if (dbg != nullptr && *dbg) debug_log = fopen(dbg, "ae");
  run_config.slot_fd = -1;
  if (!LoadSettings()) return;  // no consent, or bad settings: nothing at all
  DefaultSpoolDir();
  run_config.spool_dir = s.spool_dir;
  run_config.spool_cap_bytes = s.spool_cap_bytes;
  run_config.overhead_budget = s.overhead_budget;
  run_config.debug_log = dbg;
  run_config.slot_fd = TakeSlot();
  if (run_config.slot_fd < 0) {
    run_config.refused = 1;
    Debug("no free slot in %s: not measuring", s.slot_dir);
    return;
  }
  if (LoadTooHigh()) {
    run_config.refused = 2;
    close(run_config.slot_fd);
    run_config.slot_fd = -1;
    Debug("system load above %.2f per CPU: not measuring", s.max_load_per_cpu);
    return;
  }
  if (s.have_seed) {
    rng_state = s.seed;
  } else if (getrandom(&rng_state, sizeof rng_state, GRND_NONBLOCK) != sizeof rng_state) {
    rng_state = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull ^
                reinterpret_cast<uintptr_t>(&rng_state);
  }
  run_config.active = 1;
  measuring = true;
  ApplyForced();
  Debug("measuring this run: k=%d, overhead budget %g, allow '%s', deny '%s'", s.k,
        s.overhead_budget, s.allow_modules, s.deny_modules);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) unsigned la_version(unsigned version) {
  if (!decided) Decide();
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

__attribute__((visibility("default"))) unsigned la_objopen(link_map* map, Lmid_t lmid,
                                                           uintptr_t* cookie) {
  *cookie = reinterpret_cast<uintptr_t>(map);
  const bool refused_but_reporting = run_config.refused != 0;
  if (lmid != LM_ID_BASE || (!measuring && !refused_but_reporting)) return 0;
  const char* name = map->l_name ? map->l_name : "";
  const char* base = BaseName(name);
  if (!strcmp(base, "libfieldprof.so")) {
    companion = map;
    companion_dyn = ReadDyn(map);
    configure_fn = reinterpret_cast<FpConfigureFn>(LookUp(map, companion_dyn, FP_SYM_CONFIGURE));
    bind_fn = reinterpret_cast<FpBindFn>(LookUp(map, companion_dyn, FP_SYM_BIND));
    retire_fn = reinterpret_cast<FpRetireFn>(LookUp(map, companion_dyn, FP_SYM_RETIRE));
    add_got_fn = reinterpret_cast<FpAddGotFn>(LookUp(map, companion_dyn, FP_SYM_ADD_GOT));
    measuring_fn = reinterpret_cast<FpMeasuringFn>(LookUp(map, companion_dyn, FP_SYM_MEASURING));
    // Now, not at la_activity: the initial objects are relocated (and
    // BIND_NOW symbols bound) before the first "consistent" event.
    if (configure_fn != nullptr) {
      configured = true;
      configure_fn(&run_config);
    }
    return 0;
  }
  if (!measuring) return 0;
  const bool is_ldso = !strncmp(base, "ld-linux", 8);
  if (nobjects < kMaxObjects) {
    DynInfo d = ReadDyn(map);
    objects[nobjects++] = {map, d.soname ? d.soname : (*base ? base : "main"), nullptr, is_ldso};
  }
  if (is_ldso) return 0;
  CollectImports(map);
  return LA_FLG_BINDTO | LA_FLG_BINDFROM;
}

__attribute__((visibility("default"))) void la_activity(uintptr_t*, unsigned flag) {
  if (flag != LA_ACT_CONSISTENT) return;
  if (!configured && (measuring || run_config.refused)) {
    configured = true;
    if (configure_fn == nullptr) {
      // No companion preloaded: nothing can be measured or reported.
      Debug("libfieldprof.so is not preloaded: not measuring");
      measuring = false;
      if (run_config.slot_fd >= 0) close(run_config.slot_fd);
      run_config.slot_fd = -1;
      return;
    }
    configure_fn(&run_config);
  }
  if (measuring && npending > 0) ChooseFromPending();
}

__attribute__((visibility("default"))) uintptr_t la_symbind64(Elf64_Sym* sym, unsigned,
                                                              uintptr_t* refcook,
                                                              uintptr_t* defcook, unsigned*,
                                                              const char* symname) {
  if (!measuring || bind_fn == nullptr || *refcook == *defcook) return sym->st_value;
  // New candidates (objects just loaded) join the choice before their
  // symbols are bound.
  if (npending > 0) ChooseFromPending();
  for (int c = 0; c < nchosen; ++c) {
    Choice& ch = chosen[c];
    if (ch.retired || strcmp(ch.symbol, symname) != 0) continue;
    const int def = FindObject(*defcook);
    if (def < 0 || objects[def].ours) return sym->st_value;
    Object& o = objects[def];
    if (ch.module != nullptr && ch.module[0] && strcmp(ch.module, o.module) != 0) {
      return sym->st_value;
    }
    if (ch.bound_object >= 0 && ch.bound_object != def) return sym->st_value;
    // Its overhead budget is spent: new callers go straight to the API.
    if (ch.bound_object >= 0 && measuring_fn != nullptr && !measuring_fn(c)) return sym->st_value;
    if (s.allow_modules[0] && !InList(s.allow_modules, o.module)) return sym->st_value;
    if (s.deny_modules[0] && InList(s.deny_modules, o.module)) return sym->st_value;
    if (o.build_id == nullptr) o.build_id = BuildId(o.map);
    ch.bound_object = def;
    FpApi api = {o.module, o.build_id, ch.symbol, sym->st_value};
    const uintptr_t stub = bind_fn(c, &api);
    Debug("bound %s:%s (build %s) to slot %d", o.module, ch.symbol, o.build_id, c);
    if (stub == 0) return sym->st_value;
    TellGots(*refcook, c, symname);
    return stub;
  }
  return sym->st_value;
}

}  // extern "C"
