// The store contract (aggregator/store/store.h), run against both stores: the
// RocksDB store in a temporary directory and the ClickHouse store on a real
// ClickHouse (Debian's clickhouse-server, one per test process, a database
// per test). Tests of one store's own machinery are plain TESTs at the end.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <thread>

#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/store/aggregate_value.h"
#include "aggregator/store/calendar_tree.h"
#include "aggregator/store/k_anonymous_store.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"
#include "tests/support/clickhouse_process.h"
#include "tests/support/test_util.h"
#include "tools/loadgen/batch_gen.h"

namespace fieldprof::aggregator {
namespace {

using fieldprof::testing::IdOf;
using fieldprof::testing::SimpleBatch;
using fieldprof::testing::TempDir;

enum class Kind { kRocksDb, kClickHouse };

std::string KindName(const ::testing::TestParamInfo<Kind>& info) {
  return info.param == Kind::kRocksDb ? "RocksDb" : "ClickHouse";
}

// Opens (and reopens) one store of the kind under test over the same data.
class StoreOpener {
 public:
  explicit StoreOpener(Kind kind) : kind_(kind) {
    if (kind_ == Kind::kClickHouse) {
      server_ = testing::SharedClickHouse();
      database_ = testing::UniqueDatabase();
    }
  }
  bool ready() const { return kind_ == Kind::kRocksDb || server_ != nullptr; }

  // `today`: the store's idea of today (null: the clock's).
  StatusOr<std::unique_ptr<Store>> Open(std::function<int32_t()> today = nullptr,
                                        int max_pending = 0) {
    if (kind_ == Kind::kRocksDb) {
      RocksDbStoreOptions o{.path = dir_.path()};
      o.rollup_chunk_series = 7;  // many small steps
      o.today = std::move(today);
      if (max_pending > 0) o.max_pending_batches = max_pending;
      return OpenRocksDbStore(o);
    }
    ClickHouseStoreOptions o;
    o.url = server_->Url();
    o.database = database_;
    o.horizon_days = 0;  // a day is folded once it is over, as RocksDB rolls it up
    o.drop_grace = std::chrono::seconds(0);
    o.rollup_interval = std::chrono::milliseconds(50);
    o.today = std::move(today);
    if (max_pending > 0) o.max_pending_batches = max_pending;
    return OpenClickHouseStore(o);
  }

 private:
  Kind kind_;
  TempDir dir_;
  testing::ClickHouseProcess* server_ = nullptr;
  std::string database_;
};

class StoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(opener_.ready()) << "clickhouse-server did not start (deploy/install-deps.sh "
                                    "installs it)";
  }
  std::unique_ptr<Store> Open(std::function<int32_t()> today = nullptr, int max_pending = 0) {
    auto s = opener_.Open(std::move(today), max_pending);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  StoreOpener opener_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(BothStores, StoreTest,
                         ::testing::Values(Kind::kRocksDb, Kind::kClickHouse), KindName);

StatusOr<ApplyResult> Apply(Store& store, const wire::Batch& b, int32_t day) {
  const std::string body = b.SerializeAsString();
  BatchView view;
  if (Status s = DecodeBatchView(body, &view); !s.ok()) return s;
  return store.ApplyBatch(view, body, day);
}

ApiKey KeyOf(const wire::Batch& b, int i = 0) {
  return ApiKeyFromWire(b.records(i).key(), b.client_platform());
}

TEST_P(StoreTest, AppliesAndSums) {
  auto store = Open([] { return 100; });  // days 100 and 101 are today and tomorrow
  ASSERT_NE(store, nullptr);
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

TEST_P(StoreTest, DuplicateIdChangesNothing) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
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

// ApplyBatchFoldLater (the ingest path's): the batch is durable and known
// by its id when the call returns; what it leaves (the RocksDB store's fold
// into the sums in memory) keeps it pending until it has run, so
// WaitApplied waits for it too; then its sums are there, once.
TEST_P(StoreTest, ABatchLeftToFoldLaterIsPendingUntilFolded) {
  auto store = Open([] { return 100; });
  ASSERT_NE(store, nullptr);
  wire::Batch a = SimpleBatch(IdOf(1), "libz.so.1", "deflate", 1000, 3);
  const std::string body = a.SerializeAsString();
  BatchView view;
  ASSERT_TRUE(DecodeBatchView(body, &view).ok());
  std::function<void()> fold;
  auto r = store->ApplyBatchFoldLater(view, body, 100, &fold);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->duplicate);
  // Durable and counted already: the same id again (from another thread,
  // as another connection's would come) is a duplicate.
  auto again = std::async(std::launch::async, [&] { return Apply(*store, a, 100); }).get();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->duplicate);
  if (GetParam() == Kind::kRocksDb) {
    ASSERT_TRUE(fold) << "the RocksDB store leaves its fold";
    EXPECT_EQ(store->pending_batches(), 1u);
    EXPECT_FALSE(store->WaitApplied(std::chrono::milliseconds(0)).ok());
  }
  if (fold) fold();
  ASSERT_TRUE(store->WaitApplied(std::chrono::seconds(10)).ok());
  auto all = store->QueryRange(KeyOf(a), kUnboundedFirst, kUnboundedLast);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->histogram.count(), 3u);
  EXPECT_EQ(all->histogram.sum(), 3u * 1000);
}

