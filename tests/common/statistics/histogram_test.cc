#include "common/statistics/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace fieldprof {
namespace {

TEST(HistogramTest, ZeroGoesToZeroBucket) {
  Histogram h;
  h.Record(0);
  EXPECT_EQ(h.zero_count(), 1u);
  EXPECT_EQ(h.count(), 1u);
  for (int i = 0; i < kNumBuckets; ++i) EXPECT_EQ(h.bucket(i).count, 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
}

TEST(HistogramTest, RecordCopiesEqualsRecordingEachCopy) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 300; ++round) {
    const uint64_t v = round % 7 == 0 ? 0 : rng() >> (rng() % 64);
    const uint64_t n = rng() % 40;
    Histogram one_by_one, at_once;
    if (round % 2 == 1) {
      const uint64_t before = rng() >> (rng() % 64);
      for (Histogram* h : {&one_by_one, &at_once}) h->Record(before);
    }
    for (uint64_t i = 0; i < n; ++i) one_by_one.Record(v);
    at_once.RecordCopies(v, n);
    ASSERT_EQ(at_once, one_by_one) << v << " x " << n;
  }
  // Saturation: 2^63 squared is 2^126, and four of them pass 2^128 - 1;
  // three do not.
  for (const uint64_t n : {uint64_t{3}, uint64_t{4}, uint64_t{1000}}) {
    Histogram one_by_one, at_once;
    const uint64_t v = uint64_t{1} << 63;
    for (uint64_t i = 0; i < n; ++i) one_by_one.Record(v);
    at_once.RecordCopies(v, n);
    EXPECT_EQ(at_once.sum_sq_saturated(), n > 3) << n;
    EXPECT_EQ(at_once, one_by_one) << n;
  }
  // A count too large to record one by one: the sums stay exact.
  Histogram h;
  h.RecordCopies(1000, uint64_t{1} << 40);
  EXPECT_EQ(h.count(), uint64_t{1} << 40);
  EXPECT_EQ(h.sum(), static_cast<uint128>(1000) << 40);
  EXPECT_EQ(h.sum_sq(), static_cast<uint128>(1000000) << 40);
}

TEST(HistogramTest, RecordManyEqualsRecordingOneByOne) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint64_t> v(rng() % 200);
    // Rounds of three kinds: anything; one bucket and zeros (an API's
    // steady calls); small values over many buckets, and zeros.
    const int kind = round % 3;
    for (auto& x : v) {
      if (kind == 2) {
        x = rng() % 5 == 0 ? 0 : rng() >> (36 + rng() % 28);
        continue;
      }
      switch (kind == 1 ? (rng() % 4 == 0 ? 0 : 3) : rng() % 4) {
        case 0:
          x = 0;
          break;
        case 1:
          x = rng() % 8;
          break;
        case 2:
          x = rng() >> (rng() % 64);
          break;
        default:
          x = 1000 + rng() % 50;
          break;
      }
    }
    Histogram one_by_one, at_once;
    // Something there already, so min and max start from values, not empty.
    if (round % 2 == 1) {
      for (Histogram* h : {&one_by_one, &at_once}) {
        h->Record(300);
        h->Record(5);
      }
    }
    for (const uint64_t x : v) one_by_one.Record(x);
    at_once.RecordMany(v.data(), v.size());
    ASSERT_EQ(at_once, one_by_one) << "round " << round;
  }
  // Sums of squares saturate the same way: within one batch (one bucket,
  // and two), and across batches of one bucket.
  for (const std::vector<uint64_t>& big : {std::vector<uint64_t>(5, ~uint64_t{0}),
                                           std::vector<uint64_t>{~uint64_t{0}, 7, ~uint64_t{0}},
                                           std::vector<uint64_t>{~uint64_t{0}, 0}}) {
    Histogram one_by_one, at_once;
    for (int batch = 0; batch < 3; ++batch) {
      for (const uint64_t x : big) one_by_one.Record(x);
      at_once.RecordMany(big.data(), big.size());
    }
    EXPECT_TRUE(at_once.sum_sq_saturated());
    EXPECT_EQ(at_once, one_by_one);
  }
  // Values saturate a bucket that is nearly full as Record does.
  {
    Histogram one_by_one, at_once;
    HistogramBucket nearly;
    nearly.count = 1;
    nearly.sum = 1000;
    nearly.sum_sq = kUint128Max - 100;
    for (Histogram* h : {&one_by_one, &at_once}) h->SetBucket(9, nearly);
    const std::vector<uint64_t> v = {1000, 1001, 5, 0};
    for (const uint64_t x : v) one_by_one.Record(x);
    at_once.RecordMany(v.data(), v.size());
    EXPECT_TRUE(at_once.sum_sq_saturated());
    EXPECT_EQ(at_once.bucket(9).sum_sq, kUint128Max);
    EXPECT_EQ(at_once, one_by_one);
  }
  // Just below saturation is not saturated: 2^128 - 2^65 + 1 from one value.
  Histogram one_by_one, at_once;
  const uint64_t top = ~uint64_t{0};
  one_by_one.Record(top);
  at_once.RecordMany(&top, 1);
  EXPECT_FALSE(at_once.sum_sq_saturated());
  EXPECT_EQ(at_once, one_by_one);
}

