// The RocksDB store against a real RocksDB in a temporary directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "aggregator/aggregate_value.h"
#include "aggregator/store_rocksdb.h"
#include "aggregator/time_tree.h"
#include "common/validate.h"
#include "common/wire.h"
#include "tests/test_util.h"
#include "tools/batch_gen.h"

namespace fieldprof::aggregator {
namespace {

using fieldprof::testing::IdOf;
using fieldprof::testing::SimpleBatch;
using fieldprof::testing::TempDir;

std::unique_ptr<Store> Open(const std::string& path) {
  auto s = OpenRocksDbStore({.path = path});
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

StatusOr<ApplyResult> Apply(Store& store, const wire::Batch& b, int32_t day) {
  const std::string body = b.SerializeAsString();
  BatchView view;
  if (Status s = DecodeBatchView(body, &view); !s.ok()) return s;
  return store.ApplyBatch(view, body, day);
}

ApiKey KeyOf(const wire::Batch& b, int i = 0) {
  return ApiKeyFromWire(b.records(i).key(), b.client_platform());
}

TEST(StoreTest, AppliesAndSums) {
  TempDir dir;
  auto store = Open(dir.path());
  wire::Batch a = SimpleBatch(IdOf(1), "libz.so.1", "deflate", 1000, 3);
  wire::Batch b = SimpleBatch(IdOf(2), "libz.so.1", "deflate", 5000, 2);
  ASSERT_TRUE(Apply(*store, a, 100).ok());
  ASSERT_TRUE(Apply(*store, b, 101).ok());
  ASSERT_TRUE(store->WaitApplied(std::chrono::seconds(10)).ok());
  auto all = store->QueryRange(KeyOf(a), kUnboundedFirst, kUnboundedLast);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->histogram.count(), 5u);
  EXPECT_EQ(all->histogram.sum(), 3u * 1000 + 2u * 5000);
  EXPECT_EQ(all->runs, 2u);
  auto day100 = store->QueryRange(KeyOf(a), 100, 100);
  EXPECT_EQ(day100->histogram.count(), 3u);
  auto none = store->QueryRange(KeyOf(a), 102, 200);
  EXPECT_TRUE(none->histogram.empty());
}

TEST(StoreTest, DuplicateIdChangesNothing) {
  TempDir dir;
  auto store = Open(dir.path());
  wire::Batch a = SimpleBatch(IdOf(1), "libz.so.1", "deflate", 1000, 3);
  auto r1 = Apply(*store, a, 100);
  ASSERT_TRUE(r1.ok());
  EXPECT_FALSE(r1->duplicate);
  // Same id, even with other content: a duplicate.
  wire::Batch again = SimpleBatch(IdOf(1), "libz.so.1", "deflate", 7, 9);
  auto r2 = Apply(*store, again, 100);
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->duplicate);
  ASSERT_TRUE(store->WaitApplied(std::chrono::seconds(10)).ok());
  auto all = store->QueryRange(KeyOf(a), kUnboundedFirst, kUnboundedLast);
  EXPECT_EQ(all->histogram.count(), 3u);
}

TEST(StoreTest, ConcurrentDuplicatesCountOnce) {
  TempDir dir;
  auto store = Open(dir.path());
  constexpr int kIds = 50, kThreads = 8;
  std::atomic<int> applied{0}, dups{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIds; ++i) {
        auto r = Apply(*store, SimpleBatch(IdOf(i), "libc.so.6", "malloc", 40, 1), 5);
        ASSERT_TRUE(r.ok());
        (r->duplicate ? dups : applied)++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(applied.load(), kIds);
  EXPECT_EQ(dups.load(), kIds * (kThreads - 1));
  ASSERT_TRUE(store->WaitApplied(std::chrono::seconds(10)).ok());
  auto all = store->QueryRange(KeyOf(SimpleBatch(IdOf(0), "libc.so.6", "malloc", 40)),
                               kUnboundedFirst, kUnboundedLast);
  EXPECT_EQ(all->histogram.count(), static_cast<uint64_t>(kIds));
}

TEST(StoreTest, RealisticBatchesMatchGroundTruthAcrossReopen) {
  TempDir dir;
  tools::BatchGenerator gen(
      {.seed = 11, .modules = 30, .symbols_per_module = 20, .target_bytes = 32 * 1024});
  tools::GroundTruth truth;
  {
    auto store = Open(dir.path());
    for (int i = 0; i < 20; ++i) {
      wire::Batch b = gen.Next();
      ASSERT_TRUE(ValidateBatch(b).ok());
      ASSERT_TRUE(Apply(*store, b, 20000 + i % 3).ok());
      truth.Add(b);
    }
    ASSERT_TRUE(store->Close().ok());  // pending batches are folded or kept
  }
  auto store = Open(dir.path());
  ASSERT_TRUE(store->WaitApplied(std::chrono::seconds(10)).ok());
  for (const auto& [enc, h] : truth.by_key()) {
    auto key = DecodeApiKey(enc);
    ASSERT_TRUE(key.ok());
    auto got = store->QueryRange(*key, kUnboundedFirst, kUnboundedLast);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->histogram, h) << key->module << " " << key->symbol;
    // The day-level nodes sum to the same thing.
    auto days = store->QueryRange(*key, 20000, 20002);
    EXPECT_EQ(days->histogram, h);
  }
}

// Days are rolled up into month and all-time sums once they are over. Every
// answer must be exact before, during and after a roll-up, across a reopen
// in the middle of one, and for data that arrives for a day already rolled.
class RollupTest : public ::testing::Test {
 protected:
  static constexpr int32_t kDay0 = 20089;  // 2025-01-01

