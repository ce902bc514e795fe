#include "common/statistics/permutation_test.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>

namespace fieldprof {

namespace {

double LogFactorial(int64_t k) { return std::lgamma(static_cast<double>(k) + 1.0); }

double Uniform(std::mt19937_64& rng) {
  return (static_cast<double>(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);  // (0, 1)
}

// Items drawn one by one: for samples of a few items.
int64_t HypergeometricBySteps(std::mt19937_64& rng, int64_t good, int64_t bad, int64_t sample) {
  int64_t left = good + bad, good_left = good, got = 0;
  for (int64_t i = 0; i < sample; ++i, --left) {
    if (Uniform(rng) * static_cast<double>(left) < static_cast<double>(good_left)) {
      ++got;
      --good_left;
    }
  }
  return got;
}

// One sample's calls, as distinct values with their counts: the zero
// bucket, then each bucket with calls at its mean.
struct Cell {
  double value;
  int64_t count;
  bool local;
};

void AddCells(const Histogram& h, bool local, std::vector<Cell>* cells) {
  if (h.zero_count() > 0) cells->push_back({0.0, static_cast<int64_t>(h.zero_count()), local});
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& b = h.bucket(i);
    if (b.count == 0) continue;
    cells->push_back({static_cast<double>(b.sum) / static_cast<double>(b.count),
                      static_cast<int64_t>(b.count), local});
  }
}

// The q-quantile of a multiset given as counts over cells sorted by value:
// the smallest value whose cumulative count reaches ceil(q * n) (numpy's
// "inverted_cdf").
double QuantileOf(const std::vector<Cell>& cells, const std::vector<int64_t>& counts, int64_t n,
                  double q) {
  const int64_t rank =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * static_cast<double>(n))));
  int64_t seen = 0;
  for (size_t k = 0; k < cells.size(); ++k) {
    seen += counts[k];
    if (seen >= rank) return cells[k].value;
  }
  return cells.empty() ? 0 : cells.back().value;
}

}  // namespace

int64_t Hypergeometric(std::mt19937_64& rng, int64_t good, int64_t bad, int64_t sample) {
  if (sample <= 0 || good <= 0) return 0;
  if (bad <= 0) return sample;
  const int64_t pop = good + bad;
  if (sample >= pop) return good;
  if (sample < 10 || pop - sample < 10) {
    // Few drawn, or few left behind (their complement is drawn).
    if (sample < 10) return HypergeometricBySteps(rng, good, bad, sample);
    return good - HypergeometricBySteps(rng, good, bad, pop - sample);
  }
  // Stadlober's ratio of uniforms (H2PE-class), as numpy's HRUA: draws of
  // the smaller of sample and pop - sample, from the smaller of good and bad.
  const int64_t m_sample = std::min(sample, pop - sample);
  const int64_t min_gb = std::min(good, bad), max_gb = std::max(good, bad);
  const double p = static_cast<double>(min_gb) / static_cast<double>(pop);
  const double q = static_cast<double>(max_gb) / static_cast<double>(pop);
  const double mu = static_cast<double>(m_sample) * p;
  const double a = mu + 0.5;
  const double var = static_cast<double>(pop - m_sample) * static_cast<double>(m_sample) * p * q /
                     static_cast<double>(pop - 1);
  const double c = std::sqrt(var + 0.5);
  constexpr double kD1 = 1.7155277699214135;  // 2 sqrt(2/e)
  constexpr double kD2 = 0.8989161620588988;  // 3 - 2 sqrt(3/e)
  const double h = kD1 * c + kD2;
  const int64_t mode = static_cast<int64_t>(
      std::floor(static_cast<double>(m_sample + 1) * static_cast<double>(min_gb + 1) /
                 static_cast<double>(pop + 2)));
  const double g = LogFactorial(mode) + LogFactorial(min_gb - mode) +
                   LogFactorial(m_sample - mode) + LogFactorial(max_gb - m_sample + mode);
  const double b =
      std::min(static_cast<double>(std::min(m_sample, min_gb) + 1), std::floor(a + 16 * c));
  int64_t k = 0;
  while (true) {
    const double u = Uniform(rng), v = Uniform(rng);
    const double x = a + h * (v - 0.5) / u;
    if (x < 0.0 || x >= b) continue;
    k = static_cast<int64_t>(std::floor(x));
    const double t = g - (LogFactorial(k) + LogFactorial(min_gb - k) + LogFactorial(m_sample - k) +
                          LogFactorial(max_gb - m_sample + k));
    if (u * (4.0 - u) - 3.0 <= t) break;  // quick acceptance
    if (u * (u - t) >= 1) continue;       // quick rejection
    if (2.0 * std::log(u) <= t) break;
  }
  if (good > bad) k = m_sample - k;
  if (m_sample < sample) k = good - k;
  return k;
}

