#include "aggregator/reads/answer_cache.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "common/net/gzip.h"

namespace fieldprof::aggregator {
namespace {

// A build this long or longer is slow: its answer is kept 144 times as
// long unasked (a day rather than ten minutes).
constexpr std::chrono::milliseconds kSlowBuild(50);
constexpr int kSlowKeptTimes = 144;

// What an answer counts against the bound (none before its first build).
size_t Bytes(const std::string& key, const std::shared_ptr<const HttpResponse>& r) {
  return r ? key.size() + r->body.size() + r->content_type.size() : 0;
}

// Smaller answers are sent as they are.
constexpr size_t kGzipFrom = 1024;

// `r` gzipped, or null when it is too small or not an answer to keep.
std::shared_ptr<const HttpResponse> Gzipped(const HttpResponse& r) {
  if (r.status != 200 || r.body.size() < kGzipFrom) return nullptr;
  StatusOr<std::string> z = Gzip(r.body);
  if (!z.ok()) return nullptr;
  auto g = std::make_shared<HttpResponse>(r);
  g->body = std::move(*z);
  g->headers.emplace_back("Content-Encoding", "gzip");
  return g;
}

}  // namespace

AnswerCache::AnswerCache(Store* store, std::chrono::milliseconds max_stale, size_t max_bytes,
                         Metrics* metrics, std::chrono::milliseconds unused_for)
    : store_(store),
      max_stale_(max_stale),
      max_bytes_(max_bytes),
      unused_for_(unused_for),
      metrics_(metrics) {
  if (max_stale_.count() > 0) refresher_ = std::thread([this] { RefreshLoop(); });
}

AnswerCache::~AnswerCache() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

HttpResponse AnswerCache::Get(const std::string& key, const Build& build, bool gzip) {
  if (max_stale_.count() == 0) {
    metrics_->AnswerBuilt();
    return build();
  }
  const uint64_t version = store_->DataVersion();
  const Clock::time_point now = Clock::now();
  std::shared_ptr<const HttpResponse> kept;
  Clock::time_point built;
  {
    std::lock_guard lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      Entry& e = it->second;
      e.used = now;
      if (!e.answer) {
        // Kept warm, its first build not landed yet: joined below.
      } else if (e.version == version) {
        kept = gzip && e.gzipped ? e.gzipped : e.answer;
        metrics_->AnswerKept(/*stale=*/false);
      } else if (now - e.built < max_stale_) {
        kept = gzip && e.gzipped ? e.gzipped : e.answer;
        metrics_->AnswerKept(/*stale=*/true);
        if (!e.refreshing) {
          kicked_ = true;
          wake_.notify_one();
        }
      }
      built = e.built;
    }
  }
  if (kept) {
    HttpResponse r = *kept;
    const auto age = std::chrono::duration_cast<std::chrono::seconds>(now - built);
    r.headers.emplace_back("Age", std::to_string(age.count()));
    return r;
  }
  return BuildInRequest(key, build, version);
}

HttpResponse AnswerCache::BuildInRequest(const std::string& key, const Build& build,
                                         uint64_t version) {
  std::shared_ptr<Flight> flight;
  {
    std::unique_lock lock(mu_);
    if (auto it = flights_.find(key); it != flights_.end()) {
      // Another request builds this answer now: it is at least as new as
      // one built here would be, give or take the batches applied since.
      const std::shared_ptr<Flight> joined = it->second;
      metrics_->AnswerJoined();
      landed_.wait(lock, [&] { return joined->done; });
      return *joined->answer;
    }
    flight = std::make_shared<Flight>();
    flights_.emplace(key, flight);
  }
  metrics_->AnswerBuilt();
  std::shared_ptr<const HttpResponse> answer;
  // The flight lands however the build ends (a throw too): nobody who
  // joined it waits for good.
  auto land = [&] {
    {
      std::lock_guard lock(mu_);
      flight->answer = answer ? answer
                              : std::make_shared<const HttpResponse>(HttpResponse{
                                    500, "text/plain", "the answer could not be built\n", {}});
      flight->done = true;
      flights_.erase(key);
    }
    landed_.notify_all();
  };
  const Clock::time_point started = Clock::now();
  try {
    answer = std::make_shared<const HttpResponse>(build());
  } catch (...) {
    land();
    throw;
  }
  if (answer->status == 200) Keep(key, answer, version, build, Clock::now() - started);
  land();
  return *answer;
}

