// The time tree of a recording: any time range of millions of
// call-stack samples answered at once, without a scan.
//
// Samples are (time, type), sorted by time; a type is whatever the caller
// interns (fieldprof record: a thread and a stack). The tree is implied by
// the number of samples and its options, and built bottom up: every M
// consecutive samples make a leaf, which keeps its samples; every N
// consecutive nodes of a level make a parent (the last one with what is
// left), up to one root. A node's samples never change once it is
// complete, so the tree can grow as samples arrive (TimeTreeBuilder)
// and is the same as one built from them all at once. An inner node keeps the counts of its most
// frequent types that together cover at least P of its samples, in order of type, and the rest as
// one "other" count; unless that list would take more than a quarter of an entry per sample (near
// the leaves, where most types are seen once), when the node keeps none and a range wholly over it
// is answered from its children, exactly. Such nodes are small, and dropping their lists is what
// keeps the file near the samples' own size.
//
// A range report [t1, t2] merges the counts of inner nodes wholly inside,
// skips disjoint ones, recurses into partly covered inner nodes and scans
// only the samples of partly covered leaves. A type a merged node's list
// left out has at most as many samples there as the list's least count
// (and as its "other"): summed over the merged nodes, that is the bound,
// and every type's true count lies in [count, count + bound]. With
// `exact`, the samples of the merged nodes that used "other" are scanned
// for the types their lists left out, and the bound is 0.
//
// What a person reads is the top of that list. With `top` N, a merged
// node gives only its N most frequent types (each long list keeps them in
// order of count: its head), the N most frequent of the range are listed,
// and everything else is one "other" of exact size; the bound still holds
// for every type, listed or not. An answer then costs about N entries a
// merged node however many types the range holds.
#ifndef FIELDPROF_TOOLS_RECORD_TIME_TREE_H_
#define FIELDPROF_TOOLS_RECORD_TIME_TREE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/status.h"

namespace fieldprof::tools {

// Sample types are interned ids: a range report counts them in an array
// indexed by type, so they stay below this.
inline constexpr uint32_t kMaxTimeTreeTypes = 1u << 24;

struct TimeTreeOptions {
  uint32_t leaf_samples = 100;  // M: samples in a leaf (the last may have fewer)
  double keep_fraction = 0.95;  // P: an inner node's types cover this much
  uint32_t fanout = 2;          // N: children of an inner node
};

[[nodiscard]] Status CheckTimeTreeOptions(const TimeTreeOptions& o);

struct RangeQuery {
  bool exact = false;  // every type, counted exactly (top is then ignored)
  uint32_t top = 0;    // list the N most frequent types (0: every type seen)
};

struct RangeCounts {
  // No zeros. In order of type; with `top`, the most frequent first (ties
  // in order of type).
  std::vector<std::pair<uint32_t, uint64_t>> by_type;
  uint64_t samples = 0;  // in the range, exact
  // Of those, the samples by_type does not count (listed + other ==
  // samples, exactly).
  uint64_t other = 0;
  // Every type's true count, listed or not, lies in [count, count +
  // bound] (a type not listed: count 0). 0 when exact.
  uint64_t bound = 0;
  // No type in "other" has more samples than this.
  uint64_t other_at_most = 0;
  // What the answer took.
  uint64_t nodes_merged = 0, leaves_scanned = 0, samples_scanned = 0;
  uint64_t entries_merged = 0;  // (type, count) pairs read from the nodes' lists
};

class TimeTree {
 public:
  TimeTree() = default;
  // `times` ascending (equal times allowed); types[i] is times[i]'s, each
  // below kMaxTimeTreeTypes.
  static StatusOr<TimeTree> Build(std::vector<uint64_t> times, std::vector<uint32_t> types,
                                  const TimeTreeOptions& options = {});

  // The samples with t1 <= time <= t2.
  RangeCounts Range(uint64_t t1, uint64_t t2, const RangeQuery& q) const;
  RangeCounts Range(uint64_t t1, uint64_t t2, bool exact = false) const {
    RangeQuery q;
    q.exact = exact;
    return Range(t1, t2, q);
  }

  size_t samples() const { return times_.size(); }
  size_t nodes() const { return nodes_.size(); }
  uint64_t first_time() const { return times_.empty() ? 0 : times_.front(); }
  uint64_t last_time() const { return times_.empty() ? 0 : times_.back(); }
  const TimeTreeOptions& options() const { return options_; }
  const std::vector<uint64_t>& times() const { return times_; }
  const std::vector<uint32_t>& types() const { return types_; }

  // Times made relative to `origin` (those before it, 0): the order, the
  // shape and the lists stay as they are.
  void MakeTimesRelative(uint64_t origin);

  // The nodes in breadth-first order, for a reader elsewhere (the page of
  // a recording answers ranges in the browser from them).
  struct NodeView {
    uint32_t lo = 0, hi = 0;                // samples [lo, hi)
    uint32_t first_child = 0;               // children [first_child, + children)
    uint32_t children = 0;                  // 0: a leaf
    bool listed = false;                    // an inner node with a list
    uint32_t list_begin = 0, list_end = 0;  // its (type, count) pairs in lists()
    uint64_t other = 0;                     // its samples no pair counts
  };
  std::vector<NodeView> NodeViews() const;
  const std::vector<std::pair<uint32_t, uint32_t>>& lists() const { return top_; }

