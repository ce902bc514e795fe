// Small text helpers for the runtime's start and exit: paths, numbers and
// "name value" lines without stdio or the strto* family, whose first call
// in a process costs page faults (locale data, the printf machinery) that
// a program pays for every run the runtime decides about.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_TEXT_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_TEXT_H_

#include <cstddef>
#include <cstdint>

namespace fieldprof::rt {

inline size_t Len(const char* s) {
  size_t n = 0;
  while (s[n] != 0) ++n;
  return n;
}

inline bool Eq(const char* a, const char* b) {
  while (*a != 0 && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

// Appends src to dst (holding a string), within cap bytes; false (dst
// unchanged) when it does not fit.
inline bool Cat(char* dst, size_t cap, const char* src) {
  const size_t at = Len(dst), n = Len(src);
  if (at + n + 1 > cap) return false;
  for (size_t i = 0; i <= n; ++i) dst[at + i] = src[i];
  return true;
}

// dst = src, within cap bytes; false (dst empty) when it does not fit.
inline bool Copy(char* dst, size_t cap, const char* src) {
  if (cap == 0) return false;
  dst[0] = 0;
  return Cat(dst, cap, src);
}

// Decimal digits of v into out (at least 21 bytes); returns the length.
inline size_t FormatU64(uint64_t v, char* out) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  out[n] = 0;
  return n;
}

// An unsigned decimal integer filling [s, end); false on anything else or
// overflow.
inline bool ParseU64(const char* s, const char* end, uint64_t* out) {
  if (s == end) return false;
  uint64_t v = 0;
  for (; s < end; ++s) {
    if (*s < '0' || *s > '9') return false;
    const uint64_t d = static_cast<uint64_t>(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// A decimal number as the agent writes them ("%g": 1.5, 0.0625, 1e+06,
// 1e-05), with an optional sign, as m * 10^exp10 (the first 18 significant
// digits kept); false on anything else. Integer arithmetic only: the first
// look (first_look.cc, built without floating point registers) uses it too.
inline bool ScanDecimal(const char* s, const char* end, bool* neg, uint64_t* m, int* exp10) {
  *neg = false;
  if (s < end && (*s == '+' || *s == '-')) *neg = *s++ == '-';
  *m = 0;
  *exp10 = 0;
  int digits = 0;
  bool dot = false, any = false;
  for (; s < end; ++s) {
    if (*s == '.' && !dot) {
      dot = true;
    } else if (*s >= '0' && *s <= '9') {
      any = true;
      if (digits < 18) {
        *m = *m * 10 + static_cast<uint64_t>(*s - '0');
        if (*m != 0) ++digits;
        if (dot) --*exp10;
      } else if (!dot) {
        ++*exp10;  // digits past what is kept
      }
    } else {
      break;
    }
  }
  if (!any) return false;
  if (s < end && (*s == 'e' || *s == 'E')) {
    ++s;
    bool eneg = false;
    if (s < end && (*s == '+' || *s == '-')) eneg = *s++ == '-';
    int e = 0;
    const char* first = s;
    for (; s < end && *s >= '0' && *s <= '9'; ++s) {
      if (e < 10000) e = e * 10 + (*s - '0');
    }
    if (s == first) return false;
    *exp10 += eneg ? -e : e;
  }
  return s == end;
}

// ScanDecimal's number as a double. Precise to a few units of the last
// place, which is all thresholds need.
inline bool ParseDecimal(const char* s, const char* end, double* out) {
  bool neg = false;
  uint64_t m = 0;
  int exp10 = 0;
  if (!ScanDecimal(s, end, &neg, &m, &exp10)) return false;
  double v = static_cast<double>(m);
  double p = 1;
  for (int i = 0; i < (exp10 < 0 ? -exp10 : exp10) && i < 400; ++i) p *= 10;
  v = exp10 < 0 ? v / p : v * p;
  *out = neg ? -v : v;
  return true;
}

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_TEXT_H_
