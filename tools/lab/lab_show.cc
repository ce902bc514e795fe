// fieldprof lab show: a lab profile as a table of APIs with their time
// histograms in the heat colours, or JSON; --tree the nesting graph.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/base/json_writer.h"
#include "common/settings/options.h"
#include "common/stacks/cxx_names.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "tools/lab/lab_commands.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"
#include "tools/shared/lab_profile.h"

namespace fieldprof::tools {
namespace {

constexpr int kMetrics = 6;  // wire::Metric 1..6

struct Row {
  std::string module, symbol;
  uint64_t resolution_ns = 0;
  uint64_t runs = 0;
  Histogram m[kMetrics];
  // Calls in one run of the scenario: the census's count (the timing
  // passes ran it --repeat times); per scenario run, time in all.
  uint64_t Calls() const { return m[1].count() != 0 ? m[1].count() : m[0].count(); }
  double Total() const { return m[0].Mean() * static_cast<double>(Calls()); }
};

std::vector<Row> RowsOf(const wire::LabProfile& p) {
  std::map<std::pair<std::string, std::string>, Row> by;
  for (const wire::Record& r : p.records()) {
    const int m = static_cast<int>(r.key().metric());
    if (m < 1 || m > kMetrics) continue;
    Row& row = by[{r.key().module(), r.key().symbol()}];
    row.module = r.key().module();
    row.symbol = r.key().symbol();
    row.m[m - 1].Merge(HistogramFromWire(r.histogram()));
    if (m == 1) {
      row.resolution_ns = std::max(row.resolution_ns, r.resolution_ns());
      row.runs += r.runs();
    }
  }
  std::vector<Row> rows;
  for (auto& [k, r] : by) rows.push_back(std::move(r));
  return rows;
}

// One character per bucket of the time histogram, from bucket `lo` to
// `hi` (the same for every row, so columns line up), its height by the
// bucket's count and its colour in the heat spectrum.
std::string Strip(const Histogram& h, int lo, int hi, bool color, bool truecolor) {
  static const char* const kBlocks[] = {" ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                        "\u2585", "\u2586", "\u2587", "\u2588"};
  uint64_t top = 1;
  for (int i = lo; i <= hi; ++i) top = std::max(top, h.bucket(i).count);
  std::string out;
  for (int i = lo; i <= hi; ++i) {
    const uint64_t n = h.bucket(i).count;
    const double frac = static_cast<double>(n) / static_cast<double>(top);
    const int level = n == 0 ? 0 : std::max(1, static_cast<int>(std::lround(8 * frac)));
    const double pos = hi == lo ? 1.0 : static_cast<double>(i - lo) / (hi - lo);
    if (color && n > 0) out += Heat(pos, frac, truecolor);
    out += kBlocks[level];
    if (color && n > 0) out += "\033[0m";
  }
  return out;
}

void PrintTree(const LabGraph& g, const std::map<std::string, const Row*>& rows, size_t limit) {
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint32_t>>> inside;
  std::set<uint32_t> nested;
  for (const auto& [pair, calls] : g.pairs()) {
    if (calls == 0 || pair.first == pair.second) continue;
    inside[pair.first].push_back({calls, pair.second});
    nested.insert(pair.second);
  }
  for (auto& [k, v] : inside) std::sort(v.rbegin(), v.rend());
  auto total = [&](uint32_t a) {
    auto it = rows.find(LabApiName(g.api(a)));
    return it == rows.end() ? 0.0 : it->second->Total();
  };
  std::vector<uint32_t> roots;
  for (uint32_t a = 0; a < g.size(); ++a) {
    if (!nested.count(a)) roots.push_back(a);
  }
  std::sort(roots.begin(), roots.end(),
            [&](uint32_t a, uint32_t b) { return total(a) > total(b); });
  size_t printed = 0;
  std::function<void(uint32_t, const std::string&, uint64_t, std::vector<uint32_t>&)> show =
      [&](uint32_t a, const std::string& indent, uint64_t calls, std::vector<uint32_t>& path) {
        if (printed++ >= limit) return;
        std::printf("%s%s:%s", indent.c_str(), g.api(a).module().c_str(),
                    Demangle(g.api(a).symbol()).c_str());
        if (calls > 0) std::printf("  (%s calls from here)", FormatCount(calls).c_str());
        auto it = rows.find(LabApiName(g.api(a)));
        if (it != rows.end() && it->second->m[0].count() > 0) {
          std::printf("  %s per call", FormatNanos(it->second->m[0].Mean()).c_str());
        }
        std::printf("\n");
        auto kids = inside.find(a);
        if (kids == inside.end() || path.size() >= 10) return;
        for (const auto& [n, child] : kids->second) {
          if (std::find(path.begin(), path.end(), child) != path.end()) continue;
          path.push_back(child);
          show(child, indent + "  ", n, path);
          path.pop_back();
        }
      };
  for (uint32_t r : roots) {
    std::vector<uint32_t> path = {r};
    show(r, "  ", 0, path);
  }
  if (printed > limit) std::printf("  ... (--top to see more)\n");
}

struct ShowOptions {
  int64_t top = 25;
  std::string sort = "total", match, color = "auto";
  bool tree = false, json = false;
  std::string file;
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseShowOptions(int argc, char** argv, ShowOptions* o) {
  OptionTable t("fieldprof lab show",
                "Prints a lab profile: per API its calls, time (p50, p90, mean, total) and\n"
                "allocation per call, with its time histogram in the heat colours (each\n"
                "column a log2 bucket, the same for every row); --tree the nesting graph.\n\n"
                "  fieldprof lab show sqlite3.labprofile --top 10\n"
                "  fieldprof lab show sqlite3.labprofile --match prepare --tree");
  t.AddInt("top", &o->top, "rows (and tree lines) shown", 1, 1000000);
  t.AddString("sort", &o->sort, "total (time), calls, p50, mean, alloc");
  t.AddString("match", &o->match, "only APIs whose module:symbol contains this");
  t.AddBool("tree", &o->tree, "also print the nesting graph: which APIs ran inside which");
  t.AddBool("json", &o->json, "print as JSON");
  t.AddString("color", &o->color, "auto, always or never");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && t.positional().size() != 1) s = InvalidArgument("give one lab profile");
  const std::string& sort = o->sort;
  if (s.ok() && sort != "total" && sort != "calls" && sort != "p50" && sort != "mean" &&
      sort != "alloc") {
    s = InvalidArgument("--sort must be total, calls, p50, mean or alloc");
  }
  if (!s.ok()) return UsageError(t, s);
  o->file = t.positional()[0];
  return std::nullopt;
}

// The rows --match keeps, sorted by --sort, largest first.
std::vector<const Row*> SelectRows(const std::vector<Row>& rows, const ShowOptions& o) {
  std::vector<const Row*> shown;
  for (const Row& r : rows) {
    if (o.match.empty() || (r.module + ":" + r.symbol).find(o.match) != std::string::npos ||
        Demangle(r.symbol).find(o.match) != std::string::npos) {
      shown.push_back(&r);
    }
  }
  auto key = [&](const Row* r) -> double {
    if (o.sort == "calls") return static_cast<double>(r->Calls());
    if (o.sort == "p50") return r->m[0].Stats().p50;
    if (o.sort == "mean") return r->m[0].Mean();
    if (o.sort == "alloc") return r->m[1].Mean() * static_cast<double>(r->m[1].count());
    return r->Total();
  };
  std::stable_sort(shown.begin(), shown.end(),
                   [&](const Row* a, const Row* b) { return key(a) > key(b); });
  return shown;
}

std::string ShowJson(const wire::LabProfile& p, size_t apis, const std::vector<const Row*>& shown,
                     size_t n) {
  JsonWriter j;
  j.BeginObject();
  j.Key("scenarios").BeginArray();
  for (const std::string& sc : p.scenarios()) j.String(sc);
  j.EndArray();
  j.Key("apis").Uint(apis).Key("timing_sets").Uint(p.timing_sets());
  j.Key("min_sets").Uint(p.min_sets()).Key("repeat").Uint(p.repeat());
  j.Key("rows").BeginArray();
  for (size_t i = 0; i < n; ++i) {
    const Row& r = *shown[i];
    const HistogramStats st = r.m[0].Stats();
    j.BeginObject();
    j.Key("module").String(r.module).Key("symbol").String(r.symbol);
    j.Key("calls").Uint(r.Calls()).Key("timed_calls").Uint(st.count);
    j.Key("time_ns").BeginObject();
    j.Key("mean").Double(st.mean).Key("p50").Double(st.p50).Key("p90").Double(st.p90);
    j.Key("p99").Double(st.p99).Key("total").Double(r.Total());
    j.EndObject();
    j.Key("alloc_bytes_inclusive_mean").Double(r.m[1].Mean());
    j.Key("alloc_bytes_exclusive_mean").Double(r.m[2].Mean());
    j.Key("alloc_count_mean").Double(r.m[3].Mean());
    j.Key("file_io_bytes_mean").Double(r.m[4].Mean());
    j.Key("socket_io_bytes_mean").Double(r.m[5].Mean());
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.Take();
}

// The range of time buckets any shown row has calls in: the strips' columns.
void BucketRange(const std::vector<const Row*>& shown, size_t n, int* lo, int* hi) {
  *lo = kNumBuckets;
  *hi = -1;
  for (size_t i = 0; i < n; ++i) {
    const Histogram& h = shown[i]->m[0];
    for (int b = 0; b < kNumBuckets; ++b) {
      if (h.bucket(b).count == 0) continue;
      *lo = std::min(*lo, b);
      *hi = std::max(*hi, b);
    }
  }
  if (*hi < 0) *lo = *hi = 0;
}

void ShowText(const wire::LabProfile& p, size_t apis, const std::vector<const Row*>& shown,
              size_t n, const ShowOptions& o) {
  const bool colored = ColorWanted(o.color);
  const bool truecolor = TrueColor();
  std::string scen;
  for (const std::string& sc : p.scenarios()) scen += (scen.empty() ? "" : ", ") + sc;
  uint64_t failed = 0;
  for (const wire::LabPass& pass : p.passes()) failed += pass.exit_status() != 0;
  const std::string failures = failed ? ", " + std::to_string(failed) + " runs failed" : "";
  std::printf("lab profile of %s: %zu APIs, %zu runs (%u timing sets, least possible %u, x%u)%s\n",
              scen.c_str(), apis, static_cast<size_t>(p.passes_size()), p.timing_sets(),
              p.min_sets(), p.repeat(), failures.c_str());
  int lo = 0, hi = 0;
  BucketRange(shown, n, &lo, &hi);
  std::printf("\n%-44s %10s %10s %10s %10s %10s %10s  %s .. %s\n", "API", "calls", "total", "p50",
              "p90", "mean", "alloc/call", FormatNanos(std::ldexp(1.0, lo)).c_str(),
              FormatNanos(std::ldexp(1.0, hi + 1)).c_str());
  for (size_t i = 0; i < n; ++i) {
    const Row& r = *shown[i];
    const HistogramStats st = r.m[0].Stats();
    std::string name = r.module + ":" + Demangle(r.symbol);
    if (name.size() > 44) name = name.substr(0, 43) + "\u2026";
    auto time = [&](double v) {
      return st.count == 0 ? std::string("-")
                           : FormatMetricValue(wire::METRIC_WALL_TIME_NS, v, r.resolution_ns);
    };
    std::printf("%-44s %10s %10s %10s %10s %10s %10s  %s\n", name.c_str(),
                FormatCount(r.Calls()).c_str(),
                st.count == 0 ? "-" : FormatNanos(r.Total()).c_str(), time(st.p50).c_str(),
                time(st.p90).c_str(), time(st.mean).c_str(), FormatBytes(r.m[1].Mean()).c_str(),
                Strip(r.m[0], lo, hi, colored, truecolor).c_str());
  }
  if (shown.size() > n) std::printf("... %zu more (--top)\n", shown.size() - n);
}

}  // namespace

int LabShow(int argc, char** argv) {
  ShowOptions o;
  if (const ExitCode done = ParseShowOptions(argc, argv, &o)) return *done;
  StatusOr<wire::LabProfile> p = ReadLabProfile(o.file);
  if (!p.ok()) {
    std::cerr << "fieldprof lab show: " << p.status().message() << "\n";
    return 1;
  }
  const std::vector<Row> rows = RowsOf(*p);
  const std::vector<const Row*> shown = SelectRows(rows, o);
  const size_t n = std::min<size_t>(shown.size(), static_cast<size_t>(o.top));
  if (o.json) {
    std::cout << ShowJson(*p, rows.size(), shown, n) << "\n";
    return 0;
  }
  ShowText(*p, rows.size(), shown, n, o);
  if (o.tree) {
    LabGraph g;
    g.AddProfile(*p);
    std::map<std::string, const Row*> by_name;
    for (const Row& r : rows) by_name[r.module + ":" + r.symbol] = &r;
    std::printf("\nnesting (calls made directly inside each API):\n");
    PrintTree(g, by_name, static_cast<size_t>(o.top));
  }
  return 0;
}

}  // namespace fieldprof::tools
