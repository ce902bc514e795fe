// The two ends of a command's flag handling that every command shares:
// reading argv (and answering --help), and reporting a usage error.
//
//   OptionTable t("fieldprof lab show", "...");
//   ...
//   Status s;
//   if (ParseOrShowHelp(t, argc, argv, &s)) return 0;   // --help printed
//   if (s.ok() && t.positional().empty()) s = InvalidArgument("give a profile");
//   if (!s.ok()) return UsageError(t, s);                // exit code 2
#ifndef FIELDPROF_TOOLS_SHARED_COMMAND_LINE_H_
#define FIELDPROF_TOOLS_SHARED_COMMAND_LINE_H_

#include "common/base/status.h"
#include "common/settings/options.h"

namespace fieldprof::tools {

// Reads argv into `t`, leaving a bad flag's error in `*s` for the command to
// report after its own checks. Returns true after --help, which it has
// printed to stdout: the command has nothing more to do.
[[nodiscard]] bool ParseOrShowHelp(OptionTable& t, int argc, const char* const* argv, Status* s);

// Prints "PROGRAM: MESSAGE (see --help)" to stderr, PROGRAM as `t` names
// it. Returns 2, the exit code of a usage error.
int UsageError(const OptionTable& t, const Status& s);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_COMMAND_LINE_H_
