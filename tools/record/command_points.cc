#include "tools/record/command_points.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "common/system/exported_symbols.h"

extern char** environ;

namespace fieldprof::tools {
namespace {

// How long the dynamic linker's --list may take: it reads the program's
// libraries, and runs none of their code.
constexpr int kListDeadlineMs = 5000;

// argv[0] as execvp would find it: itself when it holds a '/', else the
// first executable regular file of that name in PATH; "" when none.
std::string FindProgram(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return name;
  const char* env = std::getenv("PATH");
  std::stringstream path(env != nullptr ? env : "/bin:/usr/bin");
  for (std::string dir; std::getline(path, dir, ':');) {
    const std::string file = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0) {
      return file;
    }
  }
  return "";
}

// Whether `path` is a dynamic linker, which takes --list: an absolute path
// to an ELF file with no interpreter of its own, named as glibc's and
// musl's are (ld-linux-x86-64.so.2, ld-musl-x86_64.so.1, ld64.so.2,
// ld.so.1). Any other interpreter a program names is not run with
// arguments of ours.
bool IsDynamicLinker(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  const std::string name = path.substr(path.rfind('/') + 1);
  if (name.rfind("ld-", 0) != 0 && name.rfind("ld64.so", 0) != 0 && name.rfind("ld.so", 0) != 0) {
    return false;
  }
  const ElfFacts f = ReadElfFacts(path);
  return f.read && f.interpreter.empty();
}

// Runs `argv` with its output into the file `out` (stdin and stderr
// /dev/null) and waits for it at most `deadline_ms`; then it is killed.
// Whether it exited 0 in time.
bool RunForOutput(const std::vector<std::string>& args, int out, int deadline_ms) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return false;
  // A pidfd is readable when the child ends: the deadline without a sleep.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  bool ended = true;
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int r;
    while ((r = poll(&p, 1, deadline_ms)) < 0 && errno == EINTR) {
    }
    ended = r > 0;
    close(pidfd);
  }
  if (!ended) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return ended && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The files of the libraries the dynamic linker `interpreter` loads with
// `program` at start, as its --list prints them (what ldd runs): lines
// "\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" and
// "\t/lib64/ld-linux-x86-64.so.2 (0x...)". The program's code does not
// run; the user's LD_PRELOAD and LD_LIBRARY_PATH count, as they will.
std::vector<std::string> StartLibraries(const std::string& interpreter,
                                        const std::string& program) {
  std::vector<std::string> out;
  if (!IsDynamicLinker(interpreter)) return out;
  const int fd = memfd_create("fieldprof-list", MFD_CLOEXEC);
  if (fd < 0) return out;
  if (!RunForOutput({interpreter, "--list", program}, fd, kListDeadlineMs)) {
    std::fprintf(stderr,
                 "fieldprof record: %s --list %s did not answer: the libraries %s loads were not "
                 "looked at for points (--points takes them anyway)\n",
                 interpreter.c_str(), program.c_str(), program.c_str());
    close(fd);
    return out;
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = pread(fd, buf, sizeof buf, static_cast<off_t>(text.size()))) > 0;) {
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t arrow = line.find(" => ");
    const size_t from = arrow != std::string::npos ? arrow + 4 : line.find('/');
    if (from == std::string::npos || from >= line.size() || line[from] != '/') continue;
    const size_t to = line.rfind(" (0x");
    if (to == std::string::npos || to <= from) continue;
    out.push_back(line.substr(from, to - from));
  }
  return out;
}

}  // namespace

bool ModuleHasPoints(const std::string& path) { return ReadElfFacts(path).imports_point_hit; }

std::string CommandModuleWithPoints(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  const std::string program = FindProgram(argv[0]);
  if (program.empty()) return "";
  const ElfFacts facts = ReadElfFacts(program);
  if (facts.imports_point_hit) return program;
  for (const std::string& lib : StartLibraries(facts.interpreter, program)) {
    if (ModuleHasPoints(lib)) return lib;
  }
  return "";
}

std::vector<std::string> ModulesWithPoints(const std::vector<std::string>& paths) {
  std::set<std::string> seen, named;
  std::vector<std::string> out;
  for (const std::string& path : paths) {
    // Relative: a name as the program's loader was given it (the in-program
    // sampler writes it so), not a file to look for from here.
    if (path.empty() || path[0] != '/' || !seen.insert(path).second || !ModuleHasPoints(path)) {
      continue;
    }
    const std::string name = path.substr(path.rfind('/') + 1);
    if (named.insert(name).second) out.push_back(name);
  }
  return out;
}

}  // namespace fieldprof::tools
