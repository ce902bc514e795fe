// Call trees (docs/tree.md): a program's events reduced to one tree
// whose nodes are call paths, each with several metrics, and the algebra
// over such trees that compares runs.
//
//   CallTree t;
//   uint32_t n = t.AddPath({"main", "parse", "malloc"});
//   t.Add(n, Metric::kSamples, 3);
//   std::vector<int64_t> total = t.Totals(Metric::kSamples);  // inclusive
//
//   CallTree sum = Combine({&a, &b}, Op::kAdd, {});   // exact, integers
//   CallTree diff = Combine({&b, &a}, Op::kSub, {});  // b - a, node by node
//   CallTree core = Combine(runs, Op::kMin, {});      // in every run, at its least
//
// A node holds its exclusive (self) value of each metric; inclusive values
// are the sums over subtrees (Totals). Every metric here adds up over
// children, so both exist for all of them. Node 0 is the root: no frame,
// and for sources that have none, no values of its own. A node's parent
// always has a smaller index, so one pass from the end accumulates totals.
//
// Names are matched across runs by a key: the name itself (exact), or the
// name without what a compiler or a loader chooses per build (normalised):
// " [clone .constprop.N]" and ".isra.N"/".part.N"/".cold" suffixes, lambda
// and unnamed-type numbering, "module+0xADDR" offsets, build ids.
#ifndef FIELDPROF_TOOLS_TREE_CALL_TREE_H_
#define FIELDPROF_TOOLS_TREE_CALL_TREE_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/base/status.h"

namespace fieldprof::tools {

enum class Metric : uint8_t {
  kSamples = 0,  // stack samples
  kTimeNs = 1,   // time: sampled CPU or wall time, or traced durations
  kCalls = 2,    // entries into the node's function on this path
  kAllocBytes = 3,
  kFreedBytes = 4,
  kAllocs = 5,  // allocation calls
};
inline constexpr int kMetricCount = 6;

// "samples", "time_ns", "calls", "alloc_bytes", "freed_bytes", "allocs".
const char* MetricName(Metric m);
// The metric named `name` (also "time" for time_ns); false when none is.
bool MetricByName(std::string_view name, Metric* m);
inline uint32_t Bit(Metric m) { return 1u << static_cast<int>(m); }

enum class Match : uint8_t { kExact, kNormalised };

// The key `name` matches by (see above). Exact: the name itself.
std::string MatchKey(std::string_view name, Match rule);

class CallTree {
 public:
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kNone = UINT32_MAX;

  CallTree();

  // The child of `parent` named `name`, added if it is not there.
  uint32_t Child(uint32_t parent, std::string_view name);
  // The child of `parent` named `name`, or kNone.
  uint32_t Find(uint32_t parent, std::string_view name) const;
  // The node of a path from the root (outermost first), added as needed.
  uint32_t AddPath(const std::vector<std::string_view>& frames);
  // Adds `v` to `node`'s self value of `m`, and marks the metric present.
  void Add(uint32_t node, Metric m, int64_t v);
  void Set(uint32_t node, Metric m, int64_t v);

  size_t size() const { return nodes_.size(); }
  uint32_t parent(uint32_t n) const { return nodes_[n].parent; }
  const std::string& name(uint32_t n) const { return names_[nodes_[n].name]; }
  uint32_t name_id(uint32_t n) const { return nodes_[n].name; }
  const std::vector<std::string>& names() const { return names_; }
  int64_t self(uint32_t n, Metric m) const { return nodes_[n].self[static_cast<int>(m)]; }
  // Depth of a node: 0 for the root.
  uint32_t depth(uint32_t n) const;
  // Its frames from the root's child to it.
  std::vector<std::string> Path(uint32_t n) const;
  // Inclusive values of `m`, per node.
  std::vector<int64_t> Totals(Metric m) const;
  // Keeps only the nodes marked in `live` (a node's parent must be live
  // when it is), in place: indices close up, order stays.
  void KeepOnly(const std::vector<bool>& live);
  // Each node's children, in the order they were added.
  std::vector<std::vector<uint32_t>> Children() const;

  // The metrics present (Bit(m) each), and the first of them in the order
  // time, samples, calls, alloc bytes, ...: what a report shows first.
  uint32_t metrics() const { return metrics_; }
  void set_metrics(uint32_t m) { metrics_ = m; }
  bool has(Metric m) const { return (metrics_ & Bit(m)) != 0; }
  Metric PrimaryMetric() const;

