// The ClickHouse parts under the ClickHouse store (store_clickhouse.h;
// docs/scale-out.md): a client for ClickHouse's HTTP interface, the
// topology the aggregator is given, and the row formats and SQL of the
// tables.
//
// 128-bit sums (a bucket's sum and sum of squares) are stored as four
// 32-bit limbs in UInt64 columns, because ClickHouse 18.16 has no UInt128:
// ClickHouse sums each limb column exactly (up to 2^32 rows), and the reader
// joins the limb sums with their carries into the exact 128-bit value.
//
//   ClickHouseClient ch({.host = "127.0.0.1", .port = 8123, .tls = false});
//   Status s = ch.Execute("SELECT 1");
//   if (!s.ok() && ch.last_error_code() == kChQuorumBusy) ...retry
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aggregator/store.h"
#include "common/batch_view.h"
#include "common/histogram.h"
#include "common/https_client.h"
#include "common/status.h"

namespace fieldprof::aggregator {

// ClickHouse's error codes the store acts on (ErrorCodes.cpp).
inline constexpr int kChTooFewReplicas = 285;       // fewer live replicas than insert_quorum
inline constexpr int kChQuorumBusy = 286;           // another quorum insert is not done
inline constexpr int kChUnknownInsertStatus = 319;  // quorum timed out: written or not
inline constexpr int kChReadonlyTable = 242;        // ZooKeeper unreachable

// Settings sent with a query (URL parameters of the HTTP interface).
using ClickHouseSettings = std::vector<std::pair<std::string, std::string>>;

// SQL over one server's HTTP interface (POST, the statement as the body).
// Not thread-safe: one client per thread (it keeps its connection open).
class ClickHouseClient {
 public:
  explicit ClickHouseClient(HttpsClientOptions o) : http_(std::move(o)) {}
  // A statement without a result (DDL, INSERT ... SELECT).
  [[nodiscard]] Status Execute(const std::string& sql, const ClickHouseSettings& settings = {});
  // A query's result as ClickHouse formats it (say FORMAT TSV in `sql`).
  [[nodiscard]] StatusOr<std::string> Query(const std::string& sql,
                                            const ClickHouseSettings& settings = {});
  // A query's result handed to `on_data` piece by piece as it arrives.
  // ClickHouse reports an error found after it began answering by
  // appending its message to the data: the reader's parse must catch it.
  [[nodiscard]] Status QueryStream(const std::string& sql, const ClickHouseSettings& settings,
                                   const std::function<bool(std::string_view)>& on_data);
  // `data` in RowBinary into `table` as one INSERT.
  [[nodiscard]] Status InsertRowBinary(const std::string& table, const std::string& data,
                                       const ClickHouseSettings& settings = {});
  // ClickHouse's error code of the last failed call ("Code: 286, ..."), or
  // 0 when it succeeded or never reached ClickHouse (network).
  int last_error_code() const { return last_code_; }

 private:
  Status Check(const StatusOr<HttpReply>& r);
  HttpsClient http_;
  int last_code_ = 0;
};

// ClickHouse servers as the aggregator is told them:
//   http://HOST:PORT                       one server
//   http://A:8123,http://B:8123;http://C:8123
// replicas of a shard are joined by ',', shards by ';'. Each server's HTTP
// client options (plain HTTP, `timeout`).
[[nodiscard]] StatusOr<std::vector<std::vector<HttpsClientOptions>>> ParseClickHouseShards(
    std::string_view urls, std::chrono::milliseconds timeout);

// The four 32-bit limbs of v, low first; and the exact value of limb sums
// (false when it does not fit in 128 bits).
std::array<uint64_t, 4> Limbs(uint128 v);
bool JoinLimbSums(const std::array<uint64_t, 4>& sums, uint128* out);

// A ClickHouse string literal of `s` ('...' with \\ and \' escaped).
std::string SqlString(std::string_view s);

// The key columns in key order (common/api_key.h EncodeApiKey's order).
inline constexpr const char* kChKeyColumns =
    "module, symbol, module_version, metric, os, arch, cpu_vendor, cpu_family";

// Column definitions of a series' key and value, for CREATE TABLE; the
// value columns' names in order; and the expressions that give them from
// the partial sums of ChDedupSumsSql (for INSERT ... SELECT into a level).
// `raw`: the raw rows' types (32-bit limbs; the levels hold their sums).
std::string ChKeyColumnsDdl();
std::string ChValueColumnsDdl(bool raw);
std::string ChValueColumnNames();
std::string ChValuesFromPartialsSql();

// The rows of one batch for the raw rows table (batch_id, seq, day, key,
// value), in RowBinary: first the batch's marker row (module '', no
// values), then its records in the batch's order, seq counting them (a
// batch may hold a key twice, and both records count). The same batch gives the
// same bytes. `day_offsets` (may be null) gets where each row's day is.
std::string BatchRows(const BatchView& batch, int32_t day,
                      std::vector<size_t>* day_offsets = nullptr);
// Moves rows from BatchRows to another day.
void SetRowsDay(std::string* rows, const std::vector<size_t>& day_offsets, int32_t day);

// SQL of one level's partial sums per key, each duplicate counted once:
// SELECT <key>, p_runs, ..., p_count, ... FROM (...) GROUP BY <key>.
// `source` is a table whose rows are (<dedup columns>, <key>, <value>);
// of the rows with equal `dedup` columns ("batch_id, seq" for raw rows;
// the key and "day" for day nodes) only the first in `first_by` order is
// kept, and then only if it meets `keep_if`. `where` filters the rows read.
std::string ChDedupSumsSql(const std::string& source, const std::string& dedup,
                           const std::string& where, const std::string& first_by = "",
                           const std::string& keep_if = "");
// The outer SQL that adds up partial sums (from ChDedupSumsSql parts joined
// by UNION ALL) into one row per key, in key order, as RowBinary that
// SumsReader reads. `where` filters the key columns ("" for none).
std::string ChFinalSumsSql(const std::string& parts);

// Reads the RowBinary answer of ChFinalSumsSql piece by piece: Feed() each
// piece as it arrives, then Finish(). Each complete row goes to `visit`
// (false stops). A row that does not read (ClickHouse's appended error
// text, a truncated answer) is an error that names what was found.
class SumsReader {
 public:
  explicit SumsReader(std::function<bool(ApiAggregate&&)> visit) : visit_(std::move(visit)) {}
  // False when reading must stop: `visit` said so, or an error (status()).
  bool Feed(std::string_view piece);
  // OK when every byte was read as whole rows.
  [[nodiscard]] Status Finish();
  const Status& status() const { return status_; }
  uint64_t rows() const { return rows_; }

 private:
  // Reads one row from buffer_ at pos_: 1 read, 0 more bytes needed, -1 bad.
  int ReadRow();
  std::function<bool(ApiAggregate&&)> visit_;
  std::string buffer_;
  size_t pos_ = 0;
  bool stopped_ = false;
  Status status_;
  uint64_t rows_ = 0;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_H_
