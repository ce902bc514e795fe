// Developer mode's runs: the per-run detail of instrumentation
// points that a program's developers upload (POST /v1/dev/runs), kept apart
// from the field sums, in three tables:
//   users   developer -> wire::DevUser: counts, the programs seen
//   points  developer, tag, start time, run -> the run as listed (a row
//           per tag of the run): runs by tag and date
//   events  developer, run -> wire::DevRun, the run's file with its events
// Every read is one developer's: nothing of another's is reachable.
// Thread-safe; a Put is durable when it returns.
#ifndef FIELDPROF_AGGREGATOR_STORE_DEV_STORE_H_
#define FIELDPROF_AGGREGATOR_STORE_DEV_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof::aggregator {

struct DevTag {
  std::string tag, program;
  uint64_t runs = 0;
  int64_t last_started_unix_ns = 0;
};

struct DevRunInfo {
  std::string id;  // 32 hex digits
  std::string program;
  int64_t started_unix_ns = 0;
  uint64_t events = 0, bytes = 0;
  uint64_t id_bytes = 0;  // a run that went up in parts: its id hashes this many first bytes
  bool open = false;      // a run still being written: more parts may follow
  std::vector<std::string> tags;
};

class DevStore {
 public:
  virtual ~DevStore() = default;
  // Keeps `run` (its id already checked to be 16 bytes) for `user`;
  // *duplicate when the user has that run already (nothing changes).
  [[nodiscard]] virtual Status Put(const std::string& user, const wire::DevRun& run,
                                   int64_t now_unix_ms, bool* duplicate) = 0;
  // Appends a later part of a run still being written (wire::DevRun
  // offset > 0, see GrowRun); *duplicate when the run has its bytes
  // already (nothing changes).
  [[nodiscard]] virtual Status Extend(const std::string& user, const wire::DevRun& part,
                                      int64_t now_unix_ms, bool* duplicate) = 0;
  // The user's tags, per program, the most recently run first.
  [[nodiscard]] virtual StatusOr<std::vector<DevTag>> Tags(const std::string& user) = 0;
  // The user's runs with `tag` (of `program`, unless empty) that began in
  // [from_ns, to_ns), oldest first.
  [[nodiscard]] virtual StatusOr<std::vector<DevRunInfo>> Runs(const std::string& user,
                                                               const std::string& tag,
                                                               const std::string& program,
                                                               int64_t from_ns, int64_t to_ns) = 0;
  // One of the user's runs by its hex id; NotFound for any other.
  [[nodiscard]] virtual StatusOr<wire::DevRun> Get(const std::string& user,
                                                   const std::string& id) = 0;
  // The user's row; an empty one for a user with no upload.
  [[nodiscard]] virtual StatusOr<wire::DevUser> User(const std::string& user) = 0;
};

// The run `have` with the later part `part` appended: its file grown by the
// bytes past its end, its tags those of both, its events the part's.
// Nullopt when `have` holds all of the part already (a part sent again).
// InvalidArgument when a part before this one is missing, or the part's
// bytes differ from those kept. Both stores' Extend use it.
[[nodiscard]] StatusOr<std::optional<wire::DevRun>> GrowRun(const wire::DevRun& have,
                                                            const wire::DevRun& part);

// The tables as column families of a RocksDB database at `path` (made if
// missing).
[[nodiscard]] StatusOr<std::unique_ptr<DevStore>> OpenRocksDevStore(const std::string& path);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_DEV_STORE_H_
