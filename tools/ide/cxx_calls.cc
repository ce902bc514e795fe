#include "tools/ide/cxx_calls.h"

#include <clang-c/CXCompilationDatabase.h>
#include <clang-c/Index.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

namespace fieldprof::tools {

// The libclang functions used, looked up once. libclang's C interface is
// stable across releases, so any Debian's libclang-N serves.
struct CxxCalls::Api {
#define FP_CLANG_FN(name) decltype(&::name) name = nullptr;
#define FP_CLANG_FNS(X)                              \
  X(clang_createIndex)                               \
  X(clang_disposeIndex)                              \
  X(clang_parseTranslationUnit2)                     \
  X(clang_reparseTranslationUnit)                    \
  X(clang_defaultReparseOptions)                     \
  X(clang_defaultEditingTranslationUnitOptions)      \
  X(clang_disposeTranslationUnit)                    \
  X(clang_getTranslationUnitCursor)                  \
  X(clang_visitChildren)                             \
  X(clang_getCursorKind)                             \
  X(clang_getCursorLocation)                         \
  X(clang_getCursorExtent)                           \
  X(clang_getCursorReferenced)                       \
  X(clang_getCursorReferenceNameRange)               \
  X(clang_getCursorSpelling)                         \
  X(clang_getCursorType)                             \
  X(clang_getPointeeType)                            \
  X(clang_getCanonicalType)                          \
  X(clang_getTypeDeclaration)                        \
  X(clang_getSpecializedCursorTemplate)              \
  X(clang_getCursorSemanticParent)                   \
  X(clang_Cursor_isNull)                             \
  X(clang_equalCursors)                              \
  X(clang_getFile)                                   \
  X(clang_File_isEqual)                              \
  X(clang_Cursor_getMangling)                        \
  X(clang_Cursor_getCXXManglings)                    \
  X(clang_Cursor_isFunctionInlined)                  \
  X(clang_CXXMethod_isVirtual)                       \
  X(clang_getRangeStart)                             \
  X(clang_getRangeEnd)                               \
  X(clang_Range_isNull)                              \
  X(clang_getFileLocation)                           \
  X(clang_getExpansionLocation)                      \
  X(clang_Location_isFromMainFile)                   \
  X(clang_Location_isInSystemHeader)                 \
  X(clang_getCString)                                \
  X(clang_disposeString)                             \
  X(clang_disposeStringSet)                          \
  X(clang_getNumDiagnostics)                         \
  X(clang_getDiagnostic)                             \
  X(clang_getDiagnosticSeverity)                     \
  X(clang_getDiagnosticSpelling)                     \
  X(clang_disposeDiagnostic)                         \
  X(clang_CompilationDatabase_fromDirectory)         \
  X(clang_CompilationDatabase_dispose)               \
  X(clang_CompilationDatabase_getCompileCommands)    \
  X(clang_CompilationDatabase_getAllCompileCommands) \
  X(clang_CompileCommands_getSize)                   \
  X(clang_CompileCommands_getCommand)                \
  X(clang_CompileCommands_dispose)                   \
  X(clang_CompileCommand_getDirectory)               \
  X(clang_CompileCommand_getFilename)                \
  X(clang_CompileCommand_getNumArgs)                 \
  X(clang_CompileCommand_getArg)
  FP_CLANG_FNS(FP_CLANG_FN)
#undef FP_CLANG_FN

