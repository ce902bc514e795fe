#include "tools/vendor/module_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/base/json_writer.h"
#include "common/model/model_json.h"
#include "common/wire/module_version.h"
#include "tools/page/page_kit.h"
#include "tools/shared/escape.h"
#include "tools/shared/format.h"

namespace fieldprof::tools {
namespace {

wire::Metric MetricOf(int m) { return static_cast<wire::Metric>(m + 1); }

std::string Value(int m, double v, uint64_t resolution_ns = 0) {
  return FormatMetricValue(MetricOf(m), v, resolution_ns);
}

std::string Percent(double share) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * share);
  return b;
}

std::string Fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// Exact figures for machine-readable outputs.
std::string Num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

size_t Rows(size_t have, size_t top) { return std::min(have, top == 0 ? have : top); }

std::string Hsl(double position, double intensity) {
  // Blue (240) for cheap buckets to red (0) for expensive ones; a bucket
  // with few calls is light, the fullest dark (kit.js histogram).
  const double hue = 240.0 * (1.0 - std::clamp(position, 0.0, 1.0));
  const double light = 80.0 - 35.0 * std::clamp(intensity, 0.0, 1.0);
  char b[64];
  std::snprintf(b, sizeof b, "hsl(%.0f,85%%,%.0f%%)", hue, light);
  return b;
}

}  // namespace

std::string HistogramSvg(const Histogram& h, int metric_index, int width, int height) {
  int lo = kNumBuckets, hi = -1;
  for (int i = 0; i < kNumBuckets; ++i) {
    if (h.bucket(i).count == 0) continue;
    lo = std::min(lo, i);
    hi = std::max(hi, i);
  }
  const bool zero = h.zero_count() > 0;
  const int bars = (hi >= lo ? hi - lo + 1 : 0) + (zero ? 1 : 0);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
                    "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
                    std::to_string(width) + " " + std::to_string(height) +
                    "\" role=\"img\" aria-label=\"histogram\">";
  if (bars == 0) return svg + "</svg>";
  uint64_t top = h.zero_count();
  for (int i = lo; i <= hi; ++i) top = std::max(top, h.bucket(i).count);
  const double w = static_cast<double>(width) / bars;
  int k = 0;
  auto bar = [&](uint64_t n, double position, const std::string& label) {
    const double frac = static_cast<double>(n) / static_cast<double>(top);
    const double bh = n == 0 ? 0 : std::max(1.0, frac * (height - 1));
    char b[256];
    std::snprintf(b, sizeof b,
                  "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">", k * w,
                  height - bh, std::max(0.5, w - 1), bh, Hsl(position, frac).c_str());
    svg += b;
    svg += "<title>" + HtmlEscape(label) + ": " + FormatCount(n) + "</title></rect>";
    ++k;
  };
  if (zero) bar(h.zero_count(), 0, "0");
  for (int i = lo; i <= hi; ++i) {
    const double position = hi == lo ? 1.0 : static_cast<double>(i - lo) / (hi - lo);
    bar(h.bucket(i).count, position,
        Value(metric_index, static_cast<double>(BucketLow(i))) + " .. " +
            Value(metric_index, static_cast<double>(BucketHigh(i))));
  }
  return svg + "</svg>";
}

std::string HistogramFigure(const Histogram& h, int metric_index, int width, int height,
                            uint64_t resolution_ns) {
  std::string buckets = "[";
  auto add = [&](int index, uint64_t n) {
    if (n == 0) return;
    if (buckets.size() > 1) buckets += ',';
    buckets += "[" + std::to_string(index) + "," + std::to_string(n) + "]";
  };
  add(-1, h.zero_count());
  for (int i = 0; i < kNumBuckets; ++i) add(i, h.bucket(i).count);
  buckets += "]";
  const char* unit = metric_index == 0 ? "ns" : metric_index == 3 ? "count" : "bytes";
  return "<svg class=\"hist\" width=\"" + std::to_string(width) + "\" height=\"" +
         std::to_string(height) + "\" role=\"img\" aria-label=\"histogram\" data-unit=\"" + unit +
         "\" data-resolution=\"" + std::to_string(resolution_ns) + "\" data-buckets=\"" + buckets +
         "\"></svg>";
}

