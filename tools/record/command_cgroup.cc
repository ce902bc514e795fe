#include "tools/record/command_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

// A mountinfo field with its octal escapes ("\\040" for a space) undone.
std::string Unescaped(const std::string& field) {
  const auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && octal(field[i + 1]) && octal(field[i + 2]) &&
        octal(field[i + 3])) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// Writes `text` to a cgroup control file in one write, as the kernel
// takes it: `path`, or with `dir_fd` a name in that open directory.
Status WriteControl(const std::string& path, const std::string& text, int dir_fd = AT_FDCWD) {
  const int fd = openat(dir_fd, path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return IOError(path + ": " + std::strerror(errno));
  const ssize_t w = write(fd, text.data(), text.size());
  const int e = errno;
  close(fd);
  if (w != static_cast<ssize_t>(text.size())) return IOError(path + ": " + std::strerror(e));
  return Status();
}

// Whether a process is in group `dir` or below it (cgroup.events).
bool Populated(const std::string& dir) {
  for (const std::string& line : Lines(dir + "/cgroup.events")) {
    if (line.rfind("populated ", 0) == 0) return line != "populated 0";
  }
  return true;  // unreadable: assume someone is there
}

std::vector<std::string> SubGroups(const std::string& dir) {
  std::vector<std::string> subs;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") != 0 &&
          std::strcmp(e->d_name, "..") != 0) {
        subs.push_back(dir + "/" + e->d_name);
      }
    }
    closedir(d);
  }
  return subs;
}

// Group `dir` and the groups the command made below it removed, deepest
// first; with `to`, their processes moved there first.
bool RemoveTree(const std::string& dir, const std::string* to) {
  for (const std::string& sub : SubGroups(dir)) (void)RemoveTree(sub, to);
  if (to != nullptr) {
    for (const std::string& pid : Lines(dir + "/cgroup.procs")) {
      if (!pid.empty()) (void)WriteControl(*to + "/cgroup.procs", pid);
    }
  }
  return rmdir(dir.c_str()) == 0 || errno == ENOENT;
}

// Every process in group `dir` (and below) moved to group `to`, the groups
// removed. A process forking as it is moved leaves a child behind, an
// exiting one holds the group a moment longer: passes 20 ms apart, for
// up to a second.
bool Empty(const std::string& dir, const std::string& to) {
  for (int pass = 0; pass < 50; ++pass) {
    if (RemoveTree(dir, &to)) return true;
    if (errno != EBUSY) return false;
    usleep(20000);
  }
  return false;
}

// The groups killed fieldprof records left in `parent` (their pid gone)
// with no process in them any more; one whose command still runs is
// left as it is, and so is another record's, live or not, while
// anything runs in it.
void RemoveStale(const std::string& parent, const std::string& pid_ns) {
  DIR* d = opendir(parent.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* e = readdir(d)) {
    // fieldprof-record-PID-PIDNS-RANDOM: a pid means something only in
    // its own pid namespace, so only ours are looked at.
    const std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + sizeof kPrefix - 1, &end, 10);
    if (end == nullptr || *end != '-' ||
        name.compare(end + 1 - name.c_str(), pid_ns.size() + 1, pid_ns + "-") != 0) {
      continue;
    }
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  closedir(d);
  for (const std::string& name : stale) {
    const std::string dir = parent + "/" + name;
    if (!Populated(dir)) (void)RemoveTree(dir, nullptr);
  }
}

}  // namespace

StatusOr<std::string> OwnCgroup2Dir() {
  std::string path;
  bool in_group = false;
  for (const std::string& line : Lines("/proc/self/cgroup")) {
    if (line.rfind("0::", 0) != 0) continue;
    path = line.substr(3);
    in_group = true;
  }
  if (!in_group) return NotFound("this process is in no cgroup2 group (/proc/self/cgroup)");
  if (path.find("/..") != std::string::npos || path.find(" (deleted)") != std::string::npos) {
    return NotFound("this process's cgroup2 group is not under a mount: " + path);
  }
  bool any = false;
  for (const std::string& line : Lines("/proc/self/mountinfo")) {
    // ID PARENT MAJ:MIN ROOT MOUNT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    any = true;
    std::istringstream f(line.substr(0, dash));
    std::string id, parent, dev, root, mount;
    f >> id >> parent >> dev >> root >> mount;
    root = Unescaped(root);
    // A mount of part of the hierarchy (ROOT not "/": a container's view
    // without a cgroup namespace) shows the groups from its root on.
    std::string rest = path;
    if (root != "/") {
      if (path.compare(0, root.size(), root) != 0 ||
          (path.size() > root.size() && path[root.size()] != '/')) {
        continue;
      }
      rest.erase(0, root.size());
    }
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    return Unescaped(mount) + rest;
  }
  if (!any) return NotFound("no cgroup2 hierarchy is mounted");
  return NotFound("this process's cgroup2 group " + path + " is under no cgroup2 mount");
}

StatusOr<std::unique_ptr<CommandCgroup>> CommandCgroup::Make() {
  StatusOr<std::string> own = OwnCgroup2Dir();
  if (!own.ok()) return own.status();
  std::unique_ptr<CommandCgroup> g(new CommandCgroup);
  g->parent_ = *own;
  // The pid namespace's inode ("pid:[4026531836]"), and a random part:
  // two records of one pid in two namespaces never share a name, and one
  // never takes over a group another left.
  char ns[64] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  std::string pid_ns;
  for (ssize_t i = 0; i < n; ++i) {
    if (ns[i] >= '0' && ns[i] <= '9') pid_ns += ns[i];
  }
  if (pid_ns.empty()) pid_ns = "0";
  RemoveStale(g->parent_, pid_ns);
  uint32_t nonce = 0;
  if (getrandom(&nonce, sizeof nonce, 0) != sizeof nonce) {
    nonce = static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", nonce);
  const std::string path =
      g->parent_ + "/" + kPrefix + std::to_string(getpid()) + "-" + pid_ns + "-" + suffix;
  if (mkdir(path.c_str(), 0755) != 0) {
    return IOError("cannot make a cgroup in " + *own + ": " + std::strerror(errno));
  }
  g->path_ = path;
  g->fd_ = open(g->path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g->fd_ < 0) return IOError(g->path_ + ": " + std::strerror(errno));
  return g;
}

CommandCgroup::~CommandCgroup() {
  if (fd_ >= 0) close(fd_);
  if (!path_.empty() && !Empty(path_, parent_)) {
    std::fprintf(stderr,
                 "fieldprof record: the command's cgroup %s could not be removed (%s); the next "
                 "fieldprof record removes it once nothing runs in it\n",
                 path_.c_str(), std::strerror(errno));
  }
}

Status CommandCgroup::Add(pid_t pid) {
  // Through the group's own descriptor: the group made, whatever its path
  // names by now.
  return WriteControl("cgroup.procs", std::to_string(pid), fd_);
}

void CommandCgroup::Remove(pid_t pid) {
  (void)WriteControl(parent_ + "/cgroup.procs", std::to_string(pid));
}

}  // namespace fieldprof::tools
