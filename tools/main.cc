// fieldprof: the command line. This file only dispatches, on the table in
// commands.h; each command has its own entry file.
#include <cstring>
#include <iostream>
#include <string>

#include "tools/commands.h"

namespace {

void PrintHelp(std::ostream& out) {
  out << "Usage: fieldprof COMMAND [options]\n\nCommands:\n";
  for (const fieldprof::tools::Command& c : fieldprof::tools::Commands()) {
    std::string_view summary = c.summary;
    bool first = true;
    while (!summary.empty()) {
      const size_t nl = summary.find('\n');
      const std::string_view line = summary.substr(0, nl);
      std::string name(first ? c.name : "");
      name.resize(6, ' ');
      out << "  " << name << " " << line << "\n";
      summary = nl == std::string_view::npos ? "" : summary.substr(nl + 1);
      first = false;
    }
  }
  out << "\n'fieldprof COMMAND --help' describes each command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintHelp(std::cout);
    return argc < 2 ? 2 : 0;
  }
  const std::string_view cmd = argv[1];
  for (const fieldprof::tools::Command& c : fieldprof::tools::Commands()) {
    if (c.name == cmd) return c.run(argc - 1, argv + 1);
  }
  std::cerr << "fieldprof: unknown command '" << cmd << "' (see fieldprof --help)\n";
  return 2;
}
