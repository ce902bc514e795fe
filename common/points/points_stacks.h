// Where a tag's points were passed (points record --stacks): each site's
// distinct stacks with their events, as `points show --stacks` and the
// developer's /v1/dev/report give them. The frames' names come from the
// caller: the command names them from the run's modules where the run was
// not named as it ended; an aggregator, which has no run's modules, by
// NameStacksAsRecorded.
#ifndef FIELDPROF_COMMON_POINTS_POINTS_STACKS_H_
#define FIELDPROF_COMMON_POINTS_POINTS_STACKS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/points/points_file.h"

namespace fieldprof {

// A run's stacks by their key, as frame names, outermost first: the last
// is the function that passed the point.
using NamedStacks = std::map<uint32_t, std::vector<std::string>>;

// A run's stacks named by what the file carries (its 'N' names,
// points_format.h) and, for a frame it does not name, module+offset
// (no file is read).
NamedStacks NameStacksAsRecorded(const PointsRun& r);

// Where one site (tag, name, a scope or not) was passed: events by stack
// (frame names, outermost first), and in how many runs.
struct StackedSite {
  std::string tag, name;
  bool scope = false;
  uint64_t events = 0, without = 0;  // without: no stack recorded
  struct Stack {
    std::vector<std::string> frames;
    uint64_t events = 0;
    size_t runs = 0;
    uint64_t ended = 0;  // a scope's: the begins of this stack matched by an end,
    double ns = 0;       // and their durations' sum
  };
  std::vector<Stack> stacks;  // most events first
};

// The sites of `tag` (or all; its runs' stacks named by `named`, a
// NamedStacks per run), and how many runs were recorded with stacks.
std::vector<StackedSite> StackedSites(const std::vector<PointsRun>& runs, const std::string& tag,
                                      const std::vector<NamedStacks>& named, size_t* with_stacks);

// StackedSites as JSON: {runs, runs_with_stacks, runs_named, stackless,
// sites: [{tag, name, scope, events, without_stack, stacks: [{events,
// runs, frames (outermost first), and for a scope ended, mean_ns}]}]}.
std::string StackedSitesJson(const std::vector<PointsRun>& runs, const std::string& tag,
                             const std::vector<NamedStacks>& named);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_POINTS_POINTS_STACKS_H_
