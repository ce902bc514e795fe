// The ClickHouse parts under the ClickHouse store (store_clickhouse.h;
// docs/scale-out.md): a client for ClickHouse's HTTP interface, the
// topology the aggregator is given, and the rows and SQL of the tables.
//
// A row holds a series' key in columns (the tables are sorted by them) and
// its value as one String: the RocksDB store's value format
// (aggregate_value.h, a wire::Record without its key). ClickHouse keeps,
// sorts, replicates and deduplicates the rows; the aggregator adds values
// up, exactly, in 128 bits (ClickHouse 18.16 has no 128-bit integers, and
// its sumMap over bucket arrays read ten times slower than this).
//
//   ClickHouseClient ch({.host = "127.0.0.1", .port = 8123, .tls = false});
//   Status s = ch.Execute("SELECT 1");
//   if (!s.ok() && ch.last_error_code() == kChQuorumBusy) ...retry
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_CLICKHOUSE_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_CLICKHOUSE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aggregator/store/aggregate_value.h"
#include "aggregator/store/store.h"
#include "common/batch_view.h"
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

// A ClickHouse string literal of `s` ('...' with \\ and \' escaped).
std::string SqlString(std::string_view s);

// Every server ParseClickHouseShards names, shard after shard.
[[nodiscard]] StatusOr<std::vector<HttpsClientOptions>> ParseClickHouseServers(
    std::string_view urls, std::chrono::milliseconds timeout);

// Runs `fn` on `servers` in turn, from servers[start % size], until one
// answers: success or a ClickHouse error (a code) is final, a network
// error tries the next server, and so does nothing once `final` (may be
// null) is true.
[[nodiscard]] Status ChOnAnyServer(const std::vector<HttpsClientOptions>& servers, size_t start,
                                   const std::function<Status(ClickHouseClient&)>& fn,
                                   const bool* final = nullptr);
// A query's answer from the first of `servers` that answers, as above.
[[nodiscard]] StatusOr<std::string> ChQueryAny(const std::vector<HttpsClientOptions>& servers,
                                               size_t start, const std::string& sql,
                                               const ClickHouseSettings& settings = {});

// insert_quorum of a table every server replicates: two when there are
// two or more servers, none for one.
std::string ChGlobalQuorum(size_t servers);

// A RowBinary String (its length as a VarUInt, then its bytes): appended
// to `out`; read from `data` at *at (false when it does not read whole).
void ChPutString(std::string* out, std::string_view s);
[[nodiscard]] bool ChReadString(std::string_view data, size_t* at, std::string* out);

// The key columns in key order (common/api_key.h EncodeApiKey's order),
// and their definitions for CREATE TABLE.
inline constexpr const char* kChKeyColumns =
    "module, symbol, module_version, metric, os, arch, cpu_vendor, cpu_family";
std::string ChKeyColumnsDdl();

// The rows of one batch for the raw rows table (batch_id, seq, day, key,
// value), in RowBinary: first the batch's marker row (module '', no
// value), then one row per record in the batch's order, seq counting them
// (a batch may hold a key twice, and both records count). The same batch
// gives the same bytes. `day_offsets` (may be null) gets where each row's
// day is, for SetRowsDay.
std::string BatchRows(const BatchView& batch, int32_t day,
                      std::vector<size_t>* day_offsets = nullptr);
void SetRowsDay(std::string* rows, const std::vector<size_t>& day_offsets, int32_t day);

// A row of a level table: (day Date | month UInt32, key, value) in RowBinary.
void AppendDayRow(std::string* out, int32_t day, const ApiKey& key, std::string_view value);
void AppendMonthRow(std::string* out, int32_t month, const ApiKey& key, std::string_view value);
// The value of a sum, as the rows hold it.
std::string EncodeValue(const ApiAggregate& a);

// SQL of one level's rows (key, value), each stored copy counted once: of
// the rows of `source` meeting `where` with equal `dedup` columns
// ("batch_id, seq" for raw rows; the key and "day" for day nodes) the first
// in `first_by` order is kept, and then only if it meets `keep_if` (which
// may name `day`).
std::string ChDedupRowsSql(const std::string& source, const std::string& dedup,
                           const std::string& where, const std::string& first_by = "",
                           const std::string& keep_if = "");
// The rows of `parts` (ChDedupRowsSql joined by UNION ALL) in key order,
// as RowBinary that SumsReader reads.
std::string ChOrderedRowsSql(const std::string& parts);

// Reads the RowBinary answer of ChOrderedRowsSql piece by piece: Feed()
// each piece as it arrives, then Finish(). The values of consecutive rows
// of one key are added up, and each key's sum goes to `visit` (false
// stops). A row that does not read (ClickHouse's appended error text, a
// cut answer, a value that does not parse) is an error that says what was
// found, never a row.
class SumsReader {
 public:
  explicit SumsReader(std::function<bool(ApiAggregate&&)> visit) : visit_(std::move(visit)) {}
  // False when reading must stop: `visit` said so, or an error (status()).
  bool Feed(std::string_view piece);
  // OK when every byte was read as whole rows (and the last key visited).
  [[nodiscard]] Status Finish();
  const Status& status() const { return status_; }
  uint64_t rows() const { return rows_; }

 private:
  // Reads one row from buffer_ at pos_: 1 read, 0 more bytes needed, -1 bad.
  int ReadRow();
  // Hands the key summed so far to visit_.
  void Flush();
  // Unavailable with ClickHouse's message when one is in the bytes at
  // hand, else DataLoss(otherwise).
  Status Failure(const std::string& otherwise) const;
  std::function<bool(ApiAggregate&&)> visit_;
  std::string buffer_;  // unread bytes from pos_, after up to 512 read ones
  size_t pos_ = 0;
  bool stopped_ = false;
  Status status_;
  uint64_t rows_ = 0;
  bool have_ = false;  // a key is being summed
  ApiKey key_;
  SparseAggregate sum_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_CLICKHOUSE_H_