std::string ReportText(const ModuleModel& m, const ReportContext& c) {
  std::string out;
  char line[1024];
  std::snprintf(line, sizeof line, "%s: %zu APIs, %s calls, %s in all (%s; %s)%s\n",
                m.module.c_str(), m.apis.size(), FormatCount(m.calls).c_str(),
                Value(0, m.total[0]).c_str(), c.source.c_str(), c.range.c_str(),
                c.filters.empty() ? "" : (", " + c.filters).c_str());
  out += line;
  std::string versions;
  for (const std::string& v : m.versions) {
    versions += (versions.empty() ? "" : ", ") + ReadableModuleVersion(v);
  }
  out += "versions: " + (versions.empty() ? std::string("-") : versions) + "\n";
  if (m.machines > 0) {
    out += "machines: at least " + FormatCount(m.machines) + " (the most behind one series)\n";
  }
  out +=
      "share = calls x mean over the module's (call-weighted); percentiles are over calls;\n"
      "runs = program runs behind each API, so a few heavy runs show as many calls/run.\n\n";
  std::snprintf(line, sizeof line, "%6s %-48s %9s %9s %8s %10s %10s %10s %20s %10s\n", "share",
                "API", "calls", "runs", "calls/run", "p50", "p90", "p99", "mean +- sd",
                "alloc/call");
  out += line;
  for (size_t i = 0; i < Rows(m.apis.size(), c.top); ++i) {
    const ApiCost& a = m.apis[i];
    const HistogramStats st = a.metric[0].Stats();
    std::string name = a.demangled;
    if (name.size() > 48) name = name.substr(0, 47) + "\u2026";
    std::snprintf(
        line, sizeof line, "%6s %-48s %9s %9s %8.1f %10s %10s %10s %20s %10s\n",
        Percent(a.share[0]).c_str(), name.c_str(), FormatCount(st.count).c_str(),
        FormatCount(a.runs).c_str(), a.CallsPerRun(), Value(0, st.p50, a.resolution_ns).c_str(),
        Value(0, st.p90, a.resolution_ns).c_str(), Value(0, st.p99, a.resolution_ns).c_str(),
        (Value(0, st.mean, a.resolution_ns) + " +- " + Value(0, st.stddev)).c_str(),
        FormatBytes(a.metric[1].Mean()).c_str());
    out += line;
  }
  if (m.apis.size() > Rows(m.apis.size(), c.top)) {
    out += "... " + std::to_string(m.apis.size() - c.top) + " more (--top)\n";
  }
  if (!m.scopes.empty()) {
    out += "\nby C++ namespace and class (wall time):\n";
    for (size_t i = 0; i < Rows(m.scopes.size(), c.top); ++i) {
      const ScopeCost& s = m.scopes[i];
      std::snprintf(line, sizeof line, "%6s %s%s  (%zu APIs, %s calls)\n",
                    Percent(s.share[0]).c_str(), std::string(2 * (s.depth - 1), ' ').c_str(),
                    s.scope.c_str(), s.apis, FormatCount(s.calls).c_str());
      out += line;
    }
  }
  if (!m.points.empty()) {
    out += "\ninstrumentation points (per tag: from each point to the next, and each scope):\n";
    std::snprintf(line, sizeof line, "%-16s %-36s %9s %9s %10s %10s %10s %10s\n", "tag", "segment",
                  "runs", "count", "mean", "p50", "p90", "p99");
    out += line;
    for (const PointCost& p : m.points) {
      const HistogramStats st = p.h.Stats();
      std::snprintf(line, sizeof line, "%-16s %-36s %9s %9s %10s %10s %10s %10s\n", p.tag.c_str(),
                    p.segment.c_str(), FormatCount(p.runs).c_str(), FormatCount(st.count).c_str(),
                    Value(0, st.mean).c_str(), Value(0, st.p50).c_str(), Value(0, st.p90).c_str(),
                    Value(0, st.p99).c_str());
      out += line;
    }
  }
  return out;
}

