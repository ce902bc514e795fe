#include "tools/lab/passes.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tools/shared/lab_profile.h"
#include "tools/shared/spawn.h"

namespace fieldprof::tools {

namespace fs = std::filesystem;

PassResult RunPass(const std::vector<std::string>& cmd, const std::string& mode,
                   const std::string& dir, const std::string& plan, int out_fd, int err_fd) {
  PassResult res;
  fs::create_directories(dir);
  setenv("FIELDPROF_LAB", mode.c_str(), 1);
  setenv("FIELDPROF_LAB_DIR", dir.c_str(), 1);
  if (plan.empty()) {
    unsetenv("FIELDPROF_LAB_APIS");
  } else {
    setenv("FIELDPROF_LAB_APIS", plan.c_str(), 1);
  }
  SpawnOptions so;
  so.out_fd = out_fd;
  so.err_fd = err_fd;
  const auto t0 = std::chrono::steady_clock::now();
  std::string error;
  const int code = SpawnAndWait(cmd, so, &error);
  if (code < 0) {
    std::fprintf(stderr, "fieldprof lab: cannot run %s: %s\n", cmd[0].c_str(), error.c_str());
    return res;
  }
  res.wall_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  res.exit_status = code;
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".fplab") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    StatusOr<wire::LabRunRecord> r = ReadLabRunRecord(f);
    if (!r.ok()) {
      std::fprintf(stderr, "fieldprof lab: %s\n", r.status().message().c_str());
      ++res.unreadable;
      continue;
    }
    res.runs.push_back(std::move(*r));
  }
  return res;
}

std::string TailOf(const std::string& path, int lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0; i < all.size();
       ++i) {
    out += "    | " + all[i] + "\n";
  }
  return out;
}
}  // namespace fieldprof::tools
