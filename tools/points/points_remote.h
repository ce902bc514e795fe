// fieldprof points upload|pull|tags --host (points_remote.cc): developer
// mode's runs on an aggregator.
#ifndef FIELDPROF_TOOLS_POINTS_POINTS_REMOTE_H_
#define FIELDPROF_TOOLS_POINTS_POINTS_REMOTE_H_

#include <string>

namespace fieldprof::tools {

// `verb`: upload, pull or tags; argv[0] is the verb.
int PointsRemote(const std::string& verb, int argc, char** argv);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_POINTS_POINTS_REMOTE_H_
