// Which APIs of a module got slower or faster between two versions or two
// date ranges, on statistical evidence: per API, the one-sided
// permutation test of common/statistics/permutation_test.h in each direction
// (two-sided p = twice the smaller, at most 1), Benjamini-Hochberg across
// APIs, and floors on the effect (relative, and for wall time absolute),
// as fieldprof check does. The same function serves the CLI and the
// aggregator, so both say the same.
#ifndef FIELDPROF_COMMON_MODEL_MODULE_DIFF_H_
#define FIELDPROF_COMMON_MODEL_MODULE_DIFF_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/model/module_model.h"
#include "common/statistics/permutation_test.h"

namespace fieldprof {

struct DiffOptions {
  int metric = 0;  // index into ApiCost::metric (0: wall time)
  PermutationOptions test;
  double fdr = 0.05;
  bool dependent = false;    // Benjamini-Yekutieli
  double min_effect = 0.05;  // |after / before - 1| of the statistic
  double min_diff_ns = 10;   // wall time: |after - before| of the statistic, and > 2 x resolution
  uint64_t min_calls = 30;   // on each side
};

struct ApiDiff {
  std::string symbol, demangled;
  Histogram before, after;
  double stat_before = 0, stat_after = 0;  // the statistic (mean or quantile)
  double change = 0;                       // stat_after / stat_before - 1
  double p_slower = 1, p_faster = 1, p = 1, adjusted = 1;
  uint64_t resolution_ns = 0;
  enum Verdict { kSame, kSlower, kFaster } verdict = kSame;
};

struct ModuleDiff {
  std::vector<ApiDiff> apis;  // in both; slower first (by change), then faster, then the rest
  std::vector<std::string> only_before, only_after;
  size_t too_few_calls = 0;
};

ModuleDiff DiffModules(const ModuleModel& before, const ModuleModel& after, const DiffOptions& o);

// Sets each entry's `adjusted` from its `p` (Benjamini-Hochberg, or with
// `dependent` Benjamini-Yekutieli), as every diff does across its entries.
template <typename T>
void AdjustAcross(std::vector<T>* v, bool dependent) {
  std::vector<double> p;
  p.reserve(v->size());
  for (const T& x : *v) p.push_back(x.p);
  const std::vector<double> adj = BenjaminiHochberg(p, dependent);
  for (size_t i = 0; i < v->size(); ++i) (*v)[i].adjusted = adj[i];
}

// The order a diff lists its entries in (APIs, stacks: anything with a
// `verdict` and a `change`): slower first, then faster, then the rest,
// each by the size of the change.
template <typename T>
void SortByVerdict(std::vector<T>* v) {
  auto rank = [](const T& x) {
    return x.verdict == ApiDiff::kSlower ? 0 : x.verdict == ApiDiff::kFaster ? 1 : 2;
  };
  std::stable_sort(v->begin(), v->end(), [&](const T& x, const T& y) {
    if (rank(x) != rank(y)) return rank(x) < rank(y);
    return std::abs(x.change) > std::abs(y.change);
  });
}

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_MODEL_MODULE_DIFF_H_