// Field stacks are series like any other (metric stack_cpu_ns): each sums
// exactly once, a batch sent twice counts once, on either store; and
// behind k = 2, the rare ones fold into the prefix two machines share
// (k_anonymous_store.h, stack_others.h), over all time and a day range.
// Stack series sum once (a replayed batch adds nothing); behind k = 2, the
// stacks of one machine each stay withheld whole: folded together they
// would count each machine once per stack (stack_others.h).
TEST_P(StoreTest, StackSeriesSumOnceAndOneMachinesStacksStayBehindK) {
  auto store = Open([] { return 100; });
  ASSERT_NE(store, nullptr);
  auto batch = [](int id, const std::string& machine,
                  const std::vector<std::pair<std::string, uint64_t>>& stacks) {
    wire::Batch b = SimpleBatch(IdOf(id), "libz.so.1", "deflate", 1, 1);
    b.clear_records();
    b.set_machine_key(machine);
    for (const auto& [symbol, ns] : stacks) {
      wire::Record* r = b.add_records();
      r->mutable_key()->set_module("libz.so.1");
      r->mutable_key()->set_module_version("1.0");
      r->mutable_key()->set_symbol(symbol);
      r->mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
      Histogram h;
      h.Record(ns);
      HistogramToWire(h, r->mutable_histogram());
      r->set_runs(1);
      r->set_first_from_machine(true);  // each machine's first of each stack
    }
    return b;
  };
  const std::string m1(16, '1'), m2(16, '2');
  const wire::Batch a = batch(1, m1, {{"deflate;+10;+20", 700}, {"deflate;+10;+30", 11}});
  const wire::Batch b = batch(2, m2, {{"deflate;+10;+20", 300}, {"deflate;+10;+40", 13}});
  ASSERT_TRUE(Apply(*store, a, 100).ok());
  ASSERT_TRUE(Apply(*store, b, 101).ok());
  auto again = Apply(*store, a, 101);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  ASSERT_TRUE(store->WaitApplied(std::chrono::seconds(10)).ok());
  ApiFilter stacks;
  stacks.module = "libz.so.1";
  stacks.metric = wire::METRIC_STACK_CPU_NS;
  auto sums = [&](Store& s, int32_t from, int32_t to) {
    std::map<std::string, uint64_t> out;
    const Status st = s.ForEachApiInRange(stacks, from, to, [&](ApiAggregate&& x) {
      out[x.key.symbol] += static_cast<uint64_t>(x.histogram.sum());
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  };
  using Sums = std::map<std::string, uint64_t>;
  EXPECT_EQ(sums(*store, kUnboundedFirst, kUnboundedLast),
            (Sums{{"deflate;+10;+20", 1000}, {"deflate;+10;+30", 11}, {"deflate;+10;+40", 13}}));
  KAnonymousStore k2(store.get(), 2);
  EXPECT_EQ(sums(k2, kUnboundedFirst, kUnboundedLast), (Sums{{"deflate;+10;+20", 1000}}));
  // Day 101 alone: machine 2's, as the all-time decision says.
  EXPECT_EQ(sums(k2, 101, 101), (Sums{{"deflate;+10;+20", 300}}));
}

// BatchAccepted knows an id once ApplyBatch took it, and not before.
TEST_P(StoreTest, AnAcceptedBatchIsKnownByItsId) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const wire::Batch a = SimpleBatch(IdOf(7), "libz.so.1", "deflate", 1000, 3);
  StatusOr<bool> before = store->BatchAccepted(a.batch_id());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_FALSE(*before);
  ASSERT_TRUE(Apply(*store, a, 100).ok());
  // Known once applied, as the sums are (ClickHouse: readable a moment
  // after the insert is acknowledged).
  ASSERT_TRUE(store->WaitApplied(std::chrono::seconds(10)).ok());
  StatusOr<bool> after = store->BatchAccepted(a.batch_id());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(*after);
  StatusOr<bool> other = store->BatchAccepted(IdOf(8));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(*other);
}

TEST_P(StoreTest, ConcurrentDuplicatesCountOnce) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
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

TEST_P(StoreTest, RealisticBatchesMatchGroundTruthAcrossReopen) {
  tools::BatchGenerator gen(
      {.seed = 11, .modules = 30, .symbols_per_module = 20, .target_bytes = 32 * 1024});
  tools::GroundTruth truth;
  {
    // Today is the first day: nothing is rolled up while batches arrive.
    auto store = Open([] { return 20000; });
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 20; ++i) {
      wire::Batch b = gen.Next();
      ASSERT_TRUE(ValidateBatch(b).ok());
      ASSERT_TRUE(Apply(*store, b, 20000 + i % 3).ok());
      truth.Add(b);
    }
    ASSERT_TRUE(store->Close().ok());  // pending batches are folded or kept
  }
  // Reopened three days later: the days roll up while the test reads, and
  // every answer is exact at any moment of it.
  auto store = Open([] { return 20003; });
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->WaitApplied(std::chrono::seconds(10)).ok());
  // All time and the three days, every series at once; a few alone.
  for (auto [first, last] : {std::pair{kUnboundedFirst, kUnboundedLast}, std::pair{20000, 20002}}) {
    size_t seen = 0;
    ASSERT_TRUE(
        store
            ->ForEachApiInRange(ApiFilter(), first, last,
                                [&](ApiAggregate&& a) {
                                  ++seen;
                                  EXPECT_EQ(a.histogram, truth.by_key().at(EncodeApiKey(a.key)))
                                      << a.key.module << " " << a.key.symbol;
                                  return true;
                                })
            .ok());
    EXPECT_EQ(seen, truth.by_key().size());
  }
  size_t i = 0;
  for (const auto& [enc, h] : truth.by_key()) {
    if (i++ % 50 != 0) continue;
    auto key = DecodeApiKey(enc);
    ASSERT_TRUE(key.ok());
    auto got = store->QueryRange(*key, kUnboundedFirst, kUnboundedLast);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->histogram, h) << key->module << " " << key->symbol;
    auto days = store->QueryRange(*key, 20000, 20002);
    EXPECT_EQ(days->histogram, h);
  }
}