TEST(HistogramTest, RecordZerosEqualsRecordingZeros) {
  for (const uint64_t n : {0, 1, 7}) {
    Histogram one_by_one, at_once;
    for (const uint64_t v : {5u, 900u}) {
      one_by_one.Record(v);
      at_once.Record(v);
    }
    for (uint64_t i = 0; i < n; ++i) one_by_one.Record(0);
    at_once.RecordZeros(n);
    EXPECT_EQ(at_once, one_by_one) << n;
  }
  Histogram empty, zeros;
  zeros.RecordZeros(0);
  EXPECT_EQ(zeros, empty);  // no zeros: still empty, min untouched
}

TEST(HistogramTest, EmptyIsAllZeroBytes) {
  // The runtime relies on it: zero-filled memory is an empty histogram.
  alignas(Histogram) unsigned char zeros[sizeof(Histogram)] = {};
  const Histogram& from_zeros = *reinterpret_cast<const Histogram*>(zeros);
  EXPECT_EQ(from_zeros, Histogram());
  EXPECT_EQ(from_zeros.min(), std::numeric_limits<uint64_t>::max());
  static const Histogram kEmpty;  // static: its padding is zero too
  EXPECT_EQ(std::memcmp(&kEmpty, zeros, sizeof kEmpty), 0);
}

TEST(HistogramTest, DesignExamples) {
  EXPECT_EQ(BucketIndex(1), 0);
  EXPECT_EQ(BucketIndex(2), 1);
  EXPECT_EQ(BucketIndex(3), 1);
  EXPECT_EQ(BucketIndex(7), 2);
  EXPECT_EQ(BucketIndex(22), 4);
  EXPECT_EQ(BucketIndex(1560), 10);
}

TEST(HistogramTest, EveryPowerOfTwoAndNeighbours) {
  for (int i = 0; i < 64; ++i) {
    const uint64_t p = uint64_t{1} << i;
    EXPECT_EQ(BucketIndex(p), i) << "2^" << i;
    if (p > 1) {
      EXPECT_EQ(BucketIndex(p - 1), i - 1) << "2^" << i << "-1";
    }
    if (i < 63) {
      EXPECT_EQ(BucketIndex(p + 1), i == 0 ? 1 : i) << "2^" << i << "+1";
    }
    EXPECT_EQ(BucketLow(i), p);
    Histogram h;
    h.Record(p);
    EXPECT_EQ(h.bucket(i).count, 1u);
    EXPECT_EQ(h.bucket(i).sum, p);
    EXPECT_EQ(h.bucket(i).sum_sq, static_cast<uint128>(p) * p);
  }
}

TEST(HistogramTest, MaxValueGoesToLastBucket) {
  Histogram h;
  const uint64_t v = ~uint64_t{0};
  h.Record(v);
  EXPECT_EQ(BucketIndex(v), 63);
  EXPECT_EQ(h.bucket(63).count, 1u);
  EXPECT_EQ(h.bucket(63).sum, v);
  EXPECT_EQ(h.bucket(63).sum_sq, static_cast<uint128>(v) * v);
  EXPECT_FALSE(h.sum_sq_saturated());
  EXPECT_EQ(BucketHigh(63), v);
}

TEST(HistogramTest, SumOfSquaresSaturatesWithFlag) {
  Histogram h;
  const uint64_t v = ~uint64_t{0};
  h.Record(v);
  h.Record(v);  // (2^64-1)^2 * 2 > 2^128-1
  EXPECT_TRUE(h.sum_sq_saturated());
  EXPECT_EQ(h.bucket(63).sum_sq, kUint128Max);
  EXPECT_EQ(h.bucket(63).count, 2u);
  EXPECT_EQ(h.bucket(63).sum, static_cast<uint128>(v) * 2);  // sums stay exact
  EXPECT_TRUE(std::isnan(h.Variance()));
  // Merging keeps the flag and stays saturated.
  Histogram g;
  g.Record(5);
  g.Merge(h);
  EXPECT_TRUE(g.sum_sq_saturated());
  EXPECT_EQ(g.bucket(63).sum_sq, kUint128Max);
}

