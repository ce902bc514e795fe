// The anomaly check's statistics: the hypergeometric draws,
// the permutation test against scipy's own on the same samples, its
// calibration (A/A trials alarm at no more than the nominal rate, shifts are
// found), and the Benjamini-Hochberg/Yekutieli corrections.
#include "common/statistics/permutation_test.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

// Runs tests/common/statistics/SCRIPT (scipy) on `cases` (JSON) and returns the
// p-values it prints, one per case.
std::vector<double> Scipy(const std::string& script, const std::string& cases) {
  testing::TempDir dir;
  {
    std::ofstream f(dir.File("cases.json"));
    f << cases;
  }
  const std::string cmd = "/usr/bin/python3 " FIELDPROF_SOURCE_DIR "/tests/common/statistics/" +
                          script + " " + dir.File("cases.json") + " > " + dir.File("scipy.json");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "scipy (python3-scipy, deploy/install-deps.sh)";
  std::ifstream in(dir.File("scipy.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& ch : text) {
    if (ch == '[' || ch == ']' || ch == ',') ch = ' ';
  }
  std::istringstream values(text);
  std::vector<double> p;
  for (double v; values >> v;) p.push_back(v);
  return p;
}

TEST(HypergeometricTest, DrawsHaveTheDistributionsMeanAndVariance) {
  std::mt19937_64 rng(5);
  struct Case {
    int64_t good, bad, sample;
  };
  // Inversion (few drawn, few left), ratio of uniforms, and counts of a
  // field's size.
  for (const Case& c :
       {Case{30, 70, 5}, Case{30, 70, 96}, Case{300, 700, 250}, Case{7, 1000000, 400000},
        Case{2000000000, 5000000000, 1000}, Case{123456789, 987654321, 500000000}}) {
    const double n = static_cast<double>(c.good + c.bad);
    const double mean = static_cast<double>(c.sample) * static_cast<double>(c.good) / n;
    const double var =
        mean * (static_cast<double>(c.bad) / n) * (n - static_cast<double>(c.sample)) / (n - 1);
    const int draws = 20000;
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < draws; ++i) {
      const int64_t k = Hypergeometric(rng, c.good, c.bad, c.sample);
      ASSERT_GE(k, std::max<int64_t>(0, c.sample - c.bad));
      ASSERT_LE(k, std::min(c.sample, c.good));
      sum += static_cast<double>(k);
      sum_sq += static_cast<double>(k) * static_cast<double>(k);
    }
    const double m = sum / draws, v = sum_sq / draws - m * m;
    EXPECT_NEAR(m, mean, 5 * std::sqrt(var / draws) + 1e-9)
        << c.good << " " << c.bad << " " << c.sample;
    EXPECT_NEAR(v, var, 0.1 * var + 1e-9) << c.good << " " << c.bad << " " << c.sample;
  }
}

// The draws against the exact probabilities: a chi-square test of 200,000
// draws (bins with fewer than 5 expected merged into the tails), for the
// ratio-of-uniforms path and for inversion.
TEST(HypergeometricTest, DrawsFollowTheExactProbabilities) {
  std::mt19937_64 rng(17);
  struct Case {
    int64_t good, bad, sample;
  };
  for (const Case& c :
       {Case{300, 700, 250}, Case{50, 60, 40}, Case{5000, 20000, 9000}, Case{40, 60, 7}}) {
    auto log_choose = [](int64_t n, int64_t k) {
      return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
             std::lgamma(static_cast<double>(n - k) + 1);
    };
    const int64_t lo = std::max<int64_t>(0, c.sample - c.bad), hi = std::min(c.sample, c.good);
    std::vector<double> pmf;
    for (int64_t k = lo; k <= hi; ++k) {
      pmf.push_back(std::exp(log_choose(c.good, k) + log_choose(c.bad, c.sample - k) -
                             log_choose(c.good + c.bad, c.sample)));
    }
    const int draws = 200000;
    std::vector<double> seen(pmf.size());
    for (int i = 0; i < draws; ++i) seen[Hypergeometric(rng, c.good, c.bad, c.sample) - lo] += 1;
    // Bins: merge from each end until 5 expected.
    std::vector<std::pair<double, double>> bins;  // expected, seen
    double e = 0, o = 0;
    for (size_t k = 0; k < pmf.size(); ++k) {
      e += pmf[k] * draws;
      o += seen[k];
      if (e >= 5) {
        bins.emplace_back(e, o);
        e = o = 0;
      }
    }
    if (!bins.empty()) bins.back().first += e, bins.back().second += o;
    double chi2 = 0;
    for (const auto& [ex, ob] : bins) chi2 += (ob - ex) * (ob - ex) / ex;
    // The 0.999 quantile of chi-square with df degrees (Wilson-Hilferty).
    const double df = static_cast<double>(bins.size() - 1);
    const double z = 3.090232;
    const double crit = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
    EXPECT_LT(chi2, crit) << c.good << " " << c.bad << " " << c.sample << ": " << bins.size()
                          << " bins";
  }
}

