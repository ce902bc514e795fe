// The verbs of `fieldprof lab` (cmd_lab.cc dispatches): each takes argv with
// its verb (or "lab") as argv[0] and returns the process exit code.
#ifndef FIELDPROF_TOOLS_LAB_LAB_COMMANDS_H_
#define FIELDPROF_TOOLS_LAB_LAB_COMMANDS_H_

#include <string>

namespace fieldprof::tools {

// fieldprof lab [options] -- COMMAND: the census, the plan, the timing passes.
int LabRun(int argc, char** argv);
// fieldprof lab show PROFILE: the table, histograms and nesting.
int LabShow(int argc, char** argv);
// fieldprof lab merge -o OUT PROFILE...
int LabMerge(int argc, char** argv);
// fieldprof lab upload|list|fetch: profiles kept by an aggregator.
int LabRemote(const std::string& verb, int argc, char** argv);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_LAB_LAB_COMMANDS_H_
