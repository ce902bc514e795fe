// The spool: where the runtime leaves one RunRecord file per measured run
// (agent/preload/runtime/records/spool_encode.h writes them) until the agent batches them.
// Reading side, shared by the agent and `fieldprof spool`.
//
//   StatusOr<std::vector<SpoolEntry>> files = ListSpool(DefaultSpoolDir());
//   StatusOr<wire::RunRecord> r = ReadRunRecord((*files)[0].path);
#ifndef FIELDPROF_COMMON_SPOOL_SPOOL_H_
#define FIELDPROF_COMMON_SPOOL_SPOOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof {

// $XDG_STATE_HOME/fieldprof/spool, else ~/.local/state/fieldprof/spool (the
// runtime's default); "" when neither variable is set.
std::string DefaultSpoolDir();

// Where measured runs keep their counts while they run (live files,
// agent/preload/runtime/records/live_layout.h): `live_dir` in the runtime's settings, else
// /dev/shm/fieldprof-<uid>, a tmpfs of this user's, as the runtime makes it.
// "" when `setting` is "off".
std::string DefaultLiveDir(const std::string& setting = "");

struct SpoolEntry {
  std::string path;
  std::string name;  // run-<ms>-<pid>-<rand>.fpr
  uint64_t bytes = 0;
  int64_t modified_unix_ms = 0;
};

// The finished record files in `dir` (temp files of runs still writing are
// skipped), oldest first. A missing directory is an empty spool.
[[nodiscard]] StatusOr<std::vector<SpoolEntry>> ListSpool(const std::string& dir);

// Removes the temporary files (".tmp-*") of record writes that never
// finished (the program was killed between creating and renaming one) once
// they are older than `older_than_s`; returns how many it removed. The
// runtime renames within milliseconds, so an hour is far past any live one.
int RemoveStaleTemporaries(const std::string& dir, int64_t older_than_s = 3600);

// Reads and validates one record file: schema version, platform and every
// record by the wire rules (common/wire/validate.h). Errors name the file.
[[nodiscard]] StatusOr<wire::RunRecord> ReadRunRecord(const std::string& path);
[[nodiscard]] Status ValidateRunRecord(const wire::RunRecord& r);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SPOOL_SPOOL_H_
