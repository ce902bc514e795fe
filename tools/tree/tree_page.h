// The page of a call tree (fieldprof tree show/sub --html): a flame graph
// of one metric, by heat, or for a difference coloured by the change and
// its significance, with search, zoom and callers and callees (tree.js,
// over the page kit).
#ifndef FIELDPROF_TOOLS_TREE_TREE_PAGE_H_
#define FIELDPROF_TOOLS_TREE_TREE_PAGE_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/base/embedded_file.h"
#include "tools/tree/call_tree.h"
#include "tools/tree/tree_report.h"

namespace fieldprof::tools {

// `changes` (from Significance, of metric `m`): a differential flame graph,
// widths from the new runs' means; else widths and heat from `t`.
std::string CallTreePage(const CallTree& t, Metric m, const std::vector<NodeChange>* changes);

// tree.html, tree.css and tree.js, built in.
const EmbeddedFile* TreePageFile(std::string_view name);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_TREE_TREE_PAGE_H_