  // The samples and the inner nodes' lists, compactly (varints, times as
  // deltas); the node boundaries are implied and not stored.
  std::string Encode() const;
  [[nodiscard]] static StatusOr<TimeTree> Decode(std::string_view bytes);

 private:
  struct Node {
    uint32_t lo = 0, hi = 0;                // samples [lo, hi)
    uint64_t first = 0, last = 0;           // times_[lo], times_[hi - 1]
    uint32_t first_child = 0;               // children [first_child, first_child + children)
    uint32_t children = 0;                  // 0: a leaf
    uint32_t top_begin = 0, top_end = 0;    // its list in top_
    uint32_t head_begin = 0, head_end = 0;  // a long list's head in heads_ (else empty)
    uint32_t least = 0;                     // the least count in its list
    uint64_t other = 0;
    bool listed = false;  // an inner node with a list (else its children answer)
    bool leaf() const { return children == 0; }
  };
  using Counts = std::vector<std::pair<uint32_t, uint64_t>>;
  struct Query;

  // Each long list's head (its most frequent types, by count), and each
  // list's least count: from the lists, after Build or Decode.
  void MakeHeads();

  // Lays out the nodes over the samples (the shape alone).
  void Shape();
  // Fills the inner nodes' lists (into `lists`, by node) from the samples,
  // on up to `spare` more threads; returns node's counts.
  Counts Fill(uint32_t node, std::vector<Counts>* lists, unsigned spare);
  // A node's list from its counts `all` (in order of type) over `total`
  // samples, into `list`, and its `other`; false when it keeps none.
  static bool KeepList(const Counts& all, uint64_t total, double keep_fraction, Counts* list,
                       uint64_t* other);
  static Counts MergeCounts(const Counts& a, const Counts& b);
  void Visit(uint32_t node, Query* q) const;
  // A merged node's list into the tally: its head's first `top` entries
  // when that is shorter, else all of it; adds to the bound.
  void Merge(const Node& nd, Query* q) const;

  friend class TimeTreeBuilder;

  int version_ = 2;  // the shape: 1 top down (files of before), 2 bottom up
  TimeTreeOptions options_;
  std::vector<uint64_t> times_;
  std::vector<uint32_t> types_;
  std::vector<Node> nodes_;
  std::vector<std::pair<uint32_t, uint32_t>> top_;    // (type, count), per node in order of type
  std::vector<std::pair<uint32_t, uint32_t>> heads_;  // the heads, each by count, descending
  uint32_t max_type_ = 0;
};

// A time tree grown as samples arrive, in order of time: each leaf and
// inner node gets its list the moment its last sample comes, and Tree()
// gives, at any moment, the tree of the samples so far, the same as
// TimeTree::Build of them.
class TimeTreeBuilder {
 public:
  explicit TimeTreeBuilder(const TimeTreeOptions& options = {}) : options_(options) {}

  // A sample no earlier than the one before it, of a type below
  // kMaxTimeTreeTypes.
  [[nodiscard]] Status Append(uint64_t time, uint32_t type);

  size_t samples() const { return times_.size(); }
  uint64_t last_time() const { return times_.empty() ? 0 : times_.back(); }
  const std::vector<uint64_t>& times() const { return times_; }
  const std::vector<uint32_t>& types() const { return types_; }
  // Complete inner nodes, their lists made.
  size_t complete_nodes() const;

  // The counts of a run of samples' types, in order of type (a leaf's).
  static std::vector<std::pair<uint32_t, uint64_t>> CountsOf(const uint32_t* types, size_t n);

  // The tree of the samples so far; what is not complete yet (the last
  // node of each level) gets its list now.
  [[nodiscard]] StatusOr<TimeTree> Tree() const;

 private:
  using Counts = std::vector<std::pair<uint32_t, uint64_t>>;
  // A complete inner node: its list and what it left out.
  struct Done {
    Counts list;
    uint64_t other = 0;
    bool listed = false;
  };
  // The level-`level` nodes complete so far have just gained one: its
  // counts go to its parent's, which may be complete in turn.
  void Completed(size_t level, Counts counts);

  TimeTreeOptions options_;
  std::vector<uint64_t> times_;
  std::vector<uint32_t> types_;
  // By level (0: leaves): each complete node's list (inner levels only),
  // and the counts of the complete nodes whose parent is not yet.
  std::vector<std::vector<Done>> done_;
  std::vector<std::vector<Counts>> waiting_;
};

// The same report by scanning every sample: the reference, and the
// benchmark's peer.
RangeCounts ScanRange(const std::vector<uint64_t>& times, const std::vector<uint32_t>& types,
                      uint64_t t1, uint64_t t2);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_TIME_TREE_H_