Histogram Draw(std::mt19937_64& rng, int n, double mu, double sigma, double scale = 1,
               int zeros = 0) {
  std::lognormal_distribution<double> d(mu, sigma);
  Histogram h;
  for (int i = 0; i < n; ++i) h.Record(static_cast<uint64_t>(scale * d(rng)));
  h.RecordZeros(static_cast<uint64_t>(zeros));
  return h;
}

// A histogram as [value, count] cells, each call at its bucket's mean.
std::string Cells(const Histogram& h) {
  std::ostringstream o;
  o.precision(17);
  o << "[";
  bool first = true;
  if (h.zero_count() > 0) {
    o << "[0, " << h.zero_count() << "]";
    first = false;
  }
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& b = h.bucket(i);
    if (b.count == 0) continue;
    o << (first ? "" : ", ") << "[" << static_cast<double>(b.sum) / static_cast<double>(b.count)
      << ", " << b.count << "]";
    first = false;
  }
  return o.str() + "]";
}

TEST(PermutationTest, AgreesWithScipyOnTheSameSamples) {
  struct Case {
    Histogram local, field;
    PermutationOptions o;
  };
  std::mt19937_64 rng(11);
  std::vector<Case> cases;
  auto add = [&](Histogram l, Histogram f, PermutationOptions::Statistic s, double q) {
    PermutationOptions o;
    o.statistic = s;
    o.quantile = q;
    o.resamples = 4999;
    o.seed = 100 + cases.size();
    cases.push_back({std::move(l), std::move(f), o});
  };
  // The same distribution; a 10% and a 25% slower local; quantiles; zeros
  // (calls under the timer's resolution); a small local sample; a
  // heavy-tailed field.
  add(Draw(rng, 400, 8, 1), Draw(rng, 3000, 8, 1), PermutationOptions::kMean, 0);
  add(Draw(rng, 400, 8, 1, 1.10), Draw(rng, 3000, 8, 1), PermutationOptions::kMean, 0);
  add(Draw(rng, 400, 8, 1, 1.25), Draw(rng, 3000, 8, 1), PermutationOptions::kMean, 0);
  add(Draw(rng, 400, 8, 1, 1.15), Draw(rng, 3000, 8, 1), PermutationOptions::kQuantile, 0.5);
  add(Draw(rng, 400, 8, 1), Draw(rng, 3000, 8, 1), PermutationOptions::kQuantile, 0.9);
  add(Draw(rng, 300, 3, 1.5, 1, 200), Draw(rng, 2000, 3, 1.5, 1, 1000), PermutationOptions::kMean,
      0);
  add(Draw(rng, 25, 10, 0.5, 1.2), Draw(rng, 2000, 10, 0.5), PermutationOptions::kMean, 0);
  add(Draw(rng, 500, 6, 2), Draw(rng, 3000, 6, 2.2), PermutationOptions::kMean, 0);

  std::ostringstream f;
  f << "[";
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    f << (i ? ", " : "") << "{\"local\": " << Cells(c.local) << ", \"field\": " << Cells(c.field)
      << ", \"statistic\": "
      << (c.o.statistic == PermutationOptions::kMean ? std::string("\"mean\"")
                                                     : std::to_string(c.o.quantile))
      << ", \"resamples\": " << c.o.resamples << ", \"seed\": " << c.o.seed << "}";
  }
  f << "]";
  const std::vector<double> scipy = Scipy("permutation_scipy.py", f.str());
  ASSERT_EQ(scipy.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const PermutationResult r = GreaterCostTest(cases[i].local, cases[i].field, cases[i].o);
    // Two Monte-Carlo estimates of one p: 4.5 standard errors of their
    // difference, and a floor for p-values near 0.
    const double p = (r.p_value + scipy[i]) / 2;
    const double se = std::sqrt(std::max(p * (1 - p), 1e-4) * 2.0 / 4999);
    EXPECT_NEAR(r.p_value, scipy[i], 4.5 * se) << "case " << i;
    std::printf("case %zu: p %.4f here, %.4f scipy\n", i, r.p_value, scipy[i]);
  }
}