std::string ReportCsv(const ModuleModel& m) {
  std::string out =
      "module,symbol,demangled,scope,versions,calls,runs,calls_per_run,share_wall_time,"
      "wall_time_p50_ns,wall_time_p90_ns,wall_time_p99_ns,wall_time_mean_ns,wall_time_sd_ns,"
      "alloc_bytes_inclusive_per_call,alloc_bytes_exclusive_per_call,alloc_count_per_call,"
      "file_io_bytes_per_call,socket_io_bytes_per_call\n";
  for (const ApiCost& a : m.apis) {
    const HistogramStats st = a.metric[0].Stats();
    std::string versions;
    for (const std::string& v : a.versions) {
      versions += (versions.empty() ? "" : "; ") + ReadableModuleVersion(v);
    }
    out += CsvField(m.module) + "," + CsvField(a.symbol) + "," + CsvField(a.demangled) + "," +
           CsvField(ScopePrefix(a.name, a.name.scopes.size())) + "," + CsvField(versions) + "," +
           std::to_string(st.count) + "," + std::to_string(a.runs) + "," + Num(a.CallsPerRun()) +
           "," + Num(a.share[0]) + "," + Num(st.p50) + "," + Num(st.p90) + "," + Num(st.p99) + "," +
           Num(st.mean) + "," + Num(st.stddev);
    for (int i = 1; i < kModelMetrics; ++i) out += "," + Num(a.metric[i].Mean());
    out += "\n";
  }
  return out;
}

std::string ReportMarkdown(const ModuleModel& m, const ReportContext& c) {
  std::string out = "# " + MarkdownCell(m.module) + "\n\n";
  out += std::to_string(m.apis.size()) + " APIs, " + FormatCount(m.calls) + " calls, " +
         Value(0, m.total[0]) + " in all; " + MarkdownCell(c.source) + ", " +
         MarkdownCell(c.range) + (c.filters.empty() ? "" : ", " + MarkdownCell(c.filters)) +
         (m.machines > 0 ? "; at least " + FormatCount(m.machines) + " machines" : std::string()) +
         ".\n\nShares are calls × mean (call-weighted); percentiles are over calls; runs are the "
         "program runs behind each API.\n\n";
  out += "| share | API | calls | runs | calls/run | p50 | p90 | p99 | mean ± sd | alloc/call |\n";
  out += "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (size_t i = 0; i < Rows(m.apis.size(), c.top); ++i) {
    const ApiCost& a = m.apis[i];
    const HistogramStats st = a.metric[0].Stats();
    out += "| " + Percent(a.share[0]) + " | `" + a.demangled.substr(0, 200) + "` | " +
           FormatCount(st.count) + " | " + FormatCount(a.runs) + " | " + Fixed(a.CallsPerRun(), 1) +
           " | " + MarkdownCell(Value(0, st.p50, a.resolution_ns)) + " | " +
           MarkdownCell(Value(0, st.p90, a.resolution_ns)) + " | " +
           MarkdownCell(Value(0, st.p99, a.resolution_ns)) + " | " +
           MarkdownCell(Value(0, st.mean, a.resolution_ns)) + " ± " +
           MarkdownCell(Value(0, st.stddev)) + " | " + FormatBytes(a.metric[1].Mean()) + " |\n";
  }
  if (!m.scopes.empty()) {
    out +=
        "\n## By namespace and class\n\n| share | scope | APIs | calls |\n|---:|---|---:|---:|\n";
    for (size_t i = 0; i < Rows(m.scopes.size(), c.top); ++i) {
      const ScopeCost& s = m.scopes[i];
      out += "| " + Percent(s.share[0]) + " | " + MarkdownCell(s.scope) + " | " +
             std::to_string(s.apis) + " | " + FormatCount(s.calls) + " |\n";
    }
  }
  if (!m.points.empty()) {
    out +=
        "\n## Instrumentation points\n\n| tag | segment | runs | count | mean | p50 | p90 | p99 "
        "|\n|---|---|---:|---:|---:|---:|---:|---:|\n";
    for (const PointCost& p : m.points) {
      const HistogramStats st = p.h.Stats();
      out += "| " + MarkdownCell(p.tag) + " | " + MarkdownCell(p.segment) + " | " +
             FormatCount(p.runs) + " | " + FormatCount(st.count) + " | " +
             MarkdownCell(Value(0, st.mean)) + " | " + MarkdownCell(Value(0, st.p50)) + " | " +
             MarkdownCell(Value(0, st.p90)) + " | " + MarkdownCell(Value(0, st.p99)) + " |\n";
    }
  }
  // Inline code may not hold a backquote: those were dropped above.
  for (size_t p = out.find("``"); p != std::string::npos; p = out.find("``", p)) out.erase(p, 1);
  return out;
}

