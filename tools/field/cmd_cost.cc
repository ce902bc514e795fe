// fieldprof cost: an API's field cost from the local snapshot cache, offline.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/api_key.h"
#include "common/histogram.h"
#include "common/json_writer.h"
#include "common/options.h"
#include "common/resolution.h"
#include "common/snapshot_cache.h"
#include "common/snapshot_index.h"
#include "common/wire.h"
#include "tools/commands.h"
#include "tools/cli/format.h"

namespace fieldprof::tools {

namespace {

// Everything the cache holds for the API asked about.
struct Match {
  std::map<wire::Metric, Histogram> by_metric;
  uint64_t runs = 0;  // of the chosen metric's series
  bool truncated = false;
  uint64_t resolution_ns = 0;                    // the coarsest (wall time)
  std::set<std::string> series;                  // module, version, platform
  std::map<std::string, uint64_t> module_calls;  // module -> calls (chosen metric)
};

// Edit distance, case-insensitive, for suggestions.
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// How close `name` is to `want`: 0 for a case-insensitive match, then
// substrings, then edit distance. Lower is closer.
size_t Closeness(const std::string& want, const std::string& name) {
  const std::string w = Lower(want), n = Lower(name);
  if (w == n) return 0;
  if (n.find(w) != std::string::npos || w.find(n) != std::string::npos) {
    return 1 + (n.size() > w.size() ? n.size() - w.size() : w.size() - n.size()) / 4;
  }
  if (w.size() > 64 || n.size() > 64) return 1000;
  return 2 + Distance(w, n);
}

double MeanOf(const Match& m, wire::Metric metric) {
  auto it = m.by_metric.find(metric);
  return it == m.by_metric.end() || it->second.empty() ? 0 : it->second.Mean();
}

}  // namespace

int CmdCost(int argc, char** argv) {
  std::string cache_dir = DefaultSnapshotCacheDir(), metric_name = "wall_time_ns", color = "auto";
  bool json = false;
  OptionTable t("fieldprof cost",
                "What an API costs in the field, from the local snapshot cache (no network):\n"
                "calls, runs, p50/p90/p99, mean +- stddev, allocations and I/O per call, and\n"
                "its histogram. Every version and platform of the API is summed.\n\n"
                "  fieldprof cost sqlite3_prepare_v2\n"
                "  fieldprof cost libz.so.1:deflate --metric alloc_bytes_inclusive\n\n"
                "The cache fills a few fragments a day (fieldprof-agent), or at once with\n"
                "fieldprof pull --all.");
  t.AddString("cache", &cache_dir, "the snapshot cache");
  t.AddString("metric", &metric_name,
              "wall_time_ns, alloc_bytes_inclusive, alloc_bytes_exclusive, alloc_count, "
              "file_io_bytes, socket_io_bytes");
  t.AddBool("json", &json, "print as JSON");
  t.AddString("color", &color, "heat colours in the histogram: auto, always, never");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  std::string module, symbol;
  if (s.ok()) {
    const auto& p = t.positional();
    if (p.size() == 2) {
      module = p[0], symbol = p[1];
    } else if (p.size() == 1) {
      symbol = p[0];
      const size_t colon = symbol.find(':');
      if (colon != std::string::npos && colon > 0 && symbol.compare(colon, 2, "::") != 0) {
        module = symbol.substr(0, colon);
        symbol = symbol.substr(colon + 1);
      }
    } else {
      s = InvalidArgument("expected SYMBOL or MODULE:SYMBOL");
    }
  }
  if (s.ok() && color != "auto" && color != "always" && color != "never") {
    s = InvalidArgument("--color must be auto, always or never");
  }
  StatusOr<wire::Metric> metric = s.ok() ? ParseMetric(metric_name) : StatusOr<wire::Metric>(s);
  if (!metric.ok()) {
    std::cerr << "fieldprof cost: " << metric.status().message() << " (see --help)\n";
    return 2;
  }

  const SnapshotCache cache(cache_dir);
  StatusOr<wire::Manifest> manifest = cache.Manifest();
  const size_t held = cache.Fragments().size();
  if (!manifest.ok() || held == 0) {
    std::cerr << "fieldprof cost: no snapshot in " << cache_dir
              << " yet; fetch it with: fieldprof pull --all\n";
    return 1;
  }

  // The symbol's records, found through the cache's index (built by this
  // call when the cache changed since it was last built).
  StatusOr<SnapshotIndex> index = SnapshotIndex::Open(cache);
  if (!index.ok()) {
    std::cerr << "fieldprof cost: " << index.status().message() << "\n";
    return 1;
  }
  Match m;
  Status scan = index->ForEachRecordOf(symbol, [&](const wire::Record& r) {
    const wire::ApiKey& k = r.key();
    if (!module.empty() && k.module() != module) return true;
    Histogram h = HistogramFromWire(r.histogram());
    if (k.metric() == *metric) {
      m.runs += r.runs();
      m.truncated = m.truncated || r.truncated();
      m.resolution_ns = std::max(m.resolution_ns, r.resolution_ns());
      m.module_calls[k.module()] += h.count();
      m.series.insert(k.module() + "\n" + k.module_version() + "\n" +
                      k.platform().SerializeAsString());
    }
    m.by_metric[k.metric()].Merge(h);
    return true;
  });
  if (!scan.ok()) {
    std::cerr << "fieldprof cost: " << scan.message() << "\n";
    return 1;
  }
  // The closest names, in case nothing matches: close symbols from the
  // index, then their modules from their records.
  auto nearest = [&] {
    std::vector<std::pair<size_t, std::string>> syms;
    index->ForEachSymbol([&](std::string_view name) {
      const size_t d = Closeness(symbol, std::string(name));
      if (d <= std::max<size_t>(3, symbol.size() / 3) || (!module.empty() && name == symbol)) {
        syms.emplace_back(d, std::string(name));
      }
    });
    std::sort(syms.begin(), syms.end());
    if (syms.size() > 24) syms.resize(24);
    std::map<std::string, size_t> near;
    for (const auto& [d, sym] : syms) {
      (void)index->ForEachRecordOf(sym, [&](const wire::Record& r) {
        if (r.key().metric() != wire::METRIC_WALL_TIME_NS) return true;
        const std::string name = r.key().module() + ":" + sym;
        const size_t dm = module.empty() ? size_t{1000} : Closeness(module + ":" + symbol, name);
        if (near.count(name) == 0) near[name] = std::min(d, dm);
        return true;
      });
    }
    return near;
  };
  const std::string shown = module.empty() ? symbol : module + ":" + symbol;
  auto chosen = m.by_metric.find(*metric);
  if (chosen == m.by_metric.end() || chosen->second.empty()) {
    if (!m.by_metric.empty()) {
      std::cerr << "fieldprof cost: " << shown << " has no " << metric_name << " data; it has";
      for (const auto& [mt, _] : m.by_metric) std::cerr << " " << MetricName(mt);
      std::cerr << "\n";
      return 1;
    }
    std::cerr << "fieldprof cost: " << shown << " is not in the snapshot cache";
    if (held < manifest->fragment_count()) {
      std::cerr << " (" << held << " of " << manifest->fragment_count()
                << " fragments held: it may be in one not fetched yet; fieldprof pull --all "
                   "fetches them all)";
    }
    std::cerr << ".\n";
    std::vector<std::pair<size_t, std::string>> best;
    for (const auto& [name, d] : nearest()) {
      if (name != shown) best.emplace_back(d, name);
    }
    std::sort(best.begin(), best.end());
    if (!best.empty()) {
      std::cerr << "Did you mean:\n";
      for (size_t i = 0; i < std::min<size_t>(best.size(), 6); ++i) {
        std::cerr << "  " << best[i].second << "\n";
      }
    }
    return 1;
  }

  const Histogram& h = chosen->second;
  const HistogramStats st = h.Stats();
  const double alloc = MeanOf(m, wire::METRIC_ALLOC_BYTES_INCLUSIVE);
  const double allocs = MeanOf(m, wire::METRIC_ALLOC_COUNT);
  const double file_io = MeanOf(m, wire::METRIC_FILE_IO_BYTES);
  const double sock_io = MeanOf(m, wire::METRIC_SOCKET_IO_BYTES);
  int lo = 64, hi = -1;
  for (int i = 0; i < kNumBuckets; ++i) {
    if (h.bucket(i).count > 0) lo = std::min(lo, i), hi = std::max(hi, i);
  }

  if (json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("module").String(module);
    j.Key("symbol").String(symbol);
    j.Key("metric").String(metric_name);
    j.Key("modules").BeginArray();
    for (const auto& [mod, _] : m.module_calls) j.String(mod);
    j.EndArray();
    j.Key("series").Uint(m.series.size());
    j.Key("runs").Uint(m.runs);
    j.Key("truncated").Bool(m.truncated);
    j.Key("calls").Uint(st.count);
    j.Key("mean").Double(st.mean).Key("stddev").Double(st.stddev);
    j.Key("min").Uint(st.min).Key("max").Uint(st.max);
    j.Key("p50").Double(st.p50).Key("p90").Double(st.p90).Key("p99").Double(st.p99);
    WriteResolution(j, st, m.resolution_ns);
    j.Key("per_call").BeginObject();
    j.Key("alloc_bytes").Double(alloc).Key("alloc_count").Double(allocs);
    j.Key("file_io_bytes").Double(file_io).Key("socket_io_bytes").Double(sock_io);
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
    j.Key("version").Uint(manifest->snapshot_version());
    j.Key("created_unix_ms").Int(manifest->created_unix_ms());
    j.Key("fragments_held").Uint(held).Key("fragment_count").Uint(manifest->fragment_count());
    j.EndObject();
    j.EndObject();
    std::cout << j.Take() << "\n";
    return 0;
  }

  const bool colored = ColorWanted(color);
  const bool truecolor = TrueColor();
  auto f = [&](double v) { return FormatMetricValue(*metric, v, m.resolution_ns); };
  auto edge = [&](double v) { return FormatMetricValue(*metric, v); };
  std::printf("%s%s%s  %s, %zu series in %zu module%s, %s runs%s\n", colored ? "\033[1m" : "",
              shown.c_str(), colored ? "\033[0m" : "", metric_name.c_str(), m.series.size(),
              m.module_calls.size(), m.module_calls.size() == 1 ? "" : "s",
              FormatCount(m.runs).c_str(),
              m.truncated ? " (some runs cut short by the budget)" : "");
  if (m.module_calls.size() > 1) {
    std::printf("  modules:");
    for (const auto& [mod, n] : m.module_calls)
      std::printf(" %s (%s calls)", mod.c_str(), FormatCount(n).c_str());
    std::printf("\n");
  }
  std::printf("  calls %s   mean %s +- %s   min %s   max %s\n", FormatCount(st.count).c_str(),
              f(st.mean).c_str(), edge(st.stddev).c_str(), f(static_cast<double>(st.min)).c_str(),
              f(static_cast<double>(st.max)).c_str());
  std::printf("  p50 %s   p90 %s   p99 %s\n", f(st.p50).c_str(), f(st.p90).c_str(),
              f(st.p99).c_str());
  std::printf("  per call: %s allocated in %.2f allocations; file I/O %s; socket I/O %s\n\n",
              FormatBytes(alloc).c_str(), allocs, FormatBytes(file_io).c_str(),
              FormatBytes(sock_io).c_str());
  uint64_t top = std::max<uint64_t>(h.zero_count(), 1);
  for (int i = lo; i <= hi; ++i) top = std::max(top, h.bucket(i).count);
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
  if (h.zero_count() > 0) row(ZeroBucketLabel(*metric, m.resolution_ns), h.zero_count(), 0);
  for (int i = lo; i <= hi; ++i) {
    const double position = hi == lo ? 1.0 : static_cast<double>(i - lo) / (hi - lo);
    row(edge(static_cast<double>(BucketLow(i))) + " .. " + edge(static_cast<double>(BucketHigh(i))),
        h.bucket(i).count, position);
  }
  char created[32] = "?";
  const time_t secs = static_cast<time_t>(manifest->created_unix_ms() / 1000);
  struct tm tm;
  if (gmtime_r(&secs, &tm) != nullptr)
    std::strftime(created, sizeof created, "%Y-%m-%d %H:%M UTC", &tm);
  std::printf("\n  snapshot %llu of %s; %zu of %u fragments held\n",
              static_cast<unsigned long long>(manifest->snapshot_version()), created, held,
              manifest->fragment_count());
  return 0;
}

}  // namespace fieldprof::tools
