// The fieldprof subcommands. Each takes argv with the command name as
// argv[0] and returns the process exit code.
#ifndef FIELDPROF_TOOLS_COMMANDS_H_
#define FIELDPROF_TOOLS_COMMANDS_H_

#include <cstdio>
#include <string>
#include <vector>

#include "common/proto/fieldprof.pb.h"
#include "common/status.h"

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
int CmdLab(int argc, char** argv);
int CmdReport(int argc, char** argv);
int CmdDiff(int argc, char** argv);
int CmdDocs(int argc, char** argv);

// Where module:symbol sits in a lab profile's nesting graph: up to three
// call stacks, outermost first, as module:symbol names (cmd_lab.cc)...
std::vector<std::vector<std::string>> LabStacks(const wire::LabProfile& p,
                                                const std::string& module,
                                                const std::string& symbol);
// ...and printed, one a line, each line starting with `indent`.
void PrintLabStacks(std::FILE* out, const wire::LabProfile& p, const std::string& module,
                    const std::string& symbol, const std::string& indent);

// The directory holding libfieldprof.so (cmd_run.cc): `lib_dir_flag`, else
// $FIELDPROF_LIB_DIR, else next to this program.
StatusOr<std::string> FindRuntime(const std::string& lib_dir_flag);
// Sets FIELDPROF_TSC_HZ for the runs this process starts, unless known
// (cmd_run.cc): durations are right from a run's first call.
void SetTscRate();

// One spool record, readably (cmd_spool.cc); `histograms` draws each metric.
void PrintRunRecord(std::FILE* out, const std::string& name, const wire::RunRecord& r,
                    bool histograms);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_COMMANDS_H_
