#include "aggregator/reads/series_json.h"

#include <chrono>

#include "aggregator/store/k_anonymous_store.h"

namespace fieldprof::aggregator {

void WriteStats(JsonWriter& j, const Histogram& h) {
  HistogramStats s = h.Stats();
  j.Key("stats").BeginObject();
  j.Key("count").Uint(s.count);
  j.Key("mean").DoubleExact(s.mean);
  j.Key("stddev").DoubleExact(s.stddev);
  j.Key("variance").DoubleExact(s.variance);
  j.Key("min").Uint(s.min);
  j.Key("max").Uint(s.max);
  j.Key("p50").DoubleExact(s.p50);
  j.Key("p90").DoubleExact(s.p90);
  j.Key("p99").DoubleExact(s.p99);
  j.EndObject();
}

void WriteHistogram(JsonWriter& j, const Histogram& h) {
  j.Key("histogram").BeginObject();
  j.Key("zero_count").Uint(h.zero_count());
  j.Key("count").Uint(h.count());
  j.Key("sum").String(Uint128ToString(h.sum()));
  j.Key("sum_sq").String(Uint128ToString(h.sum_sq()));
  j.Key("sum_sq_saturated").Bool(h.sum_sq_saturated());
  j.Key("min").Uint(h.empty() ? 0 : h.min());
  j.Key("max").Uint(h.max());
  j.Key("buckets").BeginArray();
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& b = h.bucket(i);
    if (b.count == 0) continue;
    j.BeginObject();
    j.Key("index").Int(i);
    j.Key("low").Uint(BucketLow(i));
    j.Key("high").Uint(BucketHigh(i));
    j.Key("count").Uint(b.count);
    j.Key("sum").String(Uint128ToString(b.sum));
    j.Key("sum_sq").String(Uint128ToString(b.sum_sq));
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
}

void WriteKey(JsonWriter& j, const ApiKey& k) {
  j.Key("module").String(k.module);
  j.Key("module_version").String(k.module_version);
  j.Key("symbol").String(k.symbol);
  j.Key("metric").String(MetricName(k.metric));
  j.Key("platform").BeginObject();
  j.Key("os").String(OsName(k.platform.os));
  j.Key("arch").String(ArchName(k.platform.arch));
  j.Key("cpu_vendor").String(CpuVendorName(k.platform.cpu_vendor));
  j.Key("cpu_family").Uint(k.platform.cpu_family);
  j.EndObject();
}

Status WriteWithheld(JsonWriter& j, Store* store) {
  auto* k = dynamic_cast<KAnonymousStore*>(store);
  if (k == nullptr) return Status::Ok();
  // At most a minute old, as the dashboard's module list.
  FP_ASSIGN_OR_RETURN(WithheldTotals t, k->Totals(std::chrono::seconds(60)));
  j.Key("withheld").BeginObject();
  j.Key("k").Int(k->k());
  j.Key("series").Int(t.series);
  j.Key("modules").Int(t.modules);
  j.Key("machines").Int(t.machines);
  j.Key("as_of_seconds_ago")
      .Double(std::chrono::duration<double>(std::chrono::steady_clock::now() - t.at).count());
  j.Key("setting").String("k_anonymity");
  j.EndObject();
  return Status::Ok();
}

}  // namespace fieldprof::aggregator
