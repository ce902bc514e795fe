#include "tools/ide/source.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

namespace fieldprof::tools {

namespace {

bool IdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// UTF-16 code units of the UTF-8 sequence starting with byte `c`; 0 for a
// continuation byte.
int Utf16Units(unsigned char c) {
  if ((c & 0xC0) == 0x80) return 0;
  return c >= 0xF0 ? 2 : 1;
}

size_t LineStart(const std::string& text, int64_t line) {
  size_t at = 0;
  for (int64_t l = 0; l < line; ++l) {
    const size_t nl = text.find('\n', at);
    if (nl == std::string::npos) return text.size();
    at = nl + 1;
  }
  return at;
}

const std::set<std::string>& Keywords() {
  static const std::set<std::string> k = {"if",
                                          "for",
                                          "while",
                                          "switch",
                                          "return",
                                          "sizeof",
                                          "alignof",
                                          "_Alignof",
                                          "decltype",
                                          "catch",
                                          "defined",
                                          "_Generic",
                                          "typeof",
                                          "__typeof__",
                                          "static_assert",
                                          "_Static_assert",
                                          "noexcept",
                                          "throw",
                                          "do",
                                          "else",
                                          "case",
                                          "new",
                                          "delete",
                                          "operator",
                                          "__attribute__",
                                          "asm",
                                          "__asm__",
                                          "alignas",
                                          "requires",
                                          "co_await"};
  return k;
}

// The module's stem: "libglib-2.0.so.0" -> "glib-2.0", "libz.so.1" -> "z".
std::string ModuleStem(const std::string& module) {
  std::string s = module;
  const size_t slash = s.rfind('/');
  if (slash != std::string::npos) s = s.substr(slash + 1);
  const size_t so = s.find(".so");
  if (so != std::string::npos) s = s.substr(0, so);
  if (s.rfind("lib", 0) == 0) s = s.substr(3);
  return s;
}

// Headers whose name does not say their library. Key: the header as
// written, or its first directory followed by '/'.
struct Known {
  const char* header;
  const char* stems;  // comma-separated module stems
};
constexpr Known kKnown[] = {
    {"zlib.h", "z"},
    {"zconf.h", "z"},
    {"bzlib.h", "bz2"},
    {"openssl/", "ssl,crypto"},
    {"jpeglib.h", "jpeg"},
    {"libxml/", "xml2"},
    {"event2/", "event,event_core,event_extra"},
    {"ncurses.h", "ncursesw,ncurses,tinfo"},
    {"curses.h", "ncursesw,ncurses,tinfo"},
    {"readline/", "readline"},
    {"math.h", "m"},
    {"complex.h", "m"},
    {"fenv.h", "m"},
    {"cmath", "m,stdc++"},
    {"gio/", "gio-2.0"},
    {"glib-object.h", "gobject-2.0"},
    {"X11/", "X11"},
    {"GL/", "GL"},
    {"security/", "pam"},
    {"systemd/", "systemd"},
    {"dbus/", "dbus-1"},
    {"unicode/", "icuuc,icui18n"},
};

// The C library's own headers (POSIX and glibc): functions declared there
// are libc's (with libpthread and libdl on glibc before 2.34).
bool LibcHeader(const std::string& h) {
  static const std::set<std::string> names = {
      "assert.h",   "ctype.h",     "dirent.h", "dlfcn.h",   "errno.h",    "fcntl.h",    "fnmatch.h",
      "glob.h",     "grp.h",       "iconv.h",  "ifaddrs.h", "inttypes.h", "langinfo.h", "locale.h",
      "malloc.h",   "netdb.h",     "poll.h",   "pthread.h", "pwd.h",      "regex.h",    "sched.h",
      "search.h",   "semaphore.h", "setjmp.h", "signal.h",  "spawn.h",    "stdio.h",    "stdlib.h",
      "string.h",   "strings.h",   "syslog.h", "termios.h", "threads.h",  "time.h",     "unistd.h",
      "utime.h",    "wchar.h",     "wctype.h", "cstdio",    "cstdlib",    "cstring",    "ctime",
      "csignal",    "cerrno",      "cctype",   "cwchar",    "clocale",    "link.h",     "elf.h",
      "execinfo.h", "err.h",       "error.h",  "getopt.h",  "mntent.h",   "shadow.h",   "utmp.h",
      "wordexp.h",  "aio.h",       "mqueue.h", "resolv.h"};
  if (names.count(h) != 0) return true;
  for (const char* dir : {"sys/", "arpa/", "netinet/", "net/", "bits/", "linux/"}) {
    if (h.rfind(dir, 0) == 0) return true;
  }
  return false;
}

bool StemIn(const std::string& stem, const char* list) {
  std::string item;
  for (const char* p = list;; ++p) {
    if (*p == ',' || *p == 0) {
      if (item == stem) return true;
      item.clear();
      if (*p == 0) return false;
    } else {
      item += *p;
    }
  }
}

}  // namespace

size_t OffsetOf(const std::string& text, int64_t line, int64_t character) {
  if (line < 0) return 0;
  size_t at = LineStart(text, line);
  int64_t units = 0;
  while (at < text.size() && text[at] != '\n' && units < character) {
    const int u = Utf16Units(static_cast<unsigned char>(text[at]));
    if (u > 0 && units + u > character) break;  // inside a surrogate pair
    units += u;
    ++at;
    while (at < text.size() && Utf16Units(static_cast<unsigned char>(text[at])) == 0) ++at;
  }
  return at;
}

nlohmann::json PositionOf(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  int64_t line = 0;
  size_t start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') ++line, start = i + 1;
  }
  int64_t units = 0;
  for (size_t i = start; i < offset; ++i) units += Utf16Units(static_cast<unsigned char>(text[i]));
  return {{"line", line}, {"character", units}};
}

