// The fieldprof subcommands, one entry file each under tools/<capability>/
// (cmd_*.cc), and the table main.cc dispatches on and --help lists. Each
// takes argv with the command name as argv[0] and returns the process exit
// code. What two commands share lives in tools/shared/ or common/, never in
// another command's file.
#ifndef FIELDPROF_TOOLS_COMMANDS_H_
#define FIELDPROF_TOOLS_COMMANDS_H_

#include <span>
#include <string_view>

namespace fieldprof::tools {

// tools/field/: the field's costs and stacks, from an aggregator or the
// local cache.
int CmdTop(int argc, char** argv);
int CmdApi(int argc, char** argv);
int CmdPull(int argc, char** argv);
int CmdCost(int argc, char** argv);
int CmdStacks(int argc, char** argv);
// tools/volunteer/: taking part, on this machine.
int CmdRun(int argc, char** argv);
int CmdSpool(int argc, char** argv);
int CmdStatus(int argc, char** argv);
int CmdOptin(int argc, char** argv);
int CmdOptout(int argc, char** argv);
// tools/check/, tools/lab/: your runs against the field; one scenario whole.
int CmdCheck(int argc, char** argv);
int CmdLab(int argc, char** argv);
int CmdRecord(int argc, char** argv);  // tools/record/: sampled stacks, idle threads
int CmdTree(int argc, char** argv);    // tools/tree/: call trees and their algebra
int CmdPoints(int argc, char** argv);  // tools/points/: instrumentation points per run
// tools/vendor/: a module's reports, diffs and doc snippets.
int CmdReport(int argc, char** argv);
int CmdDiff(int argc, char** argv);
int CmdDocs(int argc, char** argv);
// tools/ide/: the language server.
int CmdLsp(int argc, char** argv);

struct Command {
  std::string_view name;
  // What `fieldprof --help` says of it; a second line, if any, after '\n'.
  std::string_view summary;
  int (*run)(int argc, char** argv);
};

// Every command, in the order `fieldprof --help` lists them.
std::span<const Command> Commands();

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_COMMANDS_H_
