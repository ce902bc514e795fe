// The environment a command sets up for the programs it starts under the
// runtime (fieldprof run, lab, check -- COMMAND): where libfieldprof.so is,
// the machine's TSC rate, and variables prepended to.
#ifndef FIELDPROF_TOOLS_SHARED_RUNTIME_ENV_H_
#define FIELDPROF_TOOLS_SHARED_RUNTIME_ENV_H_

#include <string>

#include "common/base/status.h"

namespace fieldprof::tools {

// The file name of the runtime, and of the front the commands preload
// (agent/preload/runtime/front/front.cc: it loads the runtime beside it in a run that
// may be measured).
inline constexpr const char* kRuntimeLib = "libfieldprof.so";
inline constexpr const char* kFrontLib = "libfieldprof-front.so";

// The directory holding libfieldprof.so: `lib_dir_flag` (--lib_dir), else
// $FIELDPROF_LIB_DIR, else next to this program: the build tree
// (build/tools/fieldprof -> build/lib/fieldprof) or an installed layout
// (bin/fieldprof -> lib/fieldprof). NotFound says which was looked at.
[[nodiscard]] StatusOr<std::string> FindRuntime(const std::string& lib_dir_flag);

// Sets FIELDPROF_TSC_HZ for the runs this process starts, unless already
// known (the environment, or the settings file where the agent keeps it):
// measured here (20 ms), so durations are right from a run's first call
// (agent/preload/runtime/hotpath/clock.h).
void SetTscRate();

// The settings of a lab pass, for the runs this process starts: every run
// measured, with its own slots under `work` (and its spool), no load cap,
// no overhead budget; and the TSC rate (SetTscRate). What fieldprof lab
// and fieldprof points record --at give the runtime.
void SetLabPassEnvironment(const std::string& work);

// Puts `value` in front of the colon-separated list in environment
// variable `var` (LD_PRELOAD, LD_LIBRARY_PATH).
void PrependEnv(const char* var, const std::string& value);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_RUNTIME_ENV_H_
