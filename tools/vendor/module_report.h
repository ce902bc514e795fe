// Renderers of a module's field cost (common/model/module_model.h) for
// `fieldprof report` and `fieldprof docs`: text, CSV (JSON:
// common/model/model_json.h, shared with the aggregator),
// Markdown, and a self-contained HTML page with inline SVG histograms in
// the heat spectrum (cheap buckets cool, expensive ones hot, intensity by
// count) and sortable tables. Every string from the data is escaped for
// its format.
#ifndef FIELDPROF_TOOLS_VENDOR_MODULE_REPORT_H_
#define FIELDPROF_TOOLS_VENDOR_MODULE_REPORT_H_

#include <string>

#include "common/model/module_model.h"

namespace fieldprof::tools {

struct ReportContext {
  std::string source;   // "snapshot cache DIR" or "aggregator HOST:PORT"
  std::string range;    // "all time" or "2026-11-01 .. 2026-11-20"
  std::string filters;  // human-readable, "" for none
  size_t top = 50;      // API rows (scopes: the same number)
  // The module's field stacks for the HTML page's flame graph
  // (common/stacks/field_stacks.h), as a JSON array of {frames, ns}; "" none.
  std::string stacks_json;
};

std::string ReportText(const ModuleModel& m, const ReportContext& c);
std::string ReportCsv(const ModuleModel& m);
std::string ReportMarkdown(const ModuleModel& m, const ReportContext& c);
std::string ReportHtml(const ModuleModel& m, const ReportContext& c);

// A histogram for a page: an empty svg element holding the buckets,
// which the page kit draws when the page opens (tools/page/kit.js
// drawMarked); the page ends with page::KitScriptElement().
std::string HistogramFigure(const Histogram& h, int metric_index, int width, int height,
                            uint64_t resolution_ns = 0);

// A histogram drawn here, as inline SVG: for the docs' snippets, which are
// pasted where no script runs (Markdown, a docs site). One bar per log2
// bucket from the lowest to the highest non-empty one (plus the zero
// bucket), coloured as the page kit colours them: by the bucket's place
// (blue .. red) and its count (light .. dark).
std::string HistogramSvg(const Histogram& h, int metric_index, int width, int height);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_VENDOR_MODULE_REPORT_H_
