// The recorded command's own cgroup (cgroup v2), for sampling it from
// outside without a perf_event in each of its processes.
//
// perf record -- CMD, and fieldprof record without a cgroup, open each
// event on the command for every CPU and let the kernel copy them into
// every process and thread it starts (inherit): a fork copies them all
// (the task clock and, with the waits, the context-switch event, for each
// CPU), an exit takes them down. A process that lives half a millisecond
// pays that more than anything else. With the command in a cgroup of its
// own, one event per CPU filtered by the cgroup (PERF_FLAG_PID_CGROUP, as
// perf record -a -G) sees every process the command starts and copies
// nothing into any of them: docs/benchmarks.md, fieldprof record.
//
// The group is made inside fieldprof record's own group, where the
// cgroup2 hierarchy lets it (root, or a delegated subtree) and whole CPUs
// may be sampled, and removed when the recording ends; what the command
// left running there (a daemon) is moved back to fieldprof record's group
// first. A process that
// the command moves to another group itself (systemd-run, a container) is
// not followed there.
#ifndef FIELDPROF_TOOLS_RECORD_COMMAND_CGROUP_H_
#define FIELDPROF_TOOLS_RECORD_COMMAND_CGROUP_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/base/status.h"

namespace fieldprof::tools {

class CommandCgroup {
 public:
  // Makes `fieldprof-record-<pid>-<pid namespace>-<random>` in this
  // process's cgroup2 group, after removing the empty ones killed
  // fieldprof records of this pid namespace left there. An error says why
  // not: no cgroup2 hierarchy mounted, the group not to be made. Whether
  // the group may then be sampled is PerfOnCgroupAvailable's (perf_sampler.h).
  [[nodiscard]] static StatusOr<std::unique_ptr<CommandCgroup>> Make();
  // Moves what is left in the group to fieldprof record's and removes it.
  ~CommandCgroup();
  CommandCgroup(const CommandCgroup&) = delete;
  CommandCgroup& operator=(const CommandCgroup&) = delete;

  // Moves process `pid` (and so all it starts from then on) into the group.
  [[nodiscard]] Status Add(pid_t pid);
  // Moves it back to fieldprof record's group: the events on the group
  // were refused, the command is followed by inherited events instead.
  void Remove(pid_t pid);

  // The group's directory, open: what perf_event_open takes as its pid
  // with PERF_FLAG_PID_CGROUP.
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  CommandCgroup() = default;
  std::string parent_;  // fieldprof record's own group
  std::string path_;
  int fd_ = -1;
};

// The directory of this process's own cgroup2 group (the cgroup2 mount
// from /proc/self/mountinfo joined with the "0::" line of
// /proc/self/cgroup), or an error when there is no cgroup2 hierarchy.
[[nodiscard]] StatusOr<std::string> OwnCgroup2Dir();

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_COMMAND_CGROUP_H_
