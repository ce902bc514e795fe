// The fieldprof subcommands. Each takes argv with the command name as
// argv[0] and returns the process exit code.
#ifndef FIELDPROF_TOOLS_COMMANDS_H_
#define FIELDPROF_TOOLS_COMMANDS_H_

namespace fieldprof::tools {

int CmdTop(int argc, char** argv);
int CmdApi(int argc, char** argv);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_COMMANDS_H_
