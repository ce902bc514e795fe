// fieldprof check: do these runs pay more for an API than the field does?
// (issue #18). The local costs are run records: the user's spool, or
// record files given on the command line. The field is the local snapshot
// cache, read through its symbol index. Per API, a one-sided permutation
// test (common/permutation_test.h), then Benjamini-Hochberg across APIs.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/api_key.h"
#include "common/durable_file.h"
#include "common/histogram.h"
#include "common/json_writer.h"
#include "common/options.h"
#include "common/permutation_test.h"
#include "common/snapshot_cache.h"
#include "common/snapshot_index.h"
#include "common/spool.h"
#include "common/wire.h"
#include "tools/cli/client_flags.h"
#include "tools/cli/escape.h"
#include "tools/commands.h"
#include "tools/cli/format.h"
#include "tools/cli/lab_profile.h"
#include "tools/cli/module_source.h"

namespace fieldprof::tools {

namespace {

struct Local {
  Histogram h;
  uint64_t runs = 0;
  wire::Platform platform;     // of the first run seen
  std::string file;            // the first record file it is in
  uint64_t resolution_ns = 0;  // wall time: the coarsest resolution of its records
};

// How closely a field series' platform matches the local one: 3 the same
// class (arch, vendor, family), 2 arch and vendor, 1 arch, 0 any.
int Closeness(const wire::Platform& a, const wire::Platform& b) {
  if (a.arch() != b.arch()) return 0;
  if (a.cpu_vendor() != b.cpu_vendor()) return 1;
  return a.cpu_family() == b.cpu_family() ? 3 : 2;
}
const char* kWidened[] = {"any platform", "the same architecture", "the same CPU vendor",
                          "the same platform class"};

struct Finding {
  std::string module, symbol, file;
  Histogram local, field;
  uint64_t local_runs = 0, field_runs = 0;
  int match = 3;  // Closeness level used for the field
  PermutationResult test;
  double adjusted = 1;
  double excess = 0;  // (local mean - field mean) x local calls
  // Wall time: the coarser side's resolution (wire::Record.resolution_ns).
  uint64_t resolution_ns = 0;
  bool evidence = false;  // adjusted p <= fdr, and a difference past the floors
};

// A fingerprint that stays the same for an API across runs and machines:
// FNV-1a 64 of "module:symbol:metric", in hex.
std::string Fingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// SARIF 2.1.0: one rule, a result per API with evidence, located at the
// record file it was measured in and, logically, at the API.
Status WriteSarif(const std::string& path, const std::vector<Finding>& found, double fdr,
                  const std::string& metric,
                  const std::function<std::string(const Finding&)>& summary) {
  using nlohmann::json;
  json results = json::array();
  for (const Finding& f : found) {
    if (!f.evidence) continue;
    results.push_back(
        {{"ruleId", "fieldprof/api-excess-cost"},
         {"level", "warning"},
         {"message", {{"text", summary(f)}}},
         {"locations",
          {{{"physicalLocation", {{"artifactLocation", {{"uri", f.file}}}}},
            {"logicalLocations",
             {{{"name", f.symbol},
               {"fullyQualifiedName", f.module + ":" + f.symbol},
               {"kind", "function"}}}}}}},
         {"partialFingerprints",
          {{"fieldprofApi/v1", Fingerprint(f.module + ":" + f.symbol + ":" + metric)}}},
         {"properties",
          {{"pValue", f.test.p_value},
           {"adjustedPValue", f.adjusted},
           {"excess", f.excess},
           {"metric", metric}}}});
  }
  json rule = {
      {"id", "fieldprof/api-excess-cost"},
      {"name", "ApiCostsMoreThanInTheField"},
      {"shortDescription", {{"text", "An API costs these runs more than it costs the field"}}},
      {"fullDescription",
       {{"text",
         "A one-sided permutation test found the runs' cost of this API greater than the field "
         "distribution's, at the false discovery rate set (Benjamini-Hochberg across APIs)."}}},
      {"defaultConfiguration", {{"level", "warning"}}}};
  json sarif = {
      {"version", "2.1.0"},
      {"runs",
       {{{"tool",
          {{"driver", {{"name", "fieldprof check"}, {"version", "0.1.0"}, {"rules", {rule}}}}}},
         {"results", results}}}}};
  return WriteFileDurably(path, sarif.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

// JUnit XML: a test case per API compared, failed when it has evidence.
Status WriteJunit(const std::string& path, const std::vector<Finding>& found, double fdr,
                  const std::function<std::string(const Finding&)>& summary) {
  size_t failures = 0;
  for (const Finding& f : found) failures += f.evidence;
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites>\n  <testsuite name=\"fieldprof check\" tests=\"" +
       std::to_string(found.size()) + "\" failures=\"" + std::to_string(failures) + "\">\n";
  for (const Finding& f : found) {
    x += "    <testcase classname=\"" + XmlEscape(f.module) + "\" name=\"" + XmlEscape(f.symbol) +
         "\"";
    if (!f.evidence) {
      x += "/>\n";
      continue;
    }
    x += ">\n      <failure message=\"" + XmlEscape(summary(f)) +
         "\" type=\"excess-cost\"/>\n    </testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  return WriteFileDurably(path, x);
}

}  // namespace

// Runs `fieldprof run` on the command `repeat` times, measuring `apis`,
// into `spool`. The command's stdout goes to `out_fd`. Returns the runs
// that failed to start or exited non-zero, said on stderr.
int RunCommandMeasured(const std::vector<std::string>& cmd, const std::string& apis, int repeat,
                       const std::string& spool, int out_fd) {
  int apis_count = 1;
  for (char c : apis) apis_count += c == ',';
  int failed = 0;
  for (int i = 0; i < repeat; ++i) {
    std::vector<std::string> args = {"/proc/self/exe",
                                     "run",
                                     "--force",
                                     apis,
                                     "--apis",
                                     std::to_string(apis_count),
                                     "--spool",
                                     spool,
                                     "--max_load",
                                     "1000000",
                                     "--budget",
                                     "1000",
                                     "--slots",
                                     "1000",
                                     "--seed",
                                     std::to_string(i + 1),
                                     "--"};
    args.insert(args.end(), cmd.begin(), cmd.end());
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_fd != STDOUT_FILENO) posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    pid_t pid = 0;
    const int err = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) {
      std::fprintf(stderr, "fieldprof check: cannot run fieldprof run: %s\n", std::strerror(err));
      return repeat;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      std::fprintf(stderr, "fieldprof check: run %d of %s: %s %d (its record, if any, is used)\n",
                   i + 1, cmd[0].c_str(), WIFEXITED(status) ? "exit" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
  }
  return failed;
}

// GET /v1/api: the field's histogram (per-bucket counts and exact sums) and
// runs for the query; 404 leaves `h` empty.
Status FetchField(HttpsClient& http, const std::string& target, Histogram* h, uint64_t* runs,
                  uint64_t* resolution_ns) {
  StatusOr<HttpReply> r = http.Get(target);
  if (!r.ok()) return r.status();
  if (r->status == 404) return Status::Ok();
  if (r->status != 200) {
    return Internal("GET " + target + " answered " + std::to_string(r->status) + ": " + r->body);
  }
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  try {
    if (j.is_discarded()) throw std::runtime_error("not JSON");
    StatusOr<Histogram> hist = HistogramFromJson(j.at("histogram"));
    if (!hist.ok()) throw std::runtime_error(hist.status().message());
    *h = std::move(*hist);
    *runs = j.at("runs").get<uint64_t>();
    if (j.contains("resolution_ns")) {
      *resolution_ns = std::max(*resolution_ns, j.at("resolution_ns").get<uint64_t>());
    }
  } catch (const std::exception& e) {
    return DataLoss("the aggregator's answer to " + target + " does not read: " + e.what());
  }
  return Status::Ok();
}

int CmdCheck(int argc, char** argv) {
  std::string cache_dir = DefaultSnapshotCacheDir(), spool_dir = DefaultSpoolDir();
  std::string metric_name = "wall_time_ns", statistic = "mean";
  int64_t resamples = 9999, seed = 1, stop_after = 20;
  double fdr = 0.05, fail_excess = -1, min_calls = 30;
  bool dependent = false, json = false, all = false;
  double fail_p = -1, min_effect = 0.05, min_diff_ns = 10;
  std::string sarif_path, junit_path, apis, from, to;
  ClientFlags client;
  client.options.host = "";
  int64_t repeat = 5;
  OptionTable t(
      "fieldprof check",
      "Do your runs pay more for an API than the field does? Compares run records\n"
      "(your spool by default, or the record files named) with the field snapshot in\n"
      "the local cache (or an aggregator, --host), API by API: a one-sided permutation\n"
      "test of your cost against the field's on the log2 buckets, then Benjamini-Hochberg\n"
      "across the APIs. The field is matched to your platform class, widened (and said\n"
      "so) when the class has no data. Shows only APIs with evidence, by excess cost.\n\n"
      "  fieldprof check                       # your spool\n"
      "  fieldprof check run-*.fpr --json\n"
      "  fieldprof check sqlite3.labprofile     # a lab profile (fieldprof lab)\n"
      "  fieldprof check --fail_on_excess_ns 1000000   # exit 1 when found (CI)\n"
      "  fieldprof check --apis sqlite3_prepare_v2 --repeat 10 -- sqlite3 db 'select 1'\n\n"
      "With -- COMMAND, the command is run --repeat times under fieldprof run, measuring\n"
      "the --apis named, and those runs are checked.\n\n"
      "Exit: 0 nothing found (or nothing over --fail_on_excess_ns / --fail_on_p), 1\n"
      "evidence found with --fail_on_excess_ns or --fail_on_p, 2 a usage error, 3 no\n"
      "data to compare.");
  t.AddString("cache", &cache_dir, "the snapshot cache (the field)");
  t.AddString("spool", &spool_dir, "the spool read when no record file is named");
  t.AddString("metric", &metric_name,
              "wall_time_ns, alloc_bytes_inclusive, alloc_bytes_exclusive, alloc_count, "
              "file_io_bytes, socket_io_bytes");
  t.AddString("statistic", &statistic, "mean, or a quantile: p50, p90, p99");
  t.AddInt("resamples", &resamples, "permutations per API at most", 99, 10000000);
  t.AddInt("stop_after", &stop_after,
           "stop an API's resampling once this many reach its statistic (Besag-Clifford; 0: "
           "never)",
           0, 1000000);
  t.AddInt("seed", &seed, "the random seed (the same seed, the same p-values)", 0,
           int64_t{1} << 62);
  t.AddDouble("fdr", &fdr, "false discovery rate: an API has evidence at adjusted p <= this", 0, 1);
  t.AddBool("dependent", &dependent, "Benjamini-Yekutieli (any dependence between APIs)");
  t.AddDouble("min_calls", &min_calls, "skip APIs with fewer local calls than this", 1, 1e18);
  t.AddDouble("fail_on_excess_ns", &fail_excess,
              "exit 1 when an API with evidence costs at least this much more in all (its "
              "excess, in the metric's unit); -1: never",
              -1, 1e30);
  t.AddDouble("fail_on_p", &fail_p,
              "exit 1 when an API's adjusted p-value is at most this (with any excess); -1: "
              "never",
              -1, 1);
  t.AddDouble("min_effect", &min_effect,
              "evidence needs your statistic at least this fraction above the field's (0.05: "
              "5%); separate runs of one program differ by a few percent",
              0, 1e6);
  t.AddDouble("min_diff_ns", &min_diff_ns,
              "wall time: evidence needs your statistic at least this many ns above the "
              "field's, and above twice the timing resolution",
              0, 1e18);
  t.AddBool("all", &all, "show every API compared, with or without evidence");
  t.AddBool("json", &json, "print as JSON");
  t.AddString("apis", &apis,
              "with -- COMMAND: the APIs to measure, SYMBOL or MODULE:SYMBOL, comma-separated");
  t.AddInt("repeat", &repeat, "with -- COMMAND: how many runs of it", 1, 100000);
  client.Register(t);
  t.AddString("from", &from, "with --host: the field from this day (YYYY-MM-DD)");
  t.AddString("to", &to, "with --host: the field to this day (YYYY-MM-DD)");
  t.AddString("sarif", &sarif_path,
              "also write the findings as SARIF 2.1.0 to this file (code-scanning tools)");
  t.AddString("junit", &junit_path,
              "also write JUnit XML to this file: a test case per API compared, failed when it "
              "has evidence");
  // Options and record files end at "--"; the command follows.
  int cmd_at = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      cmd_at = i;
      break;
    }
  }
  Status s = t.Parse(cmd_at, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  const std::vector<std::string> command(argv + std::min(cmd_at + 1, argc), argv + argc);
  if (s.ok() && !command.empty() && apis.empty()) {
    s = InvalidArgument("-- COMMAND needs --apis: the APIs to measure in its runs");
  }
  if (s.ok() && !command.empty() && !t.positional().empty()) {
    s = InvalidArgument("record files and -- COMMAND: one or the other");
  }
  StatusOr<wire::Metric> metric = s.ok() ? ParseMetric(metric_name) : StatusOr<wire::Metric>(s);
  PermutationOptions o;
  o.resamples = static_cast<int>(resamples);
  o.seed = static_cast<uint64_t>(seed);
  o.stop_after = static_cast<int>(stop_after);
  if (metric.ok() && statistic != "mean") {
    const double q =
        statistic.size() > 1 && statistic[0] == 'p' ? std::atof(statistic.c_str() + 1) / 100 : -1;
    if (q <= 0 || q >= 1) {
      metric = InvalidArgument("--statistic must be mean or pNN, e.g. p90");
    } else {
      o.statistic = PermutationOptions::kQuantile;
      o.quantile = q;
    }
  }
  if (!metric.ok()) {
    std::cerr << "fieldprof check: " << metric.status().message() << " (see --help)\n";
    return 2;
  }

  // The local side: every record of the metric, summed per API.
  std::vector<std::string> files = t.positional();
  std::string measured_spool;  // with -- COMMAND: its runs' records, removed at the end
  struct RemoveAtEnd {
    std::string* dir;
    ~RemoveAtEnd() {
      std::error_code ec;
      if (!dir->empty()) std::filesystem::remove_all(*dir, ec);
    }
  } remove_at_end{&measured_spool};
  if (!command.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fieldprof-check-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "fieldprof check: cannot make a temporary spool: " << std::strerror(errno)
                << "\n";
      return 3;
    }
    measured_spool = tmpl;
    std::fprintf(stderr, "fieldprof check: %lld runs of %s, measuring %s\n",
                 static_cast<long long>(repeat), command[0].c_str(), apis.c_str());
    // With --json, the command's own output goes to stderr: stdout is ours.
    RunCommandMeasured(command, apis, static_cast<int>(repeat), measured_spool,
                       json ? STDERR_FILENO : STDOUT_FILENO);
    spool_dir = measured_spool;
  }
  if (files.empty()) {
    StatusOr<std::vector<SpoolEntry>> spool = ListSpool(spool_dir);
    if (!spool.ok()) {
      std::cerr << "fieldprof check: " << spool.status().message() << "\n";
      return 3;
    }
    for (const SpoolEntry& e : *spool) files.push_back(e.path);
  }
  std::map<std::pair<std::string, std::string>, Local> local;  // (module, symbol)
  int bad_files = 0;
  // Lab profiles (fieldprof lab): their records, and their nesting graphs
  // for the call-stack view.
  std::vector<wire::LabProfile> profiles;
  for (const std::string& f : files) {
    if (IsLabProfileFile(f)) {
      StatusOr<wire::LabProfile> p = ReadLabProfile(f);
      if (!p.ok()) {
        std::cerr << "fieldprof check: skipped " << p.status().message() << "\n";
        ++bad_files;
        continue;
      }
      for (const wire::Record& r : p->records()) {
        if (r.key().metric() != *metric) continue;
        Local& l = local[{r.key().module(), r.key().symbol()}];
        if (l.runs == 0) {
          l.platform = r.key().platform();
          l.file = f;
        }
        l.h.Merge(HistogramFromWire(r.histogram()));
        l.runs += std::max<uint64_t>(r.runs(), 1);
        l.resolution_ns = std::max(l.resolution_ns, r.resolution_ns());
      }
      profiles.push_back(std::move(*p));
      continue;
    }
    StatusOr<wire::RunRecord> run = ReadRunRecord(f);
    if (!run.ok()) {
      std::cerr << "fieldprof check: skipped " << run.status().message() << "\n";
      ++bad_files;
      continue;
    }
    for (const wire::Record& r : run->records()) {
      if (r.key().metric() != *metric) continue;
      Local& l = local[{r.key().module(), r.key().symbol()}];
      if (l.runs == 0) {
        l.platform = r.key().has_platform() ? r.key().platform() : run->platform();
        l.file = f;
      }
      l.h.Merge(HistogramFromWire(r.histogram()));
      l.runs += std::max<uint64_t>(r.runs(), 1);
      l.resolution_ns = std::max(l.resolution_ns, r.resolution_ns());
    }
  }
  if (local.empty()) {
    std::cerr << "fieldprof check: no " << metric_name << " data in " << files.size()
              << " record file(s)"
              << (files.empty() ? " (the spool " + spool_dir + " is empty)" : "") << ".\n";
    return 3;
  }

  // The field side, per API: the cache's index, or an aggregator's query
  // API (--host), one request per platform level until one has data.
  const bool remote = !client.options.host.empty();
  std::optional<SnapshotIndex> index;
  std::optional<HttpsClient> http;
  if (remote) {
    http.emplace(client.Resolve());
  } else {
    StatusOr<SnapshotIndex> opened = SnapshotIndex::Open(SnapshotCache(cache_dir));
    if (!opened.ok()) {
      std::cerr << "fieldprof check: no field data: " << opened.status().message()
                << " (fieldprof pull --all fetches the snapshot, or use --host)\n";
      return 3;
    }
    index.emplace(std::move(*opened));
  }
  std::vector<Finding> found;
  int no_field = 0, few_calls = 0;
  for (auto& [name, l] : local) {
    if (static_cast<double>(l.h.count()) < min_calls) {
      ++few_calls;
      continue;
    }
    Histogram by_level[4];
    uint64_t runs_by_level[4] = {0, 0, 0, 0};
    uint64_t field_resolution = 0;
    Status st = Status::Ok();
    if (remote) {
      for (int lv = 3; lv >= 0 && st.ok(); --lv) {
        std::string q = "/v1/api?module=" + UrlEncode(name.first) +
                        "&symbol=" + UrlEncode(name.second) + "&metric=" + metric_name;
        if (lv >= 1) q += "&arch=" + std::string(ArchName(l.platform.arch()));
        if (lv >= 2) q += "&vendor=" + std::string(CpuVendorName(l.platform.cpu_vendor()));
        if (lv >= 3) q += "&family=" + std::to_string(l.platform.cpu_family());
        if (!from.empty()) q += "&from=" + UrlEncode(from);
        if (!to.empty()) q += "&to=" + UrlEncode(to);
        st = FetchField(*http, q, &by_level[lv], &runs_by_level[lv], &field_resolution);
        if (!by_level[lv].empty()) break;
      }
    } else {
      st = index->ForEachRecordOf(name.second, [&](const wire::Record& r) {
        if (r.key().module() != name.first || r.key().metric() != *metric) return true;
        const int c = Closeness(l.platform, r.key().platform());
        for (int lv = 0; lv <= c; ++lv) {
          by_level[lv].Merge(HistogramFromWire(r.histogram()));
          runs_by_level[lv] += r.runs();
        }
        field_resolution = std::max(field_resolution, r.resolution_ns());
        return true;
      });
    }
    if (!st.ok()) {
      std::cerr << "fieldprof check: " << st.message() << "\n";
      return 1;
    }
    int level = 3;
    while (level > 0 && by_level[level].empty()) --level;
    if (by_level[level].empty()) {
      ++no_field;
      continue;
    }
    Finding f;
    f.module = name.first;
    f.symbol = name.second;
    f.file = l.file;
    f.local = l.h;
    f.local_runs = l.runs;
    f.field = by_level[level];
    f.field_runs = runs_by_level[level];
    f.match = level;
    f.test = GreaterCostTest(f.local, f.field, o);
    f.excess = (f.local.Mean() - f.field.Mean()) * static_cast<double>(f.local.count());
    if (*metric == wire::METRIC_WALL_TIME_NS)
      f.resolution_ns = std::max(l.resolution_ns, field_resolution);
    found.push_back(std::move(f));
  }
  std::vector<double> p;
  for (const Finding& f : found) p.push_back(f.test.p_value);
  const std::vector<double> adjusted = BenjaminiHochberg(p, dependent);
  int under_resolution = 0, under_effect = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    Finding& f = found[i];
    f.adjusted = adjusted[i];
    const double field_stat =
        o.statistic == PermutationOptions::kMean ? f.field.Mean() : f.field.Quantile(o.quantile);
    const double floor_ns =
        DifferenceFloor(*metric == wire::METRIC_WALL_TIME_NS, f.resolution_ns, min_diff_ns);
    const bool above = f.test.observed > floor_ns;
    const bool large = f.test.observed >= min_effect * field_stat;
    f.evidence = f.adjusted <= fdr && above && large;
    under_resolution += f.adjusted <= fdr && !above;
    under_effect += f.adjusted <= fdr && above && !large;
  }
  std::sort(found.begin(), found.end(),
            [](const Finding& a, const Finding& b) { return a.excess > b.excess; });
  std::vector<const Finding*> shown;
  bool fail = false;
  for (const Finding& f : found) {
    const bool evidence = f.evidence;
    if (evidence && fail_excess >= 0 && f.excess >= fail_excess) fail = true;
    if (evidence && fail_p >= 0 && f.adjusted <= fail_p) fail = true;
    if (evidence || all) shown.push_back(&f);
  }

