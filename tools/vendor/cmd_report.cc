// fieldprof report: one module's field cost for its vendor, from
// the local snapshot cache or an aggregator (day ranges, vendor tokens),
// as text, CSV, JSON, Markdown or a self-contained HTML page.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/base/durable_file.h"
#include "common/model/model_json.h"
#include "common/model/module_model.h"
#include "common/settings/options.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/stacks/field_stacks.h"
#include "common/wire/api_key.h"
#include "tools/commands.h"
#include "tools/shared/client_flags.h"
#include "tools/shared/command_line.h"
#include "tools/shared/debug_names.h"
#include "tools/shared/module_source.h"
#include "tools/shared/output.h"
#include "tools/vendor/module_report.h"

namespace fieldprof::tools {
namespace {

constexpr const char* kReportAbout =
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
    "Formats: text (default), csv, json, md, html; -o FILE picks by its extension.";

struct ReportOptions {
  std::string module, scope, version, platform, from, to, format, output, debug_dir;
  int64_t top = 50;
  ModuleSource source;
  // From the flags: the model's filter and the source's query.
  ModelFilter filter;
  ModuleQuery query;
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseReportOptions(int argc, char** argv, ReportOptions* o) {
  OptionTable t("fieldprof report", kReportAbout);
  t.AddString("module", &o->module, "the module (soname), e.g. libsqlite3.so.0");
  t.AddString("namespace", &o->scope, "only APIs in this C++ namespace or class, e.g. std::vector");
  t.AddString("version", &o->version, "only this module version (build id or version string)");
  t.AddString("platform", &o->platform,
              "only this platform: ARCH[/VENDOR[/FAMILY]], e.g. x86_64/amd/25");
  t.AddString("from", &o->from, "with --host: from this day (YYYY-MM-DD)");
  t.AddString("to", &o->to, "with --host: to this day (YYYY-MM-DD)");
  t.AddString("format", &o->format, "text, csv, json, md or html");
  t.AddString("output", &o->output, "write to this file (-o) instead of stdout");
  t.AddInt("top", &o->top, "API and scope rows in text, md and html (0: all)", 0, 100000000);
  t.AddString("debug_dir", &o->debug_dir,
              "html: name the field stacks' +offset frames from the debug files under "
              "DIR/.build-id (one version: --version)");
  o->source.Register(t);
  t.AddShort('o', "output");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  o->format = OutputFormat(o->format, o->output);
  const std::string& f = o->format;
  if (s.ok() && o->module.empty()) s = InvalidArgument("--module is needed");
  if (s.ok() && f != "text" && f != "csv" && f != "json" && f != "md" && f != "html") {
    s = InvalidArgument("--format is text, csv, json, md or html");
  }
  if (s.ok() && !o->source.remote() && (!o->from.empty() || !o->to.empty())) {
    s = InvalidArgument("the cache holds all-time sums: --from/--to need --host");
  }
  o->filter.module_version = o->version;
  o->filter.scope = o->scope;
  o->query.module = o->module;
  o->query.version = o->version;
  o->query.from = o->from;
  o->query.to = o->to;
  if (s.ok()) s = ParsePlatform(o->platform, &o->filter, &o->query);
  if (!s.ok()) return UsageError(t, s);
  return std::nullopt;
}

// Where the report says it comes from, its range and its filters.
ReportContext Context(const ReportOptions& o) {
  ReportContext c;
  c.source = o.source.Name();
  c.range = o.from.empty() && o.to.empty()
                ? "all time"
                : (o.from.empty() ? "..." : o.from) + " .. " + (o.to.empty() ? "..." : o.to);
  for (const auto& [name, v] : {std::pair<const char*, std::string>{"namespace", o.scope},
                                {"version", o.version},
                                {"platform", o.platform}}) {
    if (!v.empty()) c.filters += (c.filters.empty() ? "" : ", ") + std::string(name) + " " + v;
  }
  c.top = static_cast<size_t>(o.top);
  return c;
}

std::string Render(const ModuleModel& m, const ReportContext& c, const std::string& format) {
  if (format == "csv") return ReportCsv(m);
  if (format == "json") return ModuleModelJson(m, c.source, c.range, c.filters);
  if (format == "md") return ReportMarkdown(m, c);
  if (format == "html") return ReportHtml(m, c);
  return ReportText(m, c);
}

}  // namespace

int CmdReport(int argc, char** argv) {
  ReportOptions o;
  if (const ExitCode done = ParseReportOptions(argc, argv, &o)) return *done;
  const StatusOr<std::vector<SeriesSum>> series = o.source.Load(o.query);
  if (!series.ok()) {
    std::cerr << "fieldprof report: " << series.status().message() << "\n";
    return 1;
  }
  ReportContext c = Context(o);
  const ModuleModel m = BuildModuleModel(o.module, *series, o.filter);
  if (o.format == "html") {
    FieldStacks stacks = BuildFieldStacks(o.module, *series, o.filter);
    if (!stacks.stacks.empty() && !o.debug_dir.empty()) {
      if (Status named = NameOffsets(o.debug_dir, &stacks); !named.ok()) {
        std::cerr << "fieldprof report: " << named.message() << "\n";
        return 1;
      }
    }
    if (!stacks.stacks.empty()) {
      nlohmann::json j = nlohmann::json::array();
      for (const FieldStack& st : stacks.stacks)
        j.push_back({{"frames", st.frames}, {"ns", st.ns}});
      c.stacks_json = j.dump();
    }
  }
  if (m.apis.empty() && m.points.empty()) {
    std::cerr << "fieldprof report: no data for " << o.module
              << (c.filters.empty() ? "" : " (" + c.filters + ")") << " in the " << c.source
              << "\n";
    return 3;
  }
  if (int code = EmitOutput("fieldprof report", Render(m, c, o.format), o.output); code != 0) {
    return code;
  }
  if (!o.output.empty()) {
    std::fprintf(stderr, "fieldprof report: %s: %zu APIs -> %s\n", o.module.c_str(), m.apis.size(),
                 o.output.c_str());
  }
  return 0;
}

}  // namespace fieldprof::tools
