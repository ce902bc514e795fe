// Developer mode's tables in ClickHouse (store/dev_store.h), for several
// aggregators: fp_dev_users, fp_dev_points and fp_dev_events, tables every
// server holds, so runs uploaded through one replica are read through any.
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_DEV_STORE_CLICKHOUSE_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_DEV_STORE_CLICKHOUSE_H_

#include <memory>

#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/store/dev_store.h"
#include "common/base/status.h"

namespace fieldprof::aggregator {

// The tables on the servers `options` names, made if missing (the store
// makes the database).
[[nodiscard]] StatusOr<std::unique_ptr<DevStore>> ClickHouseDevStore(
    const ClickHouseStoreOptions& options);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_DEV_STORE_CLICKHOUSE_H_
