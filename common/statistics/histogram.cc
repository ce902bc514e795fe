#include "common/statistics/histogram.h"

#include <algorithm>
#include <cmath>

namespace fieldprof {

void Histogram::Merge(const Histogram& other) {
  zero_count_ += other.zero_count_;
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& o = other.buckets_[i];
    if (o.count == 0) continue;
    HistogramBucket& b = buckets_[i];
    b.count += o.count;
    b.sum += o.sum;
    b.sum_sq = SaturatingAdd(b.sum_sq, o.sum_sq, &sum_sq_saturated_);
  }
  not_min_ = std::max(not_min_, other.not_min_);
  max_ = std::max(max_, other.max_);
  sum_sq_saturated_ = sum_sq_saturated_ || other.sum_sq_saturated_;
}

uint64_t Histogram::count() const {
  uint64_t c = zero_count_;
  for (const auto& b : buckets_) c += b.count;
  return c;
}

uint128 Histogram::sum() const {
  uint128 s = 0;
  for (const auto& b : buckets_) s += b.sum;
  return s;
}

bool Histogram::sum_sq_saturated() const {
  if (sum_sq_saturated_) return true;
  bool total = false;
  uint128 s = 0;
  for (const auto& b : buckets_) s = SaturatingAdd(s, b.sum_sq, &total);
  return total;
}

uint128 Histogram::sum_sq() const {
  bool ignored = false;
  uint128 s = 0;
  for (const auto& b : buckets_) s = SaturatingAdd(s, b.sum_sq, &ignored);
  return s;
}

double Histogram::Mean() const {
  const uint64_t n = count();
  if (n == 0) return 0;
  return static_cast<double>(sum()) / static_cast<double>(n);
}

double Histogram::Variance() const {
  const uint64_t n = count();
  if (n == 0) return 0;
  if (sum_sq_saturated()) return std::nan("");
  // Var = E[x^2] - E[x]^2, computed in long double from exact integer sums.
  const long double mean = static_cast<long double>(sum()) / n;
  const long double ex2 = static_cast<long double>(sum_sq()) / n;
  const long double v = ex2 - mean * mean;
  return v < 0 ? 0.0 : static_cast<double>(v);
}

double Histogram::Quantile(double q) const {
  const uint64_t n = count();
  if (n == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Rank in [0, n-1], the position of the wanted value in sorted order.
  const double rank = q * static_cast<double>(n - 1);
  if (rank < static_cast<double>(zero_count_)) return 0;
  double before = static_cast<double>(zero_count_);
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& b = buckets_[i];
    if (b.count == 0) continue;
    if (rank >= before + static_cast<double>(b.count)) {
      before += static_cast<double>(b.count);
      continue;
    }
    const double c = static_cast<double>(b.count);
    const double mean = static_cast<double>(b.sum) / c;
    const double lo = static_cast<double>(std::max(BucketLow(i), min()));
    const double hi = static_cast<double>(std::min(BucketHigh(i), max_));
    if (hi < lo) return mean;  // inconsistent input; never for validated data
    if (b.count == 1) return std::clamp(mean, lo, hi);
    // Model the bucket as uniform around its mean with its own standard
    // deviation (half-width sqrt(3)*sd), clipped so it stays inside the edges.
    double half = std::min(mean - lo, hi - mean);
    if (b.sum_sq != kUint128Max) {
      const long double m = static_cast<long double>(b.sum) / b.count;
      const long double var = static_cast<long double>(b.sum_sq) / b.count - m * m;
      if (var >= 0) half = std::min(half, static_cast<double>(std::sqrt(3.0L * var)));
    }
    if (half < 0) half = 0;
    const double pos = (rank - before + 0.5) / c;  // in (0, 1)
    return std::clamp(mean + (2 * pos - 1) * half, lo, hi);
  }
  return static_cast<double>(max_);
}

HistogramStats Histogram::Stats() const {
  HistogramStats s;
  s.count = count();
  if (s.count == 0) return s;
  s.mean = Mean();
  s.variance = Variance();
  s.stddev = std::sqrt(s.variance);
  s.min = min();
  s.max = max_;
  s.p50 = Quantile(0.5);
  s.p90 = Quantile(0.9);
  s.p99 = Quantile(0.99);
  return s;
}

bool ParseUint128(std::string_view digits, uint128* out) {
  if (digits.empty()) return false;
  uint128 v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    const unsigned d = static_cast<unsigned>(c - '0');
    if (v > (~uint128{0} - d) / 10) return false;  // past 2^128-1
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

std::string Uint128ToString(uint128 v) {
  if (v == 0) return "0";
  char buf[40];
  int pos = 40;
  while (v != 0) {
    buf[--pos] = static_cast<char>('0' + static_cast<int>(v % 10));
    v /= 10;
  }
  return std::string(buf + pos, 40 - pos);
}

}  // namespace fieldprof
