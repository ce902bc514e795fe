// fieldprof lab: a complete profile of one scenario.
//   fieldprof lab [options] -- COMMAND [ARGS...]   census, plan, timing passes
//   fieldprof lab merge -o OUT PROFILE...          several scenarios or machines
//   fieldprof lab show PROFILE                     table, histograms, nesting
//   fieldprof lab upload|list|fetch ...            profiles kept by an aggregator
#include <string>

#include "tools/commands.h"
#include "tools/lab/lab_commands.h"

namespace fieldprof::tools {

int CmdLab(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "show") return LabShow(argc - 1, argv + 1);
  if (argc >= 2 && std::string(argv[1]) == "merge") return LabMerge(argc - 1, argv + 1);
  for (const char* verb : {"upload", "list", "fetch"}) {
    if (argc >= 2 && std::string(argv[1]) == verb) return LabRemote(verb, argc - 1, argv + 1);
  }
  return LabRun(argc, argv);
}

}  // namespace fieldprof::tools
