#include "tools/record/command_points.h"

#include <iostream>
#include <set>

#include "common/system/exported_symbols.h"
#include "tools/shared/program_files.h"

namespace fieldprof::tools {

bool ModuleHasPoints(const std::string& path) { return ReadElfFacts(path).imports_point_hit; }

std::string CommandModuleWithPoints(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  const std::string program = ProgramFile(argv[0]);
  if (program.empty()) return "";
  const ElfFacts facts = ReadElfFacts(program);
  if (facts.imports_point_hit) return program;
  if (facts.interpreter.empty()) return "";  // static, or not a program: no libraries to load
  const std::vector<StartLibrary> libs = StartLibraries(program);
  if (libs.empty()) {
    // A dynamic program loads at least the C library: ldd failed or took
    // too long.
    std::cerr << "fieldprof record: ldd " << program
              << " did not answer: the libraries it loads were not looked at for points "
                 "(--points records them anyway)\n";
  }
  for (const StartLibrary& lib : libs) {
    if (ModuleHasPoints(lib.file)) return lib.file;
  }
  return "";
}

std::vector<std::string> ModulesWithPoints(const std::vector<std::string>& paths) {
  std::set<std::string> seen, named;
  std::vector<std::string> out;
  for (const std::string& path : paths) {
    // Relative: a name as the program's loader was given it (the in-program
    // sampler writes it so), not a file to look for from here.
    if (path.empty() || path[0] != '/' || !seen.insert(path).second || !ModuleHasPoints(path)) {
      continue;
    }
    const std::string name = path.substr(path.rfind('/') + 1);
    if (named.insert(name).second) out.push_back(name);
  }
  return out;
}

}  // namespace fieldprof::tools
