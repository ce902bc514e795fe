// `fieldprof lab --tree`: the census's API call paths as a call tree
// (tools/tree/call_tree.h), so the tree commands and their algebra work
// on lab runs as on recordings.
#ifndef FIELDPROF_TOOLS_LAB_LAB_TREE_H_
#define FIELDPROF_TOOLS_LAB_LAB_TREE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/proto/fieldprof.pb.h"
#include "tools/tree/call_tree.h"

namespace fieldprof::tools {

// The paths of every process of a census, summed into one tree: per path
// its calls, time, bytes allocated and freed and allocations, each
// exclusive of the APIs called inside it (allocation in the allocator's
// sizes). An API is named by its demangled symbol, with its module in
// parentheses when two modules define that name.
//
// Time: a census call's time holds its nested calls' probes, so an API's
// paths share what the timing passes measured for it: its census calls
// times `mean_ns` (by "module:symbol"), split over its paths in
// proportion to their census times. An API the timing passes did not see
// keeps its census time. Self time is a path's total less its callees'.
// `lost`: calls whose path the runtime's table had no room for.
tools::CallTree LabCallTree(const std::vector<wire::LabRunRecord>& runs,
                            const std::map<std::string, double>& mean_ns, uint64_t* lost);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_LAB_LAB_TREE_H_
