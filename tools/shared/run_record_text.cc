#include "tools/shared/run_record_text.h"

#include <algorithm>
#include <ctime>
#include <string>
#include <vector>

#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"
#include "common/wire/wire.h"
#include "tools/shared/format.h"

namespace fieldprof::tools {
std::string HistogramBarsText(wire::Metric m, const Histogram& h, uint64_t resolution_ns) {
  uint64_t top = std::max<uint64_t>(1, h.zero_count());
  for (int i = 0; i < kNumBuckets; ++i) top = std::max(top, h.bucket(i).count);
  std::string out;
  auto bar = [&](const std::string& label, uint64_t n) {
    const int width =
        static_cast<int>(30.0 * static_cast<double>(n) / static_cast<double>(top) + 0.5);
    char line[160];
    std::snprintf(line, sizeof line, "        %22s %8llu ", label.c_str(),
                  static_cast<unsigned long long>(n));
    out += line + std::string(static_cast<size_t>(std::max(width, n > 0 ? 1 : 0)), '#') + "\n";
  };
  if (h.zero_count() > 0) bar(ZeroBucketLabel(m, resolution_ns), h.zero_count());
  for (int i = 0; i < kNumBuckets; ++i) {
    const uint64_t n = h.bucket(i).count;
    if (n == 0) continue;
    bar(FormatMetricValue(m, static_cast<double>(BucketLow(i))) + " .. " +
            FormatMetricValue(m, static_cast<double>(BucketHigh(i))),
        n);
  }
  return out;
}

std::string LocalTime(int64_t unix_ms) {
  const time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm tm;
  char buf[32];
  if (localtime_r(&t, &tm) == nullptr || strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm) == 0) {
    return "?";
  }
  return buf;
}

std::string RefusedText(uint32_t refused) {
  switch (refused) {
    case 0:
      return "measured";
    case 1:
      return "refused: no free slot";
    case 2:
      return "refused: load too high";
    default:
      return "refused (" + std::to_string(refused) + ")";
  }
}

void PrintRunRecord(std::FILE* out, const std::string& name, const wire::RunRecord& r,
                    bool histograms) {
  const wire::RuntimeCounters& c = r.counters();
  std::fprintf(out, "%s  ended %s  %s\n", name.c_str(), LocalTime(r.ended_unix_ms()).c_str(),
               RefusedText(c.refused()).c_str());
  if (r.part() > 0) {
    // A run reported in parts from its live file (docs/runtime.md).
    std::fprintf(out, "  part %u of a run reported from its live file%s; counts since part %u\n",
                 r.part(), r.last_part() ? " (its last: the run had ended)" : "", r.part() - 1);
  }
  std::fprintf(out, "  platform %s %s %s family %u; %s %s, %u APIs chosen",
               std::string(OsName(r.platform().os())).c_str(),
               std::string(ArchName(r.platform().arch())).c_str(),
               std::string(CpuVendorName(r.platform().cpu_vendor())).c_str(),
               r.platform().cpu_family(), r.part() > 0 ? "over" : "run",
               FormatNanos(static_cast<double>(c.run_ns())).c_str(), c.apis_chosen());
  if (c.apis_truncated() > 0)
    std::fprintf(out, " (%u hit the overhead budget)", c.apis_truncated());
  std::fprintf(out, "\n  calls measured %llu, abandoned %llu, dropped %llu; probe cost %llu ns\n",
               static_cast<unsigned long long>(c.calls_measured()),
               static_cast<unsigned long long>(c.calls_abandoned()),
               static_cast<unsigned long long>(c.calls_dropped()),
               static_cast<unsigned long long>(c.probe_ns()));
  std::string last_api;
  for (const wire::Record& rec : r.records()) {
    const wire::ApiKey& k = rec.key();
    const std::string api = k.module() + " " + k.symbol();
    if (api != last_api) {
      std::fprintf(out, "  %s  (build %s)%s\n", api.c_str(), k.module_version().c_str(),
                   rec.truncated() ? "  [truncated: overhead budget]" : "");
      last_api = api;
    }
    const Histogram h = HistogramFromWire(rec.histogram());
    const HistogramStats s = h.Stats();
    const wire::Metric m = k.metric();
    const uint64_t res = rec.resolution_ns();
    auto f = [m, res](double v) { return FormatMetricValue(m, v, res); };
    std::fprintf(out, "    %-22s calls %-6llu mean %s  p50 %s  p90 %s  p99 %s  max %s\n",
                 std::string(MetricName(m)).c_str(), static_cast<unsigned long long>(s.count),
                 f(s.mean).c_str(), f(s.p50).c_str(), f(s.p90).c_str(), f(s.p99).c_str(),
                 f(static_cast<double>(s.max)).c_str());
    if (histograms) std::fputs(HistogramBarsText(m, h, res).c_str(), out);
  }
}

}  // namespace fieldprof::tools