Positions::Positions(const std::string& text) : text_(text) {
  starts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') starts_.push_back(i + 1);
    if (static_cast<unsigned char>(text[i]) >= 0x80) ascii_ = false;
  }
}

nlohmann::json Positions::At(size_t offset) const {
  offset = std::min(offset, text_.size());
  const size_t line = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) -
                                          starts_.begin()) -
                      1;
  int64_t units = 0;
  if (ascii_) {
    units = static_cast<int64_t>(offset - starts_[line]);
  } else {
    for (size_t i = starts_[line]; i < offset; ++i) {
      units += Utf16Units(static_cast<unsigned char>(text_[i]));
    }
  }
  return {{"line", static_cast<int64_t>(line)}, {"character", units}};
}

Word IdentifierAt(const std::string& text, size_t offset) {
  Word w;
  offset = std::min(offset, text.size());
  size_t b = offset;
  if (b < text.size() && !IdentChar(text[b]) && b > 0 && IdentChar(text[b - 1])) --b;
  if (b >= text.size() || !IdentChar(text[b])) return w;
  while (b > 0 && IdentChar(text[b - 1])) --b;
  size_t e = b;
  while (e < text.size() && IdentChar(text[e])) ++e;
  if (!IdentStart(text[b])) return w;  // a number
  w.name = text.substr(b, e - b);
  w.begin = b;
  w.end = e;
  return w;
}

namespace {

// Past a string or character literal opening at text[*i], to the closing
// quote or the end of the line.
void SkipLiteral(const std::string& text, size_t* i) {
  const char quote = text[*i];
  ++*i;
  while (*i < text.size() && text[*i] != quote && text[*i] != '\n') {
    *i += text[*i] == '\\' ? 2 : 1;
  }
  ++*i;
}

// Past what is not code at text[*i]: whitespace, a preprocessor line (with
// its continuations), a comment, a literal, a raw string R"d( ... )d".
// False, with *i unmoved, when text[*i] is code. *line_start: only
// whitespace since the last newline.
bool SkipNonCode(const std::string& text, size_t* i, bool* line_start) {
  const size_t n = text.size();
  const char c = text[*i];
  if (c == '\n') {
    *line_start = true;
    ++*i;
    return true;
  }
  if (c == ' ' || c == '\t' || c == '\r') {
    ++*i;
    return true;
  }
  if (c == '#' && *line_start) {
    while (*i < n && text[*i] != '\n') *i += (text[*i] == '\\' && *i + 1 < n) ? 2 : 1;
    return true;
  }
  *line_start = false;
  if (c == '/' && *i + 1 < n && text[*i + 1] == '/') {
    while (*i < n && text[*i] != '\n') ++*i;
    return true;
  }
  if (c == '/' && *i + 1 < n && text[*i + 1] == '*') {
    const size_t end = text.find("*/", *i + 2);
    *i = end == std::string::npos ? n : end + 2;
    return true;
  }
  if (c != '"' && c != '\'') return false;
  if (c == '"' && *i > 0 && text[*i - 1] == 'R') {
    const size_t open = text.find('(', *i);
    if (open != std::string::npos && open - *i <= 17) {
      const std::string close = ")" + text.substr(*i + 1, open - *i - 1) + "\"";
      const size_t end = text.find(close, open);
      *i = end == std::string::npos ? n : end + close.size();
      return true;
    }
  }
  SkipLiteral(text, i);
  return true;
}

// Whether the name at text[b] is called as a member (.f( or ->f().
bool IsMemberCall(const std::string& text, size_t b) {
  size_t p = b;
  while (p > 0 && (text[p - 1] == ' ' || text[p - 1] == '\t')) --p;
  return p > 0 && (text[p - 1] == '.' || (text[p - 1] == '>' && p > 1 && text[p - 2] == '-'));
}

// Past the parenthesis that closes the one at text[open], if on the same
// line (and within 4 KiB: a minified line stays linear); else `fallback`.
size_t CallEnd(const std::string& text, size_t open, size_t fallback) {
  const size_t n = text.size();
  const size_t limit = std::min(n, open + 4096);
  int depth = 0;
  for (size_t k = open; k < limit && text[k] != '\n';) {
    const char d = text[k];
    if (d == '"' || d == '\'') {
      SkipLiteral(text, &k);
      continue;
    }
    if (d == '(') ++depth;
    if (d == ')' && --depth == 0) return std::min(k + 1, n);
    ++k;
  }
  return std::min(fallback, n);
}

}  // namespace

