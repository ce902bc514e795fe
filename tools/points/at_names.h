// C++ names for `fieldprof points record --at` (docs/points.md): the
// runtime finds a function by its symbol, which for C++ is the mangled
// name (_ZN6Config4loadERKSs). A user writes the name they read in their
// code or in a profile, `myprog:Config::load`, so the command looks it up
// in the module's file first: every function whose demangled name is that
// name, or that name followed by its parameter list (all overloads), and
// hands the runtime their symbols.
#ifndef FIELDPROF_TOOLS_POINTS_AT_NAMES_H_
#define FIELDPROF_TOOLS_POINTS_AT_NAMES_H_

#include <string>
#include <vector>

#include "common/base/status.h"

namespace fieldprof::tools {

// A symbol as written: a C identifier (or a mangled name) goes to the
// runtime as it is; anything else ("Config::load", "ns::f(int)",
// "operator<") is a C++ name to look up.
bool IsPlainSymbol(const std::string& name);

struct CxxMatch {
  std::string symbol;     // mangled
  std::string demangled;  // as c++filt prints it
};

// The functions defined in the ELF file `path` (its symbol table and its
// dynamic symbols) whose demangled name is `name`, or `name` followed by a
// parameter list and qualifiers (" const", " [clone .isra.0]"). With no
// match, *near holds up to 5 demangled names that end in `name`'s last
// part, for the error. IOError when the file does not read as ELF.
[[nodiscard]] StatusOr<std::vector<CxxMatch>> FunctionsNamed(const std::string& path,
                                                             const std::string& name,
                                                             std::vector<std::string>* near);

// The file of module `module` as `program` (a path) would load it: the
// program itself when `module` is its file name, else the library of that
// soname as the dynamic linker resolves it for the program (ldd), else in
// ldconfig's cache. "" when none is found.
std::string ModuleFile(const std::string& program, const std::string& module);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_POINTS_AT_NAMES_H_