// Per-run values (fieldprof tree sub): exact over every relabelling when
// there are few (5 against 5: 252), as scipy's exact test; drawn when
// there are many, within Monte-Carlo error of scipy's.
TEST(PermutationTest, TwoSampleMeanTestAgreesWithScipy) {
  struct Case {
    std::vector<double> a, b;
    int resamples;
  };
  std::mt19937_64 rng(4);
  std::normal_distribution<double> noise(100, 10);
  std::vector<Case> cases;
  for (double shift : {0.0, 5.0, 15.0, 40.0}) {
    Case c{{}, {}, 9999};
    for (int i = 0; i < 5; ++i) c.a.push_back(noise(rng) + shift), c.b.push_back(noise(rng));
    cases.push_back(c);
  }
  cases.push_back({{3, 3, 3, 4}, {3, 4, 4, 4, 4}, 9999});  // ties
  cases.push_back({{1, 2, 3}, {10, 11, 12, 13, 14, 15, 16}, 9999});
  Case big{{}, {}, 4999};  // C(24, 12) relabellings: drawn
  for (int i = 0; i < 12; ++i) big.a.push_back(noise(rng) + 6), big.b.push_back(noise(rng));
  cases.push_back(big);
  std::ostringstream f;
  f << "[";
  for (size_t i = 0; i < cases.size(); ++i) {
    f << (i ? ", " : "") << "{\"a\": [";
    for (size_t j = 0; j < cases[i].a.size(); ++j) f << (j ? "," : "") << cases[i].a[j];
    f << "], \"b\": [";
    for (size_t j = 0; j < cases[i].b.size(); ++j) f << (j ? "," : "") << cases[i].b[j];
    f << "], \"resamples\": " << cases[i].resamples << "}";
  }
  f << "]";
  const std::vector<double> scipy = Scipy("two_sample_scipy.py", f.str());
  ASSERT_EQ(scipy.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    PermutationOptions o;
    o.resamples = cases[i].resamples;
    const PermutationResult r = TwoSampleMeanTest(cases[i].a, cases[i].b, o);
    if (i + 1 < cases.size()) {  // exact on both sides
      EXPECT_NEAR(r.p_value, scipy[i], 1e-9) << "case " << i;
    } else {
      const double p = (r.p_value + scipy[i]) / 2;
      EXPECT_NEAR(r.p_value, scipy[i], 4.5 * std::sqrt(std::max(p * (1 - p), 1e-4) * 2.0 / 4999));
    }
    std::printf("two-sample case %zu: p %.5f here, %.5f scipy\n", i, r.p_value, scipy[i]);
  }
  EXPECT_EQ(TwoSampleMeanTest({}, {1, 2}, {}).p_value, 1.0);
}

TEST(PermutationTest, AATrialsAlarmAtNoMoreThanTheNominalRateAndShiftsAreFound) {
  std::mt19937_64 rng(21);
  PermutationOptions o;
  o.resamples = 499;
  const int trials = 400;
  int alarms = 0;
  for (int t = 0; t < trials; ++t) {
    o.seed = 1000 + t;
    const Histogram local = Draw(rng, 200, 9, 1), field = Draw(rng, 2000, 9, 1);
    alarms += GreaterCostTest(local, field, o).p_value <= 0.05;
  }
  // Binomial(400, 0.05): 20 expected; 3 standard deviations above is 33.
  EXPECT_LE(alarms, 33) << alarms << " alarms in " << trials << " A/A trials";
  EXPECT_GE(alarms, 6) << "far fewer alarms than nominal: the test is too conservative";
  int found = 0;
  for (int t = 0; t < 100; ++t) {
    o.seed = 5000 + t;
    found += GreaterCostTest(Draw(rng, 200, 9, 1, 1.4), Draw(rng, 2000, 9, 1), o).p_value <= 0.05;
  }
  EXPECT_GE(found, 90) << "a 40% slower local found in " << found << " of 100";
  // The p50 statistic finds a shift of the median too.
  o.statistic = PermutationOptions::kQuantile;
  o.quantile = 0.5;
  found = 0;
  for (int t = 0; t < 50; ++t) {
    o.seed = 9000 + t;
    found +=
        GreaterCostTest(Draw(rng, 300, 9, 0.5, 2.5), Draw(rng, 2000, 9, 0.5), o).p_value <= 0.05;
  }
  EXPECT_GE(found, 45);
}

