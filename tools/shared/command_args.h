// The argv of a command that runs a program (fieldprof run, lab, check --):
// its own options, then "--", then the program and its arguments.
#ifndef FIELDPROF_TOOLS_SHARED_COMMAND_ARGS_H_
#define FIELDPROF_TOOLS_SHARED_COMMAND_ARGS_H_

#include <algorithm>
#include <string>
#include <vector>

namespace fieldprof::tools {

// The index of the first "--" in argv[1..argc), or argc when there is none:
// the options are argv[0..at).
inline int DoubleDashAt(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") return i;
  }
  return argc;
}

// The program's argv: what follows "--" at `at` (empty when none does).
inline std::vector<std::string> ProgramArgs(int argc, char** argv, int at) {
  return std::vector<std::string>(argv + std::min(at + 1, argc), argv + argc);
}

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_COMMAND_ARGS_H_
