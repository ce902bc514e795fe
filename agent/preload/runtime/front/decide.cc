#include "agent/preload/runtime/front/decide.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "agent/preload/runtime/runtime.h"
#include "agent/preload/runtime/sys.h"
#include "agent/preload/runtime/text.h"
#include "common/settings/settings_rules.h"

namespace fieldprof::rt {
namespace {

static_assert(FP_MAX_APIS == settings_rules::kMaxApis);

bool ParseInt(const char* v, int64_t lo, int64_t hi, int64_t* out) {
  uint64_t x = 0;
  if (!ParseU64(v, v + Len(v), &x) || x > static_cast<uint64_t>(hi) ||
      static_cast<int64_t>(x) < lo) {
    return false;
  }
  *out = static_cast<int64_t>(x);
  return true;
}

// One `name = value` setting; false for an unknown name or a bad value.
// The names and ranges are common/settings/settings_rules.h's, as the agent's.
bool Apply(RunSettings& s, const char* name, const char* v) {
  using settings_rules::Kind;
  using settings_rules::Setting;
  const settings_rules::Rule* r = settings_rules::FindRule(name);
  if (r == nullptr) return false;
  int64_t n = 0;
  double d = 0;
  uint64_t u = 0;
  switch (r->kind) {
    case Kind::kYesNo:
      if (!Eq(v, "yes") && !Eq(v, "no")) return false;
      break;
    case Kind::kInt:
      if (!ParseInt(v, r->lo, r->hi, &n)) return false;
      break;
    case Kind::kDouble:
      if (!ParseDecimal(v, v + Len(v), &d) || !settings_rules::InRange(*r, d)) return false;
      break;
    case Kind::kU64:
      if (!ParseU64(v, v + Len(v), &u)) return false;
      break;
    case Kind::kText:
      if (!settings_rules::TextFits(*r, Len(v))) return false;
      break;
  }
  switch (r->setting) {
    case Setting::kConsent:
      s.consent = Eq(v, "yes");
      return true;
    case Setting::kK:
      s.k = static_cast<int>(n);
      return true;
    case Setting::kSlots:
      s.slots = static_cast<int>(n);
      return true;
    case Setting::kMaxLoadPerCpu:
      s.max_load_per_cpu = d;
      return true;
    case Setting::kOverheadBudget:
      s.overhead_budget = d;
      return true;
    case Setting::kSampleFraction:
      s.sample_fraction = d;
      return true;
    case Setting::kMaxRunsPerMinute:
      s.max_runs_per_minute = n;
      return true;
    case Setting::kSpoolCapMib:
      s.spool_cap_bytes = static_cast<uint64_t>(n) << 20;
      return true;
    case Setting::kTscHz:
      s.tsc_hz = static_cast<uint64_t>(n);
      return true;
    case Setting::kSeed:
      s.seed = u;
      s.have_seed = true;
      return true;
    case Setting::kSpoolDir:
      return Copy(s.spool_dir, sizeof s.spool_dir, v);
    case Setting::kAllowModules:
      return Copy(s.allow_modules, sizeof s.allow_modules, v);
    case Setting::kDenyModules:
      return Copy(s.deny_modules, sizeof s.deny_modules, v);
    case Setting::kSlotDir:
      return Copy(s.slot_dir, sizeof s.slot_dir, v);
    case Setting::kForce:
      return Copy(s.force, sizeof s.force, v);
    case Setting::kPoints:
      return Copy(s.points, sizeof s.points, v);
    case Setting::kLiveDir:
      return Copy(s.live_dir, sizeof s.live_dir, v);
    case Setting::kStackHz:
      s.stack_hz = static_cast<int>(n);
      return true;
    case Setting::kSystemCode:
      return Copy(s.system_code, sizeof s.system_code, v);
    case Setting::kShareModules:
      return Copy(s.share_modules, sizeof s.share_modules, v);
  }
  return false;
}

bool Blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

char* Trim(char* p) {
  while (Blank(*p)) ++p;
  char* e = p + Len(p);
  while (e > p && Blank(e[-1])) *--e = 0;
  return p;
}

// Each "name = value" line of a settings file's text (NUL-terminated,
// split in place; blank lines and '#' comments skipped) to `f(name,
// value)`, trimmed, until it returns false. kCorrupt: a line with no '='.
enum class Lines { kAll, kStopped, kCorrupt };
template <typename F>
Lines EachSetting(char* text, F f) {
  for (char* line = text; line != nullptr && *line;) {
    char* nl = line;
    while (*nl != 0 && *nl != '\n') ++nl;
    char* next = *nl != 0 ? nl + 1 : nullptr;
    *nl = 0;
    char* p = Trim(line);
    line = next;
    if (*p == 0 || *p == '#') continue;
    char* eq = p;
    while (*eq != 0 && *eq != '=') ++eq;
    if (*eq == 0) return Lines::kCorrupt;
    *eq = 0;
    if (!f(Trim(p), Trim(eq + 1))) return Lines::kStopped;
  }
  return Lines::kAll;
}

// The settings file's text (NUL-terminated, parsed in place; `path` names
// it in the debug log). Corrupt: false (not measured).
bool ParseSettings(RunSettings& s, char* text, const char* path) {
  const char* bad = nullptr;
  const Lines read = EachSetting(text, [&](const char* name, const char* value) {
    if (Apply(s, name, value)) return true;
    bad = name;
    return false;
  });
  if (read == Lines::kCorrupt) {
    DebugLine(s.debug_log, "settings file %s is corrupt: not measuring", path);
  } else if (read == Lines::kStopped) {
    DebugLine(s.debug_log, "settings file %s: bad '%s': not measuring", path, bad);
  }
  return read == Lines::kAll;
}

// The settings file the agent keeps (consent included), read and parsed.
// Missing, too long or corrupt: false (not measured).
// A small file's bytes into text[0, cap - 1); how many, or -1 when it
// cannot be opened. cap - 1: too long.
long ReadSmallFile(const char* path, char* text, size_t cap) {
  size_t have = 0;
  const int fd = sys::OpenAt(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  for (;;) {
    const long r = sys::Read(fd, text + have, cap - 1 - have);
    if (r == -EINTR) continue;
    if (r <= 0) break;
    have += static_cast<size_t>(r);
    if (have == cap - 1) break;
  }
  sys::Close(fd);
  return static_cast<long>(have);
}

bool ReadSettingsFile(RunSettings& s, const char* path) {
  char text[6144];  // the agent writes a few hundred bytes; lists at most 2 KiB
  const long n = ReadSmallFile(path, text, sizeof text);
  if (n < 0) return false;
  const size_t have = static_cast<size_t>(n);
  if (have == sizeof text - 1) {
    DebugLine(s.debug_log, "settings file %s is too long: not measuring", path);
    return false;
  }
  text[have] = 0;
  return ParseSettings(s, text, path);
}

// Settings: the file, then (explicit runs only) FIELDPROF_* on top. False:
// nothing at all is to happen in this run.
// The file's path as the first look finds it (first_look.cc), or "".
void SettingsPath(char** envp, char* path, size_t cap) {
  path[0] = 0;
  const char* explicit_path = sys::Env(envp, "FIELDPROF_SETTINGS");
  const char* xdg = sys::Env(envp, "XDG_CONFIG_HOME");
  const char* home = sys::Env(envp, "HOME");
  if (explicit_path != nullptr) {
    Copy(path, cap, explicit_path);
  } else if (xdg != nullptr && *xdg) {
    Copy(path, cap, xdg) && Cat(path, cap, "/fieldprof/runtime.conf");
  } else if (home != nullptr) {
    Copy(path, cap, home) && Cat(path, cap, "/.config/fieldprof/runtime.conf");
  }
}

// The file as the first look read it, parsed where it lies (no copy, no
// big stack frame: each fresh stack page is a page fault); else read here.
bool LoadSettingsFile(RunSettings& s, SettingsText* first, char** envp) {
  if (first != nullptr && first->len >= 0 && first->len < static_cast<int>(sizeof first->bytes)) {
    first->bytes[first->len] = 0;
    first->len = -1;  // parsed in place: no longer the file's bytes
    return ParseSettings(s, first->bytes, "(as first read)");
  }
  char path[1024];
  SettingsPath(envp, path, sizeof path);
  return path[0] != 0 && ReadSettingsFile(s, path);
}

bool LoadSettings(RunSettings& s, SettingsText* first, char** envp) {
  s.envp = envp;
  if (const char* dbg = sys::Env(envp, "FIELDPROF_DEBUG"); dbg != nullptr) {
    Copy(s.debug_log, sizeof s.debug_log, dbg);
  }
  const char* run = sys::Env(envp, "FIELDPROF_RUN");
  s.explicit_run = run != nullptr && Eq(run, "1");
  const bool file_ok = LoadSettingsFile(s, first, envp);
  if (!s.explicit_run) return file_ok && s.consent;
  static const struct {
    const char* env;
    const char* name;
  } kEnv[] = {{"FIELDPROF_K", "k"},
              {"FIELDPROF_SEED", "seed"},
              {"FIELDPROF_FORCE", "force"},
              {"FIELDPROF_POINTS", "points"},
              {"FIELDPROF_SPOOL", "spool_dir"},
              {"FIELDPROF_SLOTS", "slots"},
              {"FIELDPROF_SLOT_DIR", "slot_dir"},
              {"FIELDPROF_LIVE_DIR", "live_dir"},
              {"FIELDPROF_MAX_LOAD", "max_load_per_cpu"},
              {"FIELDPROF_BUDGET", "overhead_budget"},
              {"FIELDPROF_TSC_HZ", "tsc_hz"},
              {"FIELDPROF_STACK_HZ", "stack_hz"},
              {"FIELDPROF_SYSTEM_CODE", "system_code"},
              {"FIELDPROF_SHARE_MODULES", "share_modules"}};
  for (const auto& e : kEnv) {
    const char* v = sys::Env(envp, e.env);
    if (v != nullptr && !Apply(s, e.name, v)) {
      DebugLine(s.debug_log, "bad %s=%s: not measuring", e.env, v);
      return false;
    }
  }
  return true;
}

void DefaultSpoolDir(RunSettings& s, char** envp) {
  if (s.spool_dir[0]) return;
  const char* xdg = sys::Env(envp, "XDG_STATE_HOME");
  const char* home = sys::Env(envp, "HOME");
  if (xdg != nullptr && *xdg) {
    Copy(s.spool_dir, sizeof s.spool_dir, xdg) &&
        Cat(s.spool_dir, sizeof s.spool_dir, "/fieldprof/spool");
  } else if (home != nullptr) {
    Copy(s.spool_dir, sizeof s.spool_dir, home) &&
        Cat(s.spool_dir, sizeof s.spool_dir, "/.local/state/fieldprof/spool");
  }
}

// The directory shared by every user's programs (slots, rate), opened
// without following a symbolic link at its last component; -1 if unusable.
// Made (sticky and world-writable, like /tmp) only when it is missing.
int OpenSharedDir(const char* dir) {
  const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  const int fd = sys::OpenAt(AT_FDCWD, dir, flags);
  if (fd != -ENOENT) return fd < 0 ? -1 : fd;
  MakeDirs(dir, 01777);
  const int again = sys::OpenAt(AT_FDCWD, dir, flags);
  return again < 0 ? -1 : again;
}

// Takes a lock without waiting more than 50 ms on the clock: a process
// stopped while holding it must not hold up this one. Each holder keeps it
// for a read and a write, but forty programs starting at once on a busy
// 2-core VM queued for more than the ~5 ms this once waited (counted in
// tries), and their runs went uncounted.
bool LockBriefly(int fd) {
  constexpr int64_t kLockWaitNs = 50'000'000;
  const int64_t t0 = sys::MonoNs();
  for (;;) {
    const int r = sys::Flock(fd, LOCK_EX | LOCK_NB);
    if (r == 0) return true;
    if (r != -EWOULDBLOCK && r != -EINTR) return false;
    if (sys::MonoNs() - t0 >= kLockWaitNs) return false;
    sys::Nanosleep(100 * 1000);
  }
}

// The machine-wide rate cap, a generic cell rate algorithm over one number
// in <slot_dir>/rate: the theoretical arrival time of the next run (ns,
// CLOCK_MONOTONIC). A run is admitted unless that time is more than the
// burst tolerance (10 s worth of runs) ahead; admitting it moves the time
// one interval on. A damaged file starts over; one that cannot be used
// refuses the run (the cap errs on the side of measuring less).
bool RateAdmits(const RunSettings& s, int dirfd) {
  if (s.max_runs_per_minute <= 0) return true;
  // Without O_CREAT first: a create-capable open locks the directory
  // (~14 us here against ~3 us), and the file is there after the first run.
  int fd = sys::OpenAt(dirfd, "rate", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd == -ENOENT) {
    fd = sys::OpenAt(dirfd, "rate", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    struct stat st;
    if (fd >= 0 && sys::Fstat(fd, &st) == 0 && st.st_uid == sys::Geteuid() &&
        (st.st_mode & 0777) != 0666) {
      sys::Fchmod(fd, 0666);  // shared by every user, whatever the creator's umask
    }
  }
  if (fd < 0) return false;
  bool admit = false;
  if (LockBriefly(fd)) {
    char buf[32];
    const long n = sys::Pread(fd, buf, sizeof buf, 0);
    const int64_t now = sys::MonoNs();
    int64_t tat = now;
    uint64_t v = 0;
    // A time far from now can only be damage (or another boot's).
    if (n > 1 && buf[n - 1] == '\n' && ParseU64(buf, buf + n - 1, &v) &&
        v < static_cast<uint64_t>(INT64_MAX) &&
        static_cast<int64_t>(v) > now - 3600'000'000'000ll &&
        static_cast<int64_t>(v) < now + 3600'000'000'000ll) {
      tat = static_cast<int64_t>(v);
    }
    if (tat < now) tat = now;
    const int64_t interval = 60'000'000'000ll / s.max_runs_per_minute;
    const int64_t burst = s.max_runs_per_minute / 6 > 1 ? s.max_runs_per_minute / 6 : 1;
    if (tat - now <= interval * (burst - 1)) {
      tat += interval;
      char out[24];
      const size_t len = FormatU64(static_cast<uint64_t>(tat), out);
      out[len] = '\n';
      admit = sys::Pwrite(fd, out, len + 1, 0) == static_cast<long>(len + 1);
    }
  }
  sys::Close(fd);  // releases the lock
  return admit;
}

// A machine-wide slot: one of `slots` lock files, held (flock) for the life
// of the process; a killed process's lock goes away with it. Read-only
// opens: any user can lock a file another user created.
int TakeSlot(const RunSettings& s, int dirfd) {
  for (int i = 0; i < s.slots; ++i) {
    char name[32] = "slot-";
    FormatU64(static_cast<uint64_t>(i), name + 5);
    int fd = sys::OpenAt(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);  // see RateAdmits
    if (fd == -ENOENT) {
      fd = sys::OpenAt(dirfd, name, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
    }
    if (fd < 0) continue;
    if (sys::Flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    sys::Close(fd);
  }
  return -1;
}

// The 1-minute load average per CPU this process may run on.
bool LoadTooHigh(const RunSettings& s) {
  struct sysinfo si;
  if (sys::Sysinfo(&si) != 0) return false;
  uint64_t mask[16] = {};  // 1,024 CPUs
  const long bytes = sys::SchedGetaffinity(mask, sizeof mask);
  int cpus = 0;
  for (long i = 0; i < bytes / 8; ++i) cpus += __builtin_popcountll(mask[i]);
  if (cpus < 1) cpus = 1;
  const double load = static_cast<double>(si.loads[0]) / (1 << SI_LOAD_SHIFT);
  return load / cpus > s.max_load_per_cpu;
}

}  // namespace

void SetDefaults(RunSettings* s) {
  s->k = 2;
  s->slots = 6;
  s->max_load_per_cpu = 1.5;
  s->overhead_budget = 0.01;
  s->sample_fraction = 1.0 / 16;
  s->max_runs_per_minute = 120;
  s->stack_hz = 20;
  s->spool_cap_bytes = 16ull << 20;
  Copy(s->slot_dir, sizeof s->slot_dir, "/tmp/fieldprof-slots");
}

void MakeDirs(const char* dir, unsigned mode) {
  char p[512];
  if (!Copy(p, sizeof p, dir)) return;
  for (char* q = p + 1; *q; ++q) {
    if (*q != '/') continue;
    *q = 0;
    sys::Mkdir(p, 0755);
    *q = '/';
  }
  if (sys::Mkdir(p, mode) == 0) sys::Chmod(p, mode);
}

void DebugLine(const char* path, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VDebugLine(path, fmt, ap);
  va_end(ap);
}

void VDebugLine(const char* path, const char* fmt, va_list ap) {
  if (path == nullptr || path[0] == 0) return;
  const int saved = errno;
  const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    char buf[1024];
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    if (n < 0) n = 0;
    if (n > static_cast<int>(sizeof buf - 2)) n = sizeof buf - 2;
    buf[n++] = '\n';
    if (write(fd, buf, static_cast<size_t>(n)) != n) {
      // Diagnostics only: nothing to do about a failed write.
    }
    close(fd);
  }
  errno = saved;
}

void CountRun(const char* spool_dir, FpRunCounter c) {
  if (spool_dir == nullptr || spool_dir[0] == 0) return;
  char path[600];
  if (!Copy(path, sizeof path, spool_dir) || !Cat(path, sizeof path, "/" FP_COUNTERS_FILE)) return;
  constexpr int kFlags = O_RDWR | O_CLOEXEC | O_NOFOLLOW;
  int fd = sys::OpenAt(AT_FDCWD, path, kFlags);  // see RateAdmits
  if (fd == -ENOENT) {
    fd = sys::OpenAt(AT_FDCWD, path, kFlags | O_CREAT, 0600);
    if (fd == -ENOENT) {
      MakeDirs(spool_dir, 0700);
      fd = sys::OpenAt(AT_FDCWD, path, kFlags | O_CREAT, 0600);
    }
  }
  if (fd < 0) return;
  if (LockBriefly(fd)) {
    uint64_t v[kNumRunCounters] = {};
    char buf[512];
    const long n = sys::Pread(fd, buf, sizeof buf, 0);
    // "name value" lines; unknown or damaged lines are dropped.
    const char* end = buf + (n > 0 ? n : 0);
    for (const char* line = buf; line < end;) {
      const char* nl = line;
      while (nl < end && *nl != '\n') ++nl;
      const char* sp = line;
      while (sp < nl && *sp != ' ') ++sp;
      for (int i = 0; i < kNumRunCounters && sp < nl; ++i) {
        const char* name = kRunCounterNames[i];
        const size_t len = Len(name);
        if (static_cast<size_t>(sp - line) != len) continue;
        bool same = true;
        for (size_t j = 0; j < len && same; ++j) same = line[j] == name[j];
        uint64_t x = 0;
        if (same && ParseU64(sp + 1, nl, &x)) v[i] = x;
      }
      line = nl + 1;
    }
    ++v[c];
    char out[512];
    size_t len = 0;
    for (int i = 0; i < kNumRunCounters; ++i) {
      const size_t name_len = Len(kRunCounterNames[i]);
      for (size_t j = 0; j < name_len; ++j) out[len++] = kRunCounterNames[i][j];
      out[len++] = ' ';
      len += FormatU64(v[i], out + len);
      out[len++] = '\n';
    }
    // Counts only grow, so the new text is as long as the old unless the
    // old had damage or a counter the agent had taken: only then is a tail
    // cut off (one system call fewer in almost every refused run).
    if (sys::Pwrite(fd, out, len, 0) == static_cast<long>(len) && static_cast<long>(len) < n &&
        sys::Ftruncate(fd, static_cast<long>(len)) != 0) {
      // A longer old text left behind only loses its damaged tail.
    }
  }
  sys::Close(fd);
}

bool ConsentStands(const RunSettings& s) {
  if (s.explicit_run || s.envp == nullptr) return true;
  char path[1024];
  SettingsPath(s.envp, path, sizeof path);
  char text[6144];
  const long n = path[0] != 0 ? ReadSmallFile(path, text, sizeof text) : -1;
  if (n < 0) return false;  // gone: consent lives in the file
  text[n] = 0;
  // As the start reads it: the last consent line counts, and a corrupt
  // file is no consent.
  bool consent = false;
  const Lines read = EachSetting(text, [&](const char* name, const char* value) {
    if (Eq(name, "consent")) consent = Eq(value, "yes");
    return true;
  });
  return read == Lines::kAll && consent;
}

RunDecision DecideRun(RunSettings* settings, SettingsText* text, char** envp) {
  RunSettings& s = *settings;
  RunDecision d;
  SetDefaults(&s);
  if (!LoadSettings(s, text, envp)) return d;  // no consent, or bad settings: nothing at all
  DefaultSpoolDir(s, envp);
  // The load first: two system calls, and no file touched for a refusal.
  if (LoadTooHigh(s)) {
    DebugLine(s.debug_log, "system load above %.2f per CPU: not measuring", s.max_load_per_cpu);
    d.verdict = Verdict::kRefusedLoad;
    CountRun(s.spool_dir, kRunRefusedLoad);
    return d;
  }
  const int dirfd = OpenSharedDir(s.slot_dir);
  if (dirfd < 0) {
    DebugLine(s.debug_log, "cannot use %s: not measuring", s.slot_dir);
    d.verdict = Verdict::kRefusedSlot;
    CountRun(s.spool_dir, kRunRefusedSlot);
    return d;
  }
  if (!s.explicit_run && !RateAdmits(s, dirfd)) {
    sys::Close(dirfd);
    DebugLine(s.debug_log, "machine-wide rate cap (%lld runs a minute) reached: not measuring",
              static_cast<long long>(s.max_runs_per_minute));
    d.verdict = Verdict::kRefusedRate;
    CountRun(s.spool_dir, kRunRefusedRate);
    return d;
  }
  d.slot_fd = TakeSlot(s, dirfd);
  sys::Close(dirfd);
  if (d.slot_fd < 0) {
    DebugLine(s.debug_log, "no free slot in %s: not measuring", s.slot_dir);
    d.verdict = Verdict::kRefusedSlot;
    CountRun(s.spool_dir, kRunRefusedSlot);
    return d;
  }
  if (!s.have_seed && sys::Getrandom(&s.seed, sizeof s.seed, GRND_NONBLOCK) != sizeof s.seed) {
    s.seed = static_cast<uint64_t>(sys::MonoNs()) ^ static_cast<uint64_t>(sys::Getpid()) << 40;
  }
  d.verdict = Verdict::kMeasure;  // the caller logs it (outside its timing)
  return d;
}

}  // namespace fieldprof::rt
