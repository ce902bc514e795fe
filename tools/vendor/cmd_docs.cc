// fieldprof docs: one snippet per API of a module for generated API
// references: Markdown and HTML, each with an inline SVG badge
// and histogram of the API's field cost and a link to the dashboard's page
// for it. docs/vendors.md shows how to include them with Doxygen and MkDocs.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "common/base/durable_file.h"
#include "common/base/json_writer.h"
#include "common/model/module_model.h"
#include "common/settings/options.h"
#include "common/snapshot/snapshot_cache.h"
#include "tools/commands.h"
#include "tools/shared/client_flags.h"
#include "tools/shared/command_line.h"
#include "tools/shared/escape.h"
#include "tools/shared/format.h"
#include "tools/shared/module_source.h"
#include "tools/vendor/module_report.h"

namespace fieldprof::tools {
namespace {

// A file name for a symbol: mangled names are [A-Za-z0-9_.$]; anything else
// (or a name too long for a file system) gets a hash instead.
std::string FileName(const std::string& symbol) {
  bool plain = !symbol.empty() && symbol.size() <= 200 && symbol[0] != '.';
  for (char c : symbol) {
    plain =
        plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$');
  }
  if (plain) return symbol;
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : symbol) h = (h ^ c) * 1099511628211ull;
  char b[32];
  std::snprintf(b, sizeof b, "api-%016llx", static_cast<unsigned long long>(h));
  return b;
}

// A shields-style badge: "field p50 | 1.23 us", coloured by the API's place
// among the module's (its wall-time p50 against theirs).
std::string Badge(const std::string& label, const std::string& value, double position) {
  const int lw = 6 * static_cast<int>(label.size()) + 10;
  const int vw = 6 * static_cast<int>(value.size()) + 10;
  const double hue = 240.0 * (1.0 - std::clamp(position, 0.0, 1.0));
  char b[1024];
  std::snprintf(b, sizeof b,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"20\" role=\"img\" "
                "aria-label=\"%s: %s\"><rect width=\"%d\" height=\"20\" fill=\"#555\"/>"
                "<rect x=\"%d\" width=\"%d\" height=\"20\" fill=\"hsl(%.0f,70%%,40%%)\"/>"
                "<g fill=\"#fff\" font-family=\"Verdana,sans-serif\" font-size=\"11\">"
                "<text x=\"5\" y=\"14\">%s</text><text x=\"%d\" y=\"14\">%s</text></g></svg>",
                lw + vw, HtmlEscape(label).c_str(), HtmlEscape(value).c_str(), lw, lw, vw, hue,
                HtmlEscape(label).c_str(), lw + 5, HtmlEscape(value).c_str());
  return b;
}

struct DocsOptions {
  std::string module, output, link, version;
  ModuleSource source;
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseDocsOptions(int argc, char** argv, DocsOptions* o) {
  OptionTable t("fieldprof docs",
                "Writes one snippet per API of a module, in Markdown and HTML, summarising its\n"
                "field cost (a badge with its p50, calls and runs, p90/p99 and allocation per\n"
                "call, an inline SVG histogram) with a link to the dashboard. Include them in\n"
                "generated API references (Doxygen, MkDocs: see docs/vendors.md).\n\n"
                "  fieldprof docs --module libsqlite3.so.0 -o docs/fieldprof \\\n"
                "      --link https://agg.example:8443/ui/");
  t.AddString("module", &o->module, "the module (soname)");
  t.AddString("output", &o->output, "the directory to write SYMBOL.md and SYMBOL.html into (-o)");
  t.AddString("link", &o->link, "the dashboard's base URL (…/ui/); each snippet links to its API");
  t.AddString("version", &o->version, "only this module version");
  o->source.Register(t);
  t.AddShort('o', "output");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && (o->module.empty() || o->output.empty())) {
    s = InvalidArgument("--module and -o are needed");
  }
  if (!s.ok()) return UsageError(t, s);
  return std::nullopt;
}

// Each API's wall-time p50 ranked among the module's, 0 (cheapest) .. 1:
// its badge's colour.
std::vector<double> P50Ranks(const ModuleModel& m) {
  std::vector<double> p50s;
  for (const ApiCost& a : m.apis) p50s.push_back(a.metric[0].Stats().p50);
  std::vector<double> sorted = p50s;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> ranks;
  for (double p50 : p50s) {
    ranks.push_back(sorted.size() < 2
                        ? 1.0
                        : static_cast<double>(std::lower_bound(sorted.begin(), sorted.end(), p50) -
                                              sorted.begin()) /
                              static_cast<double>(sorted.size() - 1));
  }
  return ranks;
}

struct Snippet {
  std::string html, md;
};

// One API's snippet: a badge, its histogram, a sentence, a link.
Snippet MakeSnippet(const ApiCost& a, const DocsOptions& o, double rank) {
  const HistogramStats st = a.metric[0].Stats();
  auto time = [&](double v) {
    return FormatMetricValue(wire::METRIC_WALL_TIME_NS, v, a.resolution_ns);
  };
  const std::string url =
      o.link.empty() ? "" : o.link + "#api/" + UrlEncode(o.module) + "/" + UrlEncode(a.symbol);
  const std::string summary = "p50 " + time(st.p50) + ", p90 " + time(st.p90) + ", p99 " +
                              time(st.p99) + "; " + FormatBytes(a.metric[1].Mean()) +
                              " allocated per call; " + FormatCount(st.count) + " calls in " +
                              FormatCount(a.runs) + " runs";
  const std::string badge = Badge("field p50", time(st.p50), rank);
  const std::string hist = HistogramSvg(a.metric[0], 0, 160, 24);
  Snippet s;
  s.html = "<div class=\"fieldprof-cost\" data-symbol=\"" + HtmlEscape(a.symbol) + "\">" + badge +
           " " + hist + "<br><span>Field cost of <code>" + HtmlEscape(a.demangled) +
           "</code>: " + HtmlEscape(summary) + ".";
  if (!url.empty()) s.html += " <a href=\"" + HtmlEscape(url) + "\">In the dashboard</a>";
  s.html += "</span></div>\n";
  // Markdown keeps the SVG inline (Markdown passes HTML through).
  s.md = badge + " " + hist + "\n\n**Field cost** of `" + a.demangled +
         "`: " + MarkdownCell(summary) + ".";
  if (!url.empty()) s.md += " [In the dashboard](" + url + ")";
  s.md += "\n";
  return s;
}

// SYMBOL.html and SYMBOL.md per API, and index.json listing them.
Status WriteSnippets(const ModuleModel& m, const DocsOptions& o) {
  FP_RETURN_IF_ERROR(MakeDirs(o.output, FileAccess::kShared));
  const std::vector<double> ranks = P50Ranks(m);
  JsonWriter index;
  index.BeginObject().Key("module").String(o.module).Key("apis").BeginArray();
  for (size_t i = 0; i < m.apis.size(); ++i) {
    const ApiCost& a = m.apis[i];
    const Snippet s = MakeSnippet(a, o, ranks[i]);
    const std::string base = o.output + "/" + FileName(a.symbol);
    FP_RETURN_IF_ERROR(WriteFileDurably(base + ".html", s.html, FileAccess::kShared));
    FP_RETURN_IF_ERROR(WriteFileDurably(base + ".md", s.md, FileAccess::kShared));
    index.BeginObject().Key("symbol").String(a.symbol).Key("demangled").String(a.demangled);
    index.Key("file").String(FileName(a.symbol)).EndObject();
  }
  index.EndArray().EndObject();
  return WriteFileDurably(o.output + "/index.json", index.Take() + "\n", FileAccess::kShared);
}

}  // namespace

int CmdDocs(int argc, char** argv) {
  DocsOptions o;
  if (const ExitCode done = ParseDocsOptions(argc, argv, &o)) return *done;
  ModuleQuery q;
  q.module = o.module;
  q.version = o.version;
  const StatusOr<std::vector<SeriesSum>> series = o.source.Load(q);
  if (!series.ok()) {
    std::cerr << "fieldprof docs: " << series.status().message() << "\n";
    return 1;
  }
  ModelFilter filter;
  filter.module_version = o.version;
  const ModuleModel m = BuildModuleModel(o.module, *series, filter);
  if (m.apis.empty()) {
    std::cerr << "fieldprof docs: no data for " << o.module << "\n";
    return 3;
  }
  if (Status w = WriteSnippets(m, o); !w.ok()) {
    std::cerr << "fieldprof docs: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "fieldprof docs: %zu snippets of %s in %s (index.json lists them)\n",
               m.apis.size(), o.module.c_str(), o.output.c_str());
  return 0;
}

}  // namespace fieldprof::tools
