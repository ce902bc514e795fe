// Client side of the aggregator's read API: fetch one series and compare it
// with what was sent. Used by the load generator's --verify and by tests.
#ifndef FIELDPROF_TOOLS_LOADGEN_API_QUERY_H_
#define FIELDPROF_TOOLS_LOADGEN_API_QUERY_H_

#include <map>
#include <string>

#include "common/net/https_client.h"
#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"

namespace fieldprof::tools {

// The all-time sums of one series as the aggregator reports them.
struct RemoteSeries {
  uint64_t count = 0;
  uint128 sum = 0;
  uint64_t runs = 0;
  std::map<int, uint64_t> bucket_counts;  // index -> count
  uint64_t zero_count = 0;
};

// GET /v1/api for exactly `key` (all filters set). A series with no data
// yet is an empty RemoteSeries, not an error.
[[nodiscard]] StatusOr<RemoteSeries> FetchSeries(HttpsClient& client, const ApiKey& key);

// GET /v1/module: every series of `module` (all time), by EncodeApiKey. One
// request instead of one per series; NotFound when the module is
// token-protected (401).
[[nodiscard]] StatusOr<std::map<std::string, RemoteSeries>> FetchModuleSeries(
    HttpsClient& client, const std::string& module);

// Query string selecting exactly `key`.
std::string SeriesQuery(const ApiKey& key);

// "" when `after` - `before` equals `sent`, else what differs.
std::string CompareDelta(const RemoteSeries& before, const RemoteSeries& after,
                         const Histogram& sent);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_LOADGEN_API_QUERY_H_
