// fieldprof points field --module M: what the field sums of a module's
// instrumentation points (metric point_ns: the time from one point of a
// tag to the next, and of each scope, summed over volunteers' measured
// runs; docs/points.md), from the snapshot cache or an aggregator.
#include "tools/local/points_field.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "common/histogram.h"
#include "common/json_writer.h"
#include "common/options.h"
#include "tools/cli/command_line.h"
#include "tools/cli/format.h"
#include "tools/cli/module_source.h"

namespace fieldprof::tools {
namespace {

constexpr const char* kUsage =
    "The field's sums of a module's instrumentation points: per tag, the time\n"
    "from each point to the next and of each scope, over volunteers' measured\n"
    "runs (a user's own program is the module \"main\").\n"
    "  fieldprof points field --module main\n"
    "  fieldprof points field --module libfoo.so.1 --host agg.example --from 2026-11-01\n";

struct Series {
  Histogram h;
  uint64_t runs = 0;
};

// "tag$from$to" -> ("tag", "from -> to"); "tag$name" -> ("tag", "name (scope)").
std::pair<std::string, std::string> Split(const std::string& symbol) {
  const size_t a = symbol.find('$');
  const size_t b = a == std::string::npos ? a : symbol.find('$', a + 1);
  if (a == std::string::npos) return {symbol, ""};
  if (b == std::string::npos) return {symbol.substr(0, a), symbol.substr(a + 1) + " (scope)"};
  return {symbol.substr(0, a), symbol.substr(a + 1, b - a - 1) + " -> " + symbol.substr(b + 1)};
}

}  // namespace

int PointsField(int argc, char** argv) {
  ModuleSource source;
  std::string module, from, to;
  bool json = false;
  OptionTable t("fieldprof points field", kUsage);
  source.Register(t);
  t.AddString("module", &module, "the module whose points to show (\"main\": users' own programs)");
  t.AddString("from", &from, "with --host: from this day (YYYY-MM-DD)");
  t.AddString("to", &to, "with --host: to this day (YYYY-MM-DD)");
  t.AddBool("json", &json, "JSON instead of a table");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && module.empty()) s = InvalidArgument("give --module");
  if (!s.ok()) return UsageError(t, s);
  ModuleQuery q;
  q.module = module;
  q.from = from;
  q.to = to;
  q.token = source.token;
  StatusOr<std::vector<SeriesSum>> series = source.Load(q);
  if (!series.ok()) {
    std::cerr << "fieldprof points field: " << series.status().message() << "\n";
    return 1;
  }
  std::map<std::string, Series> by;  // by symbol: tag, then segment
  for (const SeriesSum& ss : *series) {
    if (ss.key.metric() != wire::METRIC_POINT_NS) continue;
    Series& e = by[ss.key.symbol()];
    e.h.Merge(ss.histogram);
    e.runs += ss.runs;
  }
  if (json) {
    JsonWriter j;
    j.BeginObject().Key("module").String(module).Key("source").String(source.Name());
    j.Key("points").BeginArray();
    for (const auto& [symbol, e] : by) {
      const auto [tag, segment] = Split(symbol);
      const HistogramStats st = e.h.Stats();
      j.BeginObject().Key("tag").String(tag).Key("segment").String(segment);
      j.Key("runs").Uint(e.runs).Key("count").Uint(st.count).Key("mean_ns").Double(st.mean);
      j.Key("p50_ns").Double(st.p50).Key("p90_ns").Double(st.p90).Key("p99_ns").Double(st.p99);
      j.EndObject();
    }
    j.EndArray().EndObject();
    std::cout << j.Take() << "\n";
    return 0;
  }
  if (by.empty()) {
    std::printf("%s: no instrumentation points in the %s\n", module.c_str(), source.Name().c_str());
    return 0;
  }
  std::printf("%s, from the %s\n", module.c_str(), source.Name().c_str());
  std::printf("%-16s %-36s %8s %10s %10s %10s %10s %10s\n", "tag", "segment", "runs", "count",
              "mean", "p50", "p90", "p99");
  for (const auto& [symbol, e] : by) {
    const auto [tag, segment] = Split(symbol);
    const HistogramStats st = e.h.Stats();
    std::printf("%-16s %-36s %8s %10s %10s %10s %10s %10s\n", tag.c_str(), segment.c_str(),
                FormatCount(e.runs).c_str(), FormatCount(st.count).c_str(),
                FormatNanos(st.mean).c_str(), FormatNanos(st.p50).c_str(),
                FormatNanos(st.p90).c_str(), FormatNanos(st.p99).c_str());
  }
  return 0;
}

}  // namespace fieldprof::tools
