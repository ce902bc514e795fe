// fieldprof spool ls|show: what the runtime has recorded on this machine and
// not yet uploaded, readably.
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "common/api_key.h"
#include "common/histogram.h"
#include "common/options.h"
#include "common/spool.h"
#include "common/wire.h"
#include "tools/commands.h"
#include "tools/format.h"

namespace fieldprof::tools {
namespace {

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

// "libz.so.1:deflate, libc.so.6:malloc" — each API once, in record order.
std::string ApiList(const wire::RunRecord& r) {
  std::vector<std::string> seen;
  for (const wire::Record& rec : r.records()) {
    std::string a = rec.key().module() + ":" + rec.key().symbol();
    if (std::find(seen.begin(), seen.end(), a) == seen.end()) seen.push_back(a);
  }
  std::string out;
  for (const std::string& a : seen) out += (out.empty() ? "" : ", ") + a;
  return out.empty() ? "-" : out;
}

void PrintHistogramBars(std::FILE* out, wire::Metric m, const Histogram& h,
                        uint64_t resolution_ns) {
  uint64_t top = std::max<uint64_t>(1, h.zero_count());
  for (int i = 0; i < kNumBuckets; ++i) top = std::max(top, h.bucket(i).count);
  auto bar = [&](const std::string& label, uint64_t n) {
    const int width =
        static_cast<int>(30.0 * static_cast<double>(n) / static_cast<double>(top) + 0.5);
    std::fprintf(out, "        %22s %8llu %s\n", label.c_str(), static_cast<unsigned long long>(n),
                 std::string(static_cast<size_t>(std::max(width, n > 0 ? 1 : 0)), '#').c_str());
  };
  if (h.zero_count() > 0) bar(ZeroBucketLabel(m, resolution_ns), h.zero_count());
  for (int i = 0; i < kNumBuckets; ++i) {
    const uint64_t n = h.bucket(i).count;
    if (n == 0) continue;
    bar(FormatMetricValue(m, static_cast<double>(BucketLow(i))) + " .. " +
            FormatMetricValue(m, static_cast<double>(BucketHigh(i))),
        n);
  }
}

}  // namespace

void PrintRunRecord(std::FILE* out, const std::string& name, const wire::RunRecord& r,
                    bool histograms) {
  const wire::RuntimeCounters& c = r.counters();
  std::fprintf(out, "%s  ended %s  %s\n", name.c_str(), LocalTime(r.ended_unix_ms()).c_str(),
               RefusedText(c.refused()).c_str());
  std::fprintf(out, "  platform %s %s %s family %u; run %s, %u APIs chosen",
               std::string(OsName(r.platform().os())).c_str(),
               std::string(ArchName(r.platform().arch())).c_str(),
               std::string(CpuVendorName(r.platform().cpu_vendor())).c_str(),
               r.platform().cpu_family(), FormatNanos(static_cast<double>(c.run_ns())).c_str(),
               c.apis_chosen());
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
    if (histograms) PrintHistogramBars(out, m, h, res);
  }
}

int CmdSpool(int argc, char** argv) {
  std::string dir = DefaultSpoolDir();
  bool json = false, histograms = false;
  OptionTable t("fieldprof spool",
                "Shows the run records the runtime left in the spool, not yet uploaded.\n\n"
                "  fieldprof spool ls [options]              one line per record\n"
                "  fieldprof spool show [options] [FILE...]  records in full (default: all)");
  t.AddString("spool", &dir, "spool directory");
  t.AddBool("json", &json, "show: print each record as JSON");
  t.AddBool("histograms", &histograms, "show: draw each metric's log2 histogram");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  const std::vector<std::string>& pos = t.positional();
  if (s.ok() && (pos.empty() || (pos[0] != "ls" && pos[0] != "show"))) {
    s = InvalidArgument("expected 'ls' or 'show'");
  }
  if (s.ok() && pos[0] == "ls" && pos.size() > 1) s = InvalidArgument("ls takes no files");
  if (s.ok() && dir.empty() && (pos[0] == "ls" || pos.size() == 1)) {
    s = InvalidArgument("no spool directory: set --spool, XDG_STATE_HOME or HOME");
  }
  if (!s.ok()) {
    std::cerr << "fieldprof spool: " << s.message() << " (see --help)\n";
    return 2;
  }
  std::vector<SpoolEntry> entries;
  if (pos[0] == "ls" || pos.size() == 1) {
    StatusOr<std::vector<SpoolEntry>> listed = ListSpool(dir);
    if (!listed.ok()) {
      std::cerr << "fieldprof spool: " << listed.status().message() << "\n";
      return 1;
    }
    entries = std::move(*listed);
  } else {
    // A directory among the files is a spool: its records, in order.
    for (size_t i = 1; i < pos.size(); ++i) {
      std::error_code ec;
      if (std::filesystem::is_directory(pos[i], ec)) {
        StatusOr<std::vector<SpoolEntry>> listed = ListSpool(pos[i]);
        if (!listed.ok()) {
          std::cerr << "fieldprof spool: " << listed.status().message() << "\n";
          return 1;
        }
        entries.insert(entries.end(), listed->begin(), listed->end());
        continue;
      }
      const size_t slash = pos[i].rfind('/');
      entries.push_back({pos[i], slash == std::string::npos ? pos[i] : pos[i].substr(slash + 1)});
    }
  }
  int bad = 0;
  uint64_t total_bytes = 0;
  if (pos[0] == "ls" && !entries.empty()) {
    std::printf("%-36s %-19s %7s %-24s %8s  %s\n", "RECORD", "ENDED", "SIZE", "STATUS", "CALLS",
                "APIS");
  }
  for (const SpoolEntry& e : entries) {
    StatusOr<wire::RunRecord> r = ReadRunRecord(e.path);
    if (!r.ok()) {
      std::cerr << "fieldprof spool: " << r.status().message() << "\n";
      ++bad;
      continue;
    }
    total_bytes += e.bytes;
    if (pos[0] == "ls") {
      std::printf(
          "%-36s %-19s %7s %-24s %8llu  %s\n", e.name.c_str(),
          LocalTime(r->ended_unix_ms()).c_str(), FormatBytes(static_cast<double>(e.bytes)).c_str(),
          RefusedText(r->counters().refused()).c_str(),
          static_cast<unsigned long long>(r->counters().calls_measured()), ApiList(*r).c_str());
    } else if (json) {
      std::string out;
      google::protobuf::util::JsonPrintOptions o;
      o.add_whitespace = true;
      o.always_print_primitive_fields = true;
      (void)google::protobuf::util::MessageToJsonString(*r, &out, o);
      std::printf("%s", out.c_str());
    } else {
      PrintRunRecord(stdout, e.name, *r, histograms);
      std::printf("\n");
    }
  }
  if (pos[0] == "ls") {
    std::printf("%zu record%s, %s in %s\n", entries.size() - static_cast<size_t>(bad),
                entries.size() - bad == 1 ? "" : "s",
                FormatBytes(static_cast<double>(total_bytes)).c_str(), dir.c_str());
  }
  return bad > 0 ? 1 : 0;
}

}  // namespace fieldprof::tools
