// fieldprof diff: which APIs of a module got slower or faster between two
// versions or two date ranges, on the evidence of
// common/model/module_diff.h, with the effect shown. Options -> the two sides'
// series (tools/shared/module_source.h) -> the diff -> text, JSON or HTML
// (diff_report.h).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/model/model_json.h"
#include "common/model/module_diff.h"
#include "common/settings/options.h"
#include "common/stacks/field_stacks.h"
#include "common/wire/api_key.h"
#include "common/wire/module_version.h"
#include "tools/commands.h"
#include "tools/shared/command_line.h"
#include "tools/shared/module_source.h"
#include "tools/shared/output.h"
#include "tools/vendor/diff_report.h"

namespace fieldprof::tools {
namespace {

constexpr const char* kDiffAbout =
    "Did a release make a library better or worse in the field? Compares one module\n"
    "at two versions (a package version such as 3.40.1-2, a build id's first 8+ hex\n"
    "digits, or a vendor's version string), or over two date\n"
    "ranges (with --host), API by API: a permutation test each way on the log2\n"
    "buckets, Benjamini-Hochberg across APIs, and floors on the effect (as fieldprof\n"
    "check). Shows the APIs that got slower or faster, with the evidence and the size.\n\n"
    "  fieldprof diff --module libz.so.1 --versions 1.2.13,1.3\n"
    "  fieldprof diff --module libz.so.1 --versions 1.2.13,1.3 --stacks   # inside it\n"
    "  fieldprof diff --module libfoo.so.2 --ranges "
    "2026-10-01..2026-10-31,2026-11-01..2026-11-20 \\\n"
    "      --host agg.example --token $TOKEN --format html -o diff.html\n\n"
    "With --stacks the same test runs stack by stack on the module's field stacks\n"
    "(the CPU time of each stack per run), so a vendor sees which internal function\n"
    "got slower; --format folded gives both sides for a differential flame graph.\n\n"
    "Exit: 0 (or 1 with --fail_on_slower when an API got slower), 2 usage, 3 no data.";

struct DiffCommandOptions {
  std::string module, versions, ranges, metric_name = "wall_time_ns", statistic = "mean";
  std::string format, output, platform;
  ModuleSource source;
  bool all = false, fail_on_slower = false, stacks = false;
  DiffOptions diff;
  // From --versions, or from --ranges.
  std::string version_a, version_b, a_from, a_to, b_from, b_to;
  wire::Metric metric = wire::METRIC_WALL_TIME_NS;
  // From --platform: the model's filter and the aggregator's query.
  ModelFilter filter;
  ModuleQuery query;
};

bool SplitPair(const std::string& s, char sep, std::string* a, std::string* b) {
  const size_t at = s.find(sep);
  if (at == std::string::npos || at == 0 || at + 1 >= s.size()) return false;
  *a = s.substr(0, at);
  *b = s.substr(at + 1);
  return true;
}

// "FROM..TO" (either side may be empty: open).
bool SplitRange(const std::string& s, std::string* from, std::string* to) {
  const size_t at = s.find("..");
  if (at == std::string::npos) return false;
  *from = s.substr(0, at);
  *to = s.substr(at + 2);
  return true;
}

void AddDiffFlags(OptionTable& t, DiffCommandOptions* o, int64_t* min_calls, int64_t* resamples,
                  int64_t* seed) {
  DiffOptions& d = o->diff;
  t.AddString("module", &o->module, "the module (soname)");
  t.AddString("versions", &o->versions, "BEFORE,AFTER module versions");
  t.AddString("ranges", &o->ranges, "with --host: FROM..TO,FROM..TO day ranges (YYYY-MM-DD)");
  t.AddString("metric", &o->metric_name,
              "wall_time_ns, alloc_bytes_inclusive, alloc_bytes_exclusive, alloc_count, "
              "file_io_bytes, socket_io_bytes");
  t.AddString("statistic", &o->statistic, "mean, or a quantile: p50, p90, p99");
  t.AddDouble("fdr", &d.fdr, "false discovery rate", 0, 1);
  t.AddBool("dependent", &d.dependent, "Benjamini-Yekutieli (any dependence between APIs)");
  t.AddDouble("min_effect", &d.min_effect,
              "a change smaller than this fraction is not shown as one", 0, 1e6);
  t.AddDouble("min_diff_ns", &d.min_diff_ns,
              "wall time: nor one under this many ns (or twice the timing resolution)", 0, 1e18);
  t.AddInt("min_calls", min_calls, "APIs with fewer calls on either side are skipped", 1,
           int64_t{1} << 40);
  t.AddInt("resamples", resamples, "permutations per API and direction at most", 99, 10000000);
  t.AddInt("seed", seed, "the random seed", 0, int64_t{1} << 62);
  t.AddString("platform", &o->platform, "only this platform: ARCH[/VENDOR[/FAMILY]]");
  t.AddBool("all", &o->all, "show every API compared, not only those that changed");
  t.AddBool("stacks", &o->stacks,
            "compare the module's field stacks (where its CPU time goes inside), stack by stack, "
            "per run; --min_calls is then the least runs (docs/field-stacks.md)");
  t.AddBool("fail_on_slower", &o->fail_on_slower, "exit 1 when an API got slower (CI)");
  t.AddString("format", &o->format, "text, json or html");
  t.AddString("output", &o->output, "write to this file (-o)");
  o->source.Register(t);
  t.AddShort('o', "output");
}

// What the flags say together: the two sides, the format, the test.
Status SettleDiff(DiffCommandOptions* o) {
  if (o->module.empty()) return InvalidArgument("--module is needed");
  if (o->versions.empty() == o->ranges.empty()) {
    return InvalidArgument("give --versions BEFORE,AFTER or --ranges FROM..TO,FROM..TO");
  }
  if (!o->versions.empty() && !SplitPair(o->versions, ',', &o->version_a, &o->version_b)) {
    return InvalidArgument("--versions is BEFORE,AFTER");
  }
  if (!o->ranges.empty()) {
    if (!o->source.remote()) {
      return InvalidArgument("the cache holds all-time sums: --ranges needs --host");
    }
    std::string ra, rb;
    if (!(SplitPair(o->ranges, ',', &ra, &rb) && SplitRange(ra, &o->a_from, &o->a_to) &&
          SplitRange(rb, &o->b_from, &o->b_to))) {
      return InvalidArgument("--ranges is FROM..TO,FROM..TO");
    }
  }
  if (o->format != "text" && o->format != "json" && o->format != "html" &&
      !(o->stacks && o->format == "folded")) {
    return InvalidArgument(o->stacks ? "--format is text, json or folded with --stacks"
                                     : "--format is text, json or html");
  }
  if (o->stacks && o->format == "html") return InvalidArgument("--stacks: text, json or folded");
  FP_ASSIGN_OR_RETURN(o->metric, ParseMetric(o->metric_name));
  o->diff.metric = static_cast<int>(o->metric) - 1;
  o->query.module = o->module;
  FP_RETURN_IF_ERROR(ParsePlatform(o->platform, &o->filter, &o->query));
  return ParseStatistic(o->statistic, &o->diff.test).WithContext("--statistic");
}

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseDiffOptions(int argc, char** argv, DiffCommandOptions* o) {
  int64_t min_calls = 30, resamples = 9999, seed = 1;
  OptionTable t("fieldprof diff", kDiffAbout);
  AddDiffFlags(t, o, &min_calls, &resamples, &seed);
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  o->format = OutputFormat(o->format, o->output);
  o->diff.min_calls = static_cast<uint64_t>(min_calls);
  o->diff.test.resamples = static_cast<int>(resamples);
  o->diff.test.seed = static_cast<uint64_t>(seed);
  o->diff.test.stop_after = 20;
  if (s.ok()) s = SettleDiff(o);
  if (!s.ok()) return UsageError(t, s);
  return std::nullopt;
}

// Both sides' series: one load (split by version later), or two by range.
Status LoadSeries(const DiffCommandOptions& o, std::vector<SeriesSum>* sa,
                  std::vector<SeriesSum>* sb) {
  ModuleQuery q = o.query;
  if (o.ranges.empty()) {
    FP_ASSIGN_OR_RETURN(*sa, o.source.Load(q));
    *sb = *sa;
    return Status::Ok();
  }
  q.from = o.a_from;
  q.to = o.a_to;
  FP_ASSIGN_OR_RETURN(*sa, o.source.Load(q));
  q.from = o.b_from;
  q.to = o.b_to;
  FP_ASSIGN_OR_RETURN(*sb, o.source.Load(q));
  return Status::Ok();
}

// Both sides' models.
Status LoadSides(const DiffCommandOptions& o, ModuleModel* before, ModuleModel* after) {
  ModelFilter fa = o.filter, fb = o.filter;
  fa.module_version = o.version_a;
  fb.module_version = o.version_b;
  std::vector<SeriesSum> sa, sb;
  FP_RETURN_IF_ERROR(LoadSeries(o, &sa, &sb));
  *before = BuildModuleModel(o.module, sa, fa);
  *after = BuildModuleModel(o.module, sb, fb);
  return Status::Ok();
}

const char* VerdictName(ApiDiff::Verdict v) {
  return v == ApiDiff::kSlower ? "slower" : v == ApiDiff::kFaster ? "faster" : "same";
}

std::string StacksDiffText(const FieldStacksDiff& d, const DiffCommandOptions& o,
                           const std::string& before, const std::string& after) {
  size_t slower = 0, faster = 0;
  for (const StackDiff& x : d.stacks) {
    slower += x.verdict == ApiDiff::kSlower;
    faster += x.verdict == ApiDiff::kFaster;
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "%s field stacks, %s -> %s: %zu compared, %zu slower, %zu faster (FDR %.2f); "
                "%zu with fewer than %llu runs a side, %zu only before, %zu only after\n\n",
                o.module.c_str(), before.c_str(), after.c_str(), d.stacks.size(), slower, faster,
                o.diff.fdr, d.too_few_runs, static_cast<unsigned long long>(o.diff.min_calls),
                d.only_before, d.only_after);
  std::string out = line;
  for (const StackDiff& x : d.stacks) {
    if (x.verdict == ApiDiff::kSame && !o.all) continue;
    std::string frames;
    for (const std::string& f : x.frames) frames += (frames.empty() ? "" : ";") + f;
    std::snprintf(line, sizeof line,
                  "  %-6s %+8.1f%%  %10.3f -> %10.3f ms a run  p %.2g (adjusted %.2g)  ",
                  VerdictName(x.verdict), 100 * x.change, x.mean_before / 1e6, x.mean_after / 1e6,
                  x.p, x.adjusted);
    out += line + frames + "\n";
  }
  return out;
}

std::string StacksDiffJson(const FieldStacksDiff& d, const std::string& before,
                           const std::string& after) {
  nlohmann::json j = {{"before", before},
                      {"after", after},
                      {"too_few_runs", d.too_few_runs},
                      {"only_before", d.only_before},
                      {"only_after", d.only_after}};
  nlohmann::json stacks = nlohmann::json::array();
  for (const StackDiff& x : d.stacks) {
    stacks.push_back({{"frames", x.frames},
                      {"verdict", VerdictName(x.verdict)},
                      {"ns_before", x.ns_before},
                      {"ns_after", x.ns_after},
                      {"runs_before", x.before.count()},
                      {"runs_after", x.after.count()},
                      {"mean_before_ns", x.mean_before},
                      {"mean_after_ns", x.mean_after},
                      {"change", x.change},
                      {"p", x.p},
                      {"adjusted", x.adjusted}});
  }
  j["stacks"] = std::move(stacks);
  return j.dump(2) + "\n";
}

// fieldprof diff --stacks: the module's field stacks, side against side.
int DiffStacks(const DiffCommandOptions& o) {
  std::vector<SeriesSum> sa, sb;
  if (Status s = LoadSeries(o, &sa, &sb); !s.ok()) {
    std::cerr << "fieldprof diff: " << s.message() << "\n";
    return 1;
  }
  ModelFilter fa = o.filter, fb = o.filter;
  fa.module_version = o.version_a;
  fb.module_version = o.version_b;
  const FieldStacks before = BuildFieldStacks(o.module, sa, fa);
  const FieldStacks after = BuildFieldStacks(o.module, sb, fb);
  std::string a = o.ranges.empty() ? o.version_a : o.a_from + ".." + o.a_to;
  std::string b = o.ranges.empty() ? o.version_b : o.b_from + ".." + o.b_to;
  if (o.ranges.empty() && before.versions.size() == 1)
    a = ReadableModuleVersion(before.versions[0]);
  if (o.ranges.empty() && after.versions.size() == 1) b = ReadableModuleVersion(after.versions[0]);
  if (before.stacks.empty() || after.stacks.empty()) {
    std::cerr << "fieldprof diff: no field stacks of " << o.module << " at "
              << (before.stacks.empty() ? a : b) << "\n";
    return 3;
  }
  const FieldStacksDiff d = DiffFieldStacks(before, after, o.diff);
  const std::string text = o.format == "folded" ? FieldStacksDiffFolded(before, after)
                           : o.format == "json" ? StacksDiffJson(d, a, b)
                                                : StacksDiffText(d, o, a, b);
  if (int code = EmitOutput("fieldprof diff", text, o.output); code != 0) return code;
  for (const StackDiff& x : d.stacks) {
    if (o.fail_on_slower && x.verdict == ApiDiff::kSlower) return 1;
  }
  return 0;
}

}  // namespace

int CmdDiff(int argc, char** argv) {
  DiffCommandOptions o;
  if (const ExitCode done = ParseDiffOptions(argc, argv, &o)) return *done;
  if (o.stacks) return DiffStacks(o);
  DiffContext c{o.module, o.version_a, o.version_b, o.metric_name, o.statistic, o.metric, o.all};
  if (!o.ranges.empty()) {
    c.before = o.a_from + ".." + o.a_to;
    c.after = o.b_from + ".." + o.b_to;
  }
  ModuleModel before, after;
  if (Status s = LoadSides(o, &before, &after); !s.ok()) {
    std::cerr << "fieldprof diff: " << s.message() << "\n";
    return 1;
  }
  // A side named by one version reads as people read it: "3.40.1-2 (5221b80b)".
  if (o.ranges.empty() && before.versions.size() == 1) {
    c.before = ReadableModuleVersion(before.versions[0]);
  }
  if (o.ranges.empty() && after.versions.size() == 1)
    c.after = ReadableModuleVersion(after.versions[0]);
  if (before.apis.empty() || after.apis.empty()) {
    std::cerr << "fieldprof diff: no data for " << o.module << " at "
              << (before.apis.empty() ? c.before : c.after) << "\n";
    return 3;
  }
  const ModuleDiff d = DiffModules(before, after, o.diff);
  std::string text;
  if (o.format == "json") {
    text =
        ModuleDiffJson(d, o.module, c.before, c.after, o.metric_name, o.statistic, o.diff, o.all);
  } else {
    text = o.format == "html" ? DiffHtml(d, o.diff, c) : DiffText(d, o.diff, c);
  }
  if (int code = EmitOutput("fieldprof diff", text, o.output); code != 0) return code;
  size_t slower = 0, faster = 0;
  CountVerdicts(d, &slower, &faster);
  return o.fail_on_slower && slower > 0 ? 1 : 0;
}

}  // namespace fieldprof::tools