TEST(PermutationTest, IsReproducibleAndSaysNothingWithoutData) {
  std::mt19937_64 rng(3);
  const Histogram a = Draw(rng, 300, 7, 1, 1.05), b = Draw(rng, 3000, 7, 1);
  PermutationOptions o;
  o.seed = 42;
  const PermutationResult r1 = GreaterCostTest(a, b, o), r2 = GreaterCostTest(a, b, o);
  EXPECT_EQ(r1.p_value, r2.p_value);
  EXPECT_EQ(r1.resamples, 9999);
  o.seed = 43;
  EXPECT_NE(GreaterCostTest(a, b, o).p_value, r1.p_value);
  // The sequential stop: a large p is known after a few resamples and agrees
  // with the full run; a small one runs them all and is the same.
  PermutationOptions seq = o;
  seq.stop_after = 20;
  const Histogram same = Draw(rng, 300, 7, 1);
  const PermutationResult full = GreaterCostTest(same, b, o), quick = GreaterCostTest(same, b, seq);
  EXPECT_LT(quick.resamples, 400) << quick.p_value;
  EXPECT_NEAR(quick.p_value, full.p_value, 0.25);
  const Histogram slow = Draw(rng, 300, 7, 1, 1.5);
  EXPECT_EQ(GreaterCostTest(slow, b, seq).resamples, 9999);
  EXPECT_EQ(GreaterCostTest(slow, b, seq).p_value, GreaterCostTest(slow, b, o).p_value);
  EXPECT_EQ(GreaterCostTest(Histogram(), b, o).p_value, 1.0);
  EXPECT_EQ(GreaterCostTest(a, Histogram(), o).p_value, 1.0);
  // The observed statistic is the difference of the bucket-mean means.
  EXPECT_NEAR(r1.observed, a.Mean() - b.Mean(), 1e-6 * std::fabs(b.Mean()));
}

TEST(BenjaminiHochbergTest, MatchesTheDefinition) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0, 1);
  for (int round = 0; round < 20; ++round) {
    const size_t m = 1 + rng() % 60;
    std::vector<double> p(m);
    for (double& v : p) v = std::pow(u(rng), 3);  // many small ones
    const std::vector<double> bh = BenjaminiHochberg(p), by = BenjaminiHochberg(p, true);
    double cm = 0;
    for (size_t i = 1; i <= m; ++i) cm += 1.0 / static_cast<double>(i);
    for (size_t i = 0; i < m; ++i) {
      // adjusted p_i = min over p_j >= p_i of m p_j / rank(p_j), at most 1
      // (rank among all; ties take the highest rank).
      double want = 1;
      for (size_t j = 0; j < m; ++j) {
        if (p[j] < p[i]) continue;
        size_t rank = 0;
        for (size_t k = 0; k < m; ++k) rank += p[k] <= p[j];
        want = std::min(want, p[j] * static_cast<double>(m) / static_cast<double>(rank));
      }
      EXPECT_NEAR(bh[i], want, 1e-12);
      EXPECT_NEAR(by[i],
                  std::min(1.0,
                           [&] {
                             double w = 1e300;
                             for (size_t j = 0; j < m; ++j) {
                               if (p[j] < p[i]) continue;
                               size_t rank = 0;
                               for (size_t k = 0; k < m; ++k) rank += p[k] <= p[j];
                               w = std::min(w, p[j] * static_cast<double>(m) * cm /
                                                   static_cast<double>(rank));
                             }
                             return w;
                           }()),
                  1e-12);
    }
  }
}

