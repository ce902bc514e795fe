#include "common/points/dev_run.h"

#include <filesystem>
#include <set>

#include "common/base/durable_file.h"
#include "common/crypto/signing.h"
#include "common/points/points_file.h"
#include "common/wire/key_rules.h"

namespace fieldprof {

StatusOr<wire::DevRun> DevRunOf(const std::string& path) {
  StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  return DevRunOfBytes(std::move(*bytes), path);
}

StatusOr<wire::DevRun> DevRunOfScan(const fieldprof::PointsScan& scan, const std::string& what) {
  if (scan.offset == 0) return InvalidArgument(what + ": a points file with a damaged header");
  if (!scan.clock) return InvalidArgument(what + ": a points file with no clock reading");
  const std::set<std::string> tags = scan.Tags();
  if (tags.empty()) return InvalidArgument(what + " has no points");
  wire::DevRun r;
  const std::string program = std::filesystem::path(scan.program).filename().string();
  r.set_program(key_rules::ModuleOk(program.data(), program.size()) ? program : "main");
  r.set_started_unix_ns(static_cast<int64_t>(scan.start_unix_ns));
  for (const std::string& t : tags) r.add_tags(t);
  r.set_events(scan.Events());
  return r;
}

StatusOr<wire::DevRun> DevRunOfBytes(std::string bytes, const std::string& what) {
  fieldprof::PointsScan scan;
  const Status read = fieldprof::ScanPointsRun(bytes, &scan);
  if (!read.ok()) return InvalidArgument(what + ": " + read.message());
  StatusOr<wire::DevRun> r = DevRunOfScan(scan, what);
  if (!r.ok()) return r.status();
  r->set_id(Sha256(bytes).substr(0, 16));
  r->set_file(std::move(bytes));
  return r;
}

}  // namespace fieldprof
