// fieldprof lab: a complete profile of one scenario.
//   fieldprof lab [options] -- COMMAND [ARGS...]   census, plan, timing passes
//   fieldprof lab merge -o OUT PROFILE...          several scenarios or machines
//   fieldprof lab show PROFILE                     table, histograms, nesting
//   fieldprof lab upload|list|fetch ...            profiles kept by an aggregator
#include <string>

#include "tools/commands.h"
#include "tools/lab/lab_commands.h"
#include "tools/shared/command_line.h"

namespace fieldprof::tools {

namespace {

// Profiles kept by an aggregator: upload, list, fetch.
int Remote(int argc, char** argv) { return LabRemote(argv[0], argc, argv); }

constexpr Verb kVerbs[] = {
    {"show", LabShow}, {"merge", LabMerge}, {"upload", Remote}, {"list", Remote}, {"fetch", Remote},
};

}  // namespace

// Without a verb, the lab's own job: a profile of the command.
int CmdLab(int argc, char** argv) { return RunVerb(kVerbs, argc, argv, LabRun); }

}  // namespace fieldprof::tools
