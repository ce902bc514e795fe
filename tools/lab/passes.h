// The lab's passes: the scenario run once under the runtime in lab mode
// (census or timing), and the lab files its processes left behind.
#ifndef FIELDPROF_TOOLS_LAB_PASSES_H_
#define FIELDPROF_TOOLS_LAB_PASSES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/proto/fieldprof.pb.h"

namespace fieldprof::tools {

struct PassResult {
  int exit_status = -1;  // shell style: 128 + N for signal N; -1 did not start
  uint64_t wall_ns = 0;
  std::vector<wire::LabRunRecord> runs;  // one per process that left a file
  int unreadable = 0;
};

// Runs the command once with the lab settings in the environment (`mode`
// census or time, the timing set's `plan` file or ""); its stdout and stderr
// go to `out_fd` and `err_fd`. Then reads the lab files its processes left
// in `dir`, in name order; a file that does not read is said on stderr and
// counted in `unreadable`.
PassResult RunPass(const std::vector<std::string>& cmd, const std::string& mode,
                   const std::string& dir, const std::string& plan, int out_fd, int err_fd);

// The last `lines` lines of the file at `path`, each indented as a quote.
std::string TailOf(const std::string& path, int lines);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_LAB_PASSES_H_