// The least p-value, from the pooled values alone, is the least p the
// test gives over every labelling of them: small samples with many ties
// (a node's samples per run: mostly 0), each labelling tried.
TEST(PermutationTest, LeastAchievablePIsTheLeastOverEveryLabelling) {
  std::mt19937_64 rng(12);
  const double values[] = {0, 0, 0, 1, 2, 5};
  PermutationOptions o;
  for (int round = 0; round < 60; ++round) {
    const size_t na = 2 + rng() % 4, nb = 2 + rng() % 4;
    std::vector<double> pool(na + nb);
    for (double& v : pool) v = values[rng() % 6];
    double least = 1;
    for (uint32_t mask = 0; mask < (1u << pool.size()); ++mask) {
      if (static_cast<size_t>(__builtin_popcount(mask)) != na) continue;
      std::vector<double> a, b;
      for (size_t i = 0; i < pool.size(); ++i) ((mask >> i) & 1 ? a : b).push_back(pool[i]);
      least = std::min(least, TwoSampleMeanTest(a, b, o).p_value);
    }
    const std::vector<double> a(pool.begin(), pool.begin() + static_cast<ptrdiff_t>(na));
    const std::vector<double> b(pool.begin() + static_cast<ptrdiff_t>(na), pool.end());
    EXPECT_NEAR(LeastAchievableP(a, b, o), least, 1e-12) << "round " << round;
  }
  // One run of ten saw it: no labelling can be significant.
  EXPECT_EQ(LeastAchievableP({0, 0, 0, 0, 3}, {0, 0, 0, 0, 0}, o), 1.0);
  EXPECT_NEAR(LeastAchievableP({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, o), 2.0 / 252, 1e-12);
  EXPECT_EQ(LeastAchievableP({}, {1}, o), 1.0);
}

// Tests that could never pass do not dilute one that can; with none of
// those, it is Benjamini-Hochberg; and over all-null sets of sparse,
// tied per-run values it alarms no more often than the FDR allows.
TEST(BenjaminiHochbergTest, DiscreteLeavesOutWhatCannotPass) {
  std::vector<double> p = {2.0 / 252}, least = {2.0 / 252};
  for (int i = 0; i < 30; ++i) p.push_back(1), least.push_back(1);
  EXPECT_NEAR(BenjaminiHochbergDiscrete(p, least, 0.05)[0], 2.0 / 252, 1e-12);
  EXPECT_GT(BenjaminiHochberg(p)[0], 0.05) << "plain BH counts all 31";
  const std::vector<double> q = {0.001, 0.02, 0.03, 0.5}, low(4, 0.001);
  const std::vector<double> d = BenjaminiHochbergDiscrete(q, low, 0.05), bh = BenjaminiHochberg(q);
  for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(d[i], bh[i], 1e-12);

  std::mt19937_64 rng(31);
  std::poisson_distribution<int> sparse(0.4);
  std::poisson_distribution<int> busy(30);
  PermutationOptions o;
  const int trials = 400;
  int alarms = 0, kept_total = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> ps, ls;
    for (int node = 0; node < 20; ++node) {
      std::vector<double> a(5), b(5);
      for (double& v : a) v = node < 4 ? busy(rng) : sparse(rng);
      for (double& v : b) v = node < 4 ? busy(rng) : sparse(rng);
      ps.push_back(TwoSampleMeanTest(a, b, o).p_value);
      ls.push_back(LeastAchievableP(a, b, o));
    }
    const std::vector<double> adj = BenjaminiHochbergDiscrete(ps, ls, 0.05);
    bool alarm = false;
    for (size_t i = 0; i < adj.size(); ++i) alarm |= adj[i] <= 0.05, kept_total += adj[i] < 1;
    alarms += alarm;
  }
  // Every node is null, so the FDR is the chance of any alarm: at most
  // 0.05; Binomial(400, 0.05) + 3 standard deviations is 33.
  EXPECT_LE(alarms, 33);
  std::printf("all-null sets with an alarm: %d of %d (%d tests kept of %d)\n", alarms, trials,
              kept_total, trials * 20);
}

}  // namespace
}  // namespace fieldprof
