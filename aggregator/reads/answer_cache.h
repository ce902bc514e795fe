// Answers that cost a walk over many series, kept between requests.
//
// GET /v1/stacks sums every field stack of a module: 100,000 of them take
// 0.1 to 0.4 s to walk, fold and write, and the answer of the same
// question is the same until the sums change. An answer is kept under its
// question (`key`) with the store's data version it was built at
// (Store::DataVersion):
//  - the version unchanged: the kept answer is the answer;
//  - the version moved (batches applied since): the kept answer is served
//    while it is younger than `max_stale`, and a refresher thread builds
//    the new one in the background; an older one is rebuilt in the
//    request. So on a store taking batches all the time an answer is at
//    most `max_stale` behind, and no request waits for a walk that a
//    kept answer could have spared;
//  - none kept (first ask, or unused for ten minutes and dropped): built
//    in the request. An answer whose build took 50 ms or more is kept a
//    day unasked instead (and kept current meanwhile): a slow question
//    asked again hours later is answered at once.
// A question asked again while a request builds its answer waits for that
// answer rather than building it too (one walk however many ask at once:
// a page opened by many, a dashboard's refresh).
// Questions kept warm (KeepWarm: a big module's usual questions) are
// built by the refresher before anyone asks them, and kept however long
// nobody does; a request that comes while such a build runs waits for it.
// A kept answer of 1 KB or more is also kept gzipped (compressed by the
// refresher, with the same sums), for requests that accept gzip.
// Only successful answers are kept; at most `max_bytes` of bodies, the
// least recently used dropped first (those not kept warm before those
// that are). A `max_stale` of zero keeps nothing: every request builds its
// answer.
//
//   AnswerCache cache(store, std::chrono::seconds(10), 256 << 20, &metrics);
//   return cache.Get(key, [=] { return BuildAnswer(...); });
#ifndef FIELDPROF_AGGREGATOR_READS_ANSWER_CACHE_H_
#define FIELDPROF_AGGREGATOR_READS_ANSWER_CACHE_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "aggregator/http/http_types.h"
#include "aggregator/metrics.h"
#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

class AnswerCache {
 public:
  using Build = std::function<HttpResponse()>;

  // `store` and `metrics` must outlive the cache. `unused_for`: how long
  // an answer nobody asks is kept (one slow to build: 144 times that).
  AnswerCache(Store* store, std::chrono::milliseconds max_stale, size_t max_bytes, Metrics* metrics,
              std::chrono::milliseconds unused_for = std::chrono::minutes(10));
  ~AnswerCache();  // stops the refresher
  AnswerCache(const AnswerCache&) = delete;
  AnswerCache& operator=(const AnswerCache&) = delete;

  // The answer to `key`, kept or built by `build` (which must give the
  // same answer for the same key and data); a kept one gzipped
  // (Content-Encoding: gzip) when `gzip` and that is ready.
  HttpResponse Get(const std::string& key, const Build& build, bool gzip = false);

  // The questions to keep warm, each with its build; a question kept warm
  // before and not here becomes an ordinary kept answer (dropped once
  // unasked for ten minutes). Nothing when `max_stale` is zero.
  void KeepWarm(const std::map<std::string, Build>& questions);

  // How many answers are kept now.
  size_t KeptCount();

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::shared_ptr<const HttpResponse> answer;
    // The same gzipped, once compressed (null: not yet, or too small).
    std::shared_ptr<const HttpResponse> gzipped;
    size_t bytes = 0;  // what the entry counts against max_bytes
    uint64_t version = 0;
    Clock::time_point built, used;
    Build build;
    bool refreshing = false;
    bool warm = false;  // KeepWarm; `answer` is null until its first build
    bool slow = false;  // its last build took kSlowBuild or more
  };

  // A build in a request, which others asking the same question join.
  struct Flight {
    bool done = false;
    std::shared_ptr<const HttpResponse> answer;
  };

  HttpResponse BuildInRequest(const std::string& key, const Build& build, uint64_t version);
  void Keep(const std::string& key, std::shared_ptr<const HttpResponse> answer, uint64_t version,
            const Build& build, Clock::duration took);
  // Sets `e`'s answers and their bytes.
  void SetLocked(const std::string& key, Entry* e, std::shared_ptr<const HttpResponse> answer,
                 std::shared_ptr<const HttpResponse> gzipped);
  void DropUnusedLocked(Clock::time_point now);
  // Compresses the kept answers not compressed yet; with `lock` held.
  void GzipKept(std::unique_lock<std::mutex>& lock);
  void RefreshLoop();
  // The refresher's build of `key`, whose entry is marked refreshing; a
  // first build (`first`) is a flight that requests join. Called and
  // returns with `lock` held.
  void Refresh(std::unique_lock<std::mutex>& lock, const std::string& key, bool first,
               uint64_t version);

  Store* const store_;
  const std::chrono::milliseconds max_stale_;
  const size_t max_bytes_;
  const std::chrono::milliseconds unused_for_;
  Metrics* const metrics_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool kicked_ = false;  // the refresher has work now (set with mu_ held)
  size_t bytes_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;
  std::condition_variable landed_;  // a flight is done
  std::thread refresher_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_READS_ANSWER_CACHE_H_
