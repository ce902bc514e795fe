#include "tools/points/points_names.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "common/base/durable_file.h"
#include "common/points/points_file.h"
#include "common/points/points_format.h"
#include "tools/shared/symbolizer.h"

namespace fieldprof::tools {
namespace {

namespace fs = std::filesystem;

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

// The 'N' record of `names`.
std::string NamesRecord(const std::map<uint64_t, std::string>& names) {
  std::string out(1, points::kNames);
  Put(&out, static_cast<uint32_t>(names.size()));
  for (const auto& [ip, name] : names) {
    const size_t len = std::min<size_t>(name.size(), UINT16_MAX);
    Put(&out, ip);
    Put(&out, static_cast<uint16_t>(len));
    out.append(name, 0, len);
  }
  return out;
}

}  // namespace

Status NameStacksOfFile(const std::string& path, size_t* names) {
  *names = 0;
  StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  StatusOr<PointsStacks> run = StacksOfPointsRun(*bytes);
  if (!run.ok()) return InvalidArgument(path + ": " + run.status().message());
  if (run->stacks.empty() || !run->complete || run->named) return Status::Ok();
  std::vector<LoadedModule> modules;
  for (const PointsModule& m : run->modules) modules.push_back({m.path, m.bias, m.lo, m.hi});
  Symbolizer sym(modules);
  std::map<uint64_t, std::string> named;
  for (const auto& [key, ips] : run->stacks) {
    for (uint64_t ip : ips) {
      if (named.count(ip) == 0) named.emplace(ip, sym.Name(ip, true));
    }
  }
  // One write, appended: a reader sees the record whole or not at all
  // (it reads whole records only).
  const std::string record = NamesRecord(named);
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return IOError("cannot open " + path + ": " + std::strerror(errno));
  const ssize_t n = write(fd, record.data(), record.size());
  const int e = errno;
  close(fd);
  if (n != static_cast<ssize_t>(record.size())) {
    return IOError("cannot write " + path + ": " + std::strerror(n < 0 ? e : ENOSPC));
  }
  *names = named.size();
  return Status::Ok();
}

std::set<std::string> PointsFilesIn(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".fppoints") out.insert(e.path().filename().string());
  }
  return out;
}

size_t NameNewStacksIn(const std::string& dir, const std::set<std::string>& before) {
  size_t files = 0;
  for (const std::string& name : PointsFilesIn(dir)) {
    if (before.count(name) != 0) continue;
    size_t names = 0;
    if (NameStacksOfFile(dir + "/" + name, &names).ok() && names > 0) ++files;
  }
  return files;
}

}  // namespace fieldprof::tools
