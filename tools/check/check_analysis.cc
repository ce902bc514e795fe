#include "tools/check/check_analysis.h"

#include <algorithm>

namespace fieldprof::tools {

int PlatformCloseness(const wire::Platform& a, const wire::Platform& b) {
  if (a.arch() != b.arch()) return 0;
  if (a.cpu_vendor() != b.cpu_vendor()) return 1;
  return a.cpu_family() == b.cpu_family() ? 3 : 2;
}

namespace {

// The test of one API against the closest platform level with data;
// false when the field has none.
bool Compare(const ApiCosts& api, const AnalysisOptions& o, Finding* f) {
  int level = kPlatformLevels - 1;
  while (level > 0 && api.field.by_level[level].empty()) --level;
  if (api.field.by_level[level].empty()) return false;
  const LocalCost& l = api.local;
  f->module = l.module;
  f->symbol = l.symbol;
  f->file = l.file;
  f->local = l.histogram;
  f->local_runs = l.runs;
  f->field = api.field.by_level[level];
  f->field_runs = api.field.runs_by_level[level];
  f->field_suspect = api.field.suspect;
  f->match = level;
  f->test = GreaterCostTest(f->local, f->field, o.test);
  f->excess = (f->local.Mean() - f->field.Mean()) * static_cast<double>(f->local.count());
  if (o.wall_time) f->resolution_ns = std::max(l.resolution_ns, api.field.resolution_ns);
  return true;
}

// Adjusted p-values, then evidence: within the rate and past both floors.
void Judge(const AnalysisOptions& o, CheckResult* r) {
  std::vector<double> p;
  for (const Finding& f : r->findings) p.push_back(f.test.p_value);
  const std::vector<double> adjusted = BenjaminiHochberg(p, o.dependent);
  for (size_t i = 0; i < r->findings.size(); ++i) {
    Finding& f = r->findings[i];
    f.adjusted = adjusted[i];
    const double field_stat = o.test.statistic == PermutationOptions::kMean
                                  ? f.field.Mean()
                                  : f.field.Quantile(o.test.quantile);
    const double floor_ns = DifferenceFloor(o.wall_time, f.resolution_ns, o.min_diff_ns);
    const bool significant = f.adjusted <= o.fdr;
    const bool above = f.test.observed > floor_ns;
    const bool large = f.test.observed >= o.min_effect * field_stat;
    f.evidence = significant && above && large;
    r->under_resolution += significant && !above;
    r->under_effect += significant && above && !large;
    if (f.evidence && o.fail_excess >= 0 && f.excess >= o.fail_excess) r->fail = true;
    if (f.evidence && o.fail_p >= 0 && f.adjusted <= o.fail_p) r->fail = true;
  }
}

}  // namespace

CheckResult AnalyzeCosts(const std::vector<ApiCosts>& apis, const AnalysisOptions& o) {
  CheckResult r;
  for (const ApiCosts& api : apis) {
    if (static_cast<double>(api.local.histogram.count()) < o.min_calls) {
      ++r.few_calls;
      continue;
    }
    Finding f;
    if (!Compare(api, o, &f)) {
      ++r.no_field;
      continue;
    }
    r.findings.push_back(std::move(f));
  }
  Judge(o, &r);
  std::stable_sort(r.findings.begin(), r.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.excess > b.excess; });
  return r;
}

}  // namespace fieldprof::tools
