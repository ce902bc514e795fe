#include "aggregator/reads/recent_apis.h"

#include <algorithm>
#include <set>
#include <utility>

namespace fieldprof::aggregator {

void RecentApis::Add(const BatchView& batch, int64_t unix_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = std::min<size_t>(batch.records().size(), kPerBatch);
  for (size_t i = 0; i < n; ++i) {
    const ApiKeyView& k = batch.records(static_cast<int>(i)).key();
    Seen seen{std::string(k.module()), std::string(k.symbol()), unix_ms};
    if (ring_.size() < kCapacity) {
      ring_.push_back(std::move(seen));
    } else {
      ring_[next_] = std::move(seen);
    }
    next_ = (next_ + 1) % kCapacity;
  }
}

std::vector<RecentApis::Seen> RecentApis::Latest(size_t limit) const {
  std::vector<Seen> oldest_first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ring_.size() < kCapacity) {
      oldest_first = ring_;
    } else {
      const auto split = ring_.begin() + static_cast<std::ptrdiff_t>(next_);
      oldest_first.assign(split, ring_.end());
      oldest_first.insert(oldest_first.end(), ring_.begin(), split);
    }
  }
  std::vector<Seen> out;
  std::set<std::pair<std::string, std::string>> shown;
  for (auto it = oldest_first.rbegin(); it != oldest_first.rend() && out.size() < limit; ++it) {
    if (!shown.insert({it->module, it->symbol}).second) continue;  // an older repeat
    out.push_back(std::move(*it));
  }
  return out;
}

}  // namespace fieldprof::aggregator