PermutationResult GreaterCostTest(const Histogram& local, const Histogram& field,
                                  const PermutationOptions& o) {
  PermutationResult r;
  std::vector<Cell> cells;
  AddCells(local, true, &cells);
  AddCells(field, false, &cells);
  int64_t n_local = 0, n_field = 0;
  double total = 0;
  for (const Cell& c : cells) {
    (c.local ? n_local : n_field) += c.count;
    total += c.value * static_cast<double>(c.count);
  }
  if (n_local == 0 || n_field == 0) return r;
  std::sort(cells.begin(), cells.end(),
            [](const Cell& a, const Cell& b) { return a.value < b.value; });
  const int64_t n = n_local + n_field;

  std::vector<int64_t> x(cells.size()), rest(cells.size());
  auto statistic = [&](const std::vector<int64_t>& mine) {
    if (o.statistic == PermutationOptions::kQuantile) {
      for (size_t k = 0; k < cells.size(); ++k) rest[k] = cells[k].count - mine[k];
      return QuantileOf(cells, mine, n_local, o.quantile) -
             QuantileOf(cells, rest, n_field, o.quantile);
    }
    double s = 0;
    for (size_t k = 0; k < cells.size(); ++k) s += cells[k].value * static_cast<double>(mine[k]);
    return s / static_cast<double>(n_local) - (total - s) / static_cast<double>(n_field);
  };
  for (size_t k = 0; k < cells.size(); ++k) x[k] = cells[k].local ? cells[k].count : 0;
  r.observed = statistic(x);
  // Ties count as "at least as large": a tolerance for rounding in sums.
  const double threshold = r.observed - 1e-12 * std::max(1.0, std::fabs(r.observed));

  std::mt19937_64 rng(o.seed);
  int64_t at_least = 0;
  int done = 0;
  for (; done < o.resamples; ++done) {
    int64_t left = n, want = n_local;
    for (size_t k = 0; k < cells.size(); ++k) {
      const int64_t a = cells[k].count;
      left -= a;
      x[k] = Hypergeometric(rng, a, left, want);
      want -= x[k];
    }
    if (statistic(x) >= threshold && ++at_least == o.stop_after) {
      r.resamples = done + 1;
      r.p_value = static_cast<double>(at_least) / static_cast<double>(r.resamples);
      return r;
    }
  }
  r.resamples = done;
  r.p_value = static_cast<double>(at_least + 1) / static_cast<double>(done + 1);
  return r;
}

PermutationResult TwoSampleMeanTest(const std::vector<double>& a, const std::vector<double>& b,
                                    const PermutationOptions& options) {
  PermutationResult r;
  if (a.empty() || b.empty()) return r;
  std::vector<double> pooled(a);
  pooled.insert(pooled.end(), b.begin(), b.end());
  const size_t n = pooled.size(), k = a.size();
  const double all = std::accumulate(pooled.begin(), pooled.end(), 0.0);
  // |mean of the k labelled "a" - mean of the rest|, from the sum of the k.
  auto statistic = [&](double sum_a) {
    return std::abs(sum_a / static_cast<double>(k) - (all - sum_a) / static_cast<double>(n - k));
  };
  r.observed = statistic(std::accumulate(a.begin(), a.end(), 0.0));
  // Ties within rounding count as reaching it.
  const double reach = r.observed * (1 - 1e-12);
  // How many labellings there are: C(n, k), stopping once past the cap.
  double labellings = 1;
  for (size_t i = 0; i < k && labellings <= options.resamples; ++i) {
    labellings = labellings * static_cast<double>(n - i) / static_cast<double>(i + 1);
  }
  if (labellings <= options.resamples) {
    // Every k-subset, by a combination walk.
    std::vector<size_t> pick(k);
    std::iota(pick.begin(), pick.end(), 0);
    int64_t total = 0, at_least = 0;
    for (;;) {
      double sum = 0;
      for (size_t i : pick) sum += pooled[i];
      ++total;
      if (statistic(sum) >= reach) ++at_least;
      size_t i = k;
      while (i > 0 && pick[i - 1] == n - k + i - 1) --i;
      if (i == 0) break;
      ++pick[i - 1];
      for (size_t j = i; j < k; ++j) pick[j] = pick[j - 1] + 1;
    }
    r.resamples = static_cast<int>(total);
    r.p_value = static_cast<double>(at_least) / static_cast<double>(total);
    return r;
  }
  std::mt19937_64 rng(options.seed);
  std::vector<double> shuffled(pooled);
  int at_least = 0;
  for (int i = 0; i < options.resamples; ++i) {
    // The first k of a partial Fisher-Yates shuffle.
    double sum = 0;
    for (size_t j = 0; j < k; ++j) {
      std::uniform_int_distribution<size_t> pick(j, n - 1);
      std::swap(shuffled[j], shuffled[pick(rng)]);
      sum += shuffled[j];
    }
    if (statistic(sum) >= reach) ++at_least;
  }
  r.resamples = options.resamples;
  r.p_value = static_cast<double>(1 + at_least) / static_cast<double>(1 + options.resamples);
  return r;
}

