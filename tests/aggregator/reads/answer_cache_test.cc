// Kept answers over a real RocksDB store: kept while the sums stand,
// served at most max_stale behind them and refreshed in the background
// while batches come, rebuilt in the request once older, never kept when
// they failed, and none kept at all with max_stale zero.
#include "aggregator/reads/answer_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/store/store_rocksdb.h"
#include "common/wire/batch_view.h"
#include "tests/support/gunzip.h"
#include "tests/support/test_util.h"

namespace fieldprof::aggregator {
namespace {

using fieldprof::testing::Gunzip;
using fieldprof::testing::IdOf;
using fieldprof::testing::SimpleBatch;
using fieldprof::testing::TempDir;
using fieldprof::testing::WaitUntil;

class AnswerCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = OpenRocksDbStore({.path = dir_.File("db")});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }

  // A batch with one more series (its own symbol), applied and summed.
  void AddSeries() {
    ++series_;
    const wire::Batch b = SimpleBatch(IdOf(static_cast<uint64_t>(series_)), "libz.so.1",
                                      "api_" + std::to_string(series_), 1000, 2);
    const std::string body = b.SerializeAsString();
    BatchView view;
    ASSERT_TRUE(DecodeBatchView(body, &view).ok());
    ASSERT_TRUE(store_->ApplyBatch(view, body, 100).ok());
    ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(60)).ok());
  }

  // The answer: how many series the store holds now; each call counted.
  AnswerCache::Build CountSeries() {
    return [this] {
      ++builds_;
      auto all = store_->ListApis(ApiFilter(), 1000);
      if (!all.ok()) return HttpResponse{500, "text/plain", all.status().ToString(), {}};
      return HttpResponse{200, "text/plain", std::to_string(all->size()), {}};
    };
  }

  static std::string Header(const HttpResponse& r, const std::string& name) {
    for (const auto& [k, value] : r.headers) {
      if (k == name) return value;
    }
    return "";
  }
  static bool HasAge(const HttpResponse& r) { return !Header(r, "Age").empty(); }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  Metrics metrics_;
  std::atomic<int> builds_{0};
  int series_ = 0;
};

TEST_F(AnswerCacheTest, KeptWhileTheSumsStandAndPerQuestion) {
  AddSeries();
  AnswerCache cache(store_.get(), std::chrono::hours(1), 1 << 20, &metrics_);
  const HttpResponse first = cache.Get("q", CountSeries());
  EXPECT_EQ(first.body, "1");
  EXPECT_FALSE(HasAge(first));
  for (int i = 0; i < 5; ++i) {
    const HttpResponse again = cache.Get("q", CountSeries());
    EXPECT_EQ(again.body, "1");
    EXPECT_TRUE(HasAge(again));
  }
  EXPECT_EQ(builds_.load(), 1);
  // Another question is built for itself.
  EXPECT_EQ(cache.Get("other", CountSeries()).body, "1");
  EXPECT_EQ(builds_.load(), 2);
}

TEST_F(AnswerCacheTest, BehindTheSumsAtMostMaxStaleThenRefreshedInTheBackground) {
  AddSeries();
  AnswerCache cache(store_.get(), std::chrono::hours(1), 1 << 20, &metrics_);
  EXPECT_EQ(cache.Get("q", CountSeries()).body, "1");
  AddSeries();
  // Within max_stale: the kept answer, at once; its refresh starts.
  const HttpResponse stale = cache.Get("q", CountSeries());
  EXPECT_EQ(stale.body, "1");
  EXPECT_TRUE(HasAge(stale));
  // The refresher sums the new answer; requests then get it, kept.
  EXPECT_TRUE(WaitUntil([&] { return cache.Get("q", CountSeries()).body == "2"; }));
  EXPECT_EQ(builds_.load(), 2);
  std::string text;
  metrics_.AppendPrometheus(&text);
  EXPECT_NE(text.find("fieldprof_answers_refreshed_total 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fieldprof_answers_built_total 1\n"), std::string::npos) << text;
}

TEST_F(AnswerCacheTest, OlderThanMaxStaleIsRebuiltInTheRequest) {
  AddSeries();
  AnswerCache cache(store_.get(), std::chrono::milliseconds(1), 1 << 20, &metrics_);
  EXPECT_EQ(cache.Get("q", CountSeries()).body, "1");
  AddSeries();  // takes longer than a millisecond: the kept answer is too old
  EXPECT_EQ(cache.Get("q", CountSeries()).body, "2");
  AddSeries();
  EXPECT_EQ(cache.Get("q", CountSeries()).body, "3");
}

TEST_F(AnswerCacheTest, AFailedAnswerIsNotKept) {
  AnswerCache cache(store_.get(), std::chrono::hours(1), 1 << 20, &metrics_);
  int calls = 0;
  const AnswerCache::Build failing = [&] {
    ++calls;
    return HttpResponse{503, "text/plain", "store reopening", {}};
  };
  EXPECT_EQ(cache.Get("q", failing).status, 503);
  EXPECT_EQ(cache.Get("q", failing).status, 503);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.Get("q", CountSeries()).status, 200);
}