  std::string Take(CXString s) const {
    const char* c = clang_getCString(s);
    std::string out = c != nullptr ? c : "";
    clang_disposeString(s);
    return out;
  }
};

struct CxxCalls::Doc {
  CXTranslationUnit tu = nullptr;
  std::vector<std::string> args;
  CxxUnit unit;
  uint64_t used = 0;    // when last asked for, in Parse calls
  bool failed = false;  // libclang could not parse unit.version_
};

namespace {

// libclang-N.so.1 of Debian's releases, newest first, then the unversioned.
std::vector<std::string> Candidates() {
  std::vector<std::string> out;
  for (int v = 21; v >= 11; --v) out.push_back("libclang-" + std::to_string(v) + ".so.1");
  out.push_back("libclang.so.1");
  return out;
}

bool IsFunction(CXCursorKind k) {
  return k == CXCursor_FunctionDecl || k == CXCursor_CXXMethod || k == CXCursor_Constructor ||
         k == CXCursor_Destructor || k == CXCursor_ConversionFunction;
}

bool IsIdent(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// A compile command's arguments as the parser takes them: only what
// changes how the source reads (include paths, macros, the language and
// its standard, the target, -f/-m/-W/-O options), include paths made
// absolute against the command's directory. Everything else is dropped:
// the compiler, the sources, outputs and dependency files (-o, -MF, -MJ,
// -Wp,...), and whatever loads code or reads more flags (-Xclang,
// -fplugin=, --config, @file). A database is a file anyone may hand you.
// (-working-directory is dropped too: libclang would change the whole
// process's current directory with it.)
std::vector<std::string> ParserArgs(const std::vector<std::string>& argv, const std::string& dir) {
  // Flags whose value may come in the next argument, and whether it is a
  // path.
  static const std::pair<const char*, bool> kWithValue[] = {
      {"-I", true},         {"-isystem", true},   {"-iquote", true},      {"-idirafter", true},
      {"-include", true},   {"-imacros", true},   {"-isysroot", true},    {"-cxx-isystem", true},
      {"--sysroot=", true}, {"-F", true},         {"-iwithprefix", true}, {"-D", false},
      {"-U", false},        {"-x", false},        {"-std=", false},       {"--std=", false},
      {"-stdlib=", false},  {"--target=", false}, {"-target", false}};
  static const char* const kPrefixes[] = {"-f", "-m", "-W", "-O"};
  static const char* const kNever[] = {"-fplugin",
                                       "-fpass-plugin",
                                       "-Wp,",
                                       "-Wl,",
                                       "-Wa,",
                                       "-fprofile",
                                       "-fcrash-diagnostics",
                                       "-fmodules-cache-path",
                                       "-fmodule-file",
                                       "-fdiagnostics-format",
                                       "-ftime-trace",
                                       "-fsave-optimization-record",
                                       "-fdump",
                                       "-fcoverage"};
  static const char* const kAlone[] = {"-pthread",    "-ansi",        "-pedantic", "-nostdinc",
                                       "-nostdinc++", "-nostdlibinc", "-trigraphs"};
  auto absolute = [&](const std::string& path) {
    return path.empty() || path[0] == '/' ? path : (std::filesystem::path(dir) / path).string();
  };
  auto starts = [](const std::string& a, const char* p) { return a.rfind(p, 0) == 0; };
  std::vector<std::string> out;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    bool taken = false;
    for (const auto& [flag, is_path] : kWithValue) {
      const std::string f = flag;
      if (a == f && f.back() != '=') {  // the value is the next argument
        if (i + 1 < argv.size()) {
          out.push_back(a);
          out.push_back(is_path ? absolute(argv[i + 1]) : argv[i + 1]);
        }
        ++i;
        taken = true;
        break;
      }
      if (a.size() > f.size() && starts(a, flag)) {
        out.push_back(f + (is_path ? absolute(a.substr(f.size())) : a.substr(f.size())));
        taken = true;
        break;
      }
    }
    if (taken) continue;
    bool never = false;
    for (const char* n : kNever) never = never || starts(a, n);
    if (never) continue;
    bool keep = false;
    for (const char* p : kPrefixes) keep = keep || (starts(a, p) && a.size() > 2);
    for (const char* p : kAlone) keep = keep || a == p;
    if (keep) out.push_back(a);
  }
  return out;
}

bool IsCxxPath(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".cc" || ext == ".cpp" || ext == ".cxx" || ext == ".C" || ext == ".c++" ||
         ext == ".hpp" || ext == ".hh" || ext == ".hxx" || ext == ".h" || ext == ".ipp" ||
         ext == ".tcc" || ext.empty();
}

}  // namespace

std::unique_ptr<CxxCalls> CxxCalls::Load(std::string* why_not, const std::string& path) {
  std::vector<std::string> tried = path.empty() ? Candidates() : std::vector<std::string>{path};
  void* h = nullptr;
  std::string name, last_error;
  for (const std::string& c : tried) {
    h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      name = c;
      break;
    }
    const char* e = dlerror();
    last_error = e != nullptr ? e : "";
  }
  if (h == nullptr) {
    *why_not = path.empty() ? "no libclang could be loaded (install Debian's libclang1-14, or pass "
                              "--libclang PATH)"
                            : "libclang could not be loaded from " + path + ": " + last_error;
    return nullptr;
  }
  std::unique_ptr<CxxCalls> out(new CxxCalls());
  out->api_ = std::make_unique<Api>();
  out->handle_ = h;
  out->library_ = name;
  Api& a = *out->api_;
  std::string missing;
#define FP_CLANG_SYM(fn)                                  \
  a.fn = reinterpret_cast<decltype(a.fn)>(dlsym(h, #fn)); \
  if (a.fn == nullptr && missing.empty()) missing = #fn;
  FP_CLANG_FNS(FP_CLANG_SYM)
#undef FP_CLANG_SYM
  if (!missing.empty()) {
    *why_not = name + " has no " + missing + " (libclang 11 or later is needed)";
    out->api_.reset();  // dlclose below, in the destructor
    return nullptr;
  }
  out->index_ = a.clang_createIndex(/*excludeDeclarationsFromPCH=*/0, /*displayDiagnostics=*/0);
  return out;
}

CxxCalls::~CxxCalls() {
  if (api_) {
    for (auto& [path, d] : docs_) {
      if (d->tu != nullptr) api_->clang_disposeTranslationUnit(d->tu);
    }
    for (auto& [dir, db] : databases_) {
      if (db.db != nullptr) api_->clang_CompilationDatabase_dispose(db.db);
    }
    if (index_ != nullptr) api_->clang_disposeIndex(index_);
  }
  if (handle_ != nullptr) dlclose(handle_);
}

void* CxxCalls::DatabaseIn(const std::string& dir) {
  const Api& a = *api_;
  const std::string file = dir + "/compile_commands.json";
  Database& e = databases_[dir];
  struct stat st;
  // Only the user's own (or root's) database, not one anybody may write:
  // a file under /tmp is not the project's word on its flags.
  const bool usable = stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                      (st.st_uid == getuid() || st.st_uid == 0) && (st.st_mode & S_IWOTH) == 0;
  const int64_t mtime_ns = usable ? st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec : -1;
  if (e.db != nullptr && e.mtime_ns == mtime_ns) return e.db;
  if (e.db != nullptr) a.clang_CompilationDatabase_dispose(e.db);  // changed or gone
  e = Database();
  if (!usable) return nullptr;
  CXCompilationDatabase_Error err;
  e.db = a.clang_CompilationDatabase_fromDirectory(dir.c_str(), &err);
  if (err != CXCompilationDatabase_NoError) e.db = nullptr;
  e.mtime_ns = mtime_ns;
  return e.db;
}

CxxCalls::Flags CxxCalls::FlagsFor(const std::string& path) {
  const Api& a = *api_;
  namespace fs = std::filesystem;
  auto read = [&](CXCompileCommand cmd) {
    std::vector<std::string> argv;
    for (unsigned i = 0; i < a.clang_CompileCommand_getNumArgs(cmd); ++i) {
      argv.push_back(a.Take(a.clang_CompileCommand_getArg(cmd, i)));
    }
    return ParserArgs(argv, a.Take(a.clang_CompileCommand_getDirectory(cmd)));
  };
  // The nearest database, as clangd finds it: the file's folder and each
  // parent, and their build/ folders.
  for (fs::path dir = fs::path(path).parent_path(), up; !dir.empty(); dir = up) {
    up = dir.parent_path();
    if (up == dir) up.clear();  // "/" is its own parent
    for (const fs::path& d : {dir, dir / "build"}) {
      CXCompilationDatabase db = DatabaseIn(d.string());
      if (db == nullptr) continue;
      const std::string from = (d / "compile_commands.json").string();
      CXCompileCommands cmds = a.clang_CompilationDatabase_getCompileCommands(db, path.c_str());
      if (cmds != nullptr && a.clang_CompileCommands_getSize(cmds) > 0) {
        Flags f{read(a.clang_CompileCommands_getCommand(cmds, 0)), from};
        a.clang_CompileCommands_dispose(cmds);
        return f;
      }
      if (cmds != nullptr) a.clang_CompileCommands_dispose(cmds);
      // Not listed (a header, a new file): the flags of a C++ file in the
      // same folder, else of the first C++ file listed.
      CXCompileCommands all = a.clang_CompilationDatabase_getAllCompileCommands(db);
      const unsigned n = all != nullptr ? a.clang_CompileCommands_getSize(all) : 0;
      int pick = -1;
      for (unsigned i = 0; i < n; ++i) {
        CXCompileCommand c = a.clang_CompileCommands_getCommand(all, i);
        const fs::path file = a.Take(a.clang_CompileCommand_getFilename(c));
        if (!IsCxxPath(file.string())) continue;
        if (pick < 0) pick = static_cast<int>(i);
        if (file.parent_path() == fs::path(path).parent_path()) {
          pick = static_cast<int>(i);
          break;
        }
      }
      Flags f{{"-xc++", "-std=c++17"}, from + " (lists no C++ file: defaults)"};
      if (pick >= 0) {
        CXCompileCommand c = a.clang_CompileCommands_getCommand(all, static_cast<unsigned>(pick));
        const std::string other = a.Take(a.clang_CompileCommand_getFilename(c));
        f.args = read(c);
        f.from = from + " (the flags of " + fs::path(other).filename().string() + ")";
      }
      if (all != nullptr) a.clang_CompileCommands_dispose(all);
      return f;  // the nearest database decides, as in clangd
    }
  }
  Flags f{{"-xc++", "-std=c++17"}, "defaults"};
  if (fs::path(path).is_absolute()) f.args.push_back("-I" + fs::path(path).parent_path().string());
  return f;
}

// Every call the main file makes, found by one walk of its AST: call
// expressions (a function's, a member's, an operator's, a constructor's)
// and `delete`. Declarations from other files are skipped whole.
class CxxCalls::Walker {
 public:
  Walker(const Api& a, const std::string& text) : a_(a), text_(text) {}

  std::vector<CxxCall> Run(CXTranslationUnit tu, const std::string& path) {
    main_ = a_.clang_getFile(tu, path.c_str());
    a_.clang_visitChildren(a_.clang_getTranslationUnitCursor(tu), &Walker::Visit, this);
    std::sort(calls_.begin(), calls_.end(), [](const CxxCall& x, const CxxCall& y) {
      return x.begin != y.begin ? x.begin < y.begin : x.symbols < y.symbols;
    });
    calls_.erase(std::unique(calls_.begin(), calls_.end(),
                             [](const CxxCall& x, const CxxCall& y) {
                               return x.begin == y.begin && x.symbols == y.symbols;
                             }),
                 calls_.end());
    return std::move(calls_);
  }

 private:
  static CXChildVisitResult Visit(CXCursor c, CXCursor /*parent*/, CXClientData data) {
    Walker& w = *static_cast<Walker*>(data);
    if (!w.InMainFile(w.a_.clang_getCursorLocation(c))) return CXChildVisit_Continue;
    const CXCursorKind k = w.a_.clang_getCursorKind(c);
    if (k == CXCursor_CallExpr) w.Call(c);
    if (k == CXCursor_CXXDeleteExpr) w.Delete(c);
    return CXChildVisit_Recurse;
  }

  // Whether `loc` is seen in the main file, a macro's body used there
  // included.
  bool InMainFile(CXSourceLocation loc) const {
    CXFile f = nullptr;
    unsigned line, col, off;
    a_.clang_getExpansionLocation(loc, &f, &line, &col, &off);
    return f != nullptr && main_ != nullptr && a_.clang_File_isEqual(f, main_);
  }

  // The offset in the main file where `loc` is seen: a macro argument where
  // it is written, a macro's body where the macro is used.
  bool Offset(CXSourceLocation loc, size_t* offset) const {
    CXFile f = nullptr;
    unsigned line, col, off;
    a_.clang_getFileLocation(loc, &f, &line, &col, &off);
    if (f == nullptr || off > text_.size()) return false;
    *offset = off;
    return true;
  }

  // The end of the identifier or operator token at `begin`.
  size_t TokenEnd(size_t begin, const std::string& spelling) const {
    size_t end = begin;
    if (end < text_.size() && text_[end] == '~') ++end;  // a destructor's name
    while (end < text_.size() && IsIdent(text_[end])) ++end;
    if (end > begin) return end;
    std::string op = spelling.rfind("operator", 0) == 0 ? spelling.substr(8) : "";
    while (!op.empty() && op[0] == ' ') op.erase(0, 1);
    if (op == "()" || op == "[]") return std::min(begin + 1, text_.size());
    if (!op.empty() && text_.compare(begin, op.size(), op) == 0) return begin + op.size();
    return std::min(begin + 1, text_.size());
  }

  // The callee's own name inside a call's callee expression: the first
  // child, through implicit casts, that refers to it.
  struct Find {
    const Walker* w;
    CXCursor target;
    CXCursor found;
    bool ok = false;
  };
  // The callee's name among a call's children, through implicit casts and
  // parentheses: the callee comes first, an operator's between its operands.
  static CXChildVisitResult FindName(CXCursor c, CXCursor, CXClientData data) {
    Find& f = *static_cast<Find*>(data);
    const Api& a = f.w->a_;
    const CXCursorKind k = a.clang_getCursorKind(c);
    if ((k == CXCursor_DeclRefExpr || k == CXCursor_MemberRefExpr) &&
        a.clang_equalCursors(a.clang_getCursorReferenced(c), f.target)) {
      f.found = c;
      f.ok = true;
      return CXChildVisit_Break;
    }
    if (k == CXCursor_UnexposedExpr || k == CXCursor_ParenExpr) return CXChildVisit_Recurse;
    return CXChildVisit_Continue;
  }

  void Call(CXCursor c) {
    const CXCursor ref = a_.clang_getCursorReferenced(c);
    if (a_.clang_Cursor_isNull(ref) || !IsFunction(a_.clang_getCursorKind(ref))) return;
    CxxCall call;
    call.spelling = a_.Take(a_.clang_getCursorSpelling(ref));
    const CXCursorKind rk = a_.clang_getCursorKind(ref);
    size_t begin = 0;
    if (rk == CXCursor_Constructor) {
      // Where the object is named: the variable, or the type of a
      // temporary. A conversion with no name of its own is left out.
      if (!Offset(a_.clang_getCursorLocation(c), &begin)) return;
      if (begin >= text_.size() || !IsIdent(text_[begin])) return;
    } else {
      // The function's own name, past `obj.` and `ns::`; an operator's
      // token (`a + b`, `os << x`).
      Find f{this, ref, {}};
      a_.clang_visitChildren(c, &Walker::FindName, &f);
      if (!f.ok) return;
      const CXSourceRange name = a_.clang_getCursorReferenceNameRange(f.found, 0, 0);
      const CXSourceLocation at = a_.clang_Range_isNull(name) ? a_.clang_getCursorLocation(f.found)
                                                              : a_.clang_getRangeStart(name);
      if (!Offset(at, &begin)) return;
    }
    call.begin = begin;
    call.end = TokenEnd(begin, call.spelling);
    if (rk != CXCursor_Constructor) {
      // A name seen where another is written: the macro whose body calls it.
      const std::string seen = text_.substr(call.begin, call.end - call.begin);
      const bool op = call.spelling.rfind("operator", 0) == 0;
      call.in_macro = IsIdent(seen[0]) && seen != call.spelling && !(op && seen == "operator");
    }
    Symbols(ref, /*deleting=*/false, &call);
    After(a_.clang_getCursorExtent(c), &call);
    Keep(std::move(call));
  }

  void Delete(CXCursor c) {
    // The operand's class, and its destructor if it declares one.
    struct Operand {
      const Walker* w;
      CXType type;
      bool ok = false;
    } o{this, {}};
    a_.clang_visitChildren(
        c,
        [](CXCursor child, CXCursor, CXClientData data) {
          Operand& o = *static_cast<Operand*>(data);
          o.type = o.w->a_.clang_getCursorType(child);
          o.ok = true;
          return CXChildVisit_Break;
        },
        &o);
    if (!o.ok) return;
    const CXType pointee = a_.clang_getCanonicalType(a_.clang_getPointeeType(o.type));
    const CXCursor cls = a_.clang_getTypeDeclaration(pointee);
    if (a_.clang_Cursor_isNull(cls)) return;
    struct Dtor {
      const Walker* w;
      CXCursor found;
      bool ok = false;
    } d{this, {}};
    a_.clang_visitChildren(
        cls,
        [](CXCursor child, CXCursor, CXClientData data) {
          Dtor& d = *static_cast<Dtor*>(data);
          if (d.w->a_.clang_getCursorKind(child) != CXCursor_Destructor)
            return CXChildVisit_Continue;
          d.found = child;
          d.ok = true;
          return CXChildVisit_Break;
        },
        &d);
    if (!d.ok) return;
    CxxCall call;
    call.spelling = a_.Take(a_.clang_getCursorSpelling(d.found));
    if (!Offset(a_.clang_getCursorLocation(c), &call.begin)) return;
    call.end = TokenEnd(call.begin, "");
    Symbols(d.found, /*deleting=*/true, &call);
    After(a_.clang_getCursorExtent(c), &call);
    Keep(std::move(call));
  }

  // Mangled names, the one a call uses first; whether the callee is virtual
  // and whether it is code from a header (inline, or a template's).
  void Symbols(CXCursor ref, bool deleting, CxxCall* call) const {
    const CXCursorKind k = a_.clang_getCursorKind(ref);
    if (k == CXCursor_Constructor || k == CXCursor_Destructor) {
      CXStringSet* set = a_.clang_Cursor_getCXXManglings(ref);
      for (unsigned i = 0; set != nullptr && i < set->Count; ++i) {
        const char* s = a_.clang_getCString(set->Strings[i]);
        if (s != nullptr && *s != 0) call->symbols.push_back(s);
      }
      if (set != nullptr) a_.clang_disposeStringSet(set);
      // C1/D1 (the complete object) is what a call site uses; D0 (the
      // deleting destructor) for a `delete` of a virtual one.
      const bool virt = a_.clang_CXXMethod_isVirtual(ref) != 0;
      const std::string first = k == CXCursor_Constructor ? "C1" : deleting && virt ? "D0" : "D1";
      std::stable_sort(call->symbols.begin(), call->symbols.end(),
                       [&](const std::string& x, const std::string& y) {
                         return x.find(first) != std::string::npos &&
                                y.find(first) == std::string::npos;
                       });
    } else {
      const std::string m = a_.Take(a_.clang_Cursor_getMangling(ref));
      if (!m.empty()) call->symbols.push_back(m);
    }
    call->is_virtual = k != CXCursor_FunctionDecl && a_.clang_CXXMethod_isVirtual(ref) != 0;
    const CXSourceLocation decl = a_.clang_getCursorLocation(ref);
    const bool from_header = !a_.clang_Location_isFromMainFile(decl);
    call->system = a_.clang_Location_isInSystemHeader(decl) != 0;
    call->header_code =
        from_header && (a_.clang_Cursor_isFunctionInlined(ref) != 0 ||
                        !a_.clang_Cursor_isNull(a_.clang_getSpecializedCursorTemplate(ref)));
  }

  void After(CXSourceRange extent, CxxCall* call) const {
    size_t end = 0;
    call->after = call->end;
    if (!Offset(a_.clang_getRangeEnd(extent), &end) || end < call->end) return;
    if (text_.find('\n', call->end) >= end) call->after = end;
  }

  void Keep(CxxCall call) {
    if (call.symbols.empty()) return;
    calls_.push_back(std::move(call));
  }

  const Api& a_;
  const std::string& text_;
  CXFile main_ = nullptr;
  std::vector<CxxCall> calls_;
};

const CxxUnit* CxxCalls::Parse(const std::string& key, const std::string& path,
                               const std::string& text, int64_t version) {
  const Api& a = *api_;
  std::unique_ptr<Doc>& slot = docs_[key];
  if (!slot) slot = std::make_unique<Doc>();
  Doc& d = *slot;
  d.used = ++uses_;
  // The same text again, parsed or not parsable: the same answer (a parse
  // that failed is not tried again until the text changes).
  if (d.unit.version_ == version && (d.tu != nullptr || d.failed)) return &d.unit;
  d.failed = false;
  // A parsed unit holds 50-200 MB: past kMaxUnits, the one asked for
  // least recently is dropped (its calls too; asked again, it is parsed).
  size_t parsed = 0;
  Doc* oldest = nullptr;
  for (auto& [p, other] : docs_) {
    if (other->tu == nullptr || other.get() == &d) continue;
    ++parsed;
    if (oldest == nullptr || other->used < oldest->used) oldest = other.get();
  }
  if (parsed >= kMaxUnits && oldest != nullptr) {
    a.clang_disposeTranslationUnit(oldest->tu);
    oldest->tu = nullptr;
    oldest->unit = CxxUnit();
  }
  ++parses_;
  const auto t0 = std::chrono::steady_clock::now();
  // Nothing of the parse may move this process's current directory, which
  // relative paths of the server's (its cache) are read against.
  struct KeepCwd {
    int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ~KeepCwd() {
      if (fd >= 0 && fchdir(fd) != 0) std::perror("fieldprof lsp: fchdir");
      if (fd >= 0) close(fd);
    }
  } keep_cwd;
  CXUnsavedFile unsaved{path.c_str(), text.data(), static_cast<unsigned long>(text.size())};
  CxxUnit unit;
  unit.version_ = version;
  if (d.tu != nullptr) {
    if (a.clang_reparseTranslationUnit(d.tu, 1, &unsaved, a.clang_defaultReparseOptions(d.tu)) !=
        0) {
      a.clang_disposeTranslationUnit(d.tu);  // unusable after a failed reparse
      d.tu = nullptr;
    }
  }
  if (d.tu == nullptr) {
    Flags f = FlagsFor(path);
    d.args = std::move(f.args);
    d.unit.flags_from_ = f.from;
    std::vector<const char*> argv;
    for (const std::string& s : d.args) argv.push_back(s.c_str());
    const unsigned options =
        a.clang_defaultEditingTranslationUnitOptions() | CXTranslationUnit_KeepGoing |
        CXTranslationUnit_LimitSkipFunctionBodiesToPreamble | CXTranslationUnit_SkipFunctionBodies;
    const CXErrorCode e =
        a.clang_parseTranslationUnit2(index_, path.c_str(), argv.data(),
                                      static_cast<int>(argv.size()), &unsaved, 1, options, &d.tu);
    if (e != CXError_Success) {
      d.tu = nullptr;
      d.failed = true;
      unit.errors_ = 1;
      unit.first_error_ = "libclang could not parse it (error " + std::to_string(e) + ")";
    }
  }
  unit.flags_from_ = d.unit.flags_from_;
  if (d.tu != nullptr) {
    for (unsigned i = 0; i < a.clang_getNumDiagnostics(d.tu); ++i) {
      CXDiagnostic g = a.clang_getDiagnostic(d.tu, i);
      if (a.clang_getDiagnosticSeverity(g) >= CXDiagnostic_Error) {
        if (unit.errors_++ == 0) unit.first_error_ = a.Take(a.clang_getDiagnosticSpelling(g));
      }
      a.clang_disposeDiagnostic(g);
    }
    unit.calls_ = Walker(a, text).Run(d.tu, path);
  }
  unit.parse_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  d.unit = std::move(unit);
  return &d.unit;
}

void CxxCalls::Close(const std::string& key) {
  auto it = docs_.find(key);
  if (it == docs_.end()) return;
  if (it->second->tu != nullptr) api_->clang_disposeTranslationUnit(it->second->tu);
  docs_.erase(it);
}

std::vector<const CxxCall*> CxxUnit::At(size_t offset) const {
  // The calls whose name holds the offset; else those whose name ends just
  // before it (a cursor right after a name), as a word is found in C.
  std::vector<const CxxCall*> in, just_after;
  for (const CxxCall& c : calls_) {
    if (c.begin > offset) break;
    if (offset < c.end) in.push_back(&c);
    if (offset == c.end) just_after.push_back(&c);
  }
  return in.empty() ? just_after : in;
}

}  // namespace fieldprof::tools
