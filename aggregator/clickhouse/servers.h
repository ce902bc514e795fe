// The ClickHouse servers an aggregator is given, and failover between
// them: a query goes to the first server that answers.
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_SERVERS_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_SERVERS_H_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/clickhouse/client.h"
#include "common/base/status.h"
#include "common/net/https_client.h"

namespace fieldprof::aggregator {

// ClickHouse servers as the aggregator is told them:
//   http://HOST:PORT                       one server
//   http://A:8123,http://B:8123;http://C:8123
// replicas of a shard are joined by ',', shards by ';'. Each server's HTTP
// client options (plain HTTP, `timeout`).
[[nodiscard]] StatusOr<std::vector<std::vector<HttpsClientOptions>>> ParseClickHouseShards(
    std::string_view urls, std::chrono::milliseconds timeout);

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

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_SERVERS_H_