// Days are rolled up (RocksDB: into month and all-time nodes; ClickHouse:
// folded into day and month nodes) once they are over. Every answer must be
// exact before, during and after a roll-up, across a reopen in the middle
// of one, and across a month's end.
class RollupTest : public ::testing::TestWithParam<Kind> {
 protected:
  static constexpr int32_t kDay0 = 20089;  // 2025-01-01

  void OpenStore() {
    ASSERT_TRUE(opener_.ready());
    auto s = opener_.Open([this] { return today_.load(); });
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
    for (int i = 0; i < 1000 && Metric("fieldprof_rollup_next_day") < uint64_t(next_day); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(Metric("fieldprof_rollup_next_day"), uint64_t(next_day));
  }

  // All time, each day, the whole month and the listing equal the truth;
  // so do ranges across the days sent. Each range is read for every series
  // at once (ForEachApiInRange) and for a few series one by one (QueryRange).
  void ExpectExact() {
    std::vector<std::pair<int32_t, int32_t>> ranges = {{kUnboundedFirst, kUnboundedLast},
                                                       {kDay0, LastDayOfMonth(MonthOfDay(kDay0))},
                                                       {kUnboundedFirst, kDay0 + 15}};
    for (const auto& [day, t] : truth_) ranges.push_back({day, day});
    for (const auto& [first, last] : ranges) ExpectRangeExact(first, last);
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

  // The truth of days [first, last], by key.
  std::map<std::string, Histogram> TruthOf(int32_t first, int32_t last) {
    std::map<std::string, Histogram> want;
    for (const auto& [day, t] : truth_) {
      if (day < first || day > last) continue;
      for (const auto& [enc, h] : t.by_key()) want[enc].Merge(h);
    }
    return want;
  }

  void ExpectRangeExact(int32_t first, int32_t last) {
    const std::string range = (first == kUnboundedFirst ? "..." : FormatDay(first)) + " to " +
                              (last == kUnboundedLast ? "..." : FormatDay(last));
    const std::map<std::string, Histogram> want = TruthOf(first, last);
    std::map<std::string, Histogram> got;
    ASSERT_TRUE(store_
                    ->ForEachApiInRange(ApiFilter(), first, last,
                                        [&](ApiAggregate&& a) {
                                          got[EncodeApiKey(a.key)] = a.histogram;
                                          return true;
                                        })
                    .ok());
    ASSERT_EQ(got.size(), want.size()) << range;
    for (const auto& [enc, h] : want) ASSERT_EQ(got[enc], h) << range;
    // A few series alone, including one without data in the range.
    size_t i = 0;
    for (const auto& [enc, h] : all_.by_key()) {
      if (i++ % 37 != 0) continue;
      auto key = DecodeApiKey(enc);
      ASSERT_TRUE(key.ok());
      auto one = store_->QueryRange(*key, first, last);
      ASSERT_TRUE(one.ok()) << one.status().ToString();
      auto it = want.find(enc);
      ASSERT_EQ(one->histogram, it == want.end() ? Histogram() : it->second)
          << key->symbol << " " << range;
    }
  }

  StoreOpener opener_{GetParam()};
  std::atomic<int32_t> today_{kDay0};
  std::unique_ptr<Store> store_;
  tools::BatchGenerator gen_{
      {.seed = 5, .modules = 12, .symbols_per_module = 15, .target_bytes = 8 * 1024}};
  std::map<int32_t, tools::GroundTruth> truth_;
  tools::GroundTruth all_;
};

INSTANTIATE_TEST_SUITE_P(BothStores, RollupTest,
                         ::testing::Values(Kind::kRocksDb, Kind::kClickHouse), KindName);

TEST_P(RollupTest, ExactBeforeDuringAndAfterRollups) {
  OpenStore();
  Send(6, kDay0);  // today: not rolled up
  ExpectExact();
  EXPECT_EQ(Metric("fieldprof_rollup_next_day"), uint64_t(kDay0));
  EXPECT_EQ(Metric("fieldprof_rollup_series_total"), 0u);

  today_ = kDay0 + 1;  // day 0 is over
  Send(4, kDay0 + 1);
  ExpectExact();  // whatever the roll-up has done by now
  WaitRolledUpTo(kDay0 + 1);
  EXPECT_EQ(Metric("fieldprof_rollup_series_total"), truth_[kDay0].by_key().size());
  ExpectExact();

  // Days 1..4 over, only day 4 has more data, sent while it was today.
  today_ = kDay0 + 4;
  Send(3, kDay0 + 4);
  today_ = kDay0 + 5;
  WaitRolledUpTo(kDay0 + 5);
  ExpectExact();
}

// RocksDB adds data for a day already rolled up to all of its nodes; the
// ClickHouse store puts it on today (store.h): the all-time sums are the
// same either way.
// A batch stays known by its id after its day is rolled up (ClickHouse:
// its raw rows folded, the id kept with the fold).
TEST_P(RollupTest, ABatchIsKnownByItsIdAfterItsDayIsRolledUp) {
  OpenStore();
  const wire::Batch a = SimpleBatch(IdOf(7), "libz.so.1", "deflate", 1000, 3);
  ASSERT_TRUE(Apply(*store_, a, kDay0).ok());
  // Two days on, so that the day's raw rows are gone too (ClickHouse keeps
  // them until the next day is folded).
  today_ = kDay0 + 2;
  Send(1, kDay0 + 2);
  WaitRolledUpTo(kDay0 + 2);
  StatusOr<bool> known = store_->BatchAccepted(a.batch_id());
  ASSERT_TRUE(known.ok()) << known.status().ToString();
  EXPECT_TRUE(*known);
  StatusOr<bool> other = store_->BatchAccepted(IdOf(8));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(*other);
}

TEST_P(RollupTest, LateDataForARolledDayCounts) {
  OpenStore();
  Send(3, kDay0);
  today_ = kDay0 + 1;
  WaitRolledUpTo(kDay0 + 1);
  wire::Batch late = gen_.Next();
  ASSERT_TRUE(Apply(*store_, late, kDay0).ok());
  ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(10)).ok());
  all_.Add(late);
  const int32_t late_day = GetParam() == Kind::kRocksDb ? kDay0 : kDay0 + 1;
  truth_[late_day].Add(late);
  ExpectExact();
}

