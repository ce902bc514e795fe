#include "tools/points/points_page.h"

#include <nlohmann/json.hpp>
#include <string>

#include "tools/page/page_kit.h"

namespace fieldprof::tools {

using json = nlohmann::json;

std::string PointsPage(const std::vector<PointsRun>& runs, const std::vector<TagReport>& tags) {
  const json data = json::parse(PointsJson(runs, tags));
  const std::string program = runs.empty() ? std::string("no runs") : runs[0].program;
  return page::RenderPage("fieldprof points", "fieldprof points: " + program,
                          PointsPageFile("points.html")->body, PointsPageFile("points.css")->body,
                          PointsPageFile("points.js")->body, data);
}

namespace {

// A group as the comparison page names it: where from, its runs and
// programs, and per tag the runs removed as dirty.
json GroupJson(const PointsGroup& g) {
  json removed = json::object();
  for (const TagReport& t : g.tags) {
    if (!t.removed.empty()) removed[t.tag] = t.removed.size();
  }
  return {
      {"name", g.name}, {"runs", g.runs.size()}, {"programs", ProgramsOf(g)}, {"removed", removed}};
}

}  // namespace

std::string PointsComparePage(const PointsGroup& a, const PointsGroup& b,
                              const std::vector<SegmentChange>& rows, const CompareOptions& o) {
  json values = json::array();
  for (const SegmentChange& r : rows) values.push_back({{"a", r.values_a}, {"b", r.values_b}});
  const json data = {{"a", GroupJson(a)},
                     {"b", GroupJson(b)},
                     {"fdr", o.fdr},
                     {"min_effect", o.min_effect},
                     {"rows", json::parse(CompareJson(rows))},
                     {"values", values},
                     {"only_a", SegmentsOnlyIn(a.tags, b.tags)},
                     {"only_b", SegmentsOnlyIn(b.tags, a.tags)}};
  return page::RenderPage(
      "fieldprof points compare", "fieldprof points compare: " + a.name + " vs " + b.name,
      PointsPageFile("points_compare.html")->body, PointsPageFile("points_compare.css")->body,
      PointsPageFile("points_compare.js")->body, data);
}

}  // namespace fieldprof::tools
