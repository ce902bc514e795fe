// A client for one ClickHouse server's HTTP interface: statements and
// queries as POST bodies, answers whole or streamed, RowBinary inserts, and
// ClickHouse's error code when it refuses.
//
//   ClickHouseClient ch({.host = "127.0.0.1", .port = 8123, .tls = false});
//   Status s = ch.Execute("SELECT 1");
//   if (!s.ok() && ch.last_error_code() == kChQuorumBusy) ...retry
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_CLIENT_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_CLIENT_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "common/net/https_client.h"

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

// A ClickHouse string literal of `s` ('...' with \\ and \' escaped).
std::string SqlString(std::string_view s);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_CLIENT_H_
