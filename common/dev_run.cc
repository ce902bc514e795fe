#include "common/dev_run.h"

#include <filesystem>
#include <set>

#include "common/durable_file.h"
#include "common/key_rules.h"
#include "common/points_file.h"
#include "common/signing.h"

namespace fieldprof {

StatusOr<wire::DevRun> DevRunOf(const std::string& path) {
  StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  return DevRunOfBytes(std::move(*bytes), path);
}

StatusOr<wire::DevRun> DevRunOfBytes(std::string bytes_in, const std::string& path) {
  StatusOr<std::string> bytes(std::move(bytes_in));
  StatusOr<local::PointsRun> run = local::DecodePointsRun(*bytes);
  if (!run.ok()) return InvalidArgument(path + ": " + run.status().message());
  wire::DevRun r;
  r.set_id(Sha256(*bytes).substr(0, 16));
  const std::string program = std::filesystem::path(run->program).filename().string();
  r.set_program(key_rules::ModuleOk(program.data(), program.size()) ? program : "main");
  r.set_started_unix_ns(static_cast<int64_t>(run->start_unix_ns));
  std::set<std::string> tags;
  for (const local::PointSite& s : run->sites) tags.insert(s.tag);
  if (tags.empty()) return InvalidArgument(path + " has no points");
  for (const std::string& t : tags) r.add_tags(t);
  r.set_events(run->events.size());
  r.set_file(std::move(*bytes));
  return r;
}

}  // namespace fieldprof
