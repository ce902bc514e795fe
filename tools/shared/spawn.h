// Running a program and waiting for it: what lab, check and record do with
// the command they are given (and check with fieldprof itself).
#ifndef FIELDPROF_TOOLS_SHARED_SPAWN_H_
#define FIELDPROF_TOOLS_SHARED_SPAWN_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fieldprof::tools {

struct SpawnOptions {
  // Where the program's stdin comes from and its stdout and stderr go;
  // kDevNull: /dev/null.
  int in_fd = 0, out_fd = 1, err_fd = 2;
  // Killed (SIGKILL) when it runs longer, unless negative.
  int deadline_ms = -1;
  // Ctrl-C (SIGINT, SIGQUIT) stops the program, not this process, which
  // goes on once the program is gone (fieldprof record writes the
  // recording of a program stopped so).
  bool interrupt_child_only = false;
  // Called with the program's pid after it is forked and before it execs
  // (it waits meanwhile): fieldprof record opens its perf_events on it
  // here, to start at the exec. False, with *error, stops the program
  // before it runs.
  std::function<bool(pid_t pid, std::string* error)> before_exec;
};
inline constexpr int kDevNull = -1;

// Runs argv (argv[0] searched in PATH unless it holds a '/') and waits.
// Its exit code, or 128 + N when signal N ended it (128 + SIGKILL when
// killed at its deadline); -1 when it could not start, with the reason in
// *error.
int SpawnAndWait(const std::vector<std::string>& argv, const SpawnOptions& options,
                 std::string* error);

// The standard output of argv (argv[0] searched in PATH), run to its end
// with stdin and stderr on /dev/null; killed after `deadline_ms` when it is
// not negative. nullopt when it could not run, did not exit 0, or ran out
// of time.
std::optional<std::string> OutputOf(const std::vector<std::string>& argv, int deadline_ms = -1);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_SPAWN_H_