  auto value = [&](double v) { return FormatMetricValue(*metric, v); };
  auto summary = [&](const Finding& f) {
    const HistogramStats l = f.local.Stats(), fl = f.field.Stats();
    char p[64];
    std::snprintf(p, sizeof p, "%.4g", f.adjusted);
    return f.module + ":" + f.symbol + " costs you " + value(l.mean - fl.mean) +
           " more per call than the field (" + metric_name + " p50 " + value(l.p50) + " against " +
           value(fl.p50) + ", p90 " + value(l.p90) + " against " + value(fl.p90) + "; " +
           FormatCount(l.count) + " calls against " + FormatCount(fl.count) + "; adjusted p " + p +
           "); excess " + value(f.excess) + " in all";
  };
  if (!sarif_path.empty()) {
    if (Status w = WriteSarif(sarif_path, found, fdr, metric_name, summary); !w.ok()) {
      std::cerr << "fieldprof check: " << w.message() << "\n";
      return 2;
    }
  }
  if (!junit_path.empty()) {
    if (Status w = WriteJunit(junit_path, found, fdr, summary); !w.ok()) {
      std::cerr << "fieldprof check: " << w.message() << "\n";
      return 2;
    }
  }
  if (json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("metric").String(metric_name).Key("statistic").String(statistic);
    j.Key("fdr")
        .Double(fdr)
        .Key("correction")
        .String(dependent ? "benjamini-yekutieli" : "benjamini-hochberg");
    j.Key("seed").Int(seed).Key("resamples_max").Int(resamples);
    j.Key("apis_compared").Uint(found.size()).Key("apis_without_field_data").Uint(no_field);
    j.Key("apis_with_too_few_calls").Uint(few_calls);
    j.Key("apis_under_resolution").Uint(under_resolution);
    j.Key("apis_under_min_effect").Uint(under_effect).Key("min_effect").Double(min_effect);
    j.Key("findings").BeginArray();
    for (const Finding* f : shown) {
      const HistogramStats l = f->local.Stats(), fl = f->field.Stats();
      j.BeginObject();
      j.Key("module").String(f->module).Key("symbol").String(f->symbol);
      j.Key("evidence").Bool(f->evidence);
      if (f->resolution_ns != 0) j.Key("resolution_ns").Uint(f->resolution_ns);
      j.Key("p_value").Double(f->test.p_value).Key("adjusted_p").Double(f->adjusted);
      j.Key("resamples").Int(f->test.resamples);
      j.Key("excess").Double(f->excess).Key("statistic_difference").Double(f->test.observed);
      j.Key("local").BeginObject();
      j.Key("calls").Uint(l.count).Key("runs").Uint(f->local_runs);
      j.Key("mean").Double(l.mean).Key("p50").Double(l.p50).Key("p90").Double(l.p90);
      j.EndObject();
      j.Key("field").BeginObject();
      j.Key("calls").Uint(fl.count).Key("runs").Uint(f->field_runs);
      j.Key("mean").Double(fl.mean).Key("p50").Double(fl.p50).Key("p90").Double(fl.p90);
      j.Key("platform_match").String(kWidened[f->match]);
      j.EndObject();
      if (!profiles.empty()) {
        // Where it sits in the lab profiles' call stacks, outermost first.
        j.Key("stacks").BeginArray();
        for (const wire::LabProfile& lp : profiles) {
          for (const auto& stack : LabStacks(lp, f->module, f->symbol)) {
            j.BeginArray();
            for (const std::string& a : stack) j.String(a);
            j.EndArray();
          }
        }
        j.EndArray();
      }
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
    std::cout << j.Take() << "\n";
    return fail ? 1 : 0;
  }

  const bool tty = isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
  std::printf(
      "%zu APIs compared on %s (%s, %s); %d without field data, %d with under %.0f calls.\n",
      found.size(), metric_name.c_str(), statistic.c_str(),
      dependent ? "Benjamini-Yekutieli" : "Benjamini-Hochberg", no_field, few_calls, min_calls);
  if (bad_files > 0) std::printf("%d record file(s) could not be read (see above).\n", bad_files);
  if (under_resolution > 0) {
    std::printf(
        "%d API(s) differ significantly by less than --min_diff_ns or twice the timing "
        "resolution: not counted as evidence.\n",
        under_resolution);
  }
  if (under_effect > 0) {
    std::printf("%d API(s) differ significantly by less than --min_effect (%.0f%%): not counted.\n",
                under_effect, 100 * min_effect);
  }
  if (shown.empty()) {
    std::printf("No API costs you more than it costs the field (false discovery rate %.2f).\n",
                fdr);
    return 0;
  }
  std::printf("\n%-40s %12s %12s %12s %12s %9s %9s  %s\n", "API", "yours p50", "field p50",
              "yours p90", "field p90", "p", "adj. p", "calls yours / field");
  for (size_t i = 0; i < shown.size(); ++i) {
    const Finding& f = *shown[i];
    const HistogramStats l = f.local.Stats(), fl = f.field.Stats();
    const bool hot = i < 3 && f.evidence;
    const std::string api = f.module + ":" + f.symbol;
    std::printf("%s%-40s %12s %12s %12s %12s %9.4f %9.4f  %s / %s%s%s\n",
                hot && tty ? "\033[1;31m" : "", api.c_str(), value(l.p50).c_str(),
                value(fl.p50).c_str(), value(l.p90).c_str(), value(fl.p90).c_str(), f.test.p_value,
                f.adjusted, FormatCount(l.count).c_str(), FormatCount(fl.count).c_str(),
                hot && tty ? "\033[0m" : "",
                f.match < 3 ? (std::string("  (field: ") + kWidened[f.match] + ")").c_str() : "");
    std::printf("%-40s excess %s in all (%s per call)\n", "", value(f.excess).c_str(),
                value(l.mean - fl.mean).c_str());
    // Where it sits, when a lab profile has the nesting graph.
    for (const wire::LabProfile& lp : profiles) {
      PrintLabStacks(stdout, lp, f.module, f.symbol, std::string(41, ' '));
    }
  }
  return fail ? 1 : 0;
}

}  // namespace fieldprof::tools
