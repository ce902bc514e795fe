// fieldprof diff: which APIs of a module got slower or faster between two
// versions or two date ranges (issue #19), on the evidence of
// common/module_diff.h, with the effect shown; text, JSON or HTML.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

#include "common/api_key.h"
#include "common/durable_file.h"
#include "common/json_writer.h"
#include "common/model_json.h"
#include "common/module_diff.h"
#include "common/options.h"
#include "common/snapshot_cache.h"
#include "tools/cli/client_flags.h"
#include "tools/cli/escape.h"
#include "tools/commands.h"
#include "tools/cli/format.h"
#include "tools/vendor/module_report.h"
#include "tools/cli/module_source.h"

namespace fieldprof::tools {
namespace {

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

const char* VerdictName(ApiDiff::Verdict v) { return DiffVerdictName(v); }

std::string Pct(double change) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", 100 * change);
  return b;
}

}  // namespace

int CmdDiff(int argc, char** argv) {
  std::string module, versions, ranges, metric_name = "wall_time_ns", statistic = "mean";
  std::string format, output, platform;
  ModuleSource source;
  double fdr = 0.05, min_effect = 0.05, min_diff_ns = 10;
  int64_t resamples = 9999, seed = 1, min_calls = 30;
  bool dependent = false, all = false, fail_on_slower = false;
  OptionTable t(
      "fieldprof diff",
      "Did a release make a library better or worse in the field? Compares one module\n"
      "at two versions (module_version: a build id or version string), or over two date\n"
      "ranges (with --host), API by API: a permutation test each way on the log2\n"
      "buckets, Benjamini-Hochberg across APIs, and floors on the effect (as fieldprof\n"
      "check). Shows the APIs that got slower or faster, with the evidence and the size.\n\n"
      "  fieldprof diff --module libz.so.1 --versions 1.2.13,1.3\n"
      "  fieldprof diff --module libfoo.so.2 --ranges "
      "2026-10-01..2026-10-31,2026-11-01..2026-11-20 \\\n"
      "      --host agg.example --token $TOKEN --format html -o diff.html\n\n"
      "Exit: 0 (or 1 with --fail_on_slower when an API got slower), 2 usage, 3 no data.");
  t.AddString("module", &module, "the module (soname)");
  t.AddString("versions", &versions, "BEFORE,AFTER module versions");
  t.AddString("ranges", &ranges, "with --host: FROM..TO,FROM..TO day ranges (YYYY-MM-DD)");
  t.AddString("metric", &metric_name,
              "wall_time_ns, alloc_bytes_inclusive, alloc_bytes_exclusive, alloc_count, "
              "file_io_bytes, socket_io_bytes");
  t.AddString("statistic", &statistic, "mean, or a quantile: p50, p90, p99");
  t.AddDouble("fdr", &fdr, "false discovery rate", 0, 1);
  t.AddBool("dependent", &dependent, "Benjamini-Yekutieli (any dependence between APIs)");
  t.AddDouble("min_effect", &min_effect, "a change smaller than this fraction is not shown as one",
              0, 1e6);
  t.AddDouble("min_diff_ns", &min_diff_ns,
              "wall time: nor one under this many ns (or twice the timing resolution)", 0, 1e18);
  t.AddInt("min_calls", &min_calls, "APIs with fewer calls on either side are skipped", 1,
           int64_t{1} << 40);
  t.AddInt("resamples", &resamples, "permutations per API and direction at most", 99, 10000000);
  t.AddInt("seed", &seed, "the random seed", 0, int64_t{1} << 62);
  t.AddString("platform", &platform, "only this platform: ARCH[/VENDOR[/FAMILY]]");
  t.AddBool("all", &all, "show every API compared, not only those that changed");
  t.AddBool("fail_on_slower", &fail_on_slower, "exit 1 when an API got slower (CI)");
  t.AddString("format", &format, "text, json or html");
  t.AddString("output", &output, "write to this file (-o)");
  source.Register(t);
  t.AddShort('o', "output");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  format = OutputFormat(format, output);
  const bool remote = source.remote();
  std::string va, vb, ra, rb, a_from, a_to, b_from, b_to;
  if (s.ok() && module.empty()) s = InvalidArgument("--module is needed");
  if (s.ok() && versions.empty() == ranges.empty()) {
    s = InvalidArgument("give --versions BEFORE,AFTER or --ranges FROM..TO,FROM..TO");
  }
  if (s.ok() && !versions.empty() && !SplitPair(versions, ',', &va, &vb)) {
    s = InvalidArgument("--versions is BEFORE,AFTER");
  }
  if (s.ok() && !ranges.empty()) {
    if (!remote) s = InvalidArgument("the cache holds all-time sums: --ranges needs --host");
    if (s.ok() && !(SplitPair(ranges, ',', &ra, &rb) && SplitRange(ra, &a_from, &a_to) &&
                    SplitRange(rb, &b_from, &b_to))) {
      s = InvalidArgument("--ranges is FROM..TO,FROM..TO");
    }
  }
  if (s.ok() && format != "text" && format != "json" && format != "html") {
    s = InvalidArgument("--format is text, json or html");
  }
  StatusOr<wire::Metric> metric = s.ok() ? ParseMetric(metric_name) : StatusOr<wire::Metric>(s);
  DiffOptions o;
  o.fdr = fdr;
  o.dependent = dependent;
  o.min_effect = min_effect;
  o.min_diff_ns = min_diff_ns;
  o.min_calls = static_cast<uint64_t>(min_calls);
  o.test.resamples = static_cast<int>(resamples);
  o.test.seed = static_cast<uint64_t>(seed);
  o.test.stop_after = 20;
  if (metric.ok()) {
    o.metric = static_cast<int>(*metric) - 1;
    if (statistic != "mean") {
      const double q =
          statistic.size() > 1 && statistic[0] == 'p' ? std::atof(statistic.c_str() + 1) / 100 : -1;
      if (q <= 0 || q >= 1) {
        metric = InvalidArgument("--statistic must be mean or pNN, e.g. p90");
      } else {
        o.test.statistic = PermutationOptions::kQuantile;
        o.test.quantile = q;
      }
    }
  }
  if (!metric.ok()) {
    std::cerr << "fieldprof diff: " << metric.status().message() << " (see --help)\n";
    return 2;
  }
  ModelFilter fa, fb;
  ModuleQuery q;
  q.module = module;
  if (Status p = ParsePlatform(platform, &fa, &q); !p.ok()) {
    std::cerr << "fieldprof diff: " << p.message() << " (see --help)\n";
    return 2;
  }
  fb = fa;
  fa.module_version = va;
  fb.module_version = vb;
  std::string before_name = va, after_name = vb;
  StatusOr<std::vector<SeriesSum>> sa = Status::Ok(), sb = Status::Ok();
  if (!ranges.empty()) {
    q.from = a_from;
    q.to = a_to;
    sa = source.Load(q);
    q.from = b_from;
    q.to = b_to;
    if (sa.ok()) sb = source.Load(q);
    before_name = a_from + ".." + a_to;
    after_name = b_from + ".." + b_to;
  } else {
    sa = source.Load(q);
    sb = sa;
  }
  if (!sa.ok() || !sb.ok()) {
    std::cerr << "fieldprof diff: " << (!sa.ok() ? sa : sb).status().message() << "\n";
    return 1;
  }
  const ModuleModel before = BuildModuleModel(module, *sa, fa);
  const ModuleModel after = BuildModuleModel(module, *sb, fb);
  if (before.apis.empty() || after.apis.empty()) {
    std::cerr << "fieldprof diff: no data for " << module << " at "
              << (before.apis.empty() ? before_name : after_name) << "\n";
    return 3;
  }
  const ModuleDiff d = DiffModules(before, after, o);
  size_t slower = 0, faster = 0;
  for (const ApiDiff& x : d.apis) {
    slower += x.verdict == ApiDiff::kSlower;
    faster += x.verdict == ApiDiff::kFaster;
  }
  const wire::Metric m = *metric;
  auto value = [&](double v) { return FormatMetricValue(m, v); };
  std::string text;
  if (format == "json") {
    text = ModuleDiffJson(d, module, before_name, after_name, metric_name, statistic, o, all);
  } else if (format == "html") {
    text = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
           HtmlEscape(module) + ": " + HtmlEscape(before_name) + " to " + HtmlEscape(after_name) +
           "</title>\n<style>body{font:14px/1.4 system-ui,sans-serif;margin:1.5em}"
           "table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
           "text-align:right}td.name{text-align:left;font-family:monospace}"
           ".slower{background:#fde8e8}.faster{background:#e6f4ea}</style>\n</head>\n<body>\n";
    text += "<h1>" + HtmlEscape(module) + ": " + HtmlEscape(before_name) + " &rarr; " +
            HtmlEscape(after_name) + "</h1>\n<p>" + std::to_string(d.apis.size()) +
            " APIs compared on " + HtmlEscape(metric_name) + " (" + HtmlEscape(statistic) + "); " +
            std::to_string(slower) + " slower, " + std::to_string(faster) +
            " faster at a false discovery rate of " + HtmlEscape(std::to_string(fdr)) +
            ".</p>\n<table>\n<thead><tr><th>API</th><th>verdict</th><th>before</th><th>after</th>"
            "<th>change</th><th>adj. p</th><th>calls before / after</th><th>before</th>"
            "<th>after</th></tr></thead>\n<tbody>\n";
    for (const ApiDiff& x : d.apis) {
      if (!all && x.verdict == ApiDiff::kSame) continue;
      char p[32];
      std::snprintf(p, sizeof p, "%.4g", x.adjusted);
      text += std::string("<tr class=\"") + VerdictName(x.verdict) + "\"><td class=\"name\">" +
              HtmlEscape(x.demangled) + "</td><td>" + VerdictName(x.verdict) + "</td><td>" +
              HtmlEscape(value(x.stat_before)) + "</td><td>" + HtmlEscape(value(x.stat_after)) +
              "</td><td>" + Pct(x.change) + "</td><td>" + p + "</td><td>" +
              FormatCount(x.before.count()) + " / " + FormatCount(x.after.count()) + "</td><td>" +
              HistogramSvg(x.before, o.metric, 120, 22) + "</td><td>" +
              HistogramSvg(x.after, o.metric, 120, 22) + "</td></tr>\n";
    }
    text += "</tbody>\n</table>\n</body>\n</html>\n";
  } else {
    char line[1024];
    std::snprintf(line, sizeof line,
                  "%s: %s -> %s, %zu APIs compared on %s (%s, %s): %zu slower, %zu faster\n",
                  module.c_str(), before_name.c_str(), after_name.c_str(), d.apis.size(),
                  metric_name.c_str(), statistic.c_str(),
                  dependent ? "Benjamini-Yekutieli" : "Benjamini-Hochberg", slower, faster);
    text += line;
    if (!d.only_before.empty() || !d.only_after.empty() || d.too_few_calls > 0) {
      std::snprintf(line, sizeof line,
                    "%zu APIs only before, %zu only after, %zu with under %lld calls\n",
                    d.only_before.size(), d.only_after.size(), d.too_few_calls,
                    static_cast<long long>(min_calls));
      text += line;
    }
    std::snprintf(line, sizeof line, "\n%-7s %-48s %12s %12s %9s %9s  %s\n", "", "API", "before",
                  "after", "change", "adj. p", "calls before / after");
    text += line;
    for (const ApiDiff& x : d.apis) {
      if (!all && x.verdict == ApiDiff::kSame) continue;
      std::string name = x.demangled;
      if (name.size() > 48) name = name.substr(0, 47) + "\u2026";
      std::snprintf(line, sizeof line, "%-7s %-48s %12s %12s %9s %9.4g  %s / %s\n",
                    VerdictName(x.verdict), name.c_str(), value(x.stat_before).c_str(),
                    value(x.stat_after).c_str(), Pct(x.change).c_str(), x.adjusted,
                    FormatCount(x.before.count()).c_str(), FormatCount(x.after.count()).c_str());
      text += line;
    }
    if (slower + faster == 0 && !all)
      text += "(no API changed on the evidence; --all shows them)\n";
  }
  if (output.empty()) {
    std::cout << text;
  } else if (Status w = WriteFileDurably(output, text); !w.ok()) {
    std::cerr << "fieldprof diff: " << w.message() << "\n";
    return 1;
  }
  return fail_on_slower && slower > 0 ? 1 : 0;
}

}  // namespace fieldprof::tools
