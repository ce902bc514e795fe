#include "agent/preload/runtime/front/first_look.h"

#include <elf.h>
#include <fcntl.h>

#include "agent/preload/runtime/sys.h"
#include "agent/preload/runtime/text.h"

namespace fieldprof::rt {
namespace {

// Appends src to dst[len..cap); false when it does not fit.
bool Append(char* dst, int& len, int cap, const char* src) {
  for (; *src != 0; ++src) {
    if (len + 1 >= cap) return false;
    dst[len++] = *src;
  }
  dst[len] = 0;
  return true;
}

bool Same(const char* a, const char* a_end, const char* b) {
  for (; a < a_end; ++a, ++b) {
    if (*b == 0 || *a != *b) return false;
  }
  return *b == 0;
}

bool Blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// 32 bits from the kernel's 16 random bytes for this exec (AT_RANDOM, on
// the initial stack after the environment), mixed so that nothing of them
// can be told from a decision.
uint32_t Coin(char** envp) {
  char** p = envp;
  while (*p != nullptr) ++p;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (const auto* a = reinterpret_cast<const Elf64_auxv_t*>(p + 1); a->a_type != AT_NULL; ++a) {
    if (a->a_type != AT_RANDOM) continue;
    const auto* r = reinterpret_cast<const uint64_t*>(a->a_un.a_val);
    x ^= r[0] * 0xbf58476d1ce4e5b9ull ^ r[1];
    break;
  }
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<uint32_t>(x >> 32);
}

}  // namespace

bool ParseFractionQ32(const char* s, const char* end, uint64_t* q32) {
  bool neg = false;
  uint64_t m = 0;
  int exp10 = 0;
  if (!ScanDecimal(s, end, &neg, &m, &exp10) || (neg && m != 0)) return false;
  // value = m * 10^exp10, wanted in [0, 1] as m * 10^exp10 * 2^32.
  using U128 = unsigned __int128;
  const U128 one = U128{1} << 32;
  U128 v = U128{m} << 32;
  if (exp10 > 0) {
    for (int i = 0; i < exp10 && v != 0; ++i) {
      v *= 10;
      if (v > one) return false;
    }
  } else {
    for (int i = 0; i < -exp10 && v != 0; ++i) v /= 10;
  }
  if (v > one) return false;
  *q32 = static_cast<uint64_t>(v);
  return true;
}

FirstLook LookAtRun(char** envp, SettingsText* keep) {
  if (envp == nullptr) return FirstLook::kOff;
  const char* run = sys::Env(envp, "FIELDPROF_RUN");
  const bool explicit_run = run != nullptr && run[0] == '1' && run[1] == 0;
  // The settings file, as DecideRun finds it.
  char path[1024];
  int len = 0;
  path[0] = 0;
  bool fits = true;
  if (const char* file = sys::Env(envp, "FIELDPROF_SETTINGS"); file != nullptr) {
    fits = Append(path, len, sizeof path, file);
  } else if (const char* xdg = sys::Env(envp, "XDG_CONFIG_HOME"); xdg != nullptr && *xdg) {
    fits = Append(path, len, sizeof path, xdg) &&
           Append(path, len, sizeof path, "/fieldprof/runtime.conf");
  } else if (const char* home = sys::Env(envp, "HOME"); home != nullptr) {
    fits = Append(path, len, sizeof path, home) &&
           Append(path, len, sizeof path, "/.config/fieldprof/runtime.conf");
  }
  if (explicit_run) return FirstLook::kGoOn;  // consent given for this run
  if (!fits || len == 0) return FirstLook::kOff;
  const int fd = sys::OpenAt(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FirstLook::kOff;
  SettingsText local;
  char* text = keep != nullptr ? keep->bytes : local.bytes;
  constexpr long kCap = sizeof local.bytes;
  long n = 0;
  for (;;) {
    const long r = sys::Read(fd, text + n, static_cast<size_t>(kCap - n));
    if (r == -4) continue;  // EINTR
    if (r <= 0) break;
    n += r;
    if (n == kCap) break;
  }
  sys::Close(fd);
  if (n <= 0) return FirstLook::kOff;
  // A file longer than the buffer: its end is unseen, so decide in full.
  if (n == kCap) return FirstLook::kGoOn;
  if (keep != nullptr) keep->len = static_cast<int>(n);
  bool consent = false;
  uint64_t fraction = kDefaultSampleQ32;
  const char* end = text + n;
  for (const char* line = text; line < end;) {
    const char* eol = line;
    while (eol < end && *eol != '\n') ++eol;
    const char* a = line;
    const char* b = eol;
    line = eol + 1;
    while (a < b && Blank(*a)) ++a;
    while (b > a && Blank(b[-1])) --b;
    if (a == b || *a == '#') continue;
    const char* eq = a;
    while (eq < b && *eq != '=') ++eq;
    if (eq == b) return FirstLook::kOff;  // corrupt: DecideRun would refuse it too
    const char* ne = eq;
    while (ne > a && Blank(ne[-1])) --ne;
    const char* v = eq + 1;
    while (v < b && Blank(*v)) ++v;
    if (Same(a, ne, "consent")) {
      consent = Same(v, b, "yes");
    } else if (Same(a, ne, "sample_fraction")) {
      if (!ParseFractionQ32(v, b, &fraction)) return FirstLook::kOff;
    }
  }
  if (!consent) return FirstLook::kOff;
  return Coin(envp) < fraction ? FirstLook::kGoOn : FirstLook::kNotSampled;
}

}  // namespace fieldprof::rt
