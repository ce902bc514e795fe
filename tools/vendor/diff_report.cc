#include "tools/vendor/diff_report.h"

#include <cstdio>

#include "common/model/model_json.h"
#include "tools/page/page_kit.h"
#include "tools/shared/escape.h"
#include "tools/shared/format.h"
#include "tools/vendor/module_report.h"

namespace fieldprof::tools {
namespace {

std::string Pct(double change) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", 100 * change);
  return b;
}

std::string HtmlRow(const ApiDiff& x, const DiffOptions& o, const DiffContext& c) {
  auto value = [&](double v) { return HtmlEscape(FormatMetricValue(c.metric, v)); };
  char p[32];
  std::snprintf(p, sizeof p, "%.4g", x.adjusted);
  const char* verdict = DiffVerdictName(x.verdict);
  return std::string("<tr class=\"") + verdict + "\"><td class=\"name\">" +
         HtmlEscape(x.demangled) + "</td><td>" + verdict + "</td><td>" + value(x.stat_before) +
         "</td><td>" + value(x.stat_after) + "</td><td>" + Pct(x.change) + "</td><td>" + p +
         "</td><td>" + FormatCount(x.before.count()) + " / " + FormatCount(x.after.count()) +
         "</td><td>" + HistogramFigure(x.before, o.metric, 120, 22) + "</td><td>" +
         HistogramFigure(x.after, o.metric, 120, 22) + "</td></tr>\n";
}

}  // namespace

void CountVerdicts(const ModuleDiff& d, size_t* slower, size_t* faster) {
  *slower = *faster = 0;
  for (const ApiDiff& x : d.apis) {
    *slower += x.verdict == ApiDiff::kSlower;
    *faster += x.verdict == ApiDiff::kFaster;
  }
}

std::string DiffHtml(const ModuleDiff& d, const DiffOptions& o, const DiffContext& c) {
  size_t slower = 0, faster = 0;
  CountVerdicts(d, &slower, &faster);
  const std::string module = HtmlEscape(c.module), before = HtmlEscape(c.before),
                    after = HtmlEscape(c.after);
  std::string text =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + module +
      ": " + before + " to " + after +
      "</title>\n<style>body{font:14px/1.4 system-ui,sans-serif;margin:1.5em}"
      "table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
      "text-align:right}td.name{text-align:left;font-family:monospace}"
      ".slower{background:#fde8e8}.faster{background:#e6f4ea}</style>\n" +
      page::KitStyleElement() + "</head>\n<body>\n";
  text += "<h1>" + module + ": " + before + " &rarr; " + after + "</h1>\n<p>" +
          std::to_string(d.apis.size()) + " APIs compared on " + HtmlEscape(c.metric_name) + " (" +
          HtmlEscape(c.statistic) + "); " + std::to_string(slower) + " slower, " +
          std::to_string(faster) + " faster at a false discovery rate of " +
          HtmlEscape(std::to_string(o.fdr)) +
          ".</p>\n<table>\n<thead><tr><th>API</th><th>verdict</th><th>before</th><th>after</th>"
          "<th>change</th><th>adj. p</th><th>calls before / after</th><th>before</th>"
          "<th>after</th></tr></thead>\n<tbody>\n";
  for (const ApiDiff& x : d.apis) {
    if (c.all || x.verdict != ApiDiff::kSame) text += HtmlRow(x, o, c);
  }
  return text + "</tbody>\n</table>\n" + page::KitScriptElement() + "</body>\n</html>\n";
}

std::string DiffText(const ModuleDiff& d, const DiffOptions& o, const DiffContext& c) {
  size_t slower = 0, faster = 0;
  CountVerdicts(d, &slower, &faster);
  auto value = [&](double v) { return FormatMetricValue(c.metric, v); };
  std::string text;
  char line[1024];
  std::snprintf(line, sizeof line,
                "%s: %s -> %s, %zu APIs compared on %s (%s, %s): %zu slower, %zu faster\n",
                c.module.c_str(), c.before.c_str(), c.after.c_str(), d.apis.size(),
                c.metric_name.c_str(), c.statistic.c_str(),
                o.dependent ? "Benjamini-Yekutieli" : "Benjamini-Hochberg", slower, faster);
  text += line;
  if (!d.only_before.empty() || !d.only_after.empty() || d.too_few_calls > 0) {
    std::snprintf(line, sizeof line,
                  "%zu APIs only before, %zu only after, %zu with under %llu calls\n",
                  d.only_before.size(), d.only_after.size(), d.too_few_calls,
                  static_cast<unsigned long long>(o.min_calls));
    text += line;
  }
  std::snprintf(line, sizeof line, "\n%-7s %-48s %12s %12s %9s %9s  %s\n", "", "API", "before",
                "after", "change", "adj. p", "calls before / after");
  text += line;
  for (const ApiDiff& x : d.apis) {
    if (!c.all && x.verdict == ApiDiff::kSame) continue;
    std::string name = x.demangled;
    if (name.size() > 48) name = name.substr(0, 47) + "\u2026";
    std::snprintf(line, sizeof line, "%-7s %-48s %12s %12s %9s %9.4g  %s / %s\n",
                  DiffVerdictName(x.verdict), name.c_str(), value(x.stat_before).c_str(),
                  value(x.stat_after).c_str(), Pct(x.change).c_str(), x.adjusted,
                  FormatCount(x.before.count()).c_str(), FormatCount(x.after.count()).c_str());
    text += line;
  }
  if (slower + faster == 0 && !c.all)
    text += "(no API changed on the evidence; --all shows them)\n";
  return text;
}

}  // namespace fieldprof::tools
