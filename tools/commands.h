// The fieldprof subcommands. Each takes argv with the command name as
// argv[0] and returns the process exit code.
#ifndef FIELDPROF_TOOLS_COMMANDS_H_
#define FIELDPROF_TOOLS_COMMANDS_H_

#include <cstdio>
#include <string>

#include "common/proto/fieldprof.pb.h"

namespace fieldprof::tools {

int CmdTop(int argc, char** argv);
int CmdApi(int argc, char** argv);
int CmdRun(int argc, char** argv);
int CmdSpool(int argc, char** argv);
int CmdStatus(int argc, char** argv);
int CmdPull(int argc, char** argv);
int CmdCost(int argc, char** argv);
int CmdOptin(int argc, char** argv);
int CmdOptout(int argc, char** argv);
int CmdLsp(int argc, char** argv);
int CmdCheck(int argc, char** argv);

// One spool record, readably (cmd_spool.cc); `histograms` draws each metric.
void PrintRunRecord(std::FILE* out, const std::string& name, const wire::RunRecord& r,
                    bool histograms);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_COMMANDS_H_
