// The language server (server_impl.h): C++ documents. Clang names the
// function each call resolves to (cxx_calls.h); the hover shows that exact
// API's field cost, or why the field has none, and lenses and hints come
// from the same calls.
#include <dlfcn.h>

#include <cstring>
#include <filesystem>

#include "common/stacks/cxx_names.h"
#include "tools/ide/server_impl.h"

namespace fieldprof::tools::lsp {
namespace {

bool IsCxxDocument(const Document& d) {
  if (d.language == "cpp" || d.language == "cuda" || d.language == "objective-cpp") return true;
  if (!d.language.empty()) return false;  // "c", or another language
  const std::string& p = d.path;
  const size_t dot = p.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : p.substr(dot);
  return ext == ".cc" || ext == ".cpp" || ext == ".cxx" || ext == ".hpp" || ext == ".hh";
}

// A demangled name as people write it: libstdc++'s spelled-out standard
// types by their usual names.
std::string Readable(std::string name) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >",
       "std::string"},
      {"std::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string"},
      {"std::basic_ostream<char, std::char_traits<char> >", "std::ostream"},
      {"std::basic_istream<char, std::char_traits<char> >", "std::istream"},
      {"std::basic_ofstream<char, std::char_traits<char> >", "std::ofstream"},
      {"std::basic_ifstream<char, std::char_traits<char> >", "std::ifstream"},
      {"std::__cxx11::", "std::"},
      {"std::filesystem::__cxx11::", "std::filesystem::"},
  };
  for (const auto& [from, to] : kNames) {
    for (size_t at = name.find(from); at != std::string::npos; at = name.find(from, at)) {
      name.replace(at, std::strlen(from), to);
      at += std::strlen(to);
    }
  }
  return name;
}

// The mangled name up to and including the function's own name, so that
// its overloads share it: "_ZNKSt7__cxx11...4find" (nested: the name is
// followed by E, I for template arguments, or B for an ABI tag), "_Z6strlen"
// and "_ZSt4sort" (unscoped: parameter types follow at once). Empty for
// operators, constructors and destructors, and a name not found. Overloads
// that differ in const-ness do not share it.
std::string OverloadPrefix(const std::string& symbol, const std::string& spelling) {
  if (spelling.empty() || spelling.rfind("operator", 0) == 0 || spelling[0] == '~') return "";
  const std::string token = std::to_string(spelling.size()) + spelling;
  for (const char* unscoped : {"_Z", "_ZSt"}) {
    if (symbol.compare(0, std::strlen(unscoped) + token.size(), unscoped + token) == 0) {
      return std::string(unscoped) + token;
    }
  }
  if (symbol.rfind("_ZN", 0) != 0) return "";
  // The first place where the whole name ends a nested name's last part.
  for (size_t at = symbol.find(token); at != std::string::npos; at = symbol.find(token, at + 1)) {
    const size_t next = at + token.size();
    const bool whole = !std::isdigit(static_cast<unsigned char>(symbol[at - 1])) &&
                       next < symbol.size() &&
                       (symbol[next] == 'E' || symbol[next] == 'I' || symbol[next] == 'B');
    if (whole) return symbol.substr(0, next);
  }
  return "";
}