TEST_F(AnswerCacheTest, MaxStaleZeroKeepsNothing) {
  AddSeries();
  AnswerCache cache(store_.get(), std::chrono::milliseconds(0), 1 << 20, &metrics_);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.Get("q", CountSeries()).body, "1");
  EXPECT_EQ(builds_.load(), 3);
}

// Requests for an answer nobody kept, at once: one builds it, the others
// wait for that build (the build below holds on until all of them are
// waiting; were each building its own, it would never see them and give
// up at the deadline, and the builds would count four).
TEST_F(AnswerCacheTest, RequestsAtOnceWaitForOneBuild) {
  AddSeries();
  AnswerCache cache(store_.get(), std::chrono::hours(1), 1 << 20, &metrics_);
  constexpr int kRequests = 4;
  auto joined = [&] {
    std::string text;
    metrics_.AppendPrometheus(&text);
    return text.find("fieldprof_answers_joined_total " + std::to_string(kRequests - 1) + "\n") !=
           std::string::npos;
  };
  std::atomic<bool> all_joined{false};
  const AnswerCache::Build slow = [&] {
    ++builds_;
    all_joined = WaitUntil(joined, std::chrono::seconds(20));
    return HttpResponse{200, "text/plain", "the answer", {}};
  };
  std::vector<std::thread> requests;
  std::vector<std::string> bodies(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    requests.emplace_back([&, i] { bodies[i] = cache.Get("q", slow).body; });
  }
  for (std::thread& t : requests) t.join();
  EXPECT_TRUE(all_joined.load());
  EXPECT_EQ(builds_.load(), 1);
  for (const std::string& b : bodies) EXPECT_EQ(b, "the answer");
  // A failed build is not kept, and those who joined it get its failure.
  const AnswerCache::Build failing = [&] {
    ++builds_;
    return HttpResponse{503, "text/plain", "busy", {}};
  };
  EXPECT_EQ(cache.Get("r", failing).status, 503);
  EXPECT_EQ(cache.Get("r", failing).status, 503);
  EXPECT_EQ(builds_.load(), 3);
}

TEST_F(AnswerCacheTest, AnswersPastTheByteBoundAreNotKept) {
  AddSeries();
  AnswerCache cache(store_.get(), std::chrono::hours(1), /*max_bytes=*/8, &metrics_);
  const AnswerCache::Build big = [&] {
    ++builds_;
    return HttpResponse{200, "text/plain", std::string(100, 'x'), {}};
  };
  cache.Get("q", big);
  cache.Get("q", big);
  EXPECT_EQ(builds_.load(), 2);
}

// A question kept warm is built by the refresher before anyone asks it;
// the first ask gets it kept. Nobody asking, it still follows the sums
// (rebuilt once half max_stale old). Kept warm no more, it is an ordinary
// kept answer.
TEST_F(AnswerCacheTest, WarmQuestionsAreAnsweredBeforeAnyoneAsks) {
  AddSeries();
  // Kept answers may be served up to 3 s old: the ask below comes right
  // after the refresh is stored (200 ms, and waiting only for the refresh
  // to start, failed once beside a full test run: the old answer had
  // grown too old while the refresh, at nice 19, was still building).
  AnswerCache cache(store_.get(), std::chrono::seconds(3), 1 << 20, &metrics_);
  cache.KeepWarm({{"q", CountSeries()}});
  ASSERT_TRUE(WaitUntil([&] { return builds_.load() == 1; }));
  AddSeries();
  // Asked by nobody, refreshed all the same: built again and kept.
  ASSERT_TRUE(WaitUntil([&] {
    std::string t;
    metrics_.AppendPrometheus(&t);
    return builds_.load() == 2 &&
           t.find("fieldprof_answers_refreshed_total 1\n") != std::string::npos;
  }));
  const HttpResponse r = cache.Get("q", CountSeries());
  EXPECT_EQ(r.body, "2");
  EXPECT_TRUE(HasAge(r));
  std::string text;
  metrics_.AppendPrometheus(&text);
  EXPECT_NE(text.find("fieldprof_answers_warmed_total 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fieldprof_answers_built_total 0\n"), std::string::npos) << text;
  // A question no longer warm and never answered is forgotten: asked, it
  // is built in the request.
  cache.KeepWarm({{"other", [] { return HttpResponse{503, "text/plain", "busy", {}}; }}});
  cache.KeepWarm({});
  EXPECT_EQ(cache.Get("other", CountSeries()).body, "2");
  text.clear();
  metrics_.AppendPrometheus(&text);
  EXPECT_NE(text.find("fieldprof_answers_built_total 1\n"), std::string::npos) << text;
}

