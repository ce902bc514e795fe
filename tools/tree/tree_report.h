// What is shown of a call tree (call_tree.h): the queries (top nodes or
// functions, callers and callees, paths to a function, a subtree, what
// allocated but did not free), the significance of a difference between
// groups of runs, and the renderings: an indented text tree with metric
// columns and heat colours, JSON, and collapsed stacks (one column, or two
// for a difference as difffolded.pl writes them).
#ifndef FIELDPROF_TOOLS_TREE_TREE_REPORT_H_
#define FIELDPROF_TOOLS_TREE_TREE_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "tools/tree/call_tree.h"

namespace fieldprof::tools {

// "12.3 ms", "1.5 MiB", "1,234"; signed values get a sign.
std::string FormatMetric(Metric m, int64_t v, bool sign = false);

struct TopRow {
  std::string name;  // a function, or a path "a;b;c"
  int64_t self = 0, total = 0;
};
// Functions by self (or total) of `m`. A function's total counts each
// path once, at its outermost call (recursion is not counted twice).
std::vector<TopRow> TopFunctions(const CallTree& t, Metric m, bool by_total);
// Nodes (call paths) by self or total, the first `limit` (0: all).
std::vector<TopRow> TopNodes(const CallTree& t, Metric m, bool by_total, size_t limit = 0);

struct Butterfly {
  int64_t self = 0, total = 0;
  std::vector<TopRow> callers, callees;  // by total of `fn` under them / of theirs under `fn`
};
// Who calls `fn` and whom it calls, with values of `m`; NotFound when no
// node is named `fn`.
[[nodiscard]] StatusOr<Butterfly> ButterflyOf(const CallTree& t, const std::string& fn, Metric m);
// Every path to `fn` (outermost calls), by total of `m`.
std::vector<TopRow> PathsTo(const CallTree& t, const std::string& fn, Metric m);
// The subtrees at `what` merged into one tree whose root's child is it:
// `what` a function name, or a path "a;b;c" from the root.
[[nodiscard]] StatusOr<CallTree> Subtree(const CallTree& t, const std::string& what);

struct LeakRow {
  std::string name;
  int64_t allocated = 0, freed = 0, allocs = 0;
};
// Functions by bytes allocated less bytes freed (self), most kept first.
std::vector<LeakRow> AllocatedNotFreed(const CallTree& t);

// A difference between groups of runs, per node of the difference tree.
struct NodeChange {
  double base_mean = 0, new_mean = 0;  // the node's self value per run, averaged
  double p = 1, q = 1;                 // permutation test; Benjamini-Hochberg adjusted
  bool counted = false;                // could be significant, so counted by BH
  bool tested = false;                 // over the effect floors, so tested
  bool significant = false;            // tested and q <= fdr
};
struct SignificanceOptions {
  Metric metric = Metric::kSamples;
  Match match = Match::kExact;
  double fdr = 0.05;
  // Effect floors: a node is tested only when its mean self value changed
  // by at least `min_effect` of the larger mean and by at least
  // `min_share` of the base's mean root total.
  double min_effect = 0.05;
  double min_share = 0.005;
};
// Per node of `diff` (a sub of the groups' means), from the runs' self
// values at the same path (0 where a run has no such path).
std::vector<NodeChange> Significance(const CallTree& diff, const std::vector<const CallTree*>& now,
                                     const std::vector<const CallTree*>& base,
                                     const SignificanceOptions& o);

// What the field says a function costs (a library API the snapshot cache
// holds): wall time a call, and calls a run, over its versions and
// platforms.
struct FieldCostOfName {
  double p50_ns = 0, p99_ns = 0, calls_a_run = 0;
  uint64_t runs = 0;  // the runs behind it
};
// "field: p50 1.46 us, p99 2.10 us a call; 2,000 calls a run (40 runs)".
std::string FieldCostText(const FieldCostOfName& c);

struct TreeTextOptions {
  Metric sort_by = Metric::kSamples;  // children by its total; filter and heat by it
  double min_share = 0.005;           // hide nodes under this share of the tree's sum
  bool color = false, truecolor = false;
  const std::vector<NodeChange>* changes = nullptr;            // adds p, q and a mark
  const std::map<uint32_t, FieldCostOfName>* field = nullptr;  // by node: after its name
};
std::string TreeText(const CallTree& t, const TreeTextOptions& o);
// `field`, by node: each API node's "field" object (p50_ns, p99_ns,
// calls_a_run, runs).
std::string TreeJson(const CallTree& t, const std::vector<NodeChange>* changes,
                     const std::map<uint32_t, FieldCostOfName>* field = nullptr);
// "a;b;c VALUE" for every node with a self value of `m`.
std::string TreeCollapsed(const CallTree& t, Metric m);
// "a;b;c BASE NOW" over both trees' paths (difffolded.pl's format).
std::string TreeCollapsedDiff(const CallTree& base, const CallTree& now, Metric m, Match rule);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_TREE_TREE_REPORT_H_
