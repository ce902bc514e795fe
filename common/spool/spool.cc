#include "common/spool/spool.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/settings/agent_state.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"

namespace fieldprof {

std::string DefaultSpoolDir() {
  const std::string state = DefaultAgentStateDir();
  return state.empty() ? "" : state + "/spool";
}

std::string DefaultLiveDir(const std::string& setting) {
  if (setting == "off") return "";
  if (!setting.empty()) return setting;
  return "/dev/shm/fieldprof-" + std::to_string(::geteuid());
}

StatusOr<std::vector<SpoolEntry>> ListSpool(const std::string& dir) {
  std::vector<SpoolEntry> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return out;
  if (ec) return Unavailable("cannot read spool " + dir + ": " + ec.message());
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".fpr") != 0 || name[0] == '.') {
      continue;
    }
    struct stat st;
    if (::stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({e.path().string(), name, static_cast<uint64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000});
  }
  // Names start with the end time in ms; equal lengths sort numerically.
  std::sort(out.begin(), out.end(), [](const SpoolEntry& a, const SpoolEntry& b) {
    if (a.name.size() != b.name.size()) return a.name.size() < b.name.size();
    return a.name < b.name;
  });
  return out;
}

int RemoveStaleTemporaries(const std::string& dir, int64_t older_than_s) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return 0;
  const int64_t now = static_cast<int64_t>(time(nullptr));
  int removed = 0;
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp-", 0) != 0) continue;
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (now - static_cast<int64_t>(st.st_mtim.tv_sec) < older_than_s) continue;
    if (::unlink(e.path().c_str()) == 0) ++removed;
  }
  return removed;
}

Status ValidateRunRecord(const wire::RunRecord& r) {
  if (r.schema_version() != kSchemaVersion) {
    return InvalidArgument("schema_version: record schema version " +
                           std::to_string(r.schema_version()) + " is not supported");
  }
  FP_RETURN_IF_ERROR(ValidatePlatform(r.platform()));
  for (int i = 0; i < r.records_size(); ++i) {
    Status s = ValidateRecord(r.records(i));
    if (!s.ok()) return InvalidArgument("record " + std::to_string(i) + ": " + s.message());
  }
  return Status::Ok();
}

StatusOr<wire::RunRecord> ReadRunRecord(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": " + std::strerror(errno));
  // Refuse a huge file before reading it (a record is a few KiB).
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) > kMaxBatchBytes) {
    return InvalidArgument(path + ": " + std::to_string(st.st_size) +
                           " bytes is too large for a run record");
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string bytes = buf.str();
  wire::RunRecord r;
  if (!r.ParseFromString(bytes)) return InvalidArgument(path + ": not a fieldprof run record");
  if (Status s = ValidateRunRecord(r); !s.ok()) return InvalidArgument(path + ": " + s.message());
  return r;
}

}  // namespace fieldprof
