// Where the publisher (publisher.h) keeps the snapshot it publishes: the
// fragments (immutable once written: a version is a digest of the bytes)
// and the current signed manifest. A local directory for one aggregator;
// ClickHouse for several (clickhouse/snapshot_storage_clickhouse.h), so that
// every replica serves what the lease holder published and a new holder
// carries on from it.
//
// Thread-safe. Errors: NotFound for what is not there; Unavailable or
// IOError when the storage cannot be read or written.
#ifndef FIELDPROF_AGGREGATOR_PUBLISH_SNAPSHOT_STORAGE_H_
#define FIELDPROF_AGGREGATOR_PUBLISH_SNAPSHOT_STORAGE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "common/base/status.h"

namespace fieldprof::aggregator {

class SnapshotStorage {
 public:
  virtual ~SnapshotStorage() = default;
  // The current signed manifest; NotFound before the first.
  [[nodiscard]] virtual StatusOr<std::string> ReadManifest() = 0;
  // Fragment `index` at `version`; NotFound when it is not (or no longer)
  // kept.
  [[nodiscard]] virtual StatusOr<std::string> ReadFragment(uint32_t index, uint64_t version) = 0;
  // Keeps a fragment durably. Writing one that is kept already is a no-op.
  [[nodiscard]] virtual Status WriteFragment(uint32_t index, uint64_t version,
                                             const std::string& bytes) = 0;
  // Makes `signed_manifest` (of `version`) the current one, durably, after
  // every fragment it lists was written. `replaced`: the fragment versions
  // it no longer lists; they stay readable for keep_old from now.
  [[nodiscard]] virtual Status WriteManifest(
      uint64_t version, const std::string& signed_manifest,
      const std::set<std::pair<uint32_t, uint64_t>>& replaced) = 0;
  // Forgets fragments replaced more than `keep_old` ago that `current`
  // (the current manifest's) does not list.
  virtual void RemoveOld(const std::set<std::pair<uint32_t, uint64_t>>& current,
                         std::chrono::milliseconds keep_old) = 0;
  // For logs: where it is.
  virtual std::string Describe() const = 0;
};

// `dir`/fragments/<index>-<version hex>.frag and `dir`/manifest.signed;
// created if missing.
[[nodiscard]] StatusOr<std::unique_ptr<SnapshotStorage>> OpenLocalSnapshotStorage(
    const std::string& dir);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_PUBLISH_SNAPSHOT_STORAGE_H_
