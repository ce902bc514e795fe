// Lab profiles kept in ClickHouse (store/lab_storage.h): fp_lab_profiles,
// a table every server holds, so a profile uploaded through one aggregator
// replica is listed and fetched through any.
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_LAB_STORAGE_CLICKHOUSE_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_LAB_STORAGE_CLICKHOUSE_H_

#include <memory>

#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/store/lab_storage.h"
#include "common/base/status.h"

namespace fieldprof::aggregator {

// fp_lab_profiles on the servers `options` names (the store makes it).
[[nodiscard]] StatusOr<std::unique_ptr<LabStorage>> ClickHouseLabStorage(
    const ClickHouseStoreOptions& options);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_LAB_STORAGE_CLICKHOUSE_H_