// The module that exports `symbol` among those this process has loaded
// (libstdc++ and libc are: the server is a C++ program), or "".
std::string LoadedExporter(const std::string& symbol) {
  void* at = dlsym(RTLD_DEFAULT, symbol.c_str());
  Dl_info info;
  if (at == nullptr || dladdr(at, &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string file = info.dli_fname;
  return file.substr(file.rfind('/') + 1);
}

}  // namespace

std::string PathOfUri(const std::string& uri) {
  if (uri.rfind("file://", 0) != 0) {
    std::string name;
    for (char c : uri) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    std::error_code ec;
    return (std::filesystem::current_path(ec) / ("fieldprof-unsaved-" + name)).string();
  }
  std::string out;
  const size_t path = uri.find('/', 7);  // past a host: file://host/p
  for (size_t i = path == std::string::npos ? uri.size() : path; i < uri.size(); ++i) {
    if (uri[i] == '%' && i + 2 < uri.size() &&
        std::isxdigit(static_cast<unsigned char>(uri[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(uri[i + 2]))) {
      out += static_cast<char>(std::stoi(uri.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += uri[i];
    }
  }
  return out;
}

const CxxUnit* Server::CxxUnitOf(Document& d) {
  if (!opt_.cxx || !IsCxxDocument(d)) return nullptr;
  if (!cxx_tried_) {
    cxx_tried_ = true;
    std::string why;
    cxx_ = CxxCalls::Load(&why, opt_.libclang);
    Log(cxx_ ? kLogInfo : kLogWarning, cxx_ ? "C++ calls are resolved by " + cxx_->library()
                                            : "C++ calls are found by name only, as in C: " + why);
  }
  if (!cxx_) return nullptr;
  const uint64_t parses = cxx_->parses();
  const CxxUnit* u = cxx_->Parse(d.uri, d.path, d.text, static_cast<int64_t>(d.edits));
  if (cxx_->parses() != parses) {
    char line[128];
    std::snprintf(line, sizeof line, ": %zu calls in %.0f ms (flags: ", u->calls().size(),
                  u->parse_ms());
    Log(kLogInfo, "C++ parse of " + d.path + line + u->flags_from() + ")");
  }
  // What a parse could not see is said once per document and problem.
  std::string problem;
  if (u->errors() > 0) {
    problem = "C++ parse of " + d.path + " (flags: " + u->flags_from() +
              "): " + std::to_string(u->errors()) + " error(s), the first: " + u->first_error() +
              "; calls Clang could not resolve have no field cost";
  }
  if (problem != d.told && !problem.empty()) Log(kLogWarning, problem);
  d.told = problem;
  return u;
}

json Server::CxxHover(const std::string& text, const std::vector<const CxxCall*>& calls) {
  std::shared_ptr<const CostIndex> ix = Index("textDocument/hover");
  std::string md;
  size_t shown = 0;
  for (const CxxCall* c : calls) {
    std::shared_ptr<const std::vector<ApiCost>> found;
    std::string symbol = c->symbols.front();
    for (const std::string& s : c->symbols) {  // C1 before C2, ...
      if (!ix) break;
      std::shared_ptr<const std::vector<ApiCost>> f = ix->Find(s);
      if (!f->empty()) {
        found = std::move(f);
        symbol = s;
        break;
      }
    }
    // The program's own functions are clangd's to describe.
    if (!found && !c->system) continue;
    if (shown++ > 0) md += "\n---\n\n";
    const std::string name = Readable(Demangle(symbol));
    md += "### " + name + (found ? " — field cost" : " — no field data") + "\n\n";
    md += "`" + symbol + "`";
    if (c->in_macro && c->end <= text.size()) {
      md += " · called in the body of the macro `" + text.substr(c->begin, c->end - c->begin) + "`";
    }
    md += "\n\n";
    if (c->is_virtual) {
      md += "Virtual: this is the static type's function; the call may run an override.\n\n";
    }
    if (found) {
      md += Cards(*found, text);
      continue;
    }
    const std::string exporter = LoadedExporter(symbol);
    if (!exporter.empty()) {
      md += "`" + exporter + "` exports it; the field has no data for it in this snapshot yet.";
      if (c->header_code) {
        md +=
            " It is also defined in a header (inline or template code), so an optimizing "
            "build may compile it into the caller instead of calling the library.";
      }
      md += "\n";
    } else if (c->header_code) {
      md +=
          "Defined in a header (inline or template code): a build that inlines it "
          "compiles it into the caller and calls no library function here, and the field has "
          "no data for this symbol.\n";
    } else {
      md += "The field has no data for it in this snapshot yet.\n";
    }
    if (!ix) continue;
    // What the field has of the same function: an optimizing build often
    // calls one of these from the inline one.
    const std::string prefix = OverloadPrefix(symbol, c->spelling);
    std::vector<std::string> others =
        prefix.empty() ? std::vector<std::string>() : ix->SymbolsWithPrefix(prefix, 5);
    others.erase(std::remove(others.begin(), others.end(), symbol), others.end());
    if (!others.empty()) {
      md += "\nThe field has other overloads of `" + c->spelling + "`:\n";
      for (const std::string& o : others) {
        std::shared_ptr<const std::vector<ApiCost>> f = ix->Find(o);
        if (f->empty()) continue;
        const ApiCost& a = f->front();
        md += "- `" + Readable(Demangle(o)) + "` in `" + a.module + "`: p50 " +
              FormatMetricValue(wire::METRIC_WALL_TIME_NS, a.time.p50, a.resolution_ns) + ", " +
              FormatCount(a.time.count) + " calls\n";
      }
    }
  }
  if (shown == 0) return nullptr;
  if (ix) md += "\n---\n\n" + SnapshotLine(*ix);
  const CxxCall& first = *calls.front();
  json range = {{"start", PositionOf(text, first.begin)}, {"end", PositionOf(text, first.end)}};
  return {{"contents", {{"kind", "markdown"}, {"value", md}}}, {"range", range}};
}

void Server::CxxSites(const CxxUnit& u, const CostIndex& ix, std::vector<Site>* out) {
  for (const CxxCall& c : u.calls()) {
    for (const std::string& s : c.symbols) {
      std::shared_ptr<const std::vector<ApiCost>> found = ix.Find(s);
      if (found->empty()) continue;
      const ApiCost* best = &found->front();  // the most called module
      if (Solid(*best)) {
        CallSite cs;
        cs.name = c.spelling;
        cs.begin = c.begin;
        cs.end = c.end;
        cs.after = c.after;
        out->push_back({cs, best, found->size() > 1, std::move(found)});
      }
      break;
    }
  }
}

}  // namespace fieldprof::tools::lsp
