#include "common/model/module_diff.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace fieldprof {
namespace {

double Statistic(const Histogram& h, const PermutationOptions& o) {
  return o.statistic == PermutationOptions::kMean ? h.Mean() : h.Quantile(o.quantile);
}

}  // namespace

ModuleDiff DiffModules(const ModuleModel& before, const ModuleModel& after, const DiffOptions& o) {
  ModuleDiff d;
  std::map<std::string, const ApiCost*> b, a;
  for (const ApiCost& x : before.apis) b[x.symbol] = &x;
  for (const ApiCost& x : after.apis) a[x.symbol] = &x;
  for (const auto& [s, x] : b) {
    if (!a.count(s)) d.only_before.push_back(s);
  }
  for (const auto& [s, y] : a) {
    auto it = b.find(s);
    if (it == b.end()) {
      d.only_after.push_back(s);
      continue;
    }
    const Histogram& hb = it->second->metric[o.metric];
    const Histogram& ha = y->metric[o.metric];
    if (hb.count() < o.min_calls || ha.count() < o.min_calls) {
      ++d.too_few_calls;
      continue;
    }
    ApiDiff x;
    x.symbol = s;
    x.demangled = y->demangled;
    x.before = hb;
    x.after = ha;
    x.stat_before = Statistic(hb, o.test);
    x.stat_after = Statistic(ha, o.test);
    x.change = x.stat_before > 0 ? x.stat_after / x.stat_before - 1 : 0;
    x.p_slower = GreaterCostTest(ha, hb, o.test).p_value;
    x.p_faster = GreaterCostTest(hb, ha, o.test).p_value;
    x.p = std::min(1.0, 2 * std::min(x.p_slower, x.p_faster));
    x.resolution_ns = std::max(it->second->resolution_ns, y->resolution_ns);
    d.apis.push_back(std::move(x));
  }
  AdjustAcross(&d.apis, o.dependent);
  for (ApiDiff& x : d.apis) {
    const double diff = x.stat_after - x.stat_before;
    const double floor_ns = DifferenceFloor(o.metric == 0, x.resolution_ns, o.min_diff_ns);
    const bool large = std::fabs(x.change) >= o.min_effect && std::fabs(diff) > floor_ns;
    if (x.adjusted <= o.fdr && large) x.verdict = diff > 0 ? ApiDiff::kSlower : ApiDiff::kFaster;
  }
  SortByVerdict(&d.apis);
  return d;
}

}  // namespace fieldprof
