// The query API over the field sums (what `fieldprof top` and `fieldprof
// api` read):
//   GET /v1/apis  ?module=&prefix=&metric=&version=&os=&arch=&vendor=&family=
//                 &limit=[&order=key|calls|mean]
//     all-time sums, one line per series: key, calls, runs, mean, p50, p90,
//     p99. order=key (the default) stops after `limit`; calls and mean scan
//     up to 100,000 series and put the most called / dearest first. Behind
//     k-anonymity, "withheld" says what the whole store holds back until k
//     machines have sent it (counts only; series_json.h WriteWithheld).
//   GET /v1/api   ?module=&symbol=[&metric=][&version=][&os=][&arch=]
//                 [&vendor=][&family=][&from=YYYY-MM-DD][&to=YYYY-MM-DD]
//     one API summed over every series the filters match and the day range
//     (wall time by default): statistics and the histogram with exact sums.
//     404 when the API is unknown; a known API with nothing in the range is
//     an empty answer.
#ifndef FIELDPROF_AGGREGATOR_READS_QUERY_HANDLER_H_
#define FIELDPROF_AGGREGATOR_READS_QUERY_HANDLER_H_

#include <string_view>

#include "aggregator/http/http_types.h"
#include "aggregator/ingest/ingest_handler.h"
#include "aggregator/metrics.h"
#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

class QueryHandler {
 public:
  // `store` and `metrics` must outlive the handler; `clock` says which day
  // is the latest (tests inject one).
  QueryHandler(Store* store, Metrics* metrics, WallClock clock)
      : store_(store), metrics_(metrics), clock_(std::move(clock)) {}

  HttpResponse ListApis(std::string_view query);
  HttpResponse GetApi(std::string_view query);

 private:
  Store* const store_;
  Metrics* const metrics_;
  const WallClock clock_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_READS_QUERY_HANDLER_H_
