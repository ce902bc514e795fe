// The log2 histogram: the one number format of the whole system.
//
// A value v (nanoseconds, bytes, a count) is an unsigned 64-bit integer.
// v == 0 goes to the zero bucket; v >= 1 goes to bucket i = floor(log2 v),
// i in 0..63, so bucket i holds [2^i, 2^(i+1)) with the lower edge inclusive
// (3 -> 1, 7 -> 2, 22 -> 4, 1560 -> 10).
//
// Every bucket keeps count, sum and sum of squares as exact integers (64-bit
// count, 128-bit sums). Sums of squares saturate at 2^128-1 and set a sticky
// flag instead of wrapping. Merging is therefore exact, associative and
// commutative: the same data always gives the same histogram, whatever the
// order it arrived in.
//
//   Histogram h;
//   h.Record(1560);
//   h.Record(22);
//   HistogramStats s = h.Stats();   // count 2, mean 791, ...
//   double p90 = h.Quantile(0.9);
//
// Not thread-safe: one writer at a time. Totals (count, sum, sum of squares)
// are derived from the buckets, so Record() touches one bucket only.
#ifndef FIELDPROF_COMMON_STATISTICS_HISTOGRAM_H_
#define FIELDPROF_COMMON_STATISTICS_HISTOGRAM_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace fieldprof {

using uint128 = unsigned __int128;

inline constexpr int kNumBuckets = 64;  // buckets 0..63; the zero bucket is separate
inline constexpr uint128 kUint128Max = ~uint128{0};

// Bucket index of v >= 1 (floor(log2 v)). Undefined for v == 0. (63 ^ clz
// is one `bsr` on x86-64; 63 - countl_zero is five instructions there.)
inline int BucketIndex(uint64_t v) { return 63 ^ __builtin_clzll(v); }
// Inclusive lower edge of bucket i: 2^i.
inline uint64_t BucketLow(int i) { return uint64_t{1} << i; }
// Inclusive upper edge of bucket i: 2^(i+1) - 1.
inline uint64_t BucketHigh(int i) { return i == 63 ? ~uint64_t{0} : (uint64_t{1} << (i + 1)) - 1; }

// a + b, clamped to 2^128-1. Sets *saturated when clamping happened.
inline uint128 SaturatingAdd(uint128 a, uint128 b, bool* saturated) {
  uint128 s = a + b;
  if (s < a) {
    *saturated = true;
    return kUint128Max;
  }
  return s;
}

struct HistogramBucket {
  uint64_t count = 0;
  uint128 sum = 0;     // exact: count * 2^64 fits in 128 bits
  uint128 sum_sq = 0;  // saturating; see Histogram::sum_sq_saturated()

  bool operator==(const HistogramBucket&) const = default;
};

struct HistogramStats {
  uint64_t count = 0;
  double mean = 0;
  double variance = 0;  // population variance; NaN when sums of squares saturated
  double stddev = 0;
  uint64_t min = 0;  // 0 when empty
  uint64_t max = 0;
  double p50 = 0, p90 = 0, p99 = 0;
};

class Histogram {
 public:
  Histogram() = default;

  // Adds one value. Hot path: no allocation, no branch on the bucket layout.
  void Record(uint64_t v) {
    if (~v > not_min_) not_min_ = ~v;
    if (v > max_) max_ = v;
    if (v == 0) {
      ++zero_count_;
      return;
    }
    const int i = BucketIndex(v);
    HistogramBucket& b = buckets_[i];
    ++b.count;
    b.sum += v;
    AddSquare(b, v);
  }