void AnswerCache::Keep(const std::string& key, std::shared_ptr<const HttpResponse> answer,
                       uint64_t version, const Build& build, Clock::duration took) {
  const Clock::time_point now = Clock::now();
  if (Bytes(key, answer) > max_bytes_) return;
  std::lock_guard lock(mu_);
  Entry& e = entries_[key];
  SetLocked(key, &e, std::move(answer), nullptr);
  e.version = version;
  e.built = now;
  e.used = now;
  e.build = build;
  e.slow = took >= kSlowBuild;
  DropUnusedLocked(now);
  // Its gzipped form comes from the refresher.
  kicked_ = true;
  wake_.notify_one();
}

void AnswerCache::SetLocked(const std::string& key, Entry* e,
                            std::shared_ptr<const HttpResponse> answer,
                            std::shared_ptr<const HttpResponse> gzipped) {
  bytes_ -= e->bytes;
  e->answer = std::move(answer);
  e->gzipped = std::move(gzipped);
  e->bytes = Bytes(key, e->answer) + (e->gzipped ? e->gzipped->body.size() : 0);
  bytes_ += e->bytes;
}

void AnswerCache::GzipKept(std::unique_lock<std::mutex>& lock) {
  std::vector<std::string> plain;
  for (const auto& [key, e] : entries_) {
    if (e.answer && !e.gzipped && e.answer->body.size() >= kGzipFrom) plain.push_back(key);
  }
  for (const std::string& key : plain) {
    if (stop_) return;
    auto it = entries_.find(key);
    if (it == entries_.end() || !it->second.answer || it->second.gzipped) continue;
    const std::shared_ptr<const HttpResponse> answer = it->second.answer;
    lock.unlock();
    std::shared_ptr<const HttpResponse> gzipped = Gzipped(*answer);
    lock.lock();
    it = entries_.find(key);
    // Kept the same meanwhile: the gzipped form is of these sums.
    if (!gzipped || it == entries_.end() || it->second.answer != answer) continue;
    SetLocked(key, &it->second, answer, std::move(gzipped));
    DropUnusedLocked(Clock::now());
  }
}

size_t AnswerCache::KeptCount() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [key, e] : entries_) n += e.answer != nullptr;
  return n;
}

void AnswerCache::KeepWarm(const std::map<std::string, Build>& questions) {
  if (max_stale_.count() == 0) return;
  {
    std::lock_guard lock(mu_);
    const Clock::time_point now = Clock::now();
    for (auto& [key, e] : entries_) e.warm = questions.count(key) != 0;
    for (const auto& [key, build] : questions) {
      auto [it, added] = entries_.try_emplace(key);
      Entry& e = it->second;
      e.warm = true;
      if (!e.refreshing) e.build = build;
      if (added) e.used = now;
    }
    kicked_ = true;
    // Questions no longer warm that never got an answer.
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (!it->second.answer && !it->second.warm && !it->second.refreshing) {
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  wake_.notify_one();
}

void AnswerCache::DropUnusedLocked(Clock::time_point now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    const Entry& e = it->second;
    if (!e.refreshing && !e.warm &&
        now - e.used > (e.slow ? unused_for_ * kSlowKeptTimes : unused_for_)) {
      bytes_ -= e.bytes;
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  // Over the bound: the least recently used go first, those kept warm
  // after every other.
  while (bytes_ > max_bytes_ && !entries_.empty()) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.refreshing || !it->second.answer) continue;
      if (oldest == entries_.end() ||
          std::make_pair(it->second.warm, it->second.used) <
              std::make_pair(oldest->second.warm, oldest->second.used)) {
        oldest = it;
      }
    }
    if (oldest == entries_.end()) break;
    bytes_ -= oldest->second.bytes;
    entries_.erase(oldest);
  }
}

