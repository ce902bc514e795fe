// The per-source token buckets (aggregator/ingest/source_limits.h): prefixes,
// refill, Retry-After and the memory bound.
#include "aggregator/ingest/source_limits.h"

#include <gtest/gtest.h>

namespace fieldprof::aggregator {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
namespace ip = boost::asio::ip;

ip::address A(const char* s) { return ip::make_address(s); }

TEST(SourceLimitsTest, APrefixIsOneSource) {
  SourceLimiter l("batches", {.per_minute = 60, .burst = 2});
  EXPECT_EQ(l.KeyOf(A("192.0.2.7")), l.KeyOf(A("192.0.2.250")));
  EXPECT_NE(l.KeyOf(A("192.0.2.7")), l.KeyOf(A("192.0.3.7")));
  EXPECT_EQ(l.KeyOf(A("192.0.2.7")), l.KeyOf(A("::ffff:192.0.2.9"))) << "v4-mapped is IPv4";
  EXPECT_EQ(l.KeyOf(A("2001:db8:0:ab00::1")), l.KeyOf(A("2001:db8:0:abff:ffff::2"))) << "/56";
  EXPECT_NE(l.KeyOf(A("2001:db8:0:ab00::1")), l.KeyOf(A("2001:db8:0:ac00::1")));
  SourceLimiter wide("batches", {.ipv4_prefix = 16, .ipv6_prefix = 48});
  EXPECT_EQ(wide.KeyOf(A("192.0.2.7")), wide.KeyOf(A("192.0.200.1")));
  EXPECT_EQ(wide.KeyOf(A("2001:db8:0:ab00::1")), wide.KeyOf(A("2001:db8:0:ffff::1")));
}

TEST(SourceLimitsTest, TheBucketRefillsAtTheRateAndSaysWhenToRetry) {
  SourceLimiter l("batches", {.per_minute = 6, .burst = 3});  // a token every 10 s
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.Take(A("198.51.100.1"), t0).allowed) << i;
  SourceLimiter::Decision d = l.Take(A("198.51.100.2"), t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_seconds, 10);
  // Another network is another bucket.
  EXPECT_TRUE(l.Take(A("198.51.101.1"), t0).allowed);
  EXPECT_TRUE(l.Take(A("::1"), t0).allowed);
  // 4 s on: 0.4 of a token, 6 s to wait.
  d = l.Take(A("198.51.100.1"), t0 + seconds(4));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_seconds, 6);
  EXPECT_TRUE(l.Take(A("198.51.100.1"), t0 + seconds(10)).allowed);
  EXPECT_FALSE(l.Take(A("198.51.100.1"), t0 + seconds(10)).allowed);
  // Quiet for long: back to the burst, no more.
  const auto later = t0 + seconds(3600);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.Take(A("198.51.100.1"), later).allowed);
  EXPECT_FALSE(l.Take(A("198.51.100.1"), later).allowed);
  EXPECT_EQ(l.limited(), 4u);
  EXPECT_EQ(l.allowed(), 9u);
  // The 429 says the rule and when.
  const HttpResponse r = l.Refusal(d);
  EXPECT_EQ(r.status, 429);
  EXPECT_NE(r.body.find("\"rule\":\"source_rate\""), std::string::npos) << r.body;
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>{"Retry-After", "6"}));
}

TEST(SourceLimitsTest, OffTakesEverything) {
  SourceLimiter l("batches", {.per_minute = 0, .burst = 1});
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(l.Take(A("203.0.113.1"), t0).allowed);
  EXPECT_EQ(l.sources(), 0u);
}

// A flood of sources (every /56 of an IPv6 range) keeps the map bounded;
// the sources seen most recently are the ones kept.
TEST(SourceLimitsTest, MemoryIsBoundedUnderAFloodOfSources) {
  SourceLimiter l("batches", {.per_minute = 60, .burst = 1, .max_sources = 1000});
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(l.Take(A("198.51.100.1"), t0).allowed);
  for (int i = 0; i < 100000; ++i) {
    char a[64];
    std::snprintf(a, sizeof a, "2001:db8:%x:%x00::1", i >> 8, i & 0xff);
    l.Take(A(a), t0 + milliseconds(10 + i / 1000));
    ASSERT_LE(l.sources(), 1001u) << i;
  }
  EXPECT_GT(l.sources(), 400u);
  EXPECT_FALSE(l.Take(A("2001:db8:186:9f00::1"), t0 + milliseconds(109)).allowed)
      << "the latest source is still limited";
  // Seconds on, every bucket is full again: the next flood drops them all
  // and keeps its own.
  for (int i = 0; i < 1000; ++i) {
    char a[64];
    std::snprintf(a, sizeof a, "2001:db9:%x:%x00::1", i >> 8, i & 0xff);
    l.Take(A(a), t0 + seconds(5));
  }
  EXPECT_EQ(l.sources(), 1000u);
}

}  // namespace
}  // namespace fieldprof::aggregator
