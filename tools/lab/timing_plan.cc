#include "tools/lab/timing_plan.h"

#include <algorithm>
#include <map>
#include <set>

namespace fieldprof::tools {

TimingPlan PlanTiming(const LabGraph& g, const std::vector<uint32_t>& called,
                      uint32_t clique_hint) {
  TimingPlan plan;
  std::map<uint32_t, std::set<uint32_t>> adj;
  std::set<uint32_t> wanted(called.begin(), called.end());
  for (const auto& [pair, calls] : g.pairs()) {
    (void)calls;
    if (pair.first == pair.second) {
      plan.recursive.push_back(pair.first);
      continue;
    }
    if (!wanted.count(pair.first) || !wanted.count(pair.second)) continue;
    adj[pair.first].insert(pair.second);
    adj[pair.second].insert(pair.first);
  }
  std::sort(plan.recursive.begin(), plan.recursive.end());
  plan.recursive.erase(std::unique(plan.recursive.begin(), plan.recursive.end()),
                       plan.recursive.end());
  // DSatur: the uncoloured API whose neighbours use the most colours goes
  // next (ties: most neighbours, then the lowest index, for a stable plan),
  // into the lowest colour none of its neighbours has.
  std::map<uint32_t, int> colour;
  std::map<uint32_t, std::set<int>> seen;  // colours among each API's neighbours
  while (colour.size() < wanted.size()) {
    uint32_t best = 0;
    bool have = false;
    for (uint32_t a : wanted) {
      if (colour.count(a)) continue;
      if (!have) {
        best = a;
        have = true;
        continue;
      }
      const size_t sa = seen[a].size(), sb = seen[best].size();
      const size_t da = adj[a].size(), db = adj[best].size();
      if (sa > sb || (sa == sb && da > db)) best = a;
    }
    int c = 0;
    while (seen[best].count(c)) ++c;
    colour[best] = c;
    for (uint32_t n : adj[best]) seen[n].insert(c);
    if (static_cast<size_t>(c) >= plan.sets.size()) plan.sets.resize(c + 1);
    plan.sets[c].push_back(best);
  }
  for (auto& s : plan.sets) std::sort(s.begin(), s.end());
  // A lower bound: any pair on one stack needs two sets; the runtime's
  // deepest stack of distinct APIs is a group that needs as many.
  uint32_t bound = wanted.empty() ? 0 : 1;
  for (const auto& [a, n] : adj) {
    if (!n.empty()) bound = std::max<uint32_t>(bound, 2);
  }
  plan.lower_bound = std::max(bound, wanted.empty() ? 0 : clique_hint);
  plan.lower_bound = std::min<uint32_t>(plan.lower_bound, static_cast<uint32_t>(plan.sets.size()));
  return plan;
}

}  // namespace fieldprof::tools