void AnswerCache::RefreshLoop() {
  // Below the request and ingest threads: a refresh is work nobody waits
  // for, and the kept answer is served meanwhile (nice 19, this thread
  // only).
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  // Looks often enough that an answer is rebuilt well before it is too
  // old to serve.
  const auto every =
      std::max<std::chrono::milliseconds>(max_stale_ / 4, std::chrono::milliseconds(50));
  std::unique_lock lock(mu_);
  uint64_t looked_at = 0;                     // the data version at the last look
  Clock::time_point moved_at = Clock::now();  // when a look last saw it move
  while (!stop_) {
    wake_.wait_for(lock, every, [this] { return stop_ || kicked_; });
    kicked_ = false;
    if (stop_) break;
    DropUnusedLocked(Clock::now());
    // Every answer whose data moved, one at a time, outside the lock.
    lock.unlock();
    const uint64_t version = store_->DataVersion();
    lock.lock();
    const Clock::time_point now = Clock::now();
    // No batch applied for a whole look's interval: the sums have
    // settled (looks come sooner when a request finds its answer stale).
    if (version != looked_at) {
      looked_at = version;
      moved_at = now;
    }
    const bool settled = now - moved_at >= every;
    std::vector<std::string> moved;
    std::vector<std::string> unasked;  // after those asked since their build
    for (const auto& [key, e] : entries_) {
      if (e.refreshing) continue;
      if (!e.answer) {
        // First builds of warm questions first: nobody has an answer yet.
        moved.insert(moved.begin(), key);
      } else if (e.version != version && e.used > e.built) {
        // An answer asked since it was built: at once.
        moved.push_back(key);
      } else if (e.version != version && (settled || now - e.built >= max_stale_ / 2)) {
        // One nobody asked (kept warm) once the sums settle, or half as
        // old as it may be served while they keep moving: still in time
        // for the next ask, at half the walks.
        unasked.push_back(key);
      }
    }
    moved.insert(moved.end(), unasked.begin(), unasked.end());
    for (const std::string& key : moved) {
      if (stop_) break;
      auto it = entries_.find(key);
      if (it == entries_.end() || it->second.refreshing) continue;
      const bool first = !it->second.answer;
      // A request builds it now, and keeps it.
      if (first && flights_.count(key) != 0) continue;
      it->second.refreshing = true;
      Refresh(lock, key, first, version);
    }
    GzipKept(lock);
  }
}

void AnswerCache::Refresh(std::unique_lock<std::mutex>& lock, const std::string& key, bool first,
                          uint64_t version) {
  const Build build = entries_.find(key)->second.build;
  std::shared_ptr<Flight> flight;
  if (first) {
    flight = std::make_shared<Flight>();
    flights_.emplace(key, flight);
  }
  lock.unlock();
  std::shared_ptr<const HttpResponse> answer, gzipped;
  const Clock::time_point started = Clock::now();
  try {
    answer = std::make_shared<const HttpResponse>(build());
  } catch (...) {
    answer = std::make_shared<const HttpResponse>(
        HttpResponse{500, "text/plain", "the answer could not be built\n", {}});
  }
  // A new answer replaces the old with its gzipped form; a first one is
  // served at once, and compressed after (GzipKept).
  const Clock::duration took = Clock::now() - started;
  if (!first) gzipped = Gzipped(*answer);
  lock.lock();
  if (flight) {
    flight->answer = answer;
    flight->done = true;
    flights_.erase(key);
    landed_.notify_all();
  }
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.refreshing = false;
  // A failed build keeps the old answer (and its version: tried again at
  // the next look).
  if (answer->status != 200) return;
  if (first) {
    metrics_->AnswerWarmed();
  } else {
    metrics_->AnswerRefreshed();
  }
  SetLocked(key, &e, std::move(answer), std::move(gzipped));
  // (At nice 19 a build may take longer than in a request: once slow, an
  // answer stays so.)
  e.slow = e.slow || took >= kSlowBuild;
  e.version = version;
  e.built = Clock::now();
  DropUnusedLocked(e.built);
}

}  // namespace fieldprof::aggregator
