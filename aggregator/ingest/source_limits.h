// Per-source limits at the door: a token bucket per client address prefix
// (/24 for IPv4, /56 for IPv6 by default), asked before a batch's body is
// read. A source over its limit gets 429 with Retry-After, the seconds
// until its bucket holds a token again; the agent waits at least that long.
//
// A bucket is the prefix (masked address bytes), a token count and a time;
// nothing else about a source is kept, and nothing is logged. Memory is
// bounded: past `max_sources` buckets, the full ones are dropped (a full
// bucket is the same as none), then, if still over, the least recently
// used half.
//
//   SourceLimiter limits(options);
//   SourceLimiter::Decision d = limits.Take(remote_address, now);
//   if (!d.allowed) answer 429 with Retry-After d.retry_after_seconds
#ifndef FIELDPROF_AGGREGATOR_INGEST_SOURCE_LIMITS_H_
#define FIELDPROF_AGGREGATOR_INGEST_SOURCE_LIMITS_H_

#include <array>
#include <atomic>
#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aggregator/http/http_types.h"

namespace fieldprof::aggregator {

struct SourceLimitOptions {
  // Sustained requests a minute per prefix; 0 turns the limit off.
  double per_minute = 60;
  // Requests a prefix may send at once after being quiet.
  double burst = 120;
  int ipv4_prefix = 24;  // bits kept of an IPv4 address
  int ipv6_prefix = 56;  // bits kept of an IPv6 address
  size_t max_sources = 1 << 20;
};

class SourceLimiter {
 public:
  // `what` names the limit in metrics and answers ("batches", "tokens").
  SourceLimiter(std::string what, SourceLimitOptions options);

  struct Decision {
    bool allowed = true;
    int retry_after_seconds = 0;  // when refused: at least 1
  };
  // Takes one token from the bucket of `source`'s prefix. Thread-safe.
  Decision Take(const boost::asio::ip::address& source, std::chrono::steady_clock::time_point now);

  bool enabled() const { return options_.per_minute > 0; }
  // The 429 answer for a refusal.
  HttpResponse Refusal(const Decision& d) const;
  // The prefix key of `source`: 16 bytes, IPv4 as v4-mapped IPv6, masked.
  using Key = std::array<uint8_t, 16>;
  Key KeyOf(const boost::asio::ip::address& source) const;

  size_t sources() const;
  uint64_t allowed() const { return allowed_.load(); }
  uint64_t limited() const { return limited_.load(); }
  const std::string& what() const { return what_; }

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point last;
  };
  void Shrink(std::chrono::steady_clock::time_point now);  // REQUIRES(mutex_)

  const std::string what_;
  const SourceLimitOptions options_;
  mutable std::mutex mutex_;
  std::unordered_map<Key, Bucket, KeyHash> buckets_;  // GUARDED_BY(mutex_)
  std::atomic<uint64_t> allowed_{0};
  std::atomic<uint64_t> limited_{0};
};

// fieldprof_source_limit_total{limit,outcome} and
// fieldprof_source_buckets{limit} of each limiter; nothing when `limits`
// is empty.
void AppendSourceLimitMetrics(const std::vector<const SourceLimiter*>& limits, std::string* out);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_INGEST_SOURCE_LIMITS_H_
