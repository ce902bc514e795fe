#include "tools/shared/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace fieldprof::tools {

namespace {

void Route(posix_spawn_file_actions_t* fa, int from, int to) {
  if (from == kDevNull) {
    posix_spawn_file_actions_addopen(fa, to, "/dev/null", to == STDIN_FILENO ? O_RDONLY : O_WRONLY,
                                     0);
  } else if (from != to) {
    posix_spawn_file_actions_adddup2(fa, from, to);
  }
}

// Waits for `pid`, killing it once `deadline_ms` (when not negative) has
// passed; its wait status.
int WaitFor(pid_t pid, int deadline_ms) {
  if (deadline_ms >= 0) {
    // A pidfd is readable when the child ends: the deadline without a sleep.
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      int r;
      while ((r = poll(&p, 1, deadline_ms)) < 0 && errno == EINTR) {
      }
      close(pidfd);
      if (r == 0) kill(pid, SIGKILL);
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// fork, the parent's before_exec, then exec: what posix_spawn cannot
// pause between. Returns 0 and the pid, or an errno (the exec's own,
// reported back through a close-on-exec pipe).
int ForkAndExec(char* const* argv, const SpawnOptions& o, pid_t* pid, std::string* hook_error) {
  int go[2], failed[2];
  if (pipe2(go, O_CLOEXEC) != 0) return errno;
  if (pipe2(failed, O_CLOEXEC) != 0) {
    const int e = errno;
    close(go[0]);
    close(go[1]);
    return e;
  }
  const pid_t child = fork();
  if (child < 0) {
    const int e = errno;
    for (int fd : {go[0], go[1], failed[0], failed[1]}) close(fd);
    return e;
  }
  if (child == 0) {
    // Only async-signal-safe calls from here. The parent's ends of the
    // pipes are not the child's: holding the go pipe's write end, it would
    // wait for good on a parent whose hook refused.
    close(go[1]);
    close(failed[0]);
    if (o.interrupt_child_only) {
      signal(SIGINT, SIG_DFL);
      signal(SIGQUIT, SIG_DFL);
    }
    auto route = [](int from, int to) {
      if (from == kDevNull) {
        const int fd = open("/dev/null", to == STDIN_FILENO ? O_RDONLY : O_WRONLY);
        if (fd >= 0 && fd != to) {
          dup2(fd, to);
          close(fd);
        }
      } else if (from != to) {
        dup2(from, to);
      }
    };
    route(o.in_fd, STDIN_FILENO);
    route(o.out_fd, STDOUT_FILENO);
    route(o.err_fd, STDERR_FILENO);
    char c = 0;
    ssize_t r;
    while ((r = read(go[0], &c, 1)) < 0 && errno == EINTR) {
    }
    if (r == 1) {
      execvp(argv[0], argv);
      const int e = errno;
      (void)!write(failed[1], &e, sizeof e);
    }
    _exit(127);
  }
  close(go[0]);
  close(failed[1]);
  const bool go_on = o.before_exec(child, hook_error);
  if (go_on) (void)!write(go[1], "x", 1);
  close(go[1]);  // without the byte: the child ends before it runs
  int e = 0;
  ssize_t r;
  while ((r = read(failed[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  close(failed[0]);
  *pid = child;
  if (!go_on) return -1;
  return r == sizeof e ? e : 0;
}

}  // namespace

int SpawnAndWait(const std::vector<std::string>& args, const SpawnOptions& o, std::string* error) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  Route(&fa, o.in_fd, STDIN_FILENO);
  Route(&fa, o.out_fd, STDOUT_FILENO);
  Route(&fa, o.err_fd, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  struct sigaction ignore {
  }, old_int{}, old_quit{};
  if (o.interrupt_child_only) {
    // As system(3) does: ignored here while the child runs, default there.
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGINT, &ignore, &old_int);
    sigaction(SIGQUIT, &ignore, &old_quit);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGQUIT);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  }
  pid_t pid = 0;
  std::string hook_error;
  const int err = o.before_exec ? ForkAndExec(argv.data(), o, &pid, &hook_error)
                                : posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  int status = 0;
  if (err == 0 || (o.before_exec && pid > 0)) {  // a child that did not exec is reaped too
    status = WaitFor(pid, o.deadline_ms);
  }
  if (o.interrupt_child_only) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
  }
  if (err != 0) {
    if (error != nullptr) *error = err < 0 ? hook_error : std::strerror(err);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::optional<std::string> OutputOf(const std::vector<std::string>& args, int deadline_ms) {
  const int out = memfd_create("fieldprof-output", MFD_CLOEXEC);
  if (out < 0) return std::nullopt;
  SpawnOptions o;
  o.in_fd = kDevNull;
  o.out_fd = out;
  o.err_fd = kDevNull;
  o.deadline_ms = deadline_ms;
  const int code = SpawnAndWait(args, o, nullptr);
  std::string text;
  char buf[8192];
  for (ssize_t n; (n = pread(out, buf, sizeof buf, static_cast<off_t>(text.size()))) > 0;) {
    text.append(buf, static_cast<size_t>(n));
  }
  close(out);
  if (code != 0) return std::nullopt;
  return text;
}

}  // namespace fieldprof::tools
