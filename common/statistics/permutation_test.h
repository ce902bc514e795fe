// "Does this API cost me more than it costs the field?": a
// one-sided permutation test on two log2-bucketed samples, and the
// multiple-testing corrections across APIs.
//
// The samples are Histograms. A call in bucket b of a sample is taken at
// that sample's bucket mean (the bucket's exact sum over its count), so a
// sample is a multiset over at most 2 x 65 distinct values (zero and 64
// buckets, per sample). A relabelling of the pooled calls then draws how
// many of each value the "local" side gets: a multivariate hypergeometric
// draw, one conditional hypergeometric per value, so a resample costs
// O(buckets) whatever the number of calls.
//
//   PermutationOptions o;             // mean, 9,999 resamples, seed 1
//   PermutationResult r = GreaterCostTest(local, field, o);
//   std::vector<double> q = BenjaminiHochberg(p_values);   // adjusted
#ifndef FIELDPROF_COMMON_STATISTICS_PERMUTATION_TEST_H_
#define FIELDPROF_COMMON_STATISTICS_PERMUTATION_TEST_H_

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "common/statistics/histogram.h"

namespace fieldprof {

struct PermutationOptions {
  // The statistic: local minus field of the mean, or of a quantile.
  enum Statistic { kMean, kQuantile } statistic = kMean;
  double quantile = 0.5;  // for kQuantile
  int resamples = 9999;
  uint64_t seed = 1;  // the same seed gives the same p-value
  // Besag and Clifford's sequential stop: once this many resamples reach
  // the observed statistic, p = that count / resamples drawn (a large p is
  // known long before `resamples`). 0: always draw them all.
  int stop_after = 0;
};

struct PermutationResult {
  double observed = 0;  // the statistic on the samples as they are
  // (1 + resamples whose statistic >= observed) / (1 + resamples): the
  // chance of a difference at least this large if the labels did not
  // matter (stopped early: stop_after / resamples drawn). 1 when either
  // sample is empty.
  double p_value = 1;
  int resamples = 0;
};

// H1: the local sample's statistic is greater than the field's.
PermutationResult GreaterCostTest(const Histogram& local, const Histogram& field,
                                  const PermutationOptions& options);

// The statistic named `name`: "mean", or a quantile "pNN" (p50, p90,
// p99.9). InvalidArgument for anything else; `o` is left as it was.
[[nodiscard]] Status ParseStatistic(std::string_view name, PermutationOptions* o);

// Two-sided: do `a` and `b` (per-run values, one per run) differ in mean?
// The statistic is |mean(a) - mean(b)|; p counts the relabellings of the
// pooled runs whose statistic reaches the observed one. Every relabelling
// when there are at most `options.resamples` of them (5 runs against 5:
// 252, so p is exact and at least 2/252), else `options.resamples` drawn
// at random with `options.seed`. 1 when either side is empty.
PermutationResult TwoSampleMeanTest(const std::vector<double>& a, const std::vector<double>& b,
                                    const PermutationOptions& options);

// The least p-value TwoSampleMeanTest(a, b, options) can give for these
// pooled values under any labelling: the share of labellings that reach
// the largest statistic (the "a" side holding the largest values, or the
// smallest), and no less than 1 / (1 + resamples). 1 when every labelling
// gives the same statistic. A node seen in one run
// of ten can never differ significantly, whatever the labels say.
double LeastAchievableP(const std::vector<double>& a, const std::vector<double>& b,
                        const PermutationOptions& options);

// Adjusted p-values (same order as `p`): Benjamini-Hochberg step-up, or
// with `dependent` the Benjamini-Yekutieli variant, valid under any
// dependence between the tests. An API has evidence at false discovery
// rate q when its adjusted p-value is <= q.
std::vector<double> BenjaminiHochberg(const std::vector<double>& p, bool dependent = false);

// Benjamini-Hochberg for discrete tests at false discovery rate `fdr`
// (Gilbert's Tarone-BH, 2005): a test whose least achievable p-value
// (`least`, same order as `p`) cannot pass at the level its count would
// give is left out of the count, so tests that could never be significant
// do not dilute those that can. The smallest K with at most K tests whose
// least p is at most fdr / K; those tests are adjusted by BH among
// themselves, the rest get 1 (and false in `counted`, when given). FDR is
// still controlled when `least` depends on the pooled data only (a
// permutation test's labels are what is tested).
std::vector<double> BenjaminiHochbergDiscrete(const std::vector<double>& p,
                                              const std::vector<double>& least, double fdr,
                                              std::vector<bool>* counted = nullptr);

// The least difference of a wall-time statistic that counts as an effect
// (fieldprof check and diff): each process takes its own calibrated probe
// cost off its durations, and two calibrations differ by up to the probe's
// spread (the resolution), so two sides by up to twice it; and timing one
// function two ways (the lab, the field runtime) differs by ~10 ns
// (docs/benchmarks-history.md): the larger of `min_diff_ns` and twice
// `resolution_ns`. 0 for other metrics (counted exactly).
double DifferenceFloor(bool wall_time, uint64_t resolution_ns, double min_diff_ns);

// One draw from the hypergeometric distribution: of `sample` items taken
// without replacement from `good` + `bad`, how many are good. Exact
// (inversion for small samples, Stadlober's ratio-of-uniforms otherwise).
int64_t Hypergeometric(std::mt19937_64& rng, int64_t good, int64_t bad, int64_t sample);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_STATISTICS_PERMUTATION_TEST_H_
