// The page of a recording (fieldprof record show --html): one
// self-contained HTML file, with nothing fetched from elsewhere. It holds
// the samples and the time tree's lists, and answers any range chosen on
// its timeline in the browser as `record show --from --to` does: from the
// tree, with the same bound (tools/page/record.js).
//
// The page of a call tree (fieldprof tree show/sub --html): a flame graph
// of one metric, by heat, or for a difference coloured by the change and
// its significance, with search, zoom and callers and callees
// (tools/page/tree.js).
#ifndef FIELDPROF_TOOLS_LOCAL_HTML_PAGE_H_
#define FIELDPROF_TOOLS_LOCAL_HTML_PAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tools/points/points_report.h"
#include "tools/record/recording.h"
#include "tools/tree/call_tree.h"
#include "tools/tree/tree_report.h"

namespace fieldprof::local {

struct PageOptions {
  // The range and thread selected when the page opens.
  uint64_t from_ns = 0, to_ns = UINT64_MAX;
  uint32_t tid = 0;
};

std::string RecordingPage(const Recording& r, const PageOptions& o);

// `changes` (from Significance, of metric `m`): a differential flame graph,
// widths from the new runs' means; else widths and heat from `t`.
std::string CallTreePage(const CallTree& t, Metric m, const std::vector<NodeChange>* changes);

// The page of recorded points (fieldprof points show --html): per tag the
// segments' table and, per segment, a bar chart with a bar per run, the
// runs removed as dirty on request (tools/page/points.js).
std::string PointsPage(const std::vector<PointsRun>& runs, const std::vector<TagReport>& tags);

// The page of two groups compared (fieldprof points compare --html): the
// groups, the table of `rows` (ComparePoints of their tags), and per segment each run of A and
// of B as a dot on one scale (tools/page/points_compare.js).
std::string PointsComparePage(const PointsGroup& a, const PointsGroup& b,
                              const std::vector<SegmentChange>& rows, const CompareOptions& o);

}  // namespace fieldprof::local

#endif  // FIELDPROF_TOOLS_LOCAL_HTML_PAGE_H_
