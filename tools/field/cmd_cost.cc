// fieldprof cost: an API's field cost from the local snapshot cache,
// offline. Options -> the lookup in the cache's index (cost_lookup.h) ->
// text or JSON.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include "common/base/json_writer.h"
#include "common/settings/options.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/snapshot/snapshot_index.h"
#include "common/statistics/histogram.h"
#include "common/statistics/resolution.h"
#include "common/wire/api_key.h"
#include "common/wire/wire.h"
#include "tools/commands.h"
#include "tools/field/cost_lookup.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"

namespace fieldprof::tools {
namespace {

struct CostOptions {
  std::string cache_dir, metric_name = "wall_time_ns", color = "auto";
  bool json = false;
  std::string module, symbol;
  wire::Metric metric = wire::METRIC_WALL_TIME_NS;

  std::string Shown() const { return module.empty() ? symbol : module + ":" + symbol; }
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseCostOptions(int argc, char** argv, CostOptions* o) {
  o->cache_dir = DefaultSnapshotCacheDir();
  OptionTable t("fieldprof cost",
                "What an API costs in the field, from the local snapshot cache (no network):\n"
                "calls, runs, p50/p90/p99, mean +- stddev, allocations and I/O per call, and\n"
                "its histogram. Every version and platform of the API is summed.\n\n"
                "  fieldprof cost sqlite3_prepare_v2\n"
                "  fieldprof cost libz.so.1:deflate --metric alloc_bytes_inclusive\n\n"
                "The cache fills a few fragments a day (fieldprof-agent), or at once with\n"
                "fieldprof pull --all.");
  t.AddString("cache", &o->cache_dir, "the snapshot cache");
  t.AddString("metric", &o->metric_name,
              "wall_time_ns, alloc_bytes_inclusive, alloc_bytes_exclusive, alloc_count, "
              "file_io_bytes, socket_io_bytes");
  t.AddBool("json", &o->json, "print as JSON");
  t.AddString("color", &o->color, "heat colours in the histogram: auto, always, never");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  const auto& p = t.positional();
  if (s.ok() && p.size() == 2) {
    o->module = p[0];
    o->symbol = p[1];
  } else if (s.ok() && p.size() == 1) {
    std::tie(o->module, o->symbol) = SplitApiName(p[0]);
  } else if (s.ok()) {
    s = InvalidArgument("expected SYMBOL or MODULE:SYMBOL");
  }
  if (s.ok() && o->color != "auto" && o->color != "always" && o->color != "never") {
    s = InvalidArgument("--color must be auto, always or never");
  }
  StatusOr<wire::Metric> metric = s.ok() ? ParseMetric(o->metric_name) : StatusOr<wire::Metric>(s);
  if (!metric.ok()) return UsageError(t, metric.status());
  o->metric = *metric;
  return std::nullopt;
}

// Nothing of the metric asked for: what the cache has instead, or the
// closest names. Returns the exit code (1).
int SayNotFound(const CostMatch& m, const CostOptions& o, const SnapshotIndex& index, size_t held,
                const wire::Manifest& manifest) {
  if (!m.by_metric.empty()) {
    std::cerr << "fieldprof cost: " << o.Shown() << " has no " << o.metric_name << " data; it has";
    for (const auto& [mt, _] : m.by_metric) std::cerr << " " << MetricName(mt);
    std::cerr << "\n";
    return 1;
  }
  std::cerr << "fieldprof cost: " << o.Shown() << " is not in the snapshot cache";
  if (held < manifest.fragment_count()) {
    std::cerr << " (" << held << " of " << manifest.fragment_count()
              << " fragments held: it may be in one not fetched yet; fieldprof pull --all "
                 "fetches them all)";
  }
  std::cerr << ".\n";
  const std::vector<std::string> near = NearestApis(index, o.module, o.symbol, 6);
  if (!near.empty()) std::cerr << "Did you mean:\n";
  for (const std::string& name : near) std::cerr << "  " << name << "\n";
  return 1;
}

std::string CostJson(const CostMatch& m, const CostOptions& o, const wire::Manifest& manifest,
                     size_t held) {
  const Histogram& h = m.by_metric.at(o.metric);
  const HistogramStats st = h.Stats();
  JsonWriter j;
  j.BeginObject();
  j.Key("module").String(o.module).Key("symbol").String(o.symbol);
  j.Key("metric").String(o.metric_name);
  j.Key("modules").BeginArray();
  for (const auto& [mod, _] : m.module_calls) j.String(mod);
  j.EndArray();
  j.Key("series").Uint(m.series.size()).Key("runs").Uint(m.runs).Key("machines").Uint(m.machines);
  j.Key("suspect").Bool(!m.suspect.empty());
  if (!m.suspect.empty()) j.Key("suspect_reason").String(m.suspect);
  j.Key("truncated").Bool(m.truncated).Key("calls").Uint(st.count);
  j.Key("mean").Double(st.mean).Key("stddev").Double(st.stddev);
  j.Key("min").Uint(st.min).Key("max").Uint(st.max);
  j.Key("p50").Double(st.p50).Key("p90").Double(st.p90).Key("p99").Double(st.p99);
  WriteResolution(j, st, m.resolution_ns);
  j.Key("per_call").BeginObject();
  j.Key("alloc_bytes").Double(m.MeanOf(wire::METRIC_ALLOC_BYTES_INCLUSIVE));
  j.Key("alloc_count").Double(m.MeanOf(wire::METRIC_ALLOC_COUNT));
  j.Key("file_io_bytes").Double(m.MeanOf(wire::METRIC_FILE_IO_BYTES));
  j.Key("socket_io_bytes").Double(m.MeanOf(wire::METRIC_SOCKET_IO_BYTES));
  j.EndObject();
  j.Key("histogram").BeginObject();
  j.Key("zero_count").Uint(h.zero_count());
  j.Key("buckets").BeginArray();
  for (int i = 0; i < kNumBuckets; ++i) {
    if (h.bucket(i).count == 0) continue;
    j.BeginObject();
    j.Key("index").Int(i).Key("low").Uint(BucketLow(i)).Key("high").Uint(BucketHigh(i));
    j.Key("count").Uint(h.bucket(i).count);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  j.Key("snapshot").BeginObject();
  j.Key("version").Uint(manifest.snapshot_version());
  j.Key("created_unix_ms").Int(manifest.created_unix_ms());
  j.Key("fragments_held").Uint(held).Key("fragment_count").Uint(manifest.fragment_count());
  j.EndObject();
  j.EndObject();
  return j.Take();
}

void PrintCostSummary(const CostMatch& m, const CostOptions& o, bool colored) {
  const HistogramStats st = m.by_metric.at(o.metric).Stats();
  auto f = [&](double v) { return FormatMetricValue(o.metric, v, m.resolution_ns); };
  const std::string machines =
      m.machines > 0 ? " on " + FormatCount(m.machines) + "+ machines" : std::string();
  std::printf("%s%s%s  %s, %zu series in %zu module%s, %s runs%s%s\n", colored ? "\033[1m" : "",
              o.Shown().c_str(), colored ? "\033[0m" : "", o.metric_name.c_str(), m.series.size(),
              m.module_calls.size(), m.module_calls.size() == 1 ? "" : "s",
              FormatCount(m.runs).c_str(), machines.c_str(),
              m.truncated ? " (some runs cut short by the budget)" : "");
  if (!m.suspect.empty()) {
    std::printf("  %sSUSPECT%s %s\n", colored ? "\033[1;31m" : "", colored ? "\033[0m" : "",
                m.suspect.c_str());
  }
  if (m.module_calls.size() > 1) {
    std::printf("  modules:");
    for (const auto& [mod, n] : m.module_calls) {
      std::printf(" %s (%s calls)", mod.c_str(), FormatCount(n).c_str());
    }
    std::printf("\n");
  }
  std::printf("  calls %s   mean %s +- %s   min %s   max %s\n", FormatCount(st.count).c_str(),
              f(st.mean).c_str(), FormatMetricValue(o.metric, st.stddev).c_str(),
              f(static_cast<double>(st.min)).c_str(), f(static_cast<double>(st.max)).c_str());
  std::printf("  p50 %s   p90 %s   p99 %s\n", f(st.p50).c_str(), f(st.p90).c_str(),
              f(st.p99).c_str());
  std::printf("  per call: %s allocated in %.2f allocations; file I/O %s; socket I/O %s\n\n",
              FormatBytes(m.MeanOf(wire::METRIC_ALLOC_BYTES_INCLUSIVE)).c_str(),
              m.MeanOf(wire::METRIC_ALLOC_COUNT),
              FormatBytes(m.MeanOf(wire::METRIC_FILE_IO_BYTES)).c_str(),
              FormatBytes(m.MeanOf(wire::METRIC_SOCKET_IO_BYTES)).c_str());
}

// One bar a log2 bucket (and the zero bucket), in the heat colours.
void PrintCostHistogram(const Histogram& h, const CostOptions& o, uint64_t resolution_ns,
                        bool colored) {
  const bool truecolor = TrueColor();
  int lo = 64, hi = -1;
  for (int i = 0; i < kNumBuckets; ++i) {
    if (h.bucket(i).count > 0) lo = std::min(lo, i), hi = std::max(hi, i);
  }
  uint64_t top = std::max<uint64_t>(h.zero_count(), 1);
  for (int i = lo; i <= hi; ++i) top = std::max(top, h.bucket(i).count);
  auto edge = [&](double v) { return FormatMetricValue(o.metric, v); };
  auto row = [&](const std::string& range, uint64_t n, double position) {
    const double frac = static_cast<double>(n) / static_cast<double>(top);
    const int width = n == 0 ? 0 : std::max(1, static_cast<int>(std::lround(40 * frac)));
    std::string bar;
    for (int w = 0; w < width; ++w) bar += "\u2588";  // 3 bytes, one column
    std::printf("  %23s %s%s%s%s %s\n", range.c_str(),
                colored && n > 0 ? Heat(position, frac, truecolor).c_str() : "", bar.c_str(),
                colored && n > 0 ? "\033[0m" : "", std::string(40 - width, ' ').c_str(),
                FormatCount(n).c_str());
  };
  if (h.zero_count() > 0) row(ZeroBucketLabel(o.metric, resolution_ns), h.zero_count(), 0);
  for (int i = lo; i <= hi; ++i) {
    const double position = hi == lo ? 1.0 : static_cast<double>(i - lo) / (hi - lo);
    row(edge(static_cast<double>(BucketLow(i))) + " .. " + edge(static_cast<double>(BucketHigh(i))),
        h.bucket(i).count, position);
  }
}

void PrintSnapshotLine(const wire::Manifest& manifest, size_t held) {
  char created[32] = "?";
  const time_t secs = static_cast<time_t>(manifest.created_unix_ms() / 1000);
  struct tm tm;
  if (gmtime_r(&secs, &tm) != nullptr) {
    std::strftime(created, sizeof created, "%Y-%m-%d %H:%M UTC", &tm);
  }
  std::printf("\n  snapshot %llu of %s; %zu of %u fragments held\n",
              static_cast<unsigned long long>(manifest.snapshot_version()), created, held,
              manifest.fragment_count());
}

}  // namespace

int CmdCost(int argc, char** argv) {
  CostOptions o;
  if (const ExitCode done = ParseCostOptions(argc, argv, &o)) return *done;
  const SnapshotCache cache(o.cache_dir);
  StatusOr<wire::Manifest> manifest = cache.Manifest();
  const size_t held = cache.Fragments().size();
  if (!manifest.ok() || held == 0) {
    std::cerr << "fieldprof cost: no snapshot in " << o.cache_dir
              << " yet; fetch it with: fieldprof pull --all\n";
    return 1;
  }
  // The symbol's records, found through the cache's index (built by this
  // call when the cache changed since it was last built).
  StatusOr<SnapshotIndex> index = SnapshotIndex::Open(cache);
  StatusOr<CostMatch> m =
      index.ok() ? LookUpCost(*index, o.module, o.symbol, o.metric) : index.status();
  if (!m.ok()) {
    std::cerr << "fieldprof cost: " << m.status().message() << "\n";
    return 1;
  }
  auto chosen = m->by_metric.find(o.metric);
  if (chosen == m->by_metric.end() || chosen->second.empty()) {
    return SayNotFound(*m, o, *index, held, *manifest);
  }
  if (o.json) {
    std::cout << CostJson(*m, o, *manifest, held) << "\n";
    return 0;
  }
  const bool colored = ColorWanted(o.color);
  PrintCostSummary(*m, o, colored);
  PrintCostHistogram(chosen->second, o, m->resolution_ns, colored);
  PrintSnapshotLine(*manifest, held);
  return 0;
}

}  // namespace fieldprof::tools
