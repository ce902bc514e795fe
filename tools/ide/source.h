// What the language server needs to know of a C or C++ source text: LSP
// positions (line, UTF-16 code unit) against byte offsets, the identifier
// under the cursor, the call sites, and the headers it includes, mapped to
// the modules (shared objects) they belong to.
#ifndef FIELDPROF_TOOLS_IDE_SOURCE_H_
#define FIELDPROF_TOOLS_IDE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fieldprof::tools {

// The byte offset of an LSP position. A line past the end gives the end of
// the text; a character past the end of its line, the end of that line.
size_t OffsetOf(const std::string& text, int64_t line, int64_t character);
// The LSP position of a byte offset, as {"line", "character"}.
nlohmann::json PositionOf(const std::string& text, size_t offset);

// PositionOf for many offsets of one text: lines found once, then a binary
// search per offset (a lens per call site in a large file stays linear).
class Positions {
 public:
  explicit Positions(const std::string& text);
  nlohmann::json At(size_t offset) const;

 private:
  const std::string& text_;
  std::vector<size_t> starts_;  // of each line
  bool ascii_ = true;           // UTF-16 units = bytes
};

struct Word {
  std::string name;  // empty: no identifier there
  size_t begin = 0, end = 0;
};
// The C identifier that contains `offset` or ends just before it.
Word IdentifierAt(const std::string& text, size_t offset);

struct CallSite {
  std::string name;
  size_t begin = 0, end = 0;  // the name
  size_t after = 0;           // just past the call's closing parenthesis, or
                              // the name's end when it closes on another line
                              // or over 4 KiB on
};
// Every `name (` outside comments, string and character literals and
// preprocessor lines, that is not a keyword or a member call (`.f(`, `->f(`).
std::vector<CallSite> CallSites(const std::string& text);

// An instrumentation point of <fieldprof/points.h> as the source marks it:
// FP_POINT("tag", "name"), FP_SCOPE, FP_BEGIN, FP_END and their _V forms,
// with both names written as plain string literals.
struct PointMark {
  std::string macro;  // "FP_POINT"
  std::string tag, name;
  size_t begin = 0, end = 0;  // the macro's name up to just past the name's literal
  size_t after = 0;           // just past the closing parenthesis (else `end`)
};
// Every such mark outside comments and strings, in order.
std::vector<PointMark> PointMarks(const std::string& text);

// The headers of every #include, as written ("zlib.h", "openssl/ssl.h").
std::vector<std::string> IncludedHeaders(const std::string& text);
// Whether one of the headers belongs to `module` (a shared object's name,
// "libz.so.1"): by a table of well-known headers, else by name (<foo.h> or
// <foo/...> for libfoo). docs/ide.md describes the rules.
bool ModuleMatchesIncludes(const std::string& module, const std::vector<std::string>& headers);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_IDE_SOURCE_H_
