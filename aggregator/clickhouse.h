// The first parts of the ClickHouse store (issue #20; docs/scale-out.md):
// a client for ClickHouse's HTTP interface, and the raw-rows table whose
// read counts each (batch, key) once however often a batch was inserted.
// Not yet a Store (aggregator/store.h): no roll-up, no batch-id table, no
// replication; those come next.
//
// 128-bit sums (a bucket's sum and sum of squares) are stored as four
// 32-bit limbs in UInt64 columns, because ClickHouse 18.16 has no UInt128:
// ClickHouse sums each limb column exactly (up to 2^32 rows), and the reader
// joins the limb sums with their carries into the exact 128-bit value.
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "aggregator/store.h"
#include "common/batch_view.h"
#include "common/histogram.h"
#include "common/https_client.h"
#include "common/status.h"

namespace fieldprof::aggregator {

// SQL over ClickHouse's HTTP interface (POST, the statement as the body).
class ClickHouseClient {
 public:
  explicit ClickHouseClient(HttpsClientOptions o) : http_(std::move(o)) {}
  // A statement without a result (DDL).
  [[nodiscard]] Status Execute(const std::string& sql);
  // A query's result as ClickHouse formats it (say FORMAT TSV in `sql`).
  [[nodiscard]] StatusOr<std::string> Query(const std::string& sql);
  // `data` in RowBinary into `table`, as one INSERT (one block).
  [[nodiscard]] Status InsertRowBinary(const std::string& table, const std::string& data);

 private:
  HttpsClient http_;
};

// The four 32-bit limbs of v, low first; and the exact value of limb sums
// (false when it does not fit in 128 bits).
std::array<uint64_t, 4> Limbs(uint128 v);
bool JoinLimbSums(const std::array<uint64_t, 4>& sums, uint128* out);

// CREATE TABLE for the raw rows (MergeTree, one node; idempotent).
std::string RawRowsTableSql(const std::string& table);

// The rows of one batch in RowBinary, in the batch's order: the same batch
// gives the same bytes (one INSERT block, deterministic).
std::string BatchRows(const BatchView& batch, int32_t day);

// Every series with its sum over days [first, last], each (batch, key)
// counted once: the rows of a batch inserted more than once are the same,
// and the inner GROUP BY keeps one of them.
// `where`: more SQL conditions on the rows' columns ("" for none).
[[nodiscard]] StatusOr<std::vector<ApiAggregate>> ReadSums(ClickHouseClient& ch,
                                                           const std::string& table,
                                                           int32_t first_day, int32_t last_day,
                                                           const std::string& where = "");

// A ClickHouse string literal of `s` ('...' with \\ and \' escaped).
std::string SqlString(std::string_view s);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_H_
