// fieldprof report: one module's field cost for its vendor (issue #19), from
// the local snapshot cache or an aggregator (day ranges, vendor tokens),
// as text, CSV, JSON, Markdown or a self-contained HTML page.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "common/api_key.h"
#include "common/durable_file.h"
#include "common/module_model.h"
#include "common/options.h"
#include "common/snapshot_cache.h"
#include "tools/client_flags.h"
#include "tools/commands.h"
#include "tools/module_report.h"
#include "tools/module_source.h"

namespace fieldprof::tools {
namespace {

// "x86_64[/amd[/25]]" -> the filter's fields and the query's names.
Status ParsePlatform(const std::string& spec, ModelFilter* f, ModuleQuery* q) {
  if (spec.empty()) return Status::Ok();
  std::vector<std::string> parts;
  for (size_t at = 0; at <= spec.size();) {
    const size_t slash = spec.find('/', at);
    parts.push_back(spec.substr(at, slash - at));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  if (parts.size() > 3) return InvalidArgument("--platform is ARCH[/VENDOR[/FAMILY]]");
  bool found = false;
  for (int a = wire::Arch_MIN; a <= wire::Arch_MAX; ++a) {
    if (wire::Arch_IsValid(a) && ArchName(static_cast<wire::Arch>(a)) == parts[0]) {
      f->arch = a;
      found = true;
    }
  }
  if (!found) return InvalidArgument("unknown architecture '" + parts[0] + "' (e.g. x86_64)");
  q->arch = parts[0];
  if (parts.size() >= 2) {
    found = false;
    for (int v = wire::CpuVendor_MIN; v <= wire::CpuVendor_MAX; ++v) {
      if (wire::CpuVendor_IsValid(v) &&
          CpuVendorName(static_cast<wire::CpuVendor>(v)) == parts[1]) {
        f->cpu_vendor = v;
        found = true;
      }
    }
    if (!found) return InvalidArgument("unknown CPU vendor '" + parts[1] + "' (e.g. amd, intel)");
    q->vendor = parts[1];
  }
  if (parts.size() == 3) {
    char* end = nullptr;
    const long fam = std::strtol(parts[2].c_str(), &end, 10);
    if (parts[2].empty() || *end != 0 || fam < 0 || fam > 255) {
      return InvalidArgument("a CPU family is 0..255");
    }
    f->cpu_family = static_cast<int>(fam);
    q->family = f->cpu_family;
  }
  return Status::Ok();
}

std::string FormatOf(const std::string& format, const std::string& output) {
  if (!format.empty()) return format;
  for (const char* ext : {"html", "csv", "json", "md"}) {
    const std::string dot = std::string(".") + ext;
    if (output.size() > dot.size() &&
        output.compare(output.size() - dot.size(), dot.size(), dot) == 0)
      return ext;
  }
  return "text";
}

}  // namespace

int CmdReport(int argc, char** argv) {
  std::string module, scope, version, platform, from, to, format, output, token;
  std::string cache_dir = DefaultSnapshotCacheDir();
  int64_t top = 50;
  ClientFlags client;
  client.options.host = "";
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
  t.AddString("cache", &cache_dir, "the snapshot cache (without --host)");
  client.Register(t);
  t.AddString("token", &token, "with --host: the vendor's bearer token for its modules");
  t.AddShort('o', "output");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  format = FormatOf(format, output);
  if (s.ok() && module.empty()) s = InvalidArgument("--module is needed");
  if (s.ok() && format != "text" && format != "csv" && format != "json" && format != "md" &&
      format != "html") {
    s = InvalidArgument("--format is text, csv, json, md or html");
  }
  const bool remote = !client.options.host.empty();
  if (s.ok() && !remote && (!from.empty() || !to.empty())) {
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
  q.token = token;
  if (s.ok()) s = ParsePlatform(platform, &filter, &q);
  if (!s.ok()) {
    std::cerr << "fieldprof report: " << s.message() << " (see --help)\n";
    return 2;
  }
  StatusOr<std::vector<SeriesSum>> series = Status::Ok();
  ReportContext c;
  if (remote) {
    HttpsClient http(client.Resolve());
    series = SeriesFromAggregator(http, q);
    c.source = "aggregator " + client.options.host + ":" + std::to_string(client.port);
  } else {
    series = SeriesFromCache(cache_dir, module);
    c.source = "snapshot cache";
  }
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
    text = ReportJson(m, c);
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
