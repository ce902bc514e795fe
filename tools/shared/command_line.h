// The two ends of a command's flag handling that every command shares:
// reading argv (and answering --help), and reporting a usage error; and
// for a command with verbs (fieldprof points record, fieldprof tree show),
// the one way a verb is found.
//
//   ExitCode ParseShowOptions(int argc, char** argv, ShowOptions* o) {
//     OptionTable t("fieldprof lab show", "...");
//     ...
//     Status s;
//     if (ParseOrShowHelp(t, argc, argv, &s)) return 0;  // --help printed
//     if (s.ok() && t.positional().empty()) s = InvalidArgument("give a profile");
//     if (!s.ok()) return UsageError(t, s);               // exit code 2
//     return std::nullopt;                                 // go on
//   }
//   int LabShow(int argc, char** argv) {
//     ShowOptions o;
//     if (const ExitCode done = ParseShowOptions(argc, argv, &o)) return *done;
//     ...
//   }
// A command's own failures after that are said on stderr with exit code 1.
#ifndef FIELDPROF_TOOLS_SHARED_COMMAND_LINE_H_
#define FIELDPROF_TOOLS_SHARED_COMMAND_LINE_H_

#include <optional>
#include <span>
#include <string>

#include "common/base/status.h"
#include "common/settings/options.h"

namespace fieldprof::tools {

// What reading a command's arguments came to: nothing, to go on; or the
// exit code to end the command with now: 0 after --help (printed), 2
// after a usage error (said). Every command's parse returns it:
//   if (const ExitCode done = ParseApiOptions(argc, argv, &o)) return *done;
using ExitCode = std::optional<int>;

// Reads argv into `t`, leaving a bad flag's error in `*s` for the command to
// report after its own checks. Returns true after --help, which it has
// printed to stdout: the command has nothing more to do.
[[nodiscard]] bool ParseOrShowHelp(OptionTable& t, int argc, const char* const* argv, Status* s);

// Prints "PROGRAM: MESSAGE (see --help)" to stderr, PROGRAM as `t` names
// it. Returns 2, the exit code of a usage error.
int UsageError(const OptionTable& t, const Status& s);

// A verb of a command with verbs: its name, and what runs it, given the
// arguments from the verb on (argv[0] is the verb).
struct Verb {
  const char* name;
  int (*run)(int argc, char** argv);
};

// Runs the verb argv[1] names: run(argc - 1, argv + 1). Without one,
// --help prints `help` (exit 0; no argument at all, exit 2), and a flag
// or a word that is no verb is a usage error that names the verbs (exit
// 2). `command` ("fieldprof points") names the command in errors.
int RunVerb(const std::string& command, std::span<const Verb> verbs, OptionTable& help, int argc,
            char** argv);
// For a command that does something of its own without a verb (fieldprof
// record -- CMD, fieldprof lab -- CMD): `without_verb` runs, given the
// whole argv, unless argv[1] names a verb.
int RunVerb(std::span<const Verb> verbs, int argc, char** argv,
            int (*without_verb)(int argc, char** argv));

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_COMMAND_LINE_H_
