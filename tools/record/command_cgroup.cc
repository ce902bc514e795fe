#include "tools/record/command_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace fieldprof::tools {

namespace {

constexpr char kPrefix[] = "fieldprof-record-";

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Writes `text` to a cgroup control file in one write, as the kernel
// takes it.
Status WriteControl(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return IOError(path + ": " + std::strerror(errno));
  const ssize_t w = write(fd, text.data(), text.size());
  const int e = errno;
  close(fd);
  if (w != static_cast<ssize_t>(text.size())) return IOError(path + ": " + std::strerror(e));
  return Status();
}

// Every process in group `dir` moved to group `to`, the group removed.
// A process forking as it is moved leaves a child behind: a few passes.
bool Empty(const std::string& dir, const std::string& to) {
  for (int pass = 0; pass < 16; ++pass) {
    for (const std::string& pid : Lines(dir + "/cgroup.procs")) {
      if (!pid.empty()) (void)WriteControl(to + "/cgroup.procs", pid);
    }
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
  }
  return false;
}

// The groups that killed fieldprof records left in `parent`.
void RemoveStale(const std::string& parent) {
  DIR* d = opendir(parent.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + sizeof kPrefix - 1, nullptr, 10);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  closedir(d);
  for (const std::string& name : stale) (void)Empty(parent + "/" + name, parent);
}

}  // namespace

StatusOr<std::string> OwnCgroup2Dir() {
  std::string mount;
  for (const std::string& line : Lines("/proc/self/mountinfo")) {
    // ID PARENT MAJ:MIN ROOT MOUNT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream f(line.substr(0, dash));
    std::string id, parent, dev, root;
    f >> id >> parent >> dev >> root >> mount;
    break;
  }
  if (mount.empty()) return NotFound("no cgroup2 hierarchy is mounted");
  for (const std::string& line : Lines("/proc/self/cgroup")) {
    if (line.rfind("0::", 0) != 0) continue;
    std::string path = line.substr(3);
    if (path.find("/..") != std::string::npos || path.find(" (deleted)") != std::string::npos) {
      return NotFound("this process's cgroup2 group is not under the mount: " + path);
    }
    while (!path.empty() && path.back() == '/') path.pop_back();
    return mount + path;
  }
  return NotFound("this process is in no cgroup2 group (/proc/self/cgroup)");
}

StatusOr<std::unique_ptr<CommandCgroup>> CommandCgroup::Make() {
  StatusOr<std::string> own = OwnCgroup2Dir();
  if (!own.ok()) return own.status();
  std::unique_ptr<CommandCgroup> g(new CommandCgroup);
  g->parent_ = *own;
  RemoveStale(g->parent_);
  g->path_ = g->parent_ + "/" + kPrefix + std::to_string(getpid());
  if (mkdir(g->path_.c_str(), 0755) != 0) {
    const int e = errno;
    g->path_.clear();
    return IOError("cannot make a cgroup in " + *own + ": " + std::strerror(e));
  }
  g->fd_ = open(g->path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g->fd_ < 0) return IOError(g->path_ + ": " + std::strerror(errno));
  return g;
}

CommandCgroup::~CommandCgroup() {
  if (fd_ >= 0) close(fd_);
  if (!path_.empty()) (void)Empty(path_, parent_);
}

Status CommandCgroup::Add(pid_t pid) {
  return WriteControl(path_ + "/cgroup.procs", std::to_string(pid));
}

void CommandCgroup::Remove(pid_t pid) {
  (void)WriteControl(parent_ + "/cgroup.procs", std::to_string(pid));
}

}  // namespace fieldprof::tools
