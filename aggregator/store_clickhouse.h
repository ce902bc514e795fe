// The aggregator's sums in ClickHouse (issue #20; docs/scale-out.md): a
// second Store (store.h), selected with --store clickhouse. This first
// version keeps every batch's raw rows (no roll-up yet) and the batch ids,
// on one ClickHouse node (no replication yet):
// - ApplyBatch: a batch id seen before answers duplicate; otherwise its
//   rows go in as one INSERT, then its id. Twins that slip past the id
//   check (two replicas at once, or a retry after a lost answer) are the
//   same rows, which reads count once (clickhouse.h: ReadSums).
// - Reads sum the raw rows of the days asked for.
#ifndef FIELDPROF_AGGREGATOR_STORE_CLICKHOUSE_H_
#define FIELDPROF_AGGREGATOR_STORE_CLICKHOUSE_H_

#include <memory>
#include <string>

#include "aggregator/store.h"
#include "common/https_client.h"

namespace fieldprof::aggregator {

struct ClickHouseStoreOptions {
  // http://HOST:PORT of ClickHouse's HTTP interface.
  std::string url = "http://127.0.0.1:8123";
  std::string rows_table = "fp_rows";
  std::string ids_table = "fp_batch_ids";
};

// Connects, creates the tables if missing (idempotent) and checks them.
[[nodiscard]] StatusOr<std::unique_ptr<Store>> OpenClickHouseStore(
    const ClickHouseStoreOptions& options);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_CLICKHOUSE_H_
