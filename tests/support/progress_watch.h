// A test that a program does not hang bounds its work, not its time: the
// program loops until N iterations or a span of the machine's time,
// whichever comes first, and says how far it got in a progress file now and
// then; the test fails only when that count stops moving while the program
// runs (a watchdog on progress), so a machine five times slower takes
// longer but passes, and a real hang still fails.
//
// The program's side (tests/tools/points/pointstacks.cc): it reads
// FIELDPROF_TEST_PROGRESS (a file to write its count to, as decimal text)
// and FIELDPROF_TEST_SPAN_MS (stop its loop after that many milliseconds).
//
//   WatchedRun r = RunWatchingProgress(cmd, dir.File("progress"), 20000);
//   ASSERT_FALSE(r.stalled) << "no progress for " ...;
#ifndef FIELDPROF_TESTS_SUPPORT_PROGRESS_WATCH_H_
#define FIELDPROF_TESTS_SUPPORT_PROGRESS_WATCH_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

namespace fieldprof::testing {

struct WatchedRun {
  int exit_code = -1;     // as a shell says it (128 + N for signal N)
  std::string out;        // stdout and stderr
  bool stalled = false;   // killed: its progress stood still for `stall`
  uint64_t progress = 0;  // the last count it wrote
};

// Runs `cmd` with `sh -c` in a process group of its own, with the two
// variables above set (the span in `span_ms`), and watches `progress_file`.
inline WatchedRun RunWatchingProgress(const std::string& cmd, const std::string& progress_file,
                                      long span_ms,
                                      std::chrono::seconds stall = std::chrono::seconds(120)) {
  WatchedRun r;
  const std::string out_file = progress_file + ".out";
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    setenv("FIELDPROF_TEST_PROGRESS", progress_file.c_str(), 1);
    setenv("FIELDPROF_TEST_SPAN_MS", std::to_string(span_ms).c_str(), 1);
    const int fd = open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  auto last_change = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::ifstream in(progress_file);
    uint64_t now = 0;
    if (in >> now && now != r.progress) {
      r.progress = now;
      last_change = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() - last_change > stall) {
      r.stalled = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::ifstream in(progress_file);
  if (uint64_t last = 0; in >> last) r.progress = last;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream out(out_file);
  r.out.assign(std::istreambuf_iterator<char>(out), {});
  return r;
}

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_PROGRESS_WATCH_H_
