#include "aggregator/ingest/source_limits.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/base/json_writer.h"

namespace fieldprof::aggregator {

SourceLimiter::SourceLimiter(std::string what, SourceLimitOptions options)
    : what_(std::move(what)), options_(options) {}

size_t SourceLimiter::KeyHash::operator()(const Key& k) const {
  uint64_t a = 0, b = 0;
  for (int i = 0; i < 8; ++i) a = a << 8 | k[i];
  for (int i = 8; i < 16; ++i) b = b << 8 | k[i];
  return static_cast<size_t>((a * 0x9E3779B97F4A7C15ull) ^ (b + (a >> 29)));
}

SourceLimiter::Key SourceLimiter::KeyOf(const boost::asio::ip::address& source) const {
  Key k{};
  int keep;
  if (source.is_v4() || (source.is_v6() && source.to_v6().is_v4_mapped())) {
    const auto v4 = source.is_v4() ? source.to_v4().to_bytes()
                                   : boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped,
                                                                      source.to_v6())
                                         .to_bytes();
    k[10] = k[11] = 0xff;
    std::copy(v4.begin(), v4.end(), k.begin() + 12);
    keep = 96 + std::clamp(options_.ipv4_prefix, 0, 32);
  } else {
    const auto v6 = source.to_v6().to_bytes();
    std::copy(v6.begin(), v6.end(), k.begin());
    keep = std::clamp(options_.ipv6_prefix, 0, 128);
  }
  for (int bit = keep; bit < 128; ++bit) k[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  return k;
}

SourceLimiter::Decision SourceLimiter::Take(const boost::asio::ip::address& source,
                                            std::chrono::steady_clock::time_point now) {
  if (!enabled()) return {};
  const double rate = options_.per_minute / 60.0;  // tokens a second
  const double burst = std::max(1.0, options_.burst);
  const Key key = KeyOf(source);
  std::lock_guard lock(mutex_);
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{burst, now});
  Bucket& b = it->second;
  if (!fresh) {
    const double elapsed = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(burst, b.tokens + std::max(0.0, elapsed) * rate);
    b.last = now;
  }
  Decision d;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    allowed_.fetch_add(1, std::memory_order_relaxed);
  } else {
    d.allowed = false;
    d.retry_after_seconds = std::max(1, static_cast<int>(std::ceil((1 - b.tokens) / rate)));
    limited_.fetch_add(1, std::memory_order_relaxed);
  }
  if (fresh && buckets_.size() > options_.max_sources) Shrink(now);
  return d;
}

void SourceLimiter::Shrink(std::chrono::steady_clock::time_point now) {
  const double rate = options_.per_minute / 60.0, burst = std::max(1.0, options_.burst);
  std::erase_if(buckets_, [&](const auto& e) {
    const double elapsed = std::chrono::duration<double>(now - e.second.last).count();
    return e.second.tokens + elapsed * rate >= burst;
  });
  if (buckets_.size() <= options_.max_sources / 2 + 1) return;
  std::vector<std::chrono::steady_clock::time_point> lasts;
  lasts.reserve(buckets_.size());
  for (const auto& e : buckets_) lasts.push_back(e.second.last);
  auto mid = lasts.begin() + static_cast<std::ptrdiff_t>(lasts.size() / 2);
  std::nth_element(lasts.begin(), mid, lasts.end());
  const auto cut = *mid;
  std::erase_if(buckets_, [&](const auto& e) { return e.second.last <= cut; });
}

size_t SourceLimiter::sources() const {
  std::lock_guard lock(mutex_);
  return buckets_.size();
}

HttpResponse SourceLimiter::Refusal(const Decision& d) const {
  HttpResponse r;
  r.status = 429;
  JsonWriter j;
  j.BeginObject();
  j.Key("error").String("ResourceExhausted");
  j.Key("rule").String("source_rate");
  const double per_minute = options_.per_minute;
  const std::string rate =
      per_minute >= 1 ? std::to_string(static_cast<int64_t>(per_minute)) + " a minute"
                      : std::to_string(static_cast<int64_t>(per_minute * 1440 + 0.5)) + " a day";
  j.Key("message").String("too many " + what_ + " from your network (limit " + rate +
                          "); retry after " + std::to_string(d.retry_after_seconds) + " s");
  j.EndObject();
  r.body = j.Take() + "\n";
  r.headers.emplace_back("Retry-After", std::to_string(d.retry_after_seconds));
  return r;
}

void AppendSourceLimitMetrics(const std::vector<const SourceLimiter*>& limits, std::string* out) {
  if (limits.empty()) return;
  *out +=
      "# HELP fieldprof_source_limit_total Requests under a per-source limit, by outcome "
      "(limited: answered 429).\n"
      "# TYPE fieldprof_source_limit_total counter\n";
  for (const SourceLimiter* l : limits) {
    const std::string labels = "{limit=\"" + l->what() + "\",outcome=\"";
    *out += "fieldprof_source_limit_total" + labels + "allowed\"} " + std::to_string(l->allowed()) +
            "\n";
    *out += "fieldprof_source_limit_total" + labels + "limited\"} " + std::to_string(l->limited()) +
            "\n";
  }
  *out +=
      "# HELP fieldprof_source_buckets Sources (address prefixes) a limit holds a bucket for.\n"
      "# TYPE fieldprof_source_buckets gauge\n";
  for (const SourceLimiter* l : limits) {
    *out += "fieldprof_source_buckets{limit=\"" + l->what() + "\"} " +
            std::to_string(l->sources()) + "\n";
  }
}

}  // namespace fieldprof::aggregator