TEST_P(RollupTest, ReopenInTheMiddleOfARollup) {
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

// Days on both sides of a month's end: once the month is over it is read
// from its month node (ClickHouse: folded from the day nodes), and ranges
// that cut through it from day nodes.
TEST_P(RollupTest, AcrossAMonthEnd) {
  const int32_t jan30 = kDay0 + 29, feb1 = kDay0 + 31;
  today_ = jan30;
  OpenStore();
  Send(3, jan30);
  today_ = jan30 + 1;
  Send(3, jan30 + 1);
  today_ = feb1;
  Send(3, feb1);
  today_ = feb1 + 2;
  WaitRolledUpTo(feb1 + 2);
  if (GetParam() == Kind::kClickHouse) {
    // Its month fold follows the days' in the same pass.
    for (int i = 0; i < 500 && Metric("fieldprof_rollup_months_total") < 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(Metric("fieldprof_rollup_months_total"), 1u);
  }
  ExpectExact();
  for (const auto& [enc, h] : all_.by_key()) {
    auto key = DecodeApiKey(enc);
    Histogram want;
    for (int32_t d : {jan30 + 1, feb1}) {
      auto it = truth_[d].by_key().find(enc);
      if (it != truth_[d].by_key().end()) want.Merge(it->second);
    }
    auto cross = store_->QueryRange(*key, jan30 + 1, feb1);
    ASSERT_TRUE(cross.ok());
    ASSERT_EQ(cross->histogram, want) << key->symbol;
  }
}

TEST_P(StoreTest, ListFiltersByModulePrefixAndMetric) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
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

TEST_P(StoreTest, BackpressureWhenTooMuchIsPending) {
  auto opened = Open(nullptr, /*max_pending=*/1);
  ASSERT_NE(opened, nullptr);
  Store& store = *opened;
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

TEST_P(StoreTest, ClosedStoreRefuses) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
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

// A stored value is read in place (no protobuf message): what it sums is
// what the message says, machines included; bytes that reader leaves (a
// field given twice, which protobuf merges) go to protobuf; damaged ones
// are refused with nothing added.
TEST(AggregateValueTest, StoredValuesReadInPlaceSumAsTheirMessages) {
  tools::BatchGenerator gen(
      {.seed = 7, .modules = 3, .symbols_per_module = 4, .target_bytes = 16 * 1024});
  const wire::Batch b = gen.Next();
  SparseAggregate read, want;
  int n = 0;
  for (const auto& r : b.records()) {
    SparseAggregate one;
    one.AddRecord(r);
    one.AddMachine(MachineHash("machine " + std::to_string(n++ % 7)));
    std::string value;
    one.Encode(&value);
    ASSERT_TRUE(read.AddEncoded(value));
    wire::Record message;
    ASSERT_TRUE(message.ParseFromString(value));
    want.AddRecord(message);
    MachineSketch machines;
    ASSERT_TRUE(machines.Decode(message.machines()));
    want.AddMachines(machines);
  }
  ASSERT_GT(n, 10);
  std::string got_bytes, want_bytes;
  read.Encode(&got_bytes);
  want.Encode(&want_bytes);
  EXPECT_EQ(got_bytes, want_bytes);
  EXPECT_EQ(read.machines().Estimate(), 7u);
  EXPECT_EQ(read.ToHistogram(), want.ToHistogram());

  // The histogram field twice: protobuf merges the two.
  SparseAggregate a, c;
  a.AddRecord(b.records(0));
  c.AddRecord(b.records(1));
  std::string va, vc;
  a.Encode(&va);
  c.Encode(&vc);
  wire::Record ra, rc;
  ASSERT_TRUE(ra.ParseFromString(va) && rc.ParseFromString(vc));
  wire::Record merged = ra;
  merged.MergeFrom(rc);
  std::string joined = va + vc;  // both records' fields, in one value
  SparseAggregate from_joined, from_merged;
  ASSERT_TRUE(from_joined.AddEncoded(joined));
  from_merged.AddRecord(merged);
  EXPECT_EQ(from_joined.ToHistogram(), from_merged.ToHistogram());
  EXPECT_EQ(from_joined.runs(), merged.runs());

  // Damaged machines: refused, nothing added.
  wire::Record bad = ra;
  bad.set_machines("\x07garbage");
  SparseAggregate refuses;
  EXPECT_FALSE(refuses.AddEncoded(bad.SerializeAsString()));
  EXPECT_TRUE(refuses.empty());
  EXPECT_EQ(refuses.runs(), 0u);
  EXPECT_TRUE(read.AddEncoded(va));  // a good one still adds
}

// A batch accepted but not yet folded when the process dies is folded at
// the next open with its machine: the pending log keeps the secret its
// entries are derived from, never its key, nor the batch's token.
TEST(RocksDbStoreTest, PendingBatchesKeepTheirMachinesButNotTheirKeysAcrossACrash) {
  TempDir dir;
  const wire::Batch warm = SimpleBatch(IdOf(1), "libz.so.1", "deflate", 10);
  std::vector<wire::Batch> batches;  // three batches from two machines
  const std::string keys[2] = {std::string(16, '\x91'), std::string(16, '\x92')};
  const std::string token(64, '\x93');
  for (int i = 0; i < 3; ++i) {
    wire::Batch b = SimpleBatch(IdOf(10 + i), "libz.so.1", "deflate", 10);
    b.set_machine_key(keys[i % 2]);
    b.mutable_records(0)->set_first_from_machine(i < 2);  // each machine's first
    b.set_token(token);
    b.set_token_epoch(7);
    batches.push_back(b);
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A fold a minute after the last: the three batches stay pending.
    RocksDbStoreOptions o{.path = dir.path()};
    o.fold_interval = std::chrono::seconds(60);
    auto s = OpenRocksDbStore(o);
    if (!s.ok()) _exit(2);
    if (!Apply(**s, warm, 1).ok() || !(*s)->WaitApplied(std::chrono::seconds(10)).ok()) _exit(3);
    for (const wire::Batch& b : batches) {
      if (!Apply(**s, b, 1).ok()) _exit(4);
    }
    _exit(0);  // a crash: no close, no fold
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    for (const std::string& secret : {keys[0], keys[1], token}) {
      EXPECT_EQ(bytes.find(secret), std::string::npos) << e.path();
    }
  }
  auto store = OpenRocksDbStore({.path = dir.path()});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->WaitApplied(std::chrono::seconds(10)).ok());
  auto got = (*store)->QueryRange(KeyOf(warm), kUnboundedFirst, kUnboundedLast);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->histogram.count(), 4u) << "the three pending batches were recovered";
  EXPECT_EQ(got->machines.Estimate(), 2u);
  EXPECT_EQ(got->day_machines.Estimate(), 2u);
  ASSERT_TRUE((*store)->Close().ok());
}

}  // namespace
}  // namespace fieldprof::aggregator