namespace {

// The page's head and the module's summary.
std::string HtmlHead(const ModuleModel& m, const ReportContext& c) {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
      HtmlEscape(m.module) +
      " in the field</title>\n<style>\n"
      "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\n"
      "table{border-collapse:collapse;margin:1em 0}\n"
      "th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;vertical-align:middle}\n"
      "th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}\n"
      "td.name{text-align:left;font-family:monospace;max-width:40em;overflow-wrap:anywhere}\n"
      "th:focus{outline:2px solid #36c}\n"
      ".note{color:#555}\n</style>\n" +
      page::KitStyleElement() + "</head>\n<body>\n";
  h += "<h1>" + HtmlEscape(m.module) + "</h1>\n<p>" + std::to_string(m.apis.size()) + " APIs, " +
       FormatCount(m.calls) + " calls, " + HtmlEscape(Value(0, m.total[0])) +
       " in all. Source: " + HtmlEscape(c.source) + "; " + HtmlEscape(c.range) +
       (c.filters.empty() ? "" : "; " + HtmlEscape(c.filters)) + ".</p>\n";
  std::string versions;
  for (const std::string& v : m.versions) {
    versions += (versions.empty() ? "" : ", ") + ReadableModuleVersion(v);
  }
  h += "<p>Versions: " + HtmlEscape(versions.empty() ? "-" : versions) + "</p>\n";
  h += "<p class=\"note\">Share is calls &times; mean over the module's (call-weighted); "
       "percentiles and means are over calls, so a heavy user's calls count as many as they "
       "are; <em>runs</em> is the number of program runs behind each API and <em>calls/run</em> "
       "shows when a few runs carry it. Click a column to sort.</p>\n";
  return h;
}

// A cell sorted by `sort_key`, showing `text`.
std::string Cell(double sort_key, const std::string& text) {
  return "<td data-v=\"" + Num(sort_key) + "\">" + HtmlEscape(text) + "</td>";
}

std::string ApiRow(const ApiCost& a) {
  const HistogramStats st = a.metric[0].Stats();
  return "<tr>" + Cell(a.share[0], Percent(a.share[0])) + "<td class=\"name\" title=\"" +
         HtmlEscape(a.symbol) + "\">" + HtmlEscape(a.demangled) + "</td>" +
         Cell(static_cast<double>(st.count), FormatCount(st.count)) +
         Cell(static_cast<double>(a.runs), FormatCount(a.runs)) +
         Cell(a.CallsPerRun(), Fixed(a.CallsPerRun(), 1)) +
         Cell(st.p50, Value(0, st.p50, a.resolution_ns)) +
         Cell(st.p90, Value(0, st.p90, a.resolution_ns)) +
         Cell(st.p99, Value(0, st.p99, a.resolution_ns)) +
         Cell(st.mean, Value(0, st.mean, a.resolution_ns)) + Cell(st.stddev, Value(0, st.stddev)) +
         Cell(a.metric[1].Mean(), FormatBytes(a.metric[1].Mean())) +
         Cell(a.metric[3].Mean(), Fixed(a.metric[3].Mean(), 2)) +
         Cell(a.metric[4].Mean(), FormatBytes(a.metric[4].Mean())) +
         Cell(a.metric[5].Mean(), FormatBytes(a.metric[5].Mean())) + "<td>" +
         HistogramFigure(a.metric[0], 0, 160, 24, a.resolution_ns) + "</td></tr>\n";
}

std::string ApiTable(const ModuleModel& m, const ReportContext& c) {
  std::string h = "<table id=\"apis\">\n<thead><tr>";
  for (const char* col :
       {"share", "API", "calls", "runs", "calls/run", "p50", "p90", "p99", "mean", "sd",
        "alloc/call", "allocs/call", "file I/O/call", "socket I/O/call", "wall time"}) {
    h += std::string("<th tabindex=\"0\">") + col + "</th>";
  }
  h += "</tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < Rows(m.apis.size(), c.top); ++i) h += ApiRow(m.apis[i]);
  return h + "</tbody>\n</table>\n";
}

std::string ScopeTable(const ModuleModel& m, const ReportContext& c) {
  if (m.scopes.empty()) return "";
  std::string h =
      "<h2>By namespace and class</h2>\n<table id=\"scopes\">\n<thead><tr><th "
      "tabindex=\"0\">share</th><th tabindex=\"0\">scope</th><th tabindex=\"0\">APIs</th><th "
      "tabindex=\"0\">calls</th><th tabindex=\"0\">wall time</th></tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < Rows(m.scopes.size(), c.top); ++i) {
    const ScopeCost& s = m.scopes[i];
    h += "<tr><td data-v=\"" + Num(s.share[0]) + "\">" + Percent(s.share[0]) +
         "</td><td class=\"name\">" + HtmlEscape(s.scope) + "</td><td data-v=\"" +
         std::to_string(s.apis) + "\">" + std::to_string(s.apis) + "</td><td data-v=\"" +
         std::to_string(s.calls) + "\">" + FormatCount(s.calls) + "</td><td data-v=\"" +
         Num(s.total[0]) + "\">" + HtmlEscape(Value(0, s.total[0])) + "</td></tr>\n";
  }
  return h + "</tbody>\n</table>\n";
}

