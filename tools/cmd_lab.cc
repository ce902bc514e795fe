// fieldprof lab: a complete profile of one scenario (issue #18; see
// tools/lab_profile.h for the pipeline and agent/runtime/lab.h for what the
// runtime does in each pass).
//   fieldprof lab [options] -- COMMAND [ARGS...]   census, plan, timing passes
//   fieldprof lab merge -o OUT PROFILE...          several scenarios or machines
//   fieldprof lab show PROFILE                     table, histograms, nesting
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/cxx_names.h"
#include "common/durable_file.h"
#include "common/histogram.h"
#include "common/json_writer.h"
#include "common/options.h"
#include "common/wire.h"
#include "tools/client_flags.h"
#include "tools/commands.h"
#include "tools/format.h"
#include "tools/lab_profile.h"

extern char** environ;

namespace fieldprof::tools {
namespace {

namespace fs = std::filesystem;

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// ------------------------------------------------------------ running passes

struct PassResult {
  int exit_status = -1;  // shell style: 128 + N for signal N; -1 did not start
  uint64_t wall_ns = 0;
  std::vector<wire::LabRunRecord> runs;  // one per process that left a file
  int unreadable = 0;
};

// Runs the command once with the lab settings in the environment; its
// stdout and stderr go to `out_fd` and `err_fd`. Then reads the lab files
// its processes left in `dir`.
PassResult RunPass(const std::vector<std::string>& cmd, const std::string& mode,
                   const std::string& dir, const std::string& plan, int out_fd, int err_fd) {
  PassResult res;
  fs::create_directories(dir);
  setenv("FIELDPROF_LAB", mode.c_str(), 1);
  setenv("FIELDPROF_LAB_DIR", dir.c_str(), 1);
  if (plan.empty()) {
    unsetenv("FIELDPROF_LAB_APIS");
  } else {
    setenv("FIELDPROF_LAB_APIS", plan.c_str(), 1);
  }
  std::vector<char*> argv;
  for (const std::string& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out_fd != STDOUT_FILENO) posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
  if (err_fd != STDERR_FILENO) posix_spawn_file_actions_adddup2(&fa, err_fd, STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) {
    std::fprintf(stderr, "fieldprof lab: cannot run %s: %s\n", cmd[0].c_str(), std::strerror(err));
    return res;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  res.wall_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  res.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".fplab") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    StatusOr<wire::LabRunRecord> r = ReadLabRunRecord(f);
    if (!r.ok()) {
      std::fprintf(stderr, "fieldprof lab: %s\n", r.status().message().c_str());
      ++res.unreadable;
      continue;
    }
    res.runs.push_back(std::move(*r));
  }
  return res;
}

std::string TailOf(const std::string& path, int lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0; i < all.size();
       ++i) {
    out += "    | " + all[i] + "\n";
  }
  return out;
}

// ------------------------------------------------------------ showing

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

// The call stacks that lead to API `target` through the graph's direct
// pairs, outermost first: at most `limit`, the busiest first.
std::vector<std::vector<uint32_t>> StacksTo(const LabGraph& g, uint32_t target, size_t limit) {
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint32_t>>> callers;
  for (const auto& [pair, calls] : g.pairs()) {
    if (calls > 0 && pair.first != pair.second) callers[pair.second].push_back({calls, pair.first});
  }
  for (auto& [k, v] : callers) std::sort(v.rbegin(), v.rend());
  std::vector<std::vector<uint32_t>> out;
  std::vector<uint32_t> path = {target};
  std::function<void()> walk = [&] {
    if (out.size() >= limit) return;
    auto it = callers.find(path.back());
    if (it == callers.end() || path.size() >= 12) {
      out.emplace_back(path.rbegin(), path.rend());
      return;
    }
    bool any = false;
    for (const auto& [calls, c] : it->second) {
      if (std::find(path.begin(), path.end(), c) != path.end()) continue;
      any = true;
      path.push_back(c);
      walk();
      path.pop_back();
      if (out.size() >= limit) return;
    }
    if (!any) out.emplace_back(path.rbegin(), path.rend());
  };
  walk();
  return out;
}

}  // namespace