  // What the tree was made from ("record sqlite3.fprec 0-1.5 s"; "add of
  // 3 runs"), and how many runs stand behind it: its values are their sum,
  // or with `per_run` one run's (a mean over them, or a min).
  std::string description;
  uint32_t runs = 1;
  bool per_run = false;

  // Node `n`'s self value of `m` summed over the tree's runs (a per-run
  // tree's times its runs), and per run (a sum tree's over its runs).
  int64_t OverRuns(uint32_t n, Metric m) const {
    return per_run ? self(n, m) * static_cast<int64_t>(runs) : self(n, m);
  }
  double PerRun(uint32_t n, Metric m) const {
    return per_run ? static_cast<double>(self(n, m))
                   : static_cast<double>(self(n, m)) / static_cast<double>(runs == 0 ? 1 : runs);
  }

 private:
  struct Node {
    uint32_t parent = kNone;
    uint32_t name = 0;
    std::array<int64_t, kMetricCount> self{};
  };
  uint32_t Intern(std::string_view name);

  std::vector<Node> nodes_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> name_ids_;
  std::unordered_map<uint64_t, uint32_t> child_;  // (parent << 32 | name) -> node
  uint32_t metrics_ = 0;
};

// Builds a tree from entry and exit events as they come (a tracer's
// points, a trace file read in time order): per thread, the open calls;
// each exit adds a call and its time to the path, its self time less the
// calls it made. Exits with no open call are counted and dropped.
class CallTreeBuilder {
 public:
  explicit CallTreeBuilder(CallTree* tree) : tree_(tree) {}
  void Enter(uint32_t thread, std::string_view name, int64_t time_ns);
  // The same at a node of the tree's own choosing (a call whose path is
  // known, its stack); calls entered inside it still nest under it, and
  // its self time is still less theirs.
  void EnterAt(uint32_t thread, uint32_t node, int64_t time_ns);
  void Exit(uint32_t thread, int64_t time_ns);
  // Ends the calls still open at `time_ns`; returns how many there were.
  uint64_t Finish(int64_t time_ns);
  uint64_t unmatched_exits() const { return unmatched_; }

 private:
  struct Open {
    uint32_t node;
    int64_t start, children;
  };
  CallTree* tree_;
  std::unordered_map<uint32_t, std::vector<Open>> stacks_;
  uint64_t unmatched_ = 0;
};

// The .fptree file: "FPTREE2\n", then varints (see call_tree.cc), then a
// CRC-32 of all before it. Decode reads "FPTREE1\n" files too (no flags:
// a sum) and refuses damage with a clear error.
std::string EncodeCallTree(const CallTree& t);
[[nodiscard]] StatusOr<CallTree> DecodeCallTree(std::string_view bytes);

enum class Op : uint8_t { kAdd, kMean, kSub, kMin };
enum class Normalize : uint8_t { kNone, kTotal, kCalls };

struct CombineOptions {
  Match match = Match::kExact;
  // Before combining, each input after the first is scaled so that its
  // root total (kTotal: of each metric; kCalls: of calls, all metrics by
  // that one ratio) equals the first input's. Rounded to integers: only
  // kNone keeps add and sub exact.
  Normalize normalize = Normalize::kNone;
  // sub of two groups of runs: the per-run mean of the first `sub_group`
  // inputs less that of the rest (each input weighing the runs it holds),
  // worked out as one integer per node and rounded once (0: the first
  // input less the sum of the rest).
  size_t sub_group = 0;
};

// Each input counts as the runs it holds (CallTree::runs): a sum of 5 runs
// as 5 runs' sum, a mean of 5 runs as its values times 5.
// add: the sum of every input's runs, node by node (the union of their
// paths); it holds all their runs.
// mean: that sum divided by the number of runs, rounded to nearest: a
// per-run tree of them all.
// sub: the first input less the rest (negative where it shrank); with
// `sub_group`, the new group's per-run mean less the base group's.
// min: only the paths in every input, each metric at its least self value.
// Nodes whose whole subtree is zero in every metric are left out (so that
// sub(add(A, B), B) is A, node for node). With Match::kNormalised, names
// are the keys they matched by.
[[nodiscard]] StatusOr<CallTree> Combine(const std::vector<const CallTree*>& in, Op op,
                                         const CombineOptions& o);

// The node of `t` at each node of `of`, by path keys; kNone where `t` has
// no such path. For reading per-run values beside a combined tree.
std::vector<uint32_t> MapNodes(const CallTree& of, const CallTree& t, Match rule);

// Trees as sorted (path, values) lists, for comparing two node for node.
std::vector<std::pair<std::string, std::array<int64_t, kMetricCount>>> Canonical(const CallTree& t);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_TREE_CALL_TREE_H_
