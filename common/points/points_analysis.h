// Instrumentation points' runs analysed: what `fieldprof
// points` shows and the aggregator serves developers (GET /v1/dev/report).
//
// A run is one process's file. Within a run and a tag, the points
// (FP_POINT) are taken in time order, whatever thread made them, and each
// consecutive pair is a segment "from -> to"; its value in the run is the
// sum over the times it occurs, with how many there were. A scope
// (FP_SCOPE, FP_BEGIN/FP_END) is matched on its thread, inner ones first,
// and its value is the sum of its durations.
//
// Dirty runs: per tag, a run's span (its first event of the tag to its
// last) is scored with the modified Z-score of Iglewicz and Hoaglin,
// M = 0.6745 (x - median) / MAD (MAD 0: 0.7979 (x - median) / mean
// absolute deviation). From 20 runs, runs with |M| > 3.5 are removed, the
// largest first, never more than 5% of the runs. From 5 to 19 runs, at
// most one is: the one of largest |M|, if |M| > 3.5 and its span is at
// least twice the median (a handful of runs gives a MAD too rough for |M|
// alone: on a quiet machine a third of honest sets of 7 had a run past
// 3.5). Below 5 runs, none. Runs past 3.5 that stay are kept and named,
// with why (DirtyRun::kept_why).
#ifndef FIELDPROF_COMMON_POINTS_POINTS_ANALYSIS_H_
#define FIELDPROF_COMMON_POINTS_POINTS_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/points/points_file.h"
#include "common/statistics/histogram.h"

namespace fieldprof {

struct SegmentStats {
  std::string from, to;  // a scope: its name in `from`, `to` empty
  bool scope = false;
  std::vector<double> per_run;     // ns, per kept run of the tag (NaN: not in that run)
  std::vector<uint64_t> count;     // occurrences, per kept run
  std::vector<double> removed_ns;  // per run removed as dirty (TagReport::removed; NaN: not in it)
  double mean = 0, median = 0, min = 0, max = 0;  // of its per-run sums, over the runs it is in
  double per_call = 0;                            // its mean duration, over all its occurrences
  // Every occurrence's duration (ns) over the kept runs, in the field's
  // log2 histogram, so its quantiles (from bucket means) are read as the
  // field's are (`points show --calls`, "each" in the JSON).
  Histogram each;
  size_t runs = 0;           // kept runs it is in
  std::string Name() const;  // "a -> b", or "name (scope)"
};

struct DirtyRun {
  size_t run;  // index into the runs analysed
  double span_ns, z;
  const char* kept_why = "";  // a run past 3.5 that stays: why ("over the 5% cap", ...)
};

// The rule above: removal from this many runs; below 20, a removed run's
// span is at least kSmallSetRatio times the median.
inline constexpr size_t kDirtyMinRuns = 5, kDirtyCapRuns = 20;
inline constexpr double kSmallSetRatio = 2.0;

struct TagReport {
  std::string tag;
  std::vector<size_t> runs;     // kept runs with this tag (indexes into the runs)
  std::vector<double> span_ns;  // per kept run
  std::vector<DirtyRun> removed, kept_outliers;
  size_t removable = 0;                // the most runs the rule lets go (0 below 5 runs)
  std::vector<SegmentStats> segments;  // in the order they first occur
  int64_t last_unix_ns = 0;            // when the newest run with it began
};

struct PointsOptions {
  std::string tag;  // only this tag ("": all)
  bool remove_dirty = true;
};

std::vector<TagReport> AnalyzePoints(const std::vector<PointsRun>& runs, const PointsOptions& o);

// One occurrence of a segment or a scope in one run: where it began and
// ended (ns since the run began) and on which threads.
struct SegmentOccurrence {
  std::string tag, segment;  // segment: SegmentStats::Name(), "a -> b" or "name (scope)"
  bool scope = false;
  uint32_t begin_tid = 0, end_tid = 0;
  int64_t begin_ns = 0, end_ns = 0;
};

// Every occurrence of a run's segments and scopes, in the order they end.
std::vector<SegmentOccurrence> OccurrencesOf(const PointsRun& run);

// Modified Z-scores of `x` (see above); all 0 when they cannot be formed.
std::vector<double> ModifiedZ(const std::vector<double>& x);

// The runs and their tags' segments as JSON (`fieldprof points show
// --json`, the points page, GET /v1/dev/report).
std::string PointsJson(const std::vector<PointsRun>& runs, const std::vector<TagReport>& tags);

// Group B against group A, per segment present in both: means, a
// permutation test over the per-run values and Benjamini-Hochberg across
// segments; a change is significant when q <= fdr and it is at least
// min_effect of A's mean (`fieldprof points compare`, GET /v1/dev/compare).
// The same per call beside it (SegmentChange::calls_a and on).
struct CompareOptions {
  double fdr = 0.05, min_effect = 0.05;
};
struct SegmentChange {
  std::string tag, segment;
  double mean_a = 0, mean_b = 0, p = 1, q = 1;
  size_t runs_a = 0, runs_b = 0;
  bool significant = false;
  // Per call, for when a run makes more or fewer of them in B (a scope in
  // a loop over more items): the mean calls a run, the mean duration of a
  // call (a group's durations over its calls), and the same test over the
  // runs' own means a call, q across the segments' per-call tests. A
  // change is significant as above.
  double calls_a = 0, calls_b = 0;
  double per_call_a = 0, per_call_b = 0, per_call_p = 1, per_call_q = 1;
  bool per_call_significant = false;
  // The per-run values tested, one per kept run that has the segment (not
  // in the JSON; the comparison's page draws them).
  std::vector<double> values_a, values_b;
  // Whether the mean calls a run differ by more than 1%: then the per-run
  // means above also count calls, and the per-call figures tell the two
  // apart.
  bool CallsDiffer() const;
};
std::vector<SegmentChange> ComparePoints(const std::vector<TagReport>& a,
                                         const std::vector<TagReport>& b, const CompareOptions& o);
// The rows as a JSON array.
std::string CompareJson(const std::vector<SegmentChange>& rows);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_POINTS_POINTS_ANALYSIS_H_
