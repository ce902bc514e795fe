// The JSON of the read endpoints' series: a key, a histogram with its exact
// sums (128-bit values as decimal strings), and the statistics of one.
// Clients read them back with tools/shared/module_source.h HistogramFromJson.
#ifndef FIELDPROF_AGGREGATOR_READS_SERIES_JSON_H_
#define FIELDPROF_AGGREGATOR_READS_SERIES_JSON_H_

#include "aggregator/store/store.h"
#include "common/base/json_writer.h"
#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"

namespace fieldprof::aggregator {

// "module", "module_version", "symbol", "metric", "platform": {...} into
// the object being written.
void WriteKey(JsonWriter& j, const ApiKey& k);
// "stats": {count, mean, stddev, variance, min, max, p50, p90, p99}.
void WriteStats(JsonWriter& j, const Histogram& h);
// "histogram": {zero_count, count, sum, sum_sq, ..., buckets: [...]}, the
// non-empty buckets with their edges.
void WriteHistogram(JsonWriter& j, const Histogram& h);

// "withheld": {k, series, modules, machines, as_of_seconds_ago, setting}
// when `store` publishes only what k machines have sent (k_anonymous_store.h):
// what the whole store holds back until then, counts only, so that an
// empty answer says why. Nothing is written for a store that withholds
// nothing. Fails only when the walk it may need fails.
[[nodiscard]] Status WriteWithheld(JsonWriter& j, Store* store);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_READS_SERIES_JSON_H_