namespace {

// C(n, k) as a double.
double Choose(size_t n, size_t k) {
  double c = 1;
  for (size_t i = 0; i < k; ++i) c = c * static_cast<double>(n - i) / static_cast<double>(i + 1);
  return c;
}

// Of the labellings that give side "a" the multiset x[from, from + k) of
// the sorted pool `x`: the copies of the boundary value inside the window,
// chosen among all copies of it in the pool.
double WaysToTake(const std::vector<double>& x, size_t from, size_t k) {
  const double edge = from == 0 ? x[k - 1] : x[from];
  const size_t copies = static_cast<size_t>(std::count(x.begin(), x.end(), edge));
  const size_t inside =
      static_cast<size_t>(std::count(x.begin() + static_cast<ptrdiff_t>(from),
                                     x.begin() + static_cast<ptrdiff_t>(from + k), edge));
  return Choose(copies, inside);
}

}  // namespace

double LeastAchievableP(const std::vector<double>& a, const std::vector<double>& b,
                        const PermutationOptions& options) {
  if (a.empty() || b.empty()) return 1;
  std::vector<double> x(a);
  x.insert(x.end(), b.begin(), b.end());
  std::sort(x.begin(), x.end(), std::greater<double>());
  const size_t n = x.size(), k = a.size();
  const double all = std::accumulate(x.begin(), x.end(), 0.0);
  auto statistic = [&](double sum_a) {
    return std::abs(sum_a / static_cast<double>(k) - (all - sum_a) / static_cast<double>(n - k));
  };
  // The statistic grows with |sum of "a" - its mean|: its largest values
  // are at the largest sum (the top k) and the smallest (the bottom k),
  // and only labellings with those multisets reach them.
  const double top = std::accumulate(x.begin(), x.begin() + static_cast<ptrdiff_t>(k), 0.0);
  const double bottom = std::accumulate(x.end() - static_cast<ptrdiff_t>(k), x.end(), 0.0);
  if (top == bottom) return 1;
  const double hi = statistic(top), lo = statistic(bottom);
  const double most = std::max(hi, lo) * (1 - 1e-12);
  double reaching = 0;
  if (hi >= most) reaching += WaysToTake(x, 0, k);
  if (lo >= most) reaching += WaysToTake(x, n - k, k);
  // (Where the test draws at random, its p could come out lower by
  // chance, down to 1 / (1 + resamples); leaving such a test out of a
  // count loses power only, never validity.)
  return std::min(1.0, std::max(reaching / Choose(n, k), 1.0 / (1.0 + options.resamples)));
}

std::vector<double> BenjaminiHochbergDiscrete(const std::vector<double>& p,
                                              const std::vector<double>& least, double fdr,
                                              std::vector<bool>* counted) {
  const size_t m = p.size();
  std::vector<double> out(m, 1.0);
  size_t k = 1;
  std::vector<size_t> kept;
  for (; k <= m; ++k) {
    kept.clear();
    for (size_t i = 0; i < m; ++i) {
      if (least[i] <= fdr / static_cast<double>(k)) kept.push_back(i);
    }
    if (kept.size() <= k) break;
  }
  std::vector<double> sub;
  for (size_t i : kept) sub.push_back(p[i]);
  const std::vector<double> q = BenjaminiHochberg(sub);
  for (size_t j = 0; j < kept.size(); ++j) out[kept[j]] = q[j];
  if (counted != nullptr) {
    counted->assign(m, false);
    for (size_t i : kept) (*counted)[i] = true;
  }
  return out;
}

std::vector<double> BenjaminiHochberg(const std::vector<double>& p, bool dependent) {
  const size_t m = p.size();
  std::vector<double> out(m);
  if (m == 0) return out;
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  double c = 1;
  if (dependent) {
    c = 0;
    for (size_t i = 1; i <= m; ++i) c += 1.0 / static_cast<double>(i);
  }
  double running = 1;
  for (size_t j = m; j-- > 0;) {  // from the largest p down
    const double adj = p[order[j]] * static_cast<double>(m) * c / static_cast<double>(j + 1);
    running = std::min(running, adj);
    out[order[j]] = std::min(1.0, running);
  }
  return out;
}

double DifferenceFloor(bool wall_time, uint64_t resolution_ns, double min_diff_ns) {
  return wall_time ? std::max(2 * static_cast<double>(resolution_ns), min_diff_ns) : 0;
}

Status ParseStatistic(std::string_view name, PermutationOptions* o) {
  if (name == "mean") {
    o->statistic = PermutationOptions::kMean;
    return Status::Ok();
  }
  double q = -1;
  if (name.size() > 1 && name[0] == 'p') {
    const std::string digits(name.substr(1));
    char* end = nullptr;
    q = std::strtod(digits.c_str(), &end) / 100;
    if (end != digits.c_str() + digits.size()) q = -1;
  }
  if (!(q > 0 && q < 1)) {
    return InvalidArgument("the statistic is mean or a quantile pNN, e.g. p90; not '" +
                           std::string(name) + "'");
  }
  o->statistic = PermutationOptions::kQuantile;
  o->quantile = q;
  return Status::Ok();
}

}  // namespace fieldprof
