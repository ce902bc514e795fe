#include "tools/cli/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace fieldprof::tools {

namespace {

void Route(posix_spawn_file_actions_t* fa, int from, int to) {
  if (from == kDevNull) {
    posix_spawn_file_actions_addopen(fa, to, "/dev/null", O_WRONLY, 0);
  } else if (from != to) {
    posix_spawn_file_actions_adddup2(fa, from, to);
  }
}

}  // namespace

int SpawnAndWait(const std::vector<std::string>& args, const SpawnOptions& o, std::string* error) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
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
  const int err = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  int status = 0;
  if (err == 0) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (o.interrupt_child_only) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
  }
  if (err != 0) {
    if (error != nullptr) *error = std::strerror(err);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace fieldprof::tools
