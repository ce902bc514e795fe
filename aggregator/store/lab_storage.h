// Where uploaded lab profiles are kept (POST/GET /v1/lab/profiles), apart
// from the field sums: a directory for one aggregator; ClickHouse (a table
// every server holds: clickhouse/lab_storage_clickhouse.h) for several, so a profile uploaded
// through one replica is listed and fetched through any.
//
// A profile is named by its content (the router's id), so keeping one that
// is kept already changes nothing. Thread-safe.
#ifndef FIELDPROF_AGGREGATOR_STORE_LAB_STORAGE_H_
#define FIELDPROF_AGGREGATOR_STORE_LAB_STORAGE_H_

#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace fieldprof::aggregator {

class LabStorage {
 public:
  virtual ~LabStorage() = default;
  // Keeps `bytes` as `id`, durably; *duplicate tells whether it was kept
  // already.
  [[nodiscard]] virtual Status Put(const std::string& id, const std::string& bytes,
                                   bool* duplicate) = 0;
  // NotFound when there is no such profile.
  [[nodiscard]] virtual StatusOr<std::string> Get(const std::string& id) = 0;
  // Every id, sorted.
  [[nodiscard]] virtual StatusOr<std::vector<std::string>> List() = 0;
};

// `dir`/<id>.labprofile files; the directory is made when first written.
std::unique_ptr<LabStorage> LocalLabStorage(std::string dir);
}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_LAB_STORAGE_H_