std::vector<CallSite> CallSites(const std::string& text) {
  std::vector<CallSite> out;
  const size_t n = text.size();
  bool line_start = true;
  size_t i = 0;
  while (i < n) {
    if (SkipNonCode(text, &i, &line_start)) continue;
    if (!IdentStart(text[i])) {
      ++i;
      continue;
    }
    const size_t b = i;
    while (i < n && IdentChar(text[i])) ++i;
    const size_t e = i;
    if (IsMemberCall(text, b)) continue;
    size_t q = e;
    while (q < n && (text[q] == ' ' || text[q] == '\t')) ++q;
    if (q >= n || text[q] != '(') continue;
    std::string name = text.substr(b, e - b);
    if (Keywords().count(name) != 0) continue;
    out.push_back({std::move(name), b, e, CallEnd(text, q, e)});
  }
  return out;
}

namespace {

// A plain string literal at `*i` (after blanks), no escapes: its text, and
// `*i` past it. False when there is none.
bool PlainLiteral(const std::string& text, size_t* i, std::string* out) {
  size_t q = *i;
  while (q < text.size() && std::isspace(static_cast<unsigned char>(text[q]))) ++q;
  if (q >= text.size() || text[q] != '"') return false;
  const size_t close = text.find_first_of("\"\\\n", q + 1);
  if (close == std::string::npos || text[close] != '"') return false;
  *out = text.substr(q + 1, close - q - 1);
  *i = close + 1;
  return true;
}

}  // namespace

std::vector<PointMark> PointMarks(const std::string& text) {
  static const char* const kMacros[] = {"FP_POINT", "FP_POINT_V", "FP_SCOPE", "FP_SCOPE_V",
                                        "FP_BEGIN", "FP_BEGIN_V", "FP_END"};
  std::vector<PointMark> out;
  for (const CallSite& cs : CallSites(text)) {
    if (std::find(std::begin(kMacros), std::end(kMacros), cs.name) == std::end(kMacros)) continue;
    PointMark m;
    m.macro = cs.name;
    m.begin = cs.begin;
    size_t i = text.find('(', cs.end) + 1;
    if (!PlainLiteral(text, &i, &m.tag)) continue;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= text.size() || text[i] != ',') continue;
    ++i;
    if (!PlainLiteral(text, &i, &m.name)) continue;
    m.end = i;
    m.after = cs.after > m.end ? cs.after : m.end;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> IncludedHeaders(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    size_t i = at;
    while (i < end && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i < end && text[i] == '#') {
      ++i;
      while (i < end && (text[i] == ' ' || text[i] == '\t')) ++i;
      if (text.compare(i, 7, "include") == 0) {
        i += 7;
        while (i < end && (text[i] == ' ' || text[i] == '\t')) ++i;
        if (i < end && (text[i] == '<' || text[i] == '"')) {
          const char close = text[i] == '<' ? '>' : '"';
          const size_t stop = text.find(close, i + 1);
          if (stop != std::string::npos && stop < end)
            out.push_back(text.substr(i + 1, stop - i - 1));
        }
      }
    }
    at = end + 1;
  }
  return out;
}

bool ModuleMatchesIncludes(const std::string& module, const std::vector<std::string>& headers) {
  const std::string stem = ModuleStem(module);
  if (stem.empty()) return false;
  for (const std::string& h : headers) {
    bool known = false;
    for (const Known& k : kKnown) {
      const size_t len = std::strlen(k.header);
      const bool dir = k.header[len - 1] == '/';
      if (dir ? h.rfind(k.header, 0) == 0 : h == k.header) {
        known = true;
        if (StemIn(stem, k.stems)) return true;
      }
    }
    if (known) continue;
    if (LibcHeader(h)) {
      if (stem == "c" || stem == "pthread" || stem == "dl" || stem == "rt") return true;
      continue;
    }
    // By name: <foo.h>, <foo/bar.h> and "foo.hpp" name libfoo, libfoo-N,
    // libfooN.
    std::string name = h;
    const size_t slash = name.find('/');
    if (slash != std::string::npos) {
      name = name.substr(0, slash);
    } else {
      const size_t dot = name.rfind('.');
      if (dot != std::string::npos) name = name.substr(0, dot);
    }
    if (name.empty()) continue;
    if (stem == name) return true;
    if (stem.size() > name.size() && stem.compare(0, name.size(), name) == 0) {
      const char next = stem[name.size()];
      if (next == '-' || std::isdigit(static_cast<unsigned char>(next))) return true;
    }
  }
  return false;
}

}  // namespace fieldprof::tools