  // Adds v[0..n): the same as n Record calls, without a branch that
  // depends on the values (the runtime's per-thread batches of durations,
  // where neighbours change bucket unpredictably). A zero goes to bucket 0
  // with weight 0, and to the zero count.
  void RecordMany(const uint64_t* v, size_t n) {
    uint64_t lo = ~not_min_, hi = max_, zeros = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t x = v[i];
      const uint64_t nonzero = x != 0;
      HistogramBucket& b = buckets_[BucketIndex(x | 1)];
      zeros += 1 - nonzero;
      b.count += nonzero;
      b.sum += x;
      AddSquare(b, x);
      lo = x < lo ? x : lo;
      hi = x > hi ? x : hi;
    }
    zero_count_ += zeros;
    not_min_ = ~lo;
    max_ = hi;
  }

  // Adds `n` copies of v: the same as n Record(v) calls.
  void RecordCopies(uint64_t v, uint64_t n) {
    if (n == 0) return;
    if (~v > not_min_) not_min_ = ~v;
    if (v > max_) max_ = v;
    if (v == 0) {
      zero_count_ += n;
      return;
    }
    HistogramBucket& b = buckets_[BucketIndex(v)];
    b.count += n;
    b.sum += static_cast<uint128>(v) * n;
    const uint128 sq = static_cast<uint128>(v) * v;
    if (n > kUint128Max / sq) {
      b.sum_sq = kUint128Max;
      sum_sq_saturated_ = true;
    } else {
      AddSumSq(b, sq * n);
    }
  }

  // Adds `n` zeros (one bucket's worth of Record(0) calls at once).
  void RecordZeros(uint64_t n) {
    if (n == 0) return;
    not_min_ = ~uint64_t{0};
    zero_count_ += n;
  }

  // Adds every value of `other` to this histogram. Exact, associative, commutative.
  void Merge(const Histogram& other);

  // Totals, derived from the buckets.
  uint64_t count() const;
  uint128 sum() const;
  uint128 sum_sq() const;  // saturating
  // Some sum of squares (a bucket's or the total) was clamped at 2^128-1.
  bool sum_sq_saturated() const;
  bool empty() const { return count() == 0; }
  // Smallest/largest recorded value; min() is 2^64-1 and max() is 0 when empty.
  uint64_t min() const { return ~not_min_; }
  uint64_t max() const { return max_; }
  uint64_t zero_count() const { return zero_count_; }
  const HistogramBucket& bucket(int i) const { return buckets_[i]; }

  double Mean() const;
  // Population variance. NaN when sums of squares saturated.
  double Variance() const;
  // Estimate of the q-quantile (0 <= q <= 1). Finds the bucket holding the
  // rank, then places the value around that bucket's own mean, spread by the
  // bucket's own standard deviation, clipped to the bucket edges and to
  // min/max. The estimate always lies inside the bucket holding the rank.
  double Quantile(double q) const;
  HistogramStats Stats() const;

  // Raw setters for decoders. They do not check consistency: run
  // ValidateHistogram (common/wire/validate.h) on anything from outside.
  void SetZeroCount(uint64_t c) { zero_count_ = c; }
  void SetBucket(int i, const HistogramBucket& b) { buckets_[i] = b; }
  void SetMinMax(uint64_t min, uint64_t max) {
    not_min_ = ~min;
    max_ = max;
  }
  void MarkSumSqSaturated() { sum_sq_saturated_ = true; }

  bool operator==(const Histogram&) const = default;

 private:
  // b.sum_sq += v * v, saturating (and flagged) at 2^128 - 1.
  void AddSquare(HistogramBucket& b, uint64_t v) { AddSumSq(b, static_cast<uint128>(v) * v); }
  void AddSumSq(HistogramBucket& b, uint128 sq) {
    const uint128 s = b.sum_sq + sq;
    if (s < sq) [[unlikely]] {
      b.sum_sq = kUint128Max;
      sum_sq_saturated_ = true;
    } else {
      b.sum_sq = s;
    }
  }

  uint64_t zero_count_ = 0;
  std::array<HistogramBucket, kNumBuckets> buckets_{};
  // The minimum, stored inverted so that an empty histogram is all zero
  // bytes: zero-filled memory (the runtime's per-thread slabs) is a valid
  // empty histogram without running a constructor over it.
  uint64_t not_min_ = 0;
  uint64_t max_ = 0;
  bool sum_sq_saturated_ = false;  // some bucket's sum of squares saturated
};

// Decimal text of a 128-bit integer (for JSON and logs).
std::string Uint128ToString(uint128 v);
// Its inverse: decimal digits only, at most 2^128-1; false otherwise.
[[nodiscard]] bool ParseUint128(std::string_view digits, uint128* out);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_STATISTICS_HISTOGRAM_H_
