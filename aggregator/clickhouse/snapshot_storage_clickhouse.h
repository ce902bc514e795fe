// The published snapshot kept in ClickHouse (publish/snapshot_storage.h):
// every server holds the fp_snapshot_* tables, so any aggregator replica
// serves what the lease holder published.
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_SNAPSHOT_STORAGE_CLICKHOUSE_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_SNAPSHOT_STORAGE_CLICKHOUSE_H_

#include <memory>

#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/publish/snapshot_storage.h"
#include "common/base/status.h"

namespace fieldprof::aggregator {

// The ClickHouse store's fp_snapshot_* tables (every server a replica),
// on the servers `options` names; the store makes the tables.
[[nodiscard]] StatusOr<std::unique_ptr<SnapshotStorage>> OpenClickHouseSnapshotStorage(
    const ClickHouseStoreOptions& options);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_SNAPSHOT_STORAGE_CLICKHOUSE_H_
