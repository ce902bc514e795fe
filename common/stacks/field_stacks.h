// A module's field stacks: where CPU time goes inside a library, summed
// over the volunteers' measured runs (stack series, metric stack_cpu_ns;
// docs/field-stacks.md). One model under every output: /v1/stacks, the
// dashboard's and the vendor report's flame graph, `fieldprof stacks`, the
// IDE's hover, `fieldprof diff --versions`.
//
//   std::vector<SeriesSum> series = ...;  // the module's records
//   FieldStacks s = BuildFieldStacks("libsqlite3.so.0", series, {});
//   s.stacks[0].frames, s.stacks[0].ns / s.total_ns
#ifndef FIELDPROF_COMMON_STACKS_FIELD_STACKS_H_
#define FIELDPROF_COMMON_STACKS_FIELD_STACKS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/model/module_diff.h"
#include "common/model/module_model.h"
#include "common/statistics/histogram.h"

namespace fieldprof {

// The frames of a stack series' symbol, outermost first.
std::vector<std::string> SplitStack(std::string_view symbol);

// Whether a frame is a mark (the last frame: where the time went on, or
// what was folded: "[libc.so.6]", "[program]", "[other]", ...).
bool IsStackMark(std::string_view frame);

struct FieldStack {
  std::string symbol;               // the stack series' symbol: the frames joined
  std::vector<std::string> frames;  // outermost first (empty: see split_frames)
  uint64_t ns = 0;                  // CPU time with this stack, all runs
  uint64_t runs = 0;                // runs that had it
  uint64_t machines = 0;            // the most of any series summed into it (estimate)
  // The CPU time of each run that had it (for a diff), or null where the
  // builder was told not to keep it (a histogram is 3 KB; an answer of
  // 100,000 stacks needs none).
  std::shared_ptr<Histogram> per_run;
};

struct FieldStacks {
  std::string module;
  std::vector<std::string> versions;  // that contributed, sorted
  std::vector<FieldStack> stacks;     // the most CPU time first, then by frames (Finish)
  uint64_t total_ns = 0;
  uint64_t machines = 0;  // the most of any series
};

// Sums stack series one by one into a module's FieldStacks: what a reader
// streaming a store's series uses, without a SeriesSum per series.
class FieldStacksBuilder {
 public:
  // `split_frames` false leaves each stack's frames empty (its symbol
  // holds them): what FieldStacksJson and FieldStacksFolded need, without
  // an allocation per frame (an answer of 100,000 stacks).
  FieldStacksBuilder(std::string module, bool keep_per_run, bool split_frames = true);
  // One stack series of the module (the caller filtered it).
  void Add(const std::string& symbol, const std::string& version, const Histogram& h, uint64_t runs,
           uint64_t machines);
  // The same, keeping `symbol` itself for a new stack (a walk's key, not
  // copied).
  void Add(std::string&& symbol, const std::string& version, const Histogram& h, uint64_t runs,
           uint64_t machines);
  // The stacks, the most CPU time first; past the `dearest` first (what an
  // answer of at most that many shows) in no order.
  FieldStacks Finish(size_t dearest = SIZE_MAX);

 private:
  // `take`, if given, is `symbol`, to be moved into a new stack.
  void AddAs(const std::string& symbol, std::string* take, const std::string& version,
             const Histogram& h, uint64_t runs, uint64_t machines);
  FieldStack* NewStack(const std::string& symbol, std::string* take, bool index);

  FieldStacks out_;
  bool keep_per_run_, split_frames_;
  std::deque<FieldStack> stacks_;  // stable: by_symbol_ views their symbols
  bool in_order_ = true;           // every symbol so far after the one before
  // Once a symbol came out of order: every stack by its symbol.
  std::unordered_map<std::string_view, FieldStack*> by_symbol_;
  std::set<std::string> versions_;
  std::string last_version_;
};

// The module's stack series that `filter` matches (every version unless it
// names one), summed per stack over versions and platforms, each with its
// runs' histogram.
FieldStacks BuildFieldStacks(const std::string& module, const std::vector<SeriesSum>& series,
                             const ModelFilter& filter);

// Only the stacks whose outermost frame is `api` (what a call of that API
// spends inside the module).
FieldStacks StacksUnder(const FieldStacks& s, const std::string& api);

// The frames under `api` that hold the most of its time, inclusive (a
// frame counted once per stack it is on), the dearest first: what the
// IDE's hover lists.
struct FrameShare {
  std::string frame;
  uint64_t ns = 0;
  double share = 0;  // of the API's sampled time
};
std::vector<FrameShare> TopFramesUnder(const FieldStacks& s, const std::string& api, size_t n);

// The stacks as an indented tree, outermost frames first, children by
// time: a line per frame with its share of the whole and its time, at
// most `lines` lines, frames under `min_share` of the whole left out.
std::string FieldStacksText(const FieldStacks& s, size_t lines, double min_share);

// {"module", "versions", "total_ns", "machines", "stacks": [{"frames",
// "ns", "runs", "machines"}], "stacks_total", "truncated"}: at most `limit`
// stacks (the dearest), the rest counted.
std::string FieldStacksJson(const FieldStacks& s, size_t limit);

// The folded format flame graph tools read (flamegraph.pl, speedscope,
// inferno): "frame;frame;frame NS" per line, the dearest first.
std::string FieldStacksFolded(const FieldStacks& s);

// Which stacks got slower or faster between two sides (two versions): per
// stack, its CPU time per run that had it, before against after, tested
// as common/model/module_diff.h tests an API (a permutation test each way on the
// runs' log2 buckets, Benjamini-Hochberg across stacks, floors on the
// effect); `o.min_calls` is the least runs a stack needs on each side.
// A function that got slower shows as the stacks it is the innermost
// frame of: the time spent in it, not passed on.
struct StackDiff {
  std::vector<std::string> frames;
  Histogram before, after;  // per run
  uint64_t ns_before = 0, ns_after = 0;
  double mean_before = 0, mean_after = 0, change = 0;
  double p = 1, adjusted = 1;
  ApiDiff::Verdict verdict = ApiDiff::kSame;
};
struct FieldStacksDiff {
  std::vector<StackDiff> stacks;  // on both sides: slower first, then faster, then the rest
  size_t only_before = 0, only_after = 0, too_few_runs = 0;
};
FieldStacksDiff DiffFieldStacks(const FieldStacks& before, const FieldStacks& after,
                                const DiffOptions& o);

// Both sides as difffolded.pl writes them ("frames BEFORE_NS AFTER_NS"),
// for a differential flame graph (flamegraph.pl, `fieldprof tree`).
std::string FieldStacksDiffFolded(const FieldStacks& before, const FieldStacks& after);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_STACKS_FIELD_STACKS_H_
