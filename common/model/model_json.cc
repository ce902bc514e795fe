#include "common/model/model_json.h"

#include "common/base/json_writer.h"

namespace fieldprof {

namespace {

// One API of a module's model: its names, counts, wall-time buckets and
// each metric's statistics.
void ApiCostJson(const ApiCost& a, JsonWriter* w) {
  JsonWriter& j = *w;
  j.BeginObject();
  j.Key("symbol").String(a.symbol).Key("demangled").String(a.demangled);
  j.Key("scopes").BeginArray();
  for (const std::string& s : a.name.scopes) j.String(s);
  j.EndArray();
  j.Key("function").String(a.name.function);
  j.Key("versions").BeginArray();
  for (const std::string& v : a.versions) j.String(v);
  j.EndArray();
  j.Key("calls")
      .Uint(a.calls())
      .Key("runs")
      .Uint(a.runs)
      .Key("calls_per_run")
      .DoubleExact(a.CallsPerRun());
  if (a.resolution_ns != 0) j.Key("resolution_ns").Uint(a.resolution_ns);
  // The wall-time histogram's counts, for pictures: [[bucket, count], ...]
  // (bucket -1: the zero bucket).
  j.Key("wall_time_buckets").BeginArray();
  if (a.metric[0].zero_count() > 0) {
    j.BeginArray().Int(-1).Uint(a.metric[0].zero_count()).EndArray();
  }
  for (int b = 0; b < kNumBuckets; ++b) {
    if (a.metric[0].bucket(b).count == 0) continue;
    j.BeginArray().Int(b).Uint(a.metric[0].bucket(b).count).EndArray();
  }
  j.EndArray();
  j.Key("metrics").BeginObject();
  for (int i = 0; i < kModelMetrics; ++i) {
    if (a.metric[i].count() == 0) continue;
    const HistogramStats st = a.metric[i].Stats();
    j.Key(ModelMetricName(i)).BeginObject();
    j.Key("count")
        .Uint(st.count)
        .Key("share")
        .DoubleExact(a.share[i])
        .Key("total")
        .DoubleExact(a.Total(i));
    j.Key("mean").DoubleExact(st.mean).Key("sd").DoubleExact(st.stddev);
    j.Key("p50").DoubleExact(st.p50).Key("p90").DoubleExact(st.p90).Key("p99").DoubleExact(st.p99);
    j.Key("min").Uint(st.min).Key("max").Uint(st.max);
    j.EndObject();
  }
  j.EndObject();
  j.EndObject();
}

}  // namespace

std::string ModuleModelJson(const ModuleModel& m, const std::string& source,
                            const std::string& range, const std::string& filters) {
  JsonWriter j;
  j.BeginObject();
  j.Key("module").String(m.module).Key("source").String(source).Key("range").String(range);
  j.Key("filters").String(filters).Key("series").Uint(m.series).Key("calls").Uint(m.calls);
  j.Key("machines").Uint(m.machines);
  j.Key("weights").String(
      "shares are calls x mean (call-weighted); percentiles and means are over calls; runs "
      "counts the program runs behind each API");
  j.Key("versions").BeginArray();
  for (const std::string& v : m.versions) j.String(v);
  j.EndArray();
  j.Key("totals").BeginObject();
  for (int i = 0; i < kModelMetrics; ++i) j.Key(ModelMetricName(i)).DoubleExact(m.total[i]);
  j.EndObject();
  j.Key("apis").BeginArray();
  for (const ApiCost& a : m.apis) ApiCostJson(a, &j);
  j.EndArray();
  j.Key("scopes").BeginArray();
  for (const ScopeCost& s : m.scopes) {
    j.BeginObject();
    j.Key("scope").String(s.scope).Key("depth").Int(s.depth).Key("apis").Uint(s.apis);
    j.Key("calls").Uint(s.calls).Key("wall_time_total").DoubleExact(s.total[0]);
    j.Key("wall_time_share").DoubleExact(s.share[0]);
    j.EndObject();
  }
  j.EndArray();
  j.Key("points").BeginArray();
  for (const PointCost& p : m.points) {
    const HistogramStats st = p.h.Stats();
    j.BeginObject().Key("tag").String(p.tag).Key("segment").String(p.segment);
    j.Key("symbol").String(p.symbol).Key("runs").Uint(p.runs).Key("count").Uint(st.count);
    j.Key("mean_ns").DoubleExact(st.mean).Key("p50_ns").DoubleExact(st.p50);
    j.Key("p90_ns").DoubleExact(st.p90).Key("p99_ns").DoubleExact(st.p99);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.Take() + "\n";
}

const char* DiffVerdictName(int v) {
  return v == ApiDiff::kSlower ? "slower" : v == ApiDiff::kFaster ? "faster" : "same";
}

std::string ModuleDiffJson(const ModuleDiff& d, const std::string& module,
                           const std::string& before, const std::string& after,
                           const std::string& metric, const std::string& statistic,
                           const DiffOptions& o, bool all) {
  size_t slower = 0, faster = 0;
  for (const ApiDiff& x : d.apis) {
    slower += x.verdict == ApiDiff::kSlower;
    faster += x.verdict == ApiDiff::kFaster;
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("module").String(module).Key("before").String(before).Key("after").String(after);
  j.Key("metric").String(metric).Key("statistic").String(statistic);
  j.Key("fdr")
      .Double(o.fdr)
      .Key("correction")
      .String(o.dependent ? "benjamini-yekutieli" : "benjamini-hochberg");
  j.Key("apis_compared").Uint(d.apis.size()).Key("slower").Uint(slower).Key("faster").Uint(faster);
  j.Key("apis_with_too_few_calls").Uint(d.too_few_calls);
  j.Key("only_before").BeginArray();
  for (const std::string& x : d.only_before) j.String(x);
  j.EndArray().Key("only_after").BeginArray();
  for (const std::string& x : d.only_after) j.String(x);
  j.EndArray();
  j.Key("apis").BeginArray();
  for (const ApiDiff& x : d.apis) {
    if (!all && x.verdict == ApiDiff::kSame) continue;
    j.BeginObject();
    j.Key("symbol").String(x.symbol).Key("demangled").String(x.demangled);
    j.Key("verdict").String(DiffVerdictName(x.verdict));
    j.Key("before").DoubleExact(x.stat_before).Key("after").DoubleExact(x.stat_after);
    j.Key("change").DoubleExact(x.change);
    j.Key("calls_before").Uint(x.before.count()).Key("calls_after").Uint(x.after.count());
    j.Key("p_slower").Double(x.p_slower).Key("p_faster").Double(x.p_faster);
    j.Key("p").Double(x.p).Key("adjusted_p").Double(x.adjusted);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.Take() + "\n";
}

}  // namespace fieldprof
