#include "tools/shared/command_line.h"

#include <iostream>

namespace fieldprof::tools {

bool ParseOrShowHelp(OptionTable& t, int argc, const char* const* argv, Status* s) {
  *s = t.Parse(argc, argv);
  if (!t.help_requested()) return false;
  std::cout << t.Help();
  return true;
}

int UsageError(const OptionTable& t, const Status& s) {
  std::cerr << t.program() << ": " << s.message() << " (see --help)\n";
  return 2;
}

}  // namespace fieldprof::tools
