// The pages of instrumentation points, over the page kit.
#ifndef FIELDPROF_TOOLS_POINTS_POINTS_PAGE_H_
#define FIELDPROF_TOOLS_POINTS_POINTS_PAGE_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/base/embedded_file.h"
#include "tools/points/points_report.h"

namespace fieldprof::tools {

// The page of recorded points (fieldprof points show --html): per tag the
// segments' table and, per segment, a bar chart with a bar per run, the
// runs removed as dirty on request (points.js).
std::string PointsPage(const std::vector<PointsRun>& runs, const std::vector<TagReport>& tags);

// The page of two groups compared (fieldprof points compare --html): the
// groups, the table of `rows` (ComparePoints of their tags), and per
// segment each run of A and of B as a dot on one scale (points_compare.js).
std::string PointsComparePage(const PointsGroup& a, const PointsGroup& b,
                              const std::vector<SegmentChange>& rows, const CompareOptions& o);

// points.{html,css,js} and points_compare.{html,css,js}, built in.
const EmbeddedFile* PointsPageFile(std::string_view name);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_POINTS_POINTS_PAGE_H_