// A request for a warm question whose first build runs waits for that
// build rather than building it too.
TEST_F(AnswerCacheTest, ARequestWaitsForTheWarmBuildUnderWay) {
  AnswerCache cache(store_.get(), std::chrono::hours(1), 1 << 20, &metrics_);
  std::atomic<bool> building{false}, joined{false};
  const AnswerCache::Build slow = [&] {
    ++builds_;
    building = true;
    joined = WaitUntil(
        [&] {
          std::string text;
          metrics_.AppendPrometheus(&text);
          return text.find("fieldprof_answers_joined_total 1\n") != std::string::npos;
        },
        std::chrono::seconds(20));
    return HttpResponse{200, "text/plain", "the answer", {}};
  };
  cache.KeepWarm({{"q", slow}});
  ASSERT_TRUE(WaitUntil([&] { return building.load(); }));
  EXPECT_EQ(cache.Get("q", slow).body, "the answer");
  EXPECT_TRUE(joined.load());
  EXPECT_EQ(builds_.load(), 1);
}

// A kept answer of 1 KB or more goes gzipped, once the refresher has
// compressed it, to a request that takes gzip; the same sums as the plain
// one, which every other request gets. A small one goes as it is.
TEST_F(AnswerCacheTest, AKeptAnswerGoesGzippedToWhomTakesIt) {
  AddSeries();
  AnswerCache cache(store_.get(), std::chrono::hours(1), 1 << 20, &metrics_);
  const AnswerCache::Build big = [&] {
    ++builds_;
    std::string body;
    for (int i = 0; i < 500; ++i) body += "frame_" + std::to_string(i % 7) + ";";
    body += std::to_string(builds_.load());
    return HttpResponse{200, "text/plain", body, {{"Vary", "Accept-Encoding"}}};
  };
  const HttpResponse first = cache.Get("q", big, /*gzip=*/true);  // built here: plain
  EXPECT_EQ(Header(first, "Content-Encoding"), "");
  HttpResponse z;
  ASSERT_TRUE(WaitUntil([&] {
    z = cache.Get("q", big, /*gzip=*/true);
    return Header(z, "Content-Encoding") == "gzip";
  }));
  EXPECT_EQ(Gunzip(z.body, 1 << 20), first.body);
  EXPECT_LT(z.body.size() * 5, first.body.size());
  EXPECT_EQ(Header(z, "Vary"), "Accept-Encoding");
  EXPECT_TRUE(HasAge(z));
  const HttpResponse plain = cache.Get("q", big, /*gzip=*/false);
  EXPECT_EQ(plain.body, first.body);
  EXPECT_EQ(Header(plain, "Content-Encoding"), "");
  // A refreshed answer replaces both forms at once.
  AddSeries();
  EXPECT_EQ(Header(cache.Get("q", big, true), "Content-Encoding"), "gzip");  // stale, kicks
  ASSERT_TRUE(WaitUntil([&] { return builds_.load() == 2; }));
  ASSERT_TRUE(WaitUntil([&] {
    z = cache.Get("q", big, /*gzip=*/true);
    return Gunzip(z.body, 1 << 20).ends_with(";2");
  }));
  EXPECT_EQ(cache.Get("q", big, false).body, Gunzip(z.body, 1 << 20));
  // Small: never gzipped.
  cache.Get("small", CountSeries(), true);
  ASSERT_TRUE(WaitUntil([&] { return builds_.load() == 3; }));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Header(cache.Get("small", CountSeries(), true), "Content-Encoding"), "");
  }
  EXPECT_EQ(builds_.load(), 3);
}

// An answer nobody asks is dropped after unused_for, unless its build
// was slow (50 ms or more): that one is kept 144 times as long, current
// meanwhile, so the slow question asked again is answered at once.
TEST_F(AnswerCacheTest, ASlowAnswerIsKeptLongerUnasked) {
  AddSeries();
  // The refresher looks every 100 ms (a quarter of max_stale).
  AnswerCache cache(store_.get(), std::chrono::milliseconds(400), 1 << 20, &metrics_,
                    /*unused_for=*/std::chrono::milliseconds(300));
  std::atomic<int> slow_builds{0};
  const AnswerCache::Build slow = [&] {
    ++slow_builds;
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // at least that: slow
    return HttpResponse{200, "text/plain", "slow", {}};
  };
  EXPECT_FALSE(HasAge(cache.Get("slow", slow)));
  // The fast one must be built quicker than 50 ms: tried again in case
  // this machine stalled it.
  bool fast = false;
  for (int attempt = 0; attempt < 5 && !fast; ++attempt) {
    const auto started = std::chrono::steady_clock::now();
    cache.Get("fast", CountSeries());
    fast = std::chrono::steady_clock::now() - started < std::chrono::milliseconds(50);
  }
  ASSERT_TRUE(fast);
  EXPECT_EQ(cache.KeptCount(), 2u);
  // Unasked past unused_for: the fast one is dropped, the slow one kept.
  ASSERT_TRUE(WaitUntil([&] { return cache.KeptCount() == 1; }));
  const int before = builds_.load();
  EXPECT_FALSE(HasAge(cache.Get("fast", CountSeries())));
  EXPECT_EQ(builds_.load(), before + 1);
  EXPECT_TRUE(HasAge(cache.Get("slow", slow)));
  EXPECT_EQ(slow_builds.load(), 1);
}

}  // namespace
}  // namespace fieldprof::aggregator
