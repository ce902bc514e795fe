// This machine's list of the system's code (common/system/system_code.h), for
// tests that start programs under the runtime themselves: without it a
// measured run chooses nothing at random, as a volunteer's would before
// the agent made it. Refreshed once per test process (the first on a
// machine reads every packaged library: seconds).
#ifndef FIELDPROF_TESTS_SUPPORT_SYSTEM_CODE_H_
#define FIELDPROF_TESTS_SUPPORT_SYSTEM_CODE_H_

#include <string>

#include "common/system/system_code.h"

namespace fieldprof::testing {

// The list's path; empty (and the reason on stderr) when it cannot be made.
inline const std::string& SystemCodeList() {
  static const std::string path = [] {
    SystemCode code;
    if (Status s = code.Refresh(); !s.ok()) {
      fprintf(stderr, "the system's code: %s\n", s.ToString().c_str());
      return std::string();
    }
    return code.BuildIdListPath();
  }();
  return path;
}

// FIELDPROF_SYSTEM_CODE=<the list>, for a measured run's environment.
inline std::string SystemCodeEnv() { return "FIELDPROF_SYSTEM_CODE=" + SystemCodeList(); }

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_SYSTEM_CODE_H_