namespace fieldprof::aggregator {
namespace {

// Once a fold is written, a pending memtable at least half full is
// flushed while its bodies sit beside their deletes: the bodies are
// dropped on the way and never written to a table (at full load, left to
// fill up, it was flushed with up to a fold of live bodies).
TEST(RocksDbStoreTest, FoldedBodiesAreNotWrittenToTables) {
  // Batches filling three quarters of the pending memtable, folded in one
  // fold once the last is in (half the pending budget; the interval is
  // far away), so the test does not depend on when folds happen.
  tools::BatchGenerator gen({.seed = 3, .target_bytes = 100 * 1024});
  const size_t memtable = size_t{2} << 20;
  std::vector<wire::Batch> batches;
  size_t bytes = 0;
  while (bytes < memtable * 3 / 4) {
    batches.push_back(gen.Next());
    bytes += batches.back().ByteSizeLong();
  }
  TempDir dir;
  RocksDbStoreOptions o{.path = dir.path()};
  o.pending_write_buffer_bytes = memtable;
  o.fold_interval = std::chrono::minutes(10);
  o.max_pending_batches = 2 * static_cast<int>(batches.size());
  auto store = OpenRocksDbStore(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  // The first fold starts at the first batch: a small one, applied first.
  ASSERT_TRUE(Apply(**store, SimpleBatch(IdOf(1), "libz.so.1", "deflate", 10), 1).ok());
  ASSERT_TRUE((*store)->WaitApplied(std::chrono::seconds(60)).ok());
  for (const wire::Batch& b : batches) ASSERT_TRUE(Apply(**store, b, 1).ok());
  ASSERT_TRUE((*store)->WaitApplied(std::chrono::seconds(60)).ok());
  auto metric = [&](const std::string& name) {
    std::string text;
    (*store)->AppendMetrics(&text);
    return testing::MetricValue(text, name + "{cf=\"pending\"}").value_or(-1);
  };
  // The flush runs in the background: its memtable goes, and a table of
  // deletes is left.
  EXPECT_TRUE(testing::WaitUntil([&] {
    return metric("fieldprof_rocksdb_memtable_bytes") < 64 * 1024 &&
           metric("fieldprof_rocksdb_running_flushes") <= 0;
  })) << "the pending memtable was not flushed: "
      << metric("fieldprof_rocksdb_memtable_bytes") << " bytes after " << batches.size()
      << " batches of " << bytes;
  EXPECT_GT(metric("fieldprof_rocksdb_live_sst_bytes"), 0) << "no table was written";
  EXPECT_LT(metric("fieldprof_rocksdb_live_sst_bytes"), 32 * 1024)
      << "bodies were written to a table";
  ASSERT_TRUE((*store)->Close().ok());
}

// What no reader ever saw is not kept for ever (docs/privacy.md): a series
// still below k 90 days after its first record goes, every node of it, the
// day the roll-up reaches; a published one, and a young one, stay.
TEST(RocksDbStoreTest, ASeriesBelowKIsDeletedAfterTheRetention) {
  TempDir dir;
  std::atomic<int32_t> today{960};  // day 900 is 60 days old: kept
  RocksDbStoreOptions o{.path = dir.path()};
  o.today = [&today] { return today.load(); };
  o.unpublished_k = 3;
  o.unpublished_retention_days = 90;
  auto store = OpenRocksDbStore(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto send = [&](uint64_t id, const std::string& symbol, int machine, int32_t day) {
    wire::Batch b = SimpleBatch(IdOf(id), "libz.so.1", symbol, 1000);
    b.set_machine_key(std::string(15, 'm') + static_cast<char>('0' + machine));
    b.mutable_records(0)->set_first_from_machine(true);
    ASSERT_TRUE(Apply(**store, b, day).ok());
  };
  send(1, "rare_old", 1, 900);
  send(2, "rare_old", 2, 950);
  for (int m = 0; m < 3; ++m) send(10 + m, "common_old", m, 900);
  send(20, "rare_young", 1, 990);
  ASSERT_TRUE((*store)->WaitApplied(std::chrono::seconds(30)).ok());
  auto runs = [&](const std::string& symbol) {
    const wire::Batch b = SimpleBatch(IdOf(99), "libz.so.1", symbol, 1);
    StatusOr<ApiAggregate> a = (*store)->QueryRange(KeyOf(b), kUnboundedFirst, kUnboundedLast);
    EXPECT_TRUE(a.ok());
    return a.ok() ? a->runs : 0;
  };
  EXPECT_EQ(runs("rare_old"), 2u);
  // Day 1000: rare_old's first record (day 900) is 100 days old.
  today = 1000;
  ASSERT_TRUE(testing::WaitUntil([&] { return runs("rare_old") == 0; })) << "rare_old still there";
  EXPECT_EQ(runs("common_old"), 3u);
  EXPECT_EQ(runs("rare_young"), 1u);
  // Not a node of it is left: its days and months too.
  const wire::Batch b = SimpleBatch(IdOf(99), "libz.so.1", "rare_old", 1);
  for (int32_t d : {900, 950}) {
    StatusOr<ApiAggregate> day = (*store)->QueryRange(KeyOf(b), d, d);
    ASSERT_TRUE(day.ok());
    EXPECT_EQ(day->runs, 0u) << d;
  }
  std::string metrics;
  (*store)->AppendMetrics(&metrics);
  EXPECT_EQ(testing::MetricValue(metrics, "fieldprof_series_expired_total").value_or(-1), 1);
  ASSERT_TRUE((*store)->Close().ok());
}

}  // namespace
}  // namespace fieldprof::aggregator