TEST(HistogramTest, SaturatingAddIsAssociative) {
  bool f = false;
  const uint128 a = kUint128Max - 10, b = 7, c = 9;
  uint128 left = SaturatingAdd(SaturatingAdd(a, b, &f), c, &f);
  uint128 right = SaturatingAdd(a, SaturatingAdd(b, c, &f), &f);
  EXPECT_EQ(left, right);
  EXPECT_EQ(left, kUint128Max);
  EXPECT_TRUE(f);
}

Histogram RandomHistogram(std::mt19937_64& rng, int n) {
  Histogram h;
  std::uniform_int_distribution<int> shift(0, 63);
  for (int i = 0; i < n; ++i) {
    uint64_t v = rng() >> shift(rng);
    if (rng() % 10 == 0) v = 0;
    h.Record(v);
  }
  return h;
}

TEST(HistogramTest, MergeIsAssociativeAndCommutative) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    Histogram a = RandomHistogram(rng, 1 + trial % 50);
    Histogram b = RandomHistogram(rng, 1 + trial % 31);
    Histogram c = RandomHistogram(rng, 1 + trial % 17);
    Histogram ab_c = a;
    ab_c.Merge(b);
    ab_c.Merge(c);
    Histogram bc = b;
    bc.Merge(c);
    Histogram a_bc = a;
    a_bc.Merge(bc);
    Histogram c_b_a = c;
    c_b_a.Merge(b);
    c_b_a.Merge(a);
    EXPECT_EQ(ab_c, a_bc);
    EXPECT_EQ(ab_c, c_b_a);
  }
}

TEST(HistogramTest, MergeEqualsRecordingEverything) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> values(5000);
  for (auto& v : values) v = rng() >> (rng() % 64);
  Histogram all, left, right;
  for (size_t i = 0; i < values.size(); ++i) {
    all.Record(values[i]);
    (i % 3 == 0 ? left : right).Record(values[i]);
  }
  left.Merge(right);
  EXPECT_EQ(left, all);
}

TEST(HistogramTest, StatisticsAreExact) {
  Histogram h;
  for (uint64_t v : {2, 4, 4, 4, 5, 5, 7, 9}) h.Record(v);
  HistogramStats s = h.Stats();
  EXPECT_EQ(s.count, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.variance, 4.0);
  EXPECT_DOUBLE_EQ(s.stddev, 2.0);
  EXPECT_EQ(s.min, 2u);
  EXPECT_EQ(s.max, 9u);
}

TEST(HistogramTest, QuantileEstimatesStayInTheirBucket) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<uint64_t> values(1 + rng() % 400);
    for (auto& v : values) v = (rng() >> (rng() % 60)) + (trial % 2);
    Histogram h;
    for (uint64_t v : values) h.Record(v);
    std::sort(values.begin(), values.end());
    for (double q : {0.0, 0.1, 0.5, 0.9, 0.99, 1.0}) {
      const uint64_t exact = values[static_cast<size_t>(q * (values.size() - 1))];
      const double est = h.Quantile(q);
      if (exact == 0) {
        EXPECT_EQ(est, 0.0);
        continue;
      }
      const int b = BucketIndex(exact);
      EXPECT_GE(est, static_cast<double>(BucketLow(b))) << "q=" << q << " exact=" << exact;
      EXPECT_LE(est, static_cast<double>(BucketHigh(b)) + 1) << "q=" << q << " exact=" << exact;
      EXPECT_GE(est, static_cast<double>(h.min()));
      EXPECT_LE(est, static_cast<double>(h.max()));
    }
  }
}

TEST(HistogramTest, QuantileUsesBucketMean) {
  // All values in bucket 10 ([1024, 2047]) equal 1100: the estimate is 1100,
  // not the bucket's middle.
  Histogram h;
  for (int i = 0; i < 100; ++i) h.Record(1100);
  EXPECT_DOUBLE_EQ(h.Quantile(0.5), 1100.0);
  EXPECT_DOUBLE_EQ(h.Quantile(0.99), 1100.0);
}

TEST(HistogramTest, EmptyHistogram) {
  Histogram h;
  EXPECT_TRUE(h.empty());
  HistogramStats s = h.Stats();
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(h.Quantile(0.5), 0.0);
}

TEST(HistogramTest, Uint128ToString) {
  EXPECT_EQ(Uint128ToString(0), "0");
  EXPECT_EQ(Uint128ToString(12345), "12345");
  EXPECT_EQ(Uint128ToString(kUint128Max), "340282366920938463463374607431768211455");
}

}  // namespace
}  // namespace fieldprof
