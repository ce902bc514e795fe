// fieldprof report: one module's field cost for its vendor (issue #19), from
// the local snapshot cache or an aggregator (day ranges, vendor tokens),
// as text, CSV, JSON, Markdown or a self-contained HTML page.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "common/api_key.h"
#include "common/durable_file.h"
#include "common/model_json.h"
#include "common/module_model.h"
#include "common/options.h"
#include "common/snapshot_cache.h"
#include "tools/cli/client_flags.h"
#include "tools/commands.h"
#include "tools/vendor/module_report.h"
#include "tools/cli/module_source.h"

namespace fieldprof::tools {

int CmdReport(int argc, char** argv) {
  std::string module, scope, version, platform, from, to, format, output;
  int64_t top = 50;
  ModuleSource source;
  OptionTable t(
      "fieldprof report",
      "Where the time in one library goes on real machines: its APIs ranked by their\n"
      "share of the module's field cost (calls x mean, per metric), broken down by C++\n"
      "namespace and class, each with p50/p90/p99, mean +- sd, calls, runs, calls per\n"
      "run, allocation and I/O per call. From the local snapshot cache (all-time sums,\n"
      "offline) or an aggregator (--host; day ranges, and --token for a vendor's\n"
      "modules).\n\n"
      "  fieldprof report --module libsqlite3.so.0\n"
      "  fieldprof report --module libstdc++.so.6 --namespace std::__cxx11 --top 20\n"
      "  fieldprof report --module libz.so.1 -o zlib.html        # a page to open anywhere\n"
      "  fieldprof report --module libfoo.so.2 --host agg.example --token $TOKEN \\\n"
      "      --from 2026-11-01 --to 2026-11-20 --format csv\n\n"
      "Formats: text (default), csv, json, md, html; -o FILE picks by its extension.");
  t.AddString("module", &module, "the module (soname), e.g. libsqlite3.so.0");
  t.AddString("namespace", &scope, "only APIs in this C++ namespace or class, e.g. std::vector");
  t.AddString("version", &version, "only this module version (build id or version string)");
  t.AddString("platform", &platform,
              "only this platform: ARCH[/VENDOR[/FAMILY]], e.g. x86_64/amd/25");
  t.AddString("from", &from, "with --host: from this day (YYYY-MM-DD)");
  t.AddString("to", &to, "with --host: to this day (YYYY-MM-DD)");
  t.AddString("format", &format, "text, csv, json, md or html");
  t.AddString("output", &output, "write to this file (-o) instead of stdout");
  t.AddInt("top", &top, "API and scope rows in text, md and html (0: all)", 0, 100000000);
  source.Register(t);
  t.AddShort('o', "output");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  format = OutputFormat(format, output);
  if (s.ok() && module.empty()) s = InvalidArgument("--module is needed");
  if (s.ok() && format != "text" && format != "csv" && format != "json" && format != "md" &&
      format != "html") {
    s = InvalidArgument("--format is text, csv, json, md or html");
  }
  if (s.ok() && !source.remote() && (!from.empty() || !to.empty())) {
    s = InvalidArgument("the cache holds all-time sums: --from/--to need --host");
  }
  ModelFilter filter;
  filter.module_version = version;
  filter.scope = scope;
  ModuleQuery q;
  q.module = module;
  q.version = version;
  q.from = from;
  q.to = to;
  if (s.ok()) s = ParsePlatform(platform, &filter, &q);
  if (!s.ok()) {
    std::cerr << "fieldprof report: " << s.message() << " (see --help)\n";
    return 2;
  }
  const StatusOr<std::vector<SeriesSum>> series = source.Load(q);
  ReportContext c;
  c.source = source.Name();
  if (!series.ok()) {
    std::cerr << "fieldprof report: " << series.status().message() << "\n";
    return 1;
  }
  c.range = from.empty() && to.empty()
                ? "all time"
                : (from.empty() ? "..." : from) + " .. " + (to.empty() ? "..." : to);
  for (const auto& [name, v] : {std::pair<const char*, std::string>{"namespace", scope},
                                {"version", version},
                                {"platform", platform}}) {
    if (!v.empty()) c.filters += (c.filters.empty() ? "" : ", ") + std::string(name) + " " + v;
  }
  c.top = static_cast<size_t>(top);
  const ModuleModel m = BuildModuleModel(module, *series, filter);
  if (m.apis.empty()) {
    std::cerr << "fieldprof report: no data for " << module
              << (c.filters.empty() ? "" : " (" + c.filters + ")") << " in the " << c.source
              << "\n";
    return 3;
  }
  std::string text;
  if (format == "csv") {
    text = ReportCsv(m);
  } else if (format == "json") {
    text = ModuleModelJson(m, c.source, c.range, c.filters);
  } else if (format == "md") {
    text = ReportMarkdown(m, c);
  } else if (format == "html") {
    text = ReportHtml(m, c);
  } else {
    text = ReportText(m, c);
  }
  if (output.empty()) {
    std::cout << text;
    return 0;
  }
  if (Status w = WriteFileDurably(output, text); !w.ok()) {
    std::cerr << "fieldprof report: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "fieldprof report: %s: %zu APIs -> %s\n", module.c_str(), m.apis.size(),
               output.c_str());
  return 0;
}

}  // namespace fieldprof::tools
