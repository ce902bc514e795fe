// fieldprof points field --module M: what the field sums of a module's
// instrumentation points (metric point_ns: the time from one point of a
// tag to the next, and of each scope, summed over volunteers' measured
// runs; docs/points.md), from the snapshot cache or an aggregator.
#include "tools/points/points_field.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "common/base/json_writer.h"
#include "common/model/module_model.h"
#include "common/settings/options.h"
#include "common/statistics/histogram.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"
#include "tools/shared/module_source.h"

namespace fieldprof::tools {
namespace {

constexpr const char* kFieldUsage =
    "The field's sums of a module's instrumentation points: per tag, the time\n"
    "from each point to the next and of each scope, over volunteers' measured\n"
    "runs (a user's own program is the module \"main\").\n"
    "  fieldprof points field --module main\n"
    "  fieldprof points field --module libfoo.so.1 --host agg.example --from 2026-11-01\n";

}  // namespace

int PointsField(int argc, char** argv) {
  ModuleSource source;
  std::string module, from, to;
  bool json = false;
  OptionTable t("fieldprof points field", kFieldUsage);
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
  const ModuleModel model = BuildModuleModel(module, *series, {});
  if (json) {
    JsonWriter j;
    j.BeginObject().Key("module").String(module).Key("source").String(source.Name());
    j.Key("points").BeginArray();
    for (const PointCost& p : model.points) {
      const HistogramStats st = p.h.Stats();
      j.BeginObject().Key("tag").String(p.tag).Key("segment").String(p.segment);
      j.Key("runs").Uint(p.runs).Key("count").Uint(st.count).Key("mean_ns").Double(st.mean);
      j.Key("p50_ns").Double(st.p50).Key("p90_ns").Double(st.p90).Key("p99_ns").Double(st.p99);
      j.EndObject();
    }
    j.EndArray().EndObject();
    std::cout << j.Take() << "\n";
    return 0;
  }
  if (model.points.empty()) {
    std::printf("%s: no instrumentation points in the %s\n", module.c_str(), source.Name().c_str());
    return 0;
  }
  std::printf("%s, from the %s\n", module.c_str(), source.Name().c_str());
  std::printf("%-16s %-36s %8s %10s %10s %10s %10s %10s\n", "tag", "segment", "runs", "count",
              "mean", "p50", "p90", "p99");
  for (const PointCost& p : model.points) {
    const HistogramStats st = p.h.Stats();
    std::printf("%-16s %-36s %8s %10s %10s %10s %10s %10s\n", p.tag.c_str(), p.segment.c_str(),
                FormatCount(p.runs).c_str(), FormatCount(st.count).c_str(),
                FormatNanos(st.mean).c_str(), FormatNanos(st.p50).c_str(),
                FormatNanos(st.p90).c_str(), FormatNanos(st.p99).c_str());
  }
  return 0;
}

}  // namespace fieldprof::tools
