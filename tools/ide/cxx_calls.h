// Which C++ function a call is. A name alone cannot tell (`s.find("x")`,
// `out.write(p, n)`, `std::string s("x")`, `a + b`), so the language server
// asks Clang: libclang, loaded at run time, parses the document with the
// project's own compile flags and names every call the main file makes by
// the mangled symbol of the declaration it resolves to, which is how the
// field keys C++ APIs. docs/ide.md says why libclang rather than clangd.
//
//   std::string why;
//   std::unique_ptr<CxxCalls> cxx = CxxCalls::Load(&why);  // null: `why` says
//   const CxxUnit* u = cxx->Parse("/src/a.cc", text, version);
//   for (const CxxCall* c : u->At(offset)) ... c->symbols[0] ...
//
// Compile flags come from compile_commands.json, looked for as clangd does:
// in the file's directory and each parent, and in their build/ folders. A
// file the database does not list borrows the flags of one in the same
// folder (else any); without a database, C++17 with the file's folder on the
// include path. A unit is parsed once per document version; edits reparse it
// with its precompiled preamble (the #include block), which is kept. At
// most kMaxUnits units are kept parsed, the most recently used.
#ifndef FIELDPROF_TOOLS_IDE_CXX_CALLS_H_
#define FIELDPROF_TOOLS_IDE_CXX_CALLS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fieldprof::tools {

struct CxxCall {
  // Mangled symbols of the callee, the one a call site uses first
  // (constructors and destructors have several: C1 before C2, D0 for a
  // `delete` of a class with a virtual destructor). A C function's is its
  // plain name.
  std::vector<std::string> symbols;
  std::string spelling;       // the callee's own name: "find", "operator+"
  size_t begin = 0, end = 0;  // the name as written (an operator's token, a
                              // macro's name when the call is in its body)
  size_t after = 0;           // past the call's closing parenthesis when on
                              // the name's line, else `end`
  bool is_virtual = false;    // a virtual member: the static type's function
  bool header_code = false;   // inline or template code defined in a header
  bool system = false;        // declared in a system header: a library's API
  bool in_macro = false;      // written in a macro's body
};

// One parsed document.
class CxxUnit {
 public:
  // The calls whose name holds `offset` (several for a macro whose body
  // calls more than one API), else those whose name ends at it; in the
  // order written.
  std::vector<const CxxCall*> At(size_t offset) const;
  const std::vector<CxxCall>& calls() const { return calls_; }
  int64_t version() const { return version_; }
  // Errors Clang found (a missing header leaves calls unresolved), and the
  // first's text.
  int errors() const { return errors_; }
  const std::string& first_error() const { return first_error_; }
  // Where the flags came from: a compile_commands.json, or "defaults".
  const std::string& flags_from() const { return flags_from_; }
  double parse_ms() const { return parse_ms_; }

 private:
  friend class CxxCalls;
  std::vector<CxxCall> calls_;  // by begin
  int64_t version_ = -1;
  int errors_ = 0;
  std::string first_error_, flags_from_;
  double parse_ms_ = 0;
};

class CxxCalls {
 public:
  // libclang loaded from `path`, or else the newest of Debian's
  // (libclang-N.so.1, libclang.so.1). Null when none loads; `why_not` says
  // what would make C++ calls resolve.
  static std::unique_ptr<CxxCalls> Load(std::string* why_not, const std::string& path = "");
  ~CxxCalls();
  CxxCalls(const CxxCalls&) = delete;
  CxxCalls& operator=(const CxxCalls&) = delete;

  // The unit of the document `key` (its URI): the file `path` with `text`
  // as its contents, parsed again only when `version` differs from the last
  // parse. Never null: a unit Clang could not parse at all has no calls and
  // says why (and is not tried again at the same version). The pointer
  // holds until the next Parse.
  const CxxUnit* Parse(const std::string& key, const std::string& path, const std::string& text,
                       int64_t version);
  // Forgets a closed document.
  void Close(const std::string& key);

  const std::string& library() const { return library_; }
  uint64_t parses() const { return parses_; }  // parses and reparses so far

  // Parsed units kept at once (the documents asked for most recently).
  static constexpr size_t kMaxUnits = 8;

 private:
  struct Api;
  struct Doc;
  class Walker;
  struct Flags {
    std::vector<std::string> args;
    std::string from;
  };
  CxxCalls() = default;
  Flags FlagsFor(const std::string& path);
  // The compile_commands.json of `dir`, opened again when the file changed;
  // null when there is none usable.
  void* DatabaseIn(const std::string& dir);

  std::unique_ptr<Api> api_;
  void* handle_ = nullptr;
  void* index_ = nullptr;
  std::string library_;
  std::map<std::string, std::unique_ptr<Doc>> docs_;
  struct Database {
    void* db = nullptr;
    int64_t mtime_ns = -1;  // of the file it was read from
  };
  std::map<std::string, Database> databases_;  // by directory
  uint64_t uses_ = 0, parses_ = 0;
};

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_IDE_CXX_CALLS_H_