  void OpenStore() {
    auto s = OpenRocksDbStore({.path = dir_.path(),
                               .rollup_chunk_series = 7,  // many small steps
                               .today = [this] { return today_.load(); }});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }

  void Send(int batches, int32_t day) {
    for (int i = 0; i < batches; ++i) {
      wire::Batch b = gen_.Next();
      ASSERT_TRUE(Apply(*store_, b, day).ok());
      truth_[day].Add(b);
      all_.Add(b);
    }
    ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(10)).ok());
  }

  uint64_t Metric(const std::string& name) {
    std::string text;
    store_->AppendMetrics(&text);
    const size_t at = text.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name;
    return std::stoull(text.substr(at + name.size() + 2));
  }

  void WaitRolledUpTo(int32_t next_day) {
    for (int i = 0; i < 500 && Metric("fieldprof_rollup_next_day") < uint64_t(next_day); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(Metric("fieldprof_rollup_next_day"), uint64_t(next_day));
  }

  // All time, each day, the whole month and the listing equal the truth.
  void ExpectExact() {
    for (const auto& [enc, h] : all_.by_key()) {
      auto key = DecodeApiKey(enc);
      ASSERT_TRUE(key.ok());
      auto got = store_->QueryRange(*key, kUnboundedFirst, kUnboundedLast);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->histogram, h) << key->symbol;
      auto month = store_->QueryRange(*key, kDay0, kDay0 + 30);
      ASSERT_EQ(month->histogram, h) << key->symbol;
      for (const auto& [day, t] : truth_) {
        auto want = t.by_key().find(enc);
        auto d = store_->QueryRange(*key, day, day);
        ASSERT_TRUE(d.ok());
        ASSERT_EQ(d->histogram, want == t.by_key().end() ? Histogram() : want->second)
            << key->symbol << " day " << day;
      }
    }
    auto listed = store_->ListApis(ApiFilter(), 1 << 20);
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), all_.by_key().size());
    for (const ApiAggregate& a : *listed) {
      ASSERT_EQ(a.histogram, all_.by_key().at(EncodeApiKey(a.key))) << a.key.symbol;
    }
    // The streaming walk sees the same series in key order, and stops when told.
    std::vector<std::string> walked;
    ASSERT_TRUE(store_
                    ->ForEachApi(ApiFilter(),
                                 [&](ApiAggregate&& a) {
                                   EXPECT_EQ(a.histogram, all_.by_key().at(EncodeApiKey(a.key)));
                                   walked.push_back(EncodeApiKey(a.key));
                                   return true;
                                 })
                    .ok());
    ASSERT_EQ(walked.size(), all_.by_key().size());
    EXPECT_TRUE(std::is_sorted(walked.begin(), walked.end()));
    size_t seen = 0;
    ASSERT_TRUE(store_->ForEachApi(ApiFilter(), [&](ApiAggregate&&) { return ++seen < 3; }).ok());
    EXPECT_EQ(seen, std::min<size_t>(3, walked.size()));
  }

  TempDir dir_;
  std::atomic<int32_t> today_{kDay0};
  std::unique_ptr<Store> store_;
  tools::BatchGenerator gen_{
      {.seed = 5, .modules = 12, .symbols_per_module = 15, .target_bytes = 8 * 1024}};
  std::map<int32_t, tools::GroundTruth> truth_;
  tools::GroundTruth all_;
};

TEST_F(RollupTest, ExactBeforeDuringAndAfterRollups) {
  OpenStore();
  Send(6, kDay0);  // today: written to day nodes only
  ExpectExact();
  EXPECT_EQ(Metric("fieldprof_rollup_next_day"), uint64_t(kDay0));
  EXPECT_EQ(Metric("fieldprof_rollup_series_total"), 0u);

  today_ = kDay0 + 1;  // day 0 is over
  Send(4, kDay0 + 1);
  ExpectExact();  // whatever the roll-up has done by now
  WaitRolledUpTo(kDay0 + 1);
  EXPECT_EQ(Metric("fieldprof_rollup_series_total"), truth_[kDay0].by_key().size());
  ExpectExact();

  Send(2, kDay0);  // late data for a rolled day goes to all three nodes
  ExpectExact();

  today_ = kDay0 + 5;  // days 1..4 over, only day 1 has data
  Send(3, kDay0 + 4);
  WaitRolledUpTo(kDay0 + 5);
  ExpectExact();
}