// The call-stack view of `fieldprof check` (commands.h).
std::vector<std::vector<std::string>> LabStacks(const wire::LabProfile& p,
                                                const std::string& module,
                                                const std::string& symbol) {
  LabGraph g;
  g.AddProfile(p);
  std::vector<std::vector<std::string>> out;
  const int64_t target = g.Find(module, symbol);
  if (target < 0) return out;
  for (const auto& stack : StacksTo(g, static_cast<uint32_t>(target), 3)) {
    std::vector<std::string> names;
    for (uint32_t a : stack) names.push_back(LabApiName(g.api(a)));
    out.push_back(std::move(names));
  }
  return out;
}

void PrintLabStacks(std::FILE* out, const wire::LabProfile& p, const std::string& module,
                    const std::string& symbol, const std::string& indent) {
  for (const auto& stack : LabStacks(p, module, symbol)) {
    std::string line = indent + "the program";
    for (const std::string& a : stack) line += " \u2192 " + Demangle(a.substr(a.find(':') + 1));
    std::fprintf(out, "%s\n", line.c_str());
  }
}

namespace {

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

int LabShow(int argc, char** argv) {
  int64_t top = 25;
  std::string sort = "total", match, color = "auto";
  bool tree = false, json = false;
  OptionTable t("fieldprof lab show",
                "Prints a lab profile: per API its calls, time (p50, p90, mean, total) and\n"
                "allocation per call, with its time histogram in the heat colours (each\n"
                "column a log2 bucket, the same for every row); --tree the nesting graph.\n\n"
                "  fieldprof lab show sqlite3.labprofile --top 10\n"
                "  fieldprof lab show sqlite3.labprofile --match prepare --tree");
  t.AddInt("top", &top, "rows (and tree lines) shown", 1, 1000000);
  t.AddString("sort", &sort, "total (time), calls, p50, mean, alloc");
  t.AddString("match", &match, "only APIs whose module:symbol contains this");
  t.AddBool("tree", &tree, "also print the nesting graph: which APIs ran inside which");
  t.AddBool("json", &json, "print as JSON");
  t.AddString("color", &color, "auto, always or never");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  if (s.ok() && t.positional().size() != 1) s = InvalidArgument("give one lab profile");
  if (s.ok() && sort != "total" && sort != "calls" && sort != "p50" && sort != "mean" &&
      sort != "alloc") {
    s = InvalidArgument("--sort must be total, calls, p50, mean or alloc");
  }
  if (!s.ok()) {
    std::cerr << "fieldprof lab show: " << s.message() << " (see --help)\n";
    return 2;
  }
  StatusOr<wire::LabProfile> p = ReadLabProfile(t.positional()[0]);
  if (!p.ok()) {
    std::cerr << "fieldprof lab show: " << p.status().message() << "\n";
    return 1;
  }
  std::vector<Row> rows = RowsOf(*p);
  std::vector<const Row*> shown;
  for (const Row& r : rows) {
    if (match.empty() || (r.module + ":" + r.symbol).find(match) != std::string::npos ||
        Demangle(r.symbol).find(match) != std::string::npos) {
      shown.push_back(&r);
    }
  }
  auto key = [&](const Row* r) -> double {
    if (sort == "calls") return static_cast<double>(r->Calls());
    if (sort == "p50") return r->m[0].Stats().p50;
    if (sort == "mean") return r->m[0].Mean();
    if (sort == "alloc") return r->m[1].Mean() * static_cast<double>(r->m[1].count());
    return r->Total();
  };
  std::stable_sort(shown.begin(), shown.end(),
                   [&](const Row* a, const Row* b) { return key(a) > key(b); });
  const size_t n = std::min<size_t>(shown.size(), static_cast<size_t>(top));
  if (json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("scenarios").BeginArray();
    for (const std::string& sc : p->scenarios()) j.String(sc);
    j.EndArray();
    j.Key("apis").Uint(rows.size()).Key("timing_sets").Uint(p->timing_sets());
    j.Key("min_sets").Uint(p->min_sets()).Key("repeat").Uint(p->repeat());
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
    std::cout << j.Take() << "\n";
    return 0;
  }
  const bool colored = ColorWanted(color);
  const bool truecolor = TrueColor();
  std::string scen;
  for (const std::string& sc : p->scenarios()) scen += (scen.empty() ? "" : ", ") + sc;
  uint64_t failed = 0;
  for (const wire::LabPass& pass : p->passes()) failed += pass.exit_status() != 0;
  std::printf("lab profile of %s: %zu APIs, %zu runs (%u timing sets, least possible %u, x%u)%s\n",
              scen.c_str(), rows.size(), static_cast<size_t>(p->passes_size()), p->timing_sets(),
              p->min_sets(), p->repeat(),
              failed ? (", " + std::to_string(failed) + " runs failed").c_str() : "");
  int lo = kNumBuckets, hi = -1;
  for (size_t i = 0; i < n; ++i) {
    const Histogram& h = shown[i]->m[0];
    for (int b = 0; b < kNumBuckets; ++b) {
      if (h.bucket(b).count == 0) continue;
      lo = std::min(lo, b);
      hi = std::max(hi, b);
    }
  }
  if (hi < 0) lo = hi = 0;
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
  if (tree) {
    LabGraph g;
    g.AddProfile(*p);
    std::map<std::string, const Row*> by_name;
    for (const Row& r : rows) by_name[r.module + ":" + r.symbol] = &r;
    std::printf("\nnesting (calls made directly inside each API):\n");
    PrintTree(g, by_name, static_cast<size_t>(top));
  }
  return 0;
}

int LabMerge(int argc, char** argv) {
  std::string output;
  OptionTable t("fieldprof lab merge",
                "Combines lab profiles (scenarios, machines) into one: records of the same\n"
                "key summed exactly, nesting graphs joined, runs listed.\n\n"
                "  fieldprof lab merge -o all.labprofile a.labprofile b.labprofile");
  t.AddString("output", &output, "the merged profile's file (-o)");
  t.AddShort('o', "output");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  if (s.ok() && output.empty()) s = InvalidArgument("--output (-o) is needed");
  if (s.ok() && t.positional().empty()) s = InvalidArgument("give the profiles to merge");
  if (!s.ok()) {
    std::cerr << "fieldprof lab merge: " << s.message() << " (see --help)\n";
    return 2;
  }
  std::vector<wire::LabProfile> in;
  for (const std::string& f : t.positional()) {
    StatusOr<wire::LabProfile> p = ReadLabProfile(f);
    if (!p.ok()) {
      std::cerr << "fieldprof lab merge: " << p.status().message() << "\n";
      return 1;
    }
    in.push_back(std::move(*p));
  }
  const wire::LabProfile merged = MergeProfiles(in);
  if (Status w = WriteLabProfile(output, merged); !w.ok()) {
    std::cerr << "fieldprof lab merge: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "fieldprof lab merge: %zu profiles, %d scenarios, %d records -> %s\n",
               in.size(), merged.scenarios_size(), merged.records_size(), output.c_str());
  return 0;
}

// ------------------------------------------------------------ an aggregator's lab store

// fieldprof lab upload|list|fetch: lab profiles kept by an aggregator, apart
// from the field sums (POST/GET /v1/lab/profiles).
int LabRemote(const std::string& verb, int argc, char** argv) {
  ClientFlags client;
  std::string output;
  OptionTable t("fieldprof lab " + verb,
                "Lab profiles on an aggregator, kept apart from the field sums:\n"
                "  fieldprof lab upload PROFILE... --host H    prints each profile's id\n"
                "  fieldprof lab list --host H\n"
                "  fieldprof lab fetch ID -o FILE --host H\n"
                "An upload is exactly once: the id is the profile's content hash, and the same\n"
                "profile sent again is recognised.");
  client.Register(t);
  t.AddString("output", &output, "fetch: the file to write (-o)");
  t.AddShort('o', "output");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  if (s.ok() && client.options.host.empty()) s = InvalidArgument("--host is needed");
  if (s.ok() && verb == "upload" && t.positional().empty()) s = InvalidArgument("give profiles");
  if (s.ok() && verb == "fetch" && (t.positional().size() != 1 || output.empty())) {
    s = InvalidArgument("give one id and -o FILE");
  }
  if (!s.ok()) {
    std::cerr << "fieldprof lab " << verb << ": " << s.message() << " (see --help)\n";
    return 2;
  }
  HttpsClient http(client.Resolve());
  if (verb == "upload") {
    int failed = 0;
    for (const std::string& f : t.positional()) {
      StatusOr<std::string> bytes = ReadWholeFile(f);
      StatusOr<wire::LabProfile> p =
          bytes.ok() ? ParseLabProfile(*bytes, f) : StatusOr<wire::LabProfile>(bytes.status());
      StatusOr<HttpReply> r =
          p.ok() ? http.Post("/v1/lab/profiles", "application/octet-stream", *bytes)
                 : StatusOr<HttpReply>(p.status());
      if (!r.ok() || r->status != 200) {
        std::fprintf(stderr, "fieldprof lab upload: %s: %s\n", f.c_str(),
                     r.ok() ? (std::to_string(r->status) + " " + r->body).c_str()
                            : r.status().message().c_str());
        ++failed;
        continue;
      }
      std::printf("%s\t%s", f.c_str(), r->body.c_str());
    }
    return failed ? 1 : 0;
  }
  const std::string target =
      verb == "list" ? "/v1/lab/profiles" : "/v1/lab/profiles/" + t.positional()[0];
  StatusOr<HttpReply> r = http.Get(target);
  if (!r.ok() || r->status != 200) {
    std::fprintf(stderr, "fieldprof lab %s: %s\n", verb.c_str(),
                 r.ok() ? (std::to_string(r->status) + " " + r->body).c_str()
                        : r.status().message().c_str());
    return 1;
  }
  if (verb == "list") {
    std::cout << r->body;
    return 0;
  }
  if (StatusOr<wire::LabProfile> p = ParseLabProfile(r->body, "the answer"); !p.ok()) {
    std::cerr << "fieldprof lab fetch: " << p.status().message() << "\n";
    return 1;
  }
  if (Status w = WriteFileDurably(output, r->body); !w.ok()) {
    std::cerr << "fieldprof lab fetch: " << w.message() << "\n";
    return 1;
  }
  return 0;
}

// ------------------------------------------------------------ the profile

int LabRun(int argc, char** argv) {
  std::string output, name, lib_dir, keep_dir, debug;
  int64_t repeat = 3;
  OptionTable t(
      "fieldprof lab",
      "Profiles one scenario completely: every exported API it calls across module\n"
      "boundaries, in every module it loads (dlopen'ed ones too), into a lab profile\n"
      "in the field's record format.\n"
      "  1. the census (one run): every API's calls, allocation (inclusive and\n"
      "     exclusive of nested APIs), allocation count, I/O, and which APIs ran\n"
      "     inside which: the nesting graph;\n"
      "  2. the timing plan: the APIs in sets of which no two were ever on one stack\n"
      "     (a colouring of the graph), so no probe's cost lands in a timed call;\n"
      "  3. the timing passes: each set, --repeat times.\n"
      "The scenario's output, exit status and behaviour are unchanged; its output is\n"
      "shown for the census run only. A run that fails is reported.\n\n"
      "  fieldprof lab -- sqlite3 /tmp/db.sqlite < workload.sql\n"
      "  fieldprof lab --repeat 5 -o build.labprofile -- make -j2\n"
      "  fieldprof lab show build.labprofile\n"
      "  fieldprof lab merge -o all.labprofile a.labprofile b.labprofile\n"
      "  fieldprof check build.labprofile      # against the field\n"
      "  fieldprof lab upload build.labprofile --host agg.example  # kept apart from field sums\n\n"
      "Exit: 0 the profile is written and every run exited as the census did;\n"
      "1 written, but some run failed or differed (said above); 2 usage; 3 nothing\n"
      "observed (a static program, or one that exits at once).");
  t.AddString("output", &output, "the profile's file (-o; default NAME.labprofile)");
  t.AddString("name", &name, "the scenario's name in the profile (default: the command's name)");
  t.AddInt("repeat", &repeat, "runs of each timing set", 1, 1000);
  t.AddString("lib_dir", &lib_dir, "directory holding libfieldprof.so");
  t.AddString("keep", &keep_dir,
              "keep every run's raw lab files (and the timing plan) in this directory");
  t.AddString("debug", &debug, "write the runtime's diagnostics to this file");
  int cmd_at = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      cmd_at = i;
      break;
    }
  }
  t.AddShort('o', "output");
  Status s = t.Parse(cmd_at, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  const std::vector<std::string> cmd(argv + std::min(cmd_at + 1, argc), argv + argc);
  if (s.ok() && cmd.empty()) s = InvalidArgument("give the scenario: fieldprof lab -- COMMAND");
  if (s.ok() && !t.positional().empty()) {
    s = InvalidArgument("unexpected '" + t.positional()[0] + "' (the command goes after --)");
  }
  StatusOr<std::string> runtime = s.ok() ? FindRuntime(lib_dir) : StatusOr<std::string>(s);
  if (!runtime.ok()) {
    std::cerr << "fieldprof lab: " << runtime.status().message() << " (see --help)\n";
    return 2;
  }
  if (name.empty()) name = fs::path(cmd[0]).filename().string();
  if (output.empty()) output = name + ".labprofile";

  std::string work = keep_dir;
  if (work.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "fieldprof-lab-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "fieldprof lab: cannot make a work directory: " << std::strerror(errno) << "\n";
      return 3;
    }
    work = tmpl;
  } else {
    std::error_code ec;
    fs::create_directories(work, ec);
  }
  struct RemoveAtEnd {
    std::string dir;
    ~RemoveAtEnd() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } remove_at_end{keep_dir.empty() ? work : ""};

  // Every pass is an explicit run, never refused: its own slots, no load cap,
  // no overhead budget.
  setenv("FIELDPROF_RUN", "1", 1);
  setenv("FIELDPROF_SLOT_DIR", (work + "/slots").c_str(), 1);
  setenv("FIELDPROF_SLOTS", "1000", 1);
  setenv("FIELDPROF_MAX_LOAD", "1000000", 1);
  setenv("FIELDPROF_BUDGET", "1000", 1);
  setenv("FIELDPROF_SPOOL", (work + "/spool").c_str(), 1);
  if (!debug.empty()) setenv("FIELDPROF_DEBUG", debug.c_str(), 1);
  SetTscRate();
  const std::string preload = *runtime + "/libfieldprof.so";
  {
    const char* old = std::getenv("LD_PRELOAD");
    setenv("LD_PRELOAD", (old != nullptr && *old ? preload + ":" + old : preload).c_str(), 1);
  }
  const bool tty = isatty(STDERR_FILENO);
  const auto started = std::chrono::steady_clock::now();
  wire::LabProfile profile;
  profile.set_schema_version(1);
  profile.add_scenarios(name);
  profile.set_repeat(static_cast<uint32_t>(repeat));
  bool trouble = false;
  auto record_pass = [&](uint32_t set, uint32_t rep, const PassResult& r) {
    wire::LabPass* p = profile.add_passes();
    p->set_set(set);
    p->set_repeat(rep);
    p->set_exit_status(r.exit_status);
    p->set_wall_ns(r.wall_ns);
    p->set_processes(static_cast<uint32_t>(r.runs.size()));
    p->set_scenario(name);
  };

  // 1. The census.
  std::fprintf(stderr, "fieldprof lab: census run of %s ...\n", name.c_str());
  const PassResult census =
      RunPass(cmd, "census", work + "/census", "", STDOUT_FILENO, STDERR_FILENO);
  record_pass(0, 1, census);
  if (census.exit_status < 0) return 3;
  LabGraph graph;
  uint32_t clique = 0;
  uint64_t calls = 0, refused = 0, lost = 0;
  for (const wire::LabRunRecord& r : census.runs) {
    graph.AddRun(r);
    clique = std::max(clique, r.max_depth());
    calls += r.counters().calls_measured();
    refused += r.apis_refused();
    lost += r.edges_lost();
  }
  std::set<std::string> modules;
  for (uint32_t a = 0; a < graph.size(); ++a) modules.insert(graph.api(a).module());
  std::fprintf(stderr,
               "fieldprof lab: census: %zu APIs in %zu modules, %s calls, %zu nested pairs, "
               "%zu process%s, exit %d, %.2f s\n",
               graph.size(), modules.size(), FormatCount(calls).c_str(), graph.pairs().size(),
               census.runs.size(), census.runs.size() == 1 ? "" : "es", census.exit_status,
               static_cast<double>(census.wall_ns) / 1e9);
  if (refused > 0 || lost > 0) {
    std::fprintf(stderr,
                 "fieldprof lab: warning: the runtime's tables were full: %llu APIs unobserved, "
                 "%llu nested pairs lost\n",
                 static_cast<unsigned long long>(refused), static_cast<unsigned long long>(lost));
  }
  if (graph.size() == 0) {
    std::fprintf(
        stderr,
        "fieldprof lab: the census observed no API in %s (a statically linked program, "
        "or one that exits before calling any library? --debug FILE says what the runtime saw)\n",
        name.c_str());
    return 3;
  }

  // 2. The plan.
  std::vector<uint32_t> all(graph.size());
  for (uint32_t a = 0; a < graph.size(); ++a) all[a] = a;
  const TimingPlan plan = PlanTiming(graph, all, clique);
  std::fprintf(stderr,
               "fieldprof lab: timing plan: %zu sets (no plan can use fewer than %u), %lld runs "
               "each: %lld runs for %zu APIs\n",
               plan.sets.size(), plan.lower_bound, static_cast<long long>(repeat),
               static_cast<long long>(plan.sets.size() * repeat), graph.size());
  if (!plan.recursive.empty()) {
    std::fprintf(stderr,
                 "fieldprof lab: %zu APIs run inside themselves (e.g. %s): their outer calls "
                 "include an inner call's probe\n",
                 plan.recursive.size(), LabApiName(graph.api(plan.recursive[0])).c_str());
  }
  profile.set_timing_sets(static_cast<uint32_t>(plan.sets.size()));
  profile.set_min_sets(plan.lower_bound);

  // 3. The timing passes.
  std::vector<wire::LabRunRecord> timed;
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const size_t total = plan.sets.size() * static_cast<size_t>(repeat);
  size_t done = 0;
  for (size_t si = 0; si < plan.sets.size(); ++si) {
    const std::string plan_file = work + "/set-" + std::to_string(si + 1) + ".apis";
    {
      std::ofstream pf(plan_file);
      for (uint32_t a : plan.sets[si]) pf << LabApiName(graph.api(a)) << "\n";
    }
    for (int64_t rep = 1; rep <= repeat; ++rep) {
      ++done;
      const std::string dir =
          work + "/set-" + std::to_string(si + 1) + "-run-" + std::to_string(rep);
      fs::create_directories(dir);
      const std::string err_path = dir + "/stderr.txt";
      const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      std::fprintf(
          stderr,
          "%sfieldprof lab: [%zu/%zu] set %zu of %zu (%zu APIs), run %lld of %lld, %.1f s%s",
          tty ? "\r\033[K" : "", done, total, si + 1, plan.sets.size(), plan.sets[si].size(),
          static_cast<long long>(rep), static_cast<long long>(repeat),
          Seconds(std::chrono::steady_clock::now() - started), tty ? "" : "\n");
      std::fflush(stderr);
      PassResult r = RunPass(cmd, "time", dir, plan_file, devnull >= 0 ? devnull : STDOUT_FILENO,
                             err_fd >= 0 ? err_fd : STDERR_FILENO);
      if (err_fd >= 0) close(err_fd);
      record_pass(static_cast<uint32_t>(si + 1), static_cast<uint32_t>(rep), r);
      if (r.exit_status != census.exit_status || r.unreadable > 0) {
        trouble = true;
        std::fprintf(stderr,
                     "%sfieldprof lab: set %zu run %lld exited %d (the census run: %d)%s; its "
                     "data is kept, its stderr ends:\n%s",
                     tty ? "\r\033[K" : "", si + 1, static_cast<long long>(rep), r.exit_status,
                     census.exit_status,
                     r.unreadable
                         ? (", " + std::to_string(r.unreadable) + " unreadable lab files").c_str()
                         : "",
                     TailOf(err_path, 5).c_str());
      }
      for (auto& run : r.runs) timed.push_back(std::move(run));
    }
  }
  if (devnull >= 0) close(devnull);
  if (tty && total > 0) std::fprintf(stderr, "\r\033[K");

  // 4. The profile: time from the timing passes, the rest from the census.
  std::map<std::string, wire::Record> records;
  SumRecords(census.runs, wire::METRIC_ALLOC_BYTES_INCLUSIVE, wire::METRIC_SOCKET_IO_BYTES,
             &records);
  SumRecords(timed, wire::METRIC_WALL_TIME_NS, wire::METRIC_WALL_TIME_NS, &records);
  std::set<std::string> timed_apis;
  for (const auto& [k, r] : records) {
    if (r.key().metric() == wire::METRIC_WALL_TIME_NS) timed_apis.insert(LabApiName(r.key()));
  }
  uint64_t untimed = 0;
  for (uint32_t a = 0; a < graph.size(); ++a)
    untimed += !timed_apis.count(LabApiName(graph.api(a)));
  profile.set_apis_untimed(untimed);
  for (auto& [k, r] : records) *profile.add_records() = std::move(r);
  graph.ToProfile(&profile);
  if (Status w = WriteLabProfile(output, profile); !w.ok()) {
    std::cerr << "fieldprof lab: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr,
               "fieldprof lab: %s written: %zu APIs, %zu timed (%llu never called in their "
               "timing runs), %zu runs in %.1f s\n",
               output.c_str(), graph.size(), timed_apis.size(),
               static_cast<unsigned long long>(untimed), static_cast<size_t>(profile.passes_size()),
               Seconds(std::chrono::steady_clock::now() - started));
  if (!keep_dir.empty())
    std::fprintf(stderr, "fieldprof lab: raw files kept in %s\n", work.c_str());
  return trouble ? 1 : 0;
}

}  // namespace

int CmdLab(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "show") return LabShow(argc - 1, argv + 1);
  if (argc >= 2 && std::string(argv[1]) == "merge") return LabMerge(argc - 1, argv + 1);
  for (const char* verb : {"upload", "list", "fetch"}) {
    if (argc >= 2 && std::string(argv[1]) == verb) return LabRemote(verb, argc - 1, argv + 1);
  }
  return LabRun(argc, argv);
}

}  // namespace fieldprof::tools
