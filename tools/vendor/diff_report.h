// Renderers of a module diff (common/model/module_diff.h) for `fieldprof diff`:
// text and a self-contained HTML page (JSON: common/model/model_json.h,
// shared with the aggregator's /v1/diff).
#ifndef FIELDPROF_TOOLS_VENDOR_DIFF_REPORT_H_
#define FIELDPROF_TOOLS_VENDOR_DIFF_REPORT_H_

#include <cstddef>
#include <string>

#include "common/model/module_diff.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof::tools {

// What a diff report says besides the diff itself.
struct DiffContext {
  std::string module, before, after;  // the two sides' names
  std::string metric_name, statistic;
  wire::Metric metric = wire::METRIC_WALL_TIME_NS;
  bool all = false;  // every API compared, not only those that changed
};

// How many APIs got slower and faster.
void CountVerdicts(const ModuleDiff& d, size_t* slower, size_t* faster);

std::string DiffText(const ModuleDiff& d, const DiffOptions& o, const DiffContext& c);
std::string DiffHtml(const ModuleDiff& d, const DiffOptions& o, const DiffContext& c);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_VENDOR_DIFF_REPORT_H_
