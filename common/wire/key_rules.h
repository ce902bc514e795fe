// What the strings of an API key may hold. The wire format promises that
// nothing in it identifies a person or a machine, so a key's strings are
// held to the shapes the runtime produces, and free text has nowhere to go:
//
//   module          a file name as a soname spells it: letters, digits and
//                   . _ + - (libstdc++.so.6, ld-linux-x86-64.so.2); never a
//                   path, whitespace or "." / "..".
//   module_version  a hex GNU build id, or a plain version token (a letter
//                   or digit, then letters, digits and . _ + ~ - :, as in
//                   1:2.3~rc1), at most
//                   64 bytes.
//   symbol          an ELF symbol name: letters, digits and _ . $ @ (C++
//                   names mangled, as the dynamic symbol table holds them).
//                   For an instrumentation point's series (metric
//                   point_ns): "tag$from$to" or "tag$name", each part a
//                   point name (below).
//                   For a stack series (metric stack_cpu_ns): frames
//                   joined by ';', outermost first (StackSymbolOk).
//   point name      a tag or name of FP_POINT and its kin: an identifier,
//                   a letter or _ and then letters, digits, _ and ., at most
//                   64 bytes. No path, no space, no free text.
//
// Header only and without the C++ library: the runtime (agent/preload/runtime/)
// checks what it is about to record with the same functions that
// common/wire/validate.cc applies on the agent and the aggregator.
#ifndef FIELDPROF_COMMON_WIRE_KEY_RULES_H_
#define FIELDPROF_COMMON_WIRE_KEY_RULES_H_

#include <stddef.h>

namespace fieldprof::key_rules {

inline constexpr size_t kMaxModule = 255;
inline constexpr size_t kMaxModuleVersion = 64;
inline constexpr size_t kMaxSymbol = 1024;

constexpr bool Alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
constexpr bool ModuleChar(char c) {
  return Alnum(c) || c == '.' || c == '_' || c == '+' || c == '-';
}
constexpr bool VersionChar(char c) {
  return Alnum(c) || c == '.' || c == '_' || c == '+' || c == '~' || c == '-' || c == ':';
}
constexpr bool SymbolChar(char c) {
  return Alnum(c) || c == '_' || c == '.' || c == '$' || c == '@';
}

// The first byte of s[0..n) that breaks the rule, or n when none does (and
// the length is within bounds: then the returned index is n too, and the
// caller tells the two apart by the length).
constexpr size_t FirstBadModuleChar(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!ModuleChar(s[i])) return i;
  }
  return n;
}
constexpr size_t FirstBadVersionChar(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!VersionChar(s[i]) || (i == 0 && !Alnum(s[i]))) return i;
  }
  return n;
}
constexpr size_t FirstBadSymbolChar(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!SymbolChar(s[i])) return i;
  }
  return n;
}

constexpr bool IsDotName(const char* s, size_t n) {
  return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

constexpr bool ModuleOk(const char* s, size_t n) {
  return n > 0 && n <= kMaxModule && !IsDotName(s, n) && FirstBadModuleChar(s, n) == n;
}
constexpr bool ModuleVersionOk(const char* s, size_t n) {
  return n > 0 && n <= kMaxModuleVersion && FirstBadVersionChar(s, n) == n;
}
constexpr bool SymbolOk(const char* s, size_t n) {
  return n > 0 && n <= kMaxSymbol && FirstBadSymbolChar(s, n) == n;
}

inline constexpr size_t kMaxPointName = 64;

// A character a point name may hold after its first.
constexpr bool PointNameChar(char c) { return Alnum(c) || c == '_' || c == '.'; }

constexpr bool PointNameOk(const char* s, size_t n) {
  if (n == 0 || n > kMaxPointName) return false;
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_')) return false;
  for (size_t i = 1; i < n; ++i) {
    if (!PointNameChar(s[i])) return false;
  }
  return true;
}

// A point series' symbol: two or three point names joined by '$'.
constexpr bool PointSymbolOk(const char* s, size_t n) {
  size_t parts = 0, start = 0;
  for (size_t i = 0; i <= n; ++i) {
    if (i < n && s[i] != '$') continue;
    if (!PointNameOk(s + start, i - start)) return false;
    ++parts;
    start = i + 1;
  }
  return parts == 2 || parts == 3;
}

// A stack series' symbol: at least one frame of the module, outermost
// first, each an ELF symbol name or '+' and a lowercase hex offset of at
// most 16 digits; then at most one bracketed frame, last, naming where the
// time went next: another module ("[libc.so.6]"), or "[program]",
// "[unpackaged]", "[deeper]" (the stack went on past kMaxSymbol). Nothing
// else: no path, no name of the program's own.
inline constexpr char kStackSeparator = ';';

constexpr bool HexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

constexpr bool StackFrameOk(const char* s, size_t n) {
  if (n == 0) return false;
  if (s[0] == '+') {
    if (n < 2 || n > 17) return false;
    for (size_t i = 1; i < n; ++i) {
      if (!HexDigit(s[i])) return false;
    }
    return true;
  }
  return FirstBadSymbolChar(s, n) == n;
}

constexpr bool StackMarkOk(const char* s, size_t n) {
  if (n < 3 || s[0] != '[' || s[n - 1] != ']') return false;
  return ModuleOk(s + 1, n - 2);  // "program", "unpackaged", "deeper" keep the rule too
}

constexpr bool StackSymbolOk(const char* s, size_t n) {
  if (n == 0 || n > kMaxSymbol) return false;
  size_t frames = 0, start = 0;
  for (size_t i = 0; i <= n; ++i) {
    if (i < n && s[i] != kStackSeparator) continue;
    const bool last = i == n;
    if (!StackFrameOk(s + start, i - start) &&
        !(last && frames > 0 && StackMarkOk(s + start, i - start))) {
      return false;
    }
    ++frames;
    start = i + 1;
  }
  return true;
}

}  // namespace fieldprof::key_rules

#endif  // FIELDPROF_COMMON_WIRE_KEY_RULES_H_