// The module's instrumentation points, as the field summed them.
std::string PointTable(const ModuleModel& m) {
  if (m.points.empty()) return "";
  std::string h = "<h2>Instrumentation points</h2>\n<table id=\"points\">\n<thead><tr>";
  for (const char* col : {"tag", "segment", "runs", "count", "mean", "p50", "p90", "p99"}) {
    h += std::string("<th tabindex=\"0\">") + col + "</th>";
  }
  h += "</tr></thead>\n<tbody>\n";
  for (const PointCost& p : m.points) {
    const HistogramStats st = p.h.Stats();
    h += "<tr data-symbol=\"" + HtmlEscape(p.symbol) + "\"><td class=\"name\">" +
         HtmlEscape(p.tag) + "</td><td class=\"name\">" + HtmlEscape(p.segment) + "</td>" +
         Cell(static_cast<double>(p.runs), FormatCount(p.runs)) +
         Cell(static_cast<double>(st.count), FormatCount(st.count)) +
         Cell(st.mean, Value(0, st.mean)) + Cell(st.p50, Value(0, st.p50)) +
         Cell(st.p90, Value(0, st.p90)) + Cell(st.p99, Value(0, st.p99)) + "</tr>\n";
  }
  return h + "</tbody>\n</table>\n";
}

// The field stacks' flame graph, drawn by the page kit (kit.js
// drawMarked: an svg of class field-flame with data-stacks).
std::string StacksFigure(const ModuleModel& m, const ReportContext& c) {
  if (c.stacks_json.empty()) return "";
  return "<h2>Where its CPU time goes (field stacks)</h2>\n<p class=\"note\">Sampled CPU time "
         "inside the module in measured runs, each frame as wide as the time under it; click one "
         "to zoom. Frames in brackets are where the time went on (docs/field-stacks.md).</p>\n"
         "<svg class=\"flame field-flame\" id=\"field-flame\" data-root=\"" +
         HtmlEscape(m.module) + "\" data-stacks=\"" + HtmlEscape(c.stacks_json) + "\"></svg>\n";
}

}  // namespace

std::string ReportHtml(const ModuleModel& m, const ReportContext& c) {
  // The kit draws the histograms and the flame graph, and sorts the tables
  // (click a header).
  return HtmlHead(m, c) + ApiTable(m, c) + ScopeTable(m, c) + PointTable(m) + StacksFigure(m, c) +
         page::KitScriptElement() + "</body>\n</html>\n";
}

}  // namespace fieldprof::tools