TEST_F(RollupTest, ReopenInTheMiddleOfARollup) {
  OpenStore();
  Send(8, kDay0);
  Send(8, kDay0 + 1);
  today_ = kDay0 + 2;
  // Close at once: the roll-up is cut short somewhere in its chunks.
  ASSERT_TRUE(store_->Close().ok());
  store_.reset();
  OpenStore();
  ExpectExact();
  WaitRolledUpTo(kDay0 + 2);
  ExpectExact();
  EXPECT_GE(Metric("fieldprof_rollup_series_total"), 1u);
}

TEST(StoreTest, ListFiltersByModulePrefixAndMetric) {
  TempDir dir;
  auto store = Open(dir.path());
  ASSERT_TRUE(Apply(*store, SimpleBatch(IdOf(1), "libz.so.1", "deflate", 10), 1).ok());
  ASSERT_TRUE(Apply(*store, SimpleBatch(IdOf(2), "libz.so.1", "deflateEnd", 10), 1).ok());
  ASSERT_TRUE(Apply(*store, SimpleBatch(IdOf(3), "libz.so.1", "inflate", 10), 1).ok());
  ASSERT_TRUE(Apply(*store, SimpleBatch(IdOf(4), "libzstd.so.1", "ZSTD_compress", 10), 1).ok());
  ASSERT_TRUE(store->WaitApplied(std::chrono::seconds(10)).ok());
  ApiFilter f;
  f.module = "libz.so.1";
  EXPECT_EQ(store->ListApis(f, 100)->size(), 3u);
  f.symbol_prefix = "deflate";
  EXPECT_EQ(store->ListApis(f, 100)->size(), 2u);
  f.symbol_exact = true;
  EXPECT_EQ(store->ListApis(f, 100)->size(), 1u);
  ApiFilter all;
  EXPECT_EQ(store->ListApis(all, 100)->size(), 4u);
  EXPECT_EQ(store->ListApis(all, 2)->size(), 2u);
  all.metric = wire::METRIC_ALLOC_COUNT;
  EXPECT_EQ(store->ListApis(all, 100)->size(), 0u);
}

TEST(StoreTest, BackpressureWhenTooMuchIsPending) {
  TempDir dir;
  auto opened = OpenRocksDbStore({.path = dir.path(), .max_pending_batches = 1});
  ASSERT_TRUE(opened.ok());
  Store& store = **opened;
  int exhausted = 0;
  for (int i = 0; i < 200; ++i) {
    auto r = Apply(store, SimpleBatch(IdOf(i), "libz.so.1", "deflate", 10), 1);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
      ++exhausted;
    }
  }
  // Not asserting how many (timing), only that refusals are clean and the
  // accepted ones are all counted.
  ASSERT_TRUE(store.WaitApplied(std::chrono::seconds(10)).ok());
  auto all = store.QueryRange(KeyOf(SimpleBatch(IdOf(0), "libz.so.1", "deflate", 10)),
                              kUnboundedFirst, kUnboundedLast);
  EXPECT_EQ(all->histogram.count(), 200u - exhausted);
}

TEST(StoreTest, ClosedStoreRefuses) {
  TempDir dir;
  auto store = Open(dir.path());
  ASSERT_TRUE(store->Close().ok());
  auto r = Apply(*store, SimpleBatch(IdOf(1), "libz.so.1", "deflate", 10), 1);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

TEST(AggregateValueTest, MergeIsOrderIndependentBytes) {
  tools::BatchGenerator gen(
      {.seed = 5, .modules = 2, .symbols_per_module = 1, .target_bytes = 8 * 1024});
  wire::Batch b = gen.Next();
  std::vector<std::string> ops;
  for (const auto& r : b.records()) {
    SparseAggregate one;
    one.AddRecord(r);
    one.Encode(&ops.emplace_back());
  }
  std::string forward, backward;
  SparseAggregate f, g;
  for (const auto& o : ops) ASSERT_TRUE(f.AddEncoded(o));
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) ASSERT_TRUE(g.AddEncoded(*it));
  f.Encode(&forward);
  g.Encode(&backward);
  EXPECT_EQ(forward, backward);
  SparseAggregate bad;
  EXPECT_FALSE(bad.AddEncoded("\xff\xff\xff"));
}

}  // namespace
}  // namespace fieldprof::aggregator
