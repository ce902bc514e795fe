// fieldprof check's options: its flags and what they mean for the inputs,
// the analysis and the outputs.
#ifndef FIELDPROF_TOOLS_CHECK_CHECK_OPTIONS_H_
#define FIELDPROF_TOOLS_CHECK_CHECK_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/proto/fieldprof.pb.h"
#include "tools/check/check_analysis.h"
#include "tools/shared/client_flags.h"
#include "tools/shared/command_line.h"

namespace fieldprof::tools {

struct CheckOptions {
  // Inputs: record files or lab profiles, else the spool; or a command run
  // --repeat times measuring --apis.
  std::vector<std::string> files;
  std::string spool_dir;
  std::vector<std::string> command;
  std::string apis;
  int64_t repeat = 5;
  // The field: the snapshot cache, or an aggregator (--host) and a range.
  std::string cache_dir;
  ClientFlags client;
  std::string from, to;
  // The analysis.
  std::string metric_name = "wall_time_ns", statistic = "mean";
  wire::Metric metric = wire::METRIC_WALL_TIME_NS;
  AnalysisOptions analysis;
  // The outputs.
  bool json = false, all = false;
  std::string sarif_path, junit_path;

  bool remote() const { return !client.options.host.empty(); }
};

// Parses argv into `o`: nothing to go on, else the exit code (ExitCode:
// 0 after --help, 2 after a usage error said on stderr).
ExitCode ParseCheckOptions(int argc, char** argv, CheckOptions* o);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_CHECK_CHECK_OPTIONS_H_
