// What `fieldprof points` says about recorded runs (points_file.h): per
// tag, the time between consecutive points (from -> to) and each scope's
// duration, per run and across runs, with dirty runs removed; two groups
// of runs compared; the runs as a Chrome trace or a call tree.
//
// The analysis itself (segments, scopes, dirty runs) is common/points/points_analysis.h.
#ifndef FIELDPROF_TOOLS_POINTS_POINTS_REPORT_H_
#define FIELDPROF_TOOLS_POINTS_POINTS_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/points/points_analysis.h"
#include "common/points/points_stacks.h"
#include "tools/tree/call_tree.h"

namespace fieldprof::tools {

// Text tables (per tag; with `per_run`, one row per run and a column per
// segment; with `calls`, each segment's occurrences over the runs kept: the
// count, mean, p50, p90, p99, min and max from the field's log2 histogram,
// and its buckets drawn); the JSON is PointsJson (common/points/points_analysis.h).
std::string PointsText(const std::vector<PointsRun>& runs, const std::vector<TagReport>& tags,
                       bool per_run, bool calls = false);

// The tags, newest first: tag, runs, last seen.
std::string TagsText(const std::vector<TagReport>& tags);

// One group of runs that `points compare` compares: the name it was
// given by (a directory or file), its runs, and their analysis.
struct PointsGroup {
  std::string name;
  std::vector<PointsRun> runs;
  std::vector<TagReport> tags;  // AnalyzePoints(runs)
};

// The segments of `of` that `in` lacks, as "tag: segment".
std::vector<std::string> SegmentsOnlyIn(const std::vector<TagReport>& of,
                                        const std::vector<TagReport>& in);

// Group B against group A (`rows`: ComparePoints of their tags,
// common/points/points_analysis.h) as a table, or its JSON: first each group (its runs, programs
// and the runs removed as dirty), then a row per segment in both; where the calls a run differ,
// what a call costs and the calls a run below it; the segments in one group only; the verdict's
// rule.
std::string PointsCompareText(const PointsGroup& a, const PointsGroup& b,
                              const std::vector<SegmentChange>& rows, const CompareOptions& o,
                              bool json);

// The programs of a group's runs, each once, sorted.
std::vector<std::string> ProgramsOf(const PointsGroup& g);

// The runs as Chrome trace event JSON (Perfetto, chrome://tracing,
// speedscope): a process per run, points as instant events, scopes as
// B/E pairs; microseconds from each run's start. An event recorded with
// its stack has it in args.stack, frame names outermost first.
std::string PointsChromeTrace(const std::vector<PointsRun>& runs);

// Each run's stacks (points record --stacks) by their key, as frame
// names, outermost first: the last is the function that passed the point.
// Names written into the file when the run ended stand (points_names.h);
// without them, the run's modules are read (the machine it ran on).
std::vector<NamedStacks> NamePointsStacks(const std::vector<PointsRun>& runs);

// Where each point and scope of the runs (of `tag` only, when given) was
// passed: per site, its distinct stacks with their events, most first,
// and for a scope the mean duration of the calls from each stack; a line
// saying so when no run was recorded with stacks.
std::string PointsStacksText(const std::vector<PointsRun>& runs, const std::string& tag);
// The same as JSON: {"runs", "runs_with_stacks", "sites": [{"tag", "name",
// "scope", "events", "without_stack", "stacks": [{"events", "runs",
// "frames" (outermost first), and for a scope "ended", "mean_ns"}]}]}.
std::string PointsStacksJson(const std::vector<PointsRun>& runs, const std::string& tag);

// The runs' scopes as a call tree (nested per thread; a node per
// "tag:name"), summed over runs: calls and time. A scope recorded with
// its stack (record --stacks) sits under that stack's frames, outermost
// first, so the tree shows where each scope's time was spent from; its
// self time is still less the scopes inside it.
CallTree PointsCallTree(const std::vector<PointsRun>& runs);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_POINTS_POINTS_REPORT_H_
