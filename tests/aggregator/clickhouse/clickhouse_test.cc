// The ClickHouse store's own machinery against a real ClickHouse
// (Debian's 18.16) on loopback: the reader of ClickHouse's answers, copies of one batch counted
// once however they were stored, retries after the raw rows are folded, the schema's version, and
// the real aggregator over it. The store contract itself runs against this store in store_test.cc;
// the cluster in cluster_test.cc.
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/clickhouse/client.h"
#include "aggregator/clickhouse/dev_store_clickhouse.h"
#include "aggregator/clickhouse/lab_storage_clickhouse.h"
#include "aggregator/clickhouse/rows.h"
#include "aggregator/clickhouse/servers.h"
#include "aggregator/clickhouse/snapshot_storage_clickhouse.h"
#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/publish/publisher.h"
#include "aggregator/publish/snapshot_storage.h"
#include "aggregator/store/calendar_tree.h"
#include "aggregator/store/dev_store.h"
#include "aggregator/store/lab_storage.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/crypto/signing.h"
#include "common/crypto/upload_tokens.h"
#include "common/wire/api_key.h"
#include "common/wire/batch_view.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/clickhouse_process.h"
#include "tests/support/test_util.h"
#include "tools/loadgen/batch_gen.h"

namespace fieldprof::aggregator {
namespace {

TEST(ClickHouseShardsTest, ParsesReplicasAndShards) {
  auto shards = ParseClickHouseShards("http://a:1,http://b:2/;http://c:3", std::chrono::seconds(1));
  ASSERT_TRUE(shards.ok()) << shards.status().ToString();
  ASSERT_EQ(shards->size(), 2u);
  ASSERT_EQ((*shards)[0].size(), 2u);
  EXPECT_EQ((*shards)[0][1].host, "b");
  EXPECT_EQ((*shards)[0][1].port, 2);
  EXPECT_FALSE((*shards)[0][1].tls);
  EXPECT_EQ((*shards)[1][0].port, 3);
  auto one = ParseClickHouseShards("http://localhost", std::chrono::seconds(1));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)[0][0].port, 8123);
  for (const char* bad : {"https://a:1", "http://:80", "http://h:99999", "http://h:12x",
                          "http://a:1;;http://b:2", "", "a:1"}) {
    auto r = ParseClickHouseShards(bad, std::chrono::seconds(1));
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("clickhouse_url"), std::string::npos);
    }
  }
}

wire::Batch MakeBatch(char id,
                      const std::vector<std::pair<std::string, std::vector<uint64_t>>>& apis) {
  wire::Batch b;
  b.set_schema_version(kSchemaVersion);
  b.set_batch_id(std::string(16, id));
  b.set_created_unix_ms(1795392000000);
  b.mutable_client_platform()->set_os(wire::OS_LINUX);
  b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
  b.mutable_client_platform()->set_cpu_vendor(wire::CPU_VENDOR_AMD);
  b.mutable_client_platform()->set_cpu_family(25);
  for (const auto& [sym, values] : apis) {
    wire::Record* r = b.add_records();
    r->mutable_key()->set_module("libch.so.1");
    r->mutable_key()->set_module_version("1.0");
    r->mutable_key()->set_symbol(sym);
    r->mutable_key()->set_metric(wire::METRIC_WALL_TIME_NS);
    Histogram h;
    for (uint64_t v : values) h.Record(v);
    HistogramToWire(h, r->mutable_histogram());
    r->set_runs(1);
  }
  return b;
}

ApiKey KeyOf(const wire::Batch& b, int i) {
  return ApiKeyFromWire(b.records(i).key(), b.client_platform());
}

StatusOr<ApplyResult> Apply(Store& store, const wire::Batch& b, int32_t day) {
  const std::string body = b.SerializeAsString();
  BatchView view;
  if (Status s = DecodeBatchView(body, &view); !s.ok()) return s;
  return store.ApplyBatch(view, body, day);
}

std::string RowsOf(const wire::Batch& b, int32_t day) {
  const std::string body = b.SerializeAsString();
  BatchView view;
  EXPECT_TRUE(DecodeBatchView(body, &view).ok());
  return BatchRows(view, day);
}

uint64_t Metric(Store& store, const std::string& name) {
  std::string text;
  store.AppendMetrics(&text);
  const size_t at = text.find("\n" + name + " ");
  EXPECT_NE(at, std::string::npos) << name;
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + name.size() + 2));
}

class ClickHouseStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::SharedClickHouse();
    ASSERT_NE(server_, nullptr) << "clickhouse-server did not start (deploy/install-deps.sh "
                                   "installs it)";
    database_ = testing::UniqueDatabase();
  }
  StatusOr<std::unique_ptr<Store>> Open() {
    ClickHouseStoreOptions o;
    o.url = server_->Url();
    o.database = database_;
    o.horizon_days = 1;
    o.drop_grace = std::chrono::seconds(0);
    o.rollup_interval = std::chrono::milliseconds(50);
    o.today = [this] { return today_.load(); };
    return OpenClickHouseStore(o);
  }
  void WaitFoldedTo(Store& store, int32_t next_day) {
    for (int i = 0; i < 500 && Metric(store, "fieldprof_rollup_next_day") < uint64_t(next_day);
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(Metric(store, "fieldprof_rollup_next_day"), uint64_t(next_day));
  }

  // ClickHouse's RowBinary answer for every raw row, each record once.
  bool RawRowsAnswer(std::string* answer) {
    ClickHouseClient ch(server_->Options());
    const std::string sql =
        ChOrderedRowsSql(ChDedupRowsSql(database_ + ".fp_rows", "batch_id, seq", "module != ''"));
    return ch
        .QueryStream(sql, {},
                     [&](std::string_view p) {
                       answer->append(p);
                       return true;
                     })
        .ok();
  }

  testing::ClickHouseProcess* server_ = nullptr;
  std::string database_;
  std::atomic<int32_t> today_{20000};
};

// Values near 2^63: bucket sums past 2^64, sums of squares near 2^127.
const uint64_t kBig = (uint64_t{1} << 63) + 12345;

// Copies of one batch that slipped past the check (two aggregators taking
// it at once, across midnight) are its rows twice: counted once, on the
// first day, before and after the days are folded.
TEST_F(ClickHouseStoreTest, ABatchStoredTwiceCountsOnceOnItsFirstDay) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const wire::Batch a =
      MakeBatch('a', {{"huge", {kBig, kBig, kBig, kBig}}, {"small", {1, 2, 3, 0}}, {"small", {9}}});
  const wire::Batch b = MakeBatch('b', {{"huge", {kBig - 1}}, {"small", {7}}});
  ClickHouseClient ch(server_->Options());
  const std::string table = database_ + ".fp_rows";
  ASSERT_TRUE(ch.InsertRowBinary(table, RowsOf(a, 20000)).ok());
  ASSERT_TRUE(ch.InsertRowBinary(table, RowsOf(a, 20001)).ok());  // its twin after midnight
  ASSERT_TRUE(ch.InsertRowBinary(table, RowsOf(a, 20000)).ok());  // and one more
  ASSERT_TRUE(Apply(**store, b, 20001).ok());
  std::map<std::string, Histogram> want;
  std::map<std::string, uint64_t> runs;
  for (const wire::Batch* batch : {&a, &b}) {
    for (const wire::Record& r : batch->records()) {
      want[r.key().symbol()].Merge(HistogramFromWire(r.histogram()));
      runs[r.key().symbol()] += r.runs();
    }
  }
  EXPECT_GT(want.at("huge").sum(), static_cast<uint128>(UINT64_MAX));
  auto check = [&] {
    for (int i : {0, 1}) {
      const ApiKey k = KeyOf(a, i);
      auto all = (*store)->QueryRange(k, kUnboundedFirst, kUnboundedLast);
      ASSERT_TRUE(all.ok()) << all.status().ToString();
      EXPECT_TRUE(all->histogram == want.at(k.symbol)) << k.symbol;
      EXPECT_EQ(all->runs, runs.at(k.symbol)) << k.symbol << ": each record once";
      auto first = (*store)->QueryRange(k, 20000, 20000);
      ASSERT_TRUE(first.ok());
      Histogram of_a;
      for (const wire::Record& r : a.records()) {
        if (r.key().symbol() == k.symbol) of_a.Merge(HistogramFromWire(r.histogram()));
      }
      EXPECT_TRUE(first->histogram == of_a) << k.symbol << " on the first day";
      auto second = (*store)->QueryRange(k, 20001, 20001);
      ASSERT_TRUE(second.ok());
      EXPECT_EQ(second->histogram.count(), 1u) << k.symbol << ": b alone on the second day";
    }
  };
  check();
  today_ = 20003;  // both days folded (horizon 1 day)
  WaitFoldedTo(**store, 20002);
  check();
  EXPECT_GE(Metric(**store, "fieldprof_rollup_days_total"), 2u);
}

// A retry after its day was folded and its raw rows dropped is recognised
// from the ids the fold kept: duplicate, not counted again.
TEST_F(ClickHouseStoreTest, ARetryAfterTheFoldIsADuplicate) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const wire::Batch a = MakeBatch('r', {{"f", {10, 20}}});
  auto first = Apply(**store, a, 20000);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->duplicate);
  auto again = Apply(**store, a, 20000);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate) << "its marker row is found";
  ASSERT_TRUE(Apply(**store, MakeBatch('s', {{"f", {5}}}), 20001).ok());
  today_ = 20003;
  WaitFoldedTo(**store, 20002);
  for (int i = 0; i < 500 && Metric(**store, "fieldprof_rollup_partitions_dropped_total") < 1;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(Metric(**store, "fieldprof_rollup_partitions_dropped_total"), 1u)
      << "day 20000's raw rows are dropped once day 20001 is folded";
  auto late = Apply(**store, a, 20003);
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_TRUE(late->duplicate) << "its id is kept with the folded day";
  auto all = (*store)->QueryRange(KeyOf(a, 0), kUnboundedFirst, kUnboundedLast);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->histogram.count(), 3u) << "a's two calls once, and s's one";
}

// The reader of ClickHouse's RowBinary answers: any split into pieces
// reads the same rows; a cut answer and an error that ClickHouse appended
// after it began answering are errors, never rows.
TEST_F(ClickHouseStoreTest, TheReaderTakesWholeRowsOnly) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(
      Apply(**store, MakeBatch('x', {{"a", {1, 2}}, {"b", {kBig}}, {"c", {0}}}), 20000).ok());
  std::string answer;
  ASSERT_TRUE(RawRowsAnswer(&answer));
  auto read = [](std::string_view data, size_t piece, std::vector<ApiAggregate>* rows) {
    SumsReader r([&](ApiAggregate&& a) {
      rows->push_back(std::move(a));
      return true;
    });
    for (size_t at = 0; at < data.size(); at += piece) r.Feed(data.substr(at, piece));
    return r.Finish();
  };
  std::vector<ApiAggregate> whole, bytewise;
  ASSERT_TRUE(read(answer, answer.size(), &whole).ok());
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(whole[1].key.symbol, "b");
  EXPECT_TRUE(whole[1].histogram.sum() == kBig);
  ASSERT_TRUE(read(answer, 1, &bytewise).ok());
  ASSERT_EQ(bytewise.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(whole[i].histogram == bytewise[i].histogram);
  std::vector<ApiAggregate> cut_rows;
  Status cut = read(answer.substr(0, answer.size() - 3), 7, &cut_rows);
  EXPECT_EQ(cut.code(), StatusCode::kDataLoss) << cut.ToString();
  const std::string error =
      "Code: 241, e.displayText() = DB::Exception: Memory limit (for query) exceeded, e.what() = "
      "DB::Exception\n";
  for (size_t keep : {size_t{0}, answer.size() / 2, answer.size()}) {
    std::vector<ApiAggregate> rows;
    Status s = read(answer.substr(0, keep) + error, 64, &rows);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << keep << ": " << s.ToString();
    EXPECT_NE(s.message().find("Memory limit"), std::string::npos) << s.ToString();
  }
}

// Many rows per key, cut into pieces of every size at random: the same
// sums as the answer read whole.
TEST_F(ClickHouseStoreTest, TheReaderSumsKeysAcrossAnyPieces) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  tools::BatchGenerator gen(
      {.seed = 4, .modules = 3, .symbols_per_module = 5, .target_bytes = 8 * 1024});
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(Apply(**store, gen.Next(), 20000).ok());
  std::string answer;
  ASSERT_TRUE(RawRowsAnswer(&answer));
  auto read = [&](std::mt19937& rng, std::map<std::string, Histogram>* out) {
    SumsReader r([&](ApiAggregate&& a) {
      EXPECT_TRUE(out->emplace(EncodeApiKey(a.key), a.histogram).second)
          << "a key handed on twice: " << a.key.symbol;
      return true;
    });
    for (size_t at = 0; at < answer.size();) {
      const size_t n = 1 + rng() % 300;
      r.Feed(std::string_view(answer).substr(at, n));
      at += n;
    }
    return r.Finish();
  };
  std::mt19937 rng(1);
  std::map<std::string, Histogram> whole;
  {
    SumsReader r([&](ApiAggregate&& a) {
      whole.emplace(EncodeApiKey(a.key), a.histogram);
      return true;
    });
    r.Feed(answer);
    ASSERT_TRUE(r.Finish().ok());
    EXPECT_GT(r.rows(), 2 * whole.size()) << "keys span many rows";
  }
  for (int round = 0; round < 20; ++round) {
    std::map<std::string, Histogram> pieces;
    ASSERT_TRUE(read(rng, &pieces).ok());
    ASSERT_EQ(pieces, whole) << "round " << round;
  }
}

// Tables created once; a second store opens them as they are; a schema
// newer than this binary's is refused, with a message that says so.
TEST_F(ClickHouseStoreTest, TheSchemaIsCreatedOnceAndItsVersionChecked) {
  { ASSERT_TRUE(Open().ok()); }
  auto again = Open();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE((*again)->Close().ok());
  ClickHouseClient ch(server_->Options());
  StatusOr<std::string> versions =
      ch.Query("SELECT count() FROM " + database_ + ".fp_state WHERE name = 'schema' FORMAT TSV");
  ASSERT_TRUE(versions.ok());
  EXPECT_EQ(*versions, "1\n") << "recorded once";
  ASSERT_TRUE(
      ch.Execute("INSERT INTO " + database_ + ".fp_state VALUES ('schema', 99, now())").ok());
  auto newer = Open();
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("newer"), std::string::npos) << newer.status().ToString();
  ClickHouseStoreOptions two;
  two.url = server_->Url() + "," + server_->Url();
  auto unnamed = OpenClickHouseStore(two);
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.status().message().find("clickhouse_cluster"), std::string::npos);
  two.cluster = "nosuchcluster";
  auto unknown = OpenClickHouseStore(two);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no cluster named"), std::string::npos)
      << unknown.status().ToString();
  ClickHouseStoreOptions dead;
  dead.url = "http://127.0.0.1:" + std::to_string(testing::FreePort());
  auto nobody = OpenClickHouseStore(dead);
  ASSERT_FALSE(nobody.ok());
  EXPECT_NE(nobody.status().message().find("ClickHouse"), std::string::npos);
}

// The snapshot published from the ClickHouse store is byte for byte the one
// published from the RocksDB store over the same batches; kept in
// ClickHouse, it is served by another publisher (another aggregator), which
// carries the versions on when it takes over; a cycle that lost its lease
// writes no manifest.
TEST_F(ClickHouseStoreTest, ItsSnapshotIsRocksDbsByteForByteAndShared) {
  auto ch_store = Open();
  ASSERT_TRUE(ch_store.ok()) << ch_store.status().ToString();
  testing::TempDir dir;
  auto rocks = OpenRocksDbStore({.path = dir.File("db")});
  ASSERT_TRUE(rocks.ok());
  tools::BatchGenerator gen(
      {.seed = 9, .modules = 20, .symbols_per_module = 30, .target_bytes = 16 * 1024});
  for (int i = 0; i < 12; ++i) {
    const wire::Batch b = gen.Next();
    ASSERT_TRUE(Apply(**rocks, b, 20000).ok());
    ASSERT_TRUE(Apply(**ch_store, b, 20000).ok());
  }
  ASSERT_TRUE((*rocks)->WaitApplied(std::chrono::seconds(30)).ok());
  auto key = Ed25519Signer::Generate();
  ASSERT_TRUE(key.ok());
  PublisherOptions po;
  po.dir = dir.File("snapshot");
  po.fragment_count = 16;
  po.per_cycle = 4;
  Publisher local((*rocks).get(), &*key, po);
  ASSERT_TRUE(local.Init().ok());
  ClickHouseStoreOptions so;
  so.url = server_->Url();
  so.database = database_;
  auto shared = OpenClickHouseSnapshotStorage(so);
  ASSERT_TRUE(shared.ok());
  Publisher holder((*ch_store).get(), &*key, po, shared->get());
  ASSERT_TRUE(holder.Init().ok());
  const int64_t now_ms = 1795000000000;
  auto a = local.Cycle(now_ms);
  auto b = holder.Cycle(now_ms);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << " " << b.status().ToString();
  EXPECT_EQ(a->series, b->series);
  EXPECT_GT(b->series, 100u);
  EXPECT_EQ(*local.SignedManifestBytes(), *holder.SignedManifestBytes())
      << "same sums, same key, same time: the same signed manifest";
  for (uint32_t i = 0; i < 16; ++i) {
    EXPECT_EQ(*local.FragmentBytes(i), *holder.FragmentBytes(i)) << "fragment " << i;
  }
  // Another aggregator serves it from ClickHouse.
  Publisher follower((*ch_store).get(), &*key, po, shared->get());
  ASSERT_TRUE(follower.Init().ok());
  ASSERT_TRUE(follower.SignedManifestBytes().ok());
  EXPECT_EQ(*follower.SignedManifestBytes(), *holder.SignedManifestBytes());
  for (uint32_t i = 0; i < 16; ++i) {
    EXPECT_EQ(*follower.FragmentBytes(i), *holder.FragmentBytes(i)) << "fragment " << i;
  }
  // More data; the follower takes the lease over and carries on.
  ASSERT_TRUE(Apply(**ch_store, gen.Next(), 20000).ok());
  auto c = follower.Cycle(now_ms + 1000);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->snapshot_version, b->snapshot_version + 1);
  ASSERT_TRUE(holder.Refresh().ok());
  EXPECT_EQ(holder.CurrentManifest()->snapshot_version(), c->snapshot_version)
      << "the old holder now serves the new holder's manifest";
  // A cycle whose lease is gone by the time it would write.
  PublisherOptions lost = po;
  lost.may_write = [] { return false; };
  Publisher late((*ch_store).get(), &*key, lost, shared->get());
  ASSERT_TRUE(late.Init().ok());
  auto d = late.Cycle(now_ms + 2000);
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(holder.Refresh().ok());
  EXPECT_EQ(holder.CurrentManifest()->snapshot_version(), c->snapshot_version);
}

// Developer mode's tables in ClickHouse, and the same contract on RocksDB:
// runs kept through one aggregator are listed by tag and day and read back
// byte for byte through another; a run kept twice is one and says so;
// another developer sees none of them.
TEST_F(ClickHouseStoreTest, DeveloperRunsKeptThroughOneAreReadThroughAnother) {
  auto store = Open();  // makes the schema
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ClickHouseStoreOptions o;
  o.url = server_->Url();
  o.database = database_;
  auto one = ClickHouseDevStore(o);
  auto other = ClickHouseDevStore(o);
  ASSERT_TRUE(one.ok() && other.ok()) << one.status().ToString();
  testing::TempDir dir;
  auto rocks = OpenRocksDevStore(dir.File("dev"));
  ASSERT_TRUE(rocks.ok()) << rocks.status().ToString();
  const auto run = [](char id, int64_t started, std::vector<std::string> tags) {
    wire::DevRun r;
    r.set_id(std::string(16, id));
    r.set_program("myprog");
    r.set_started_unix_ns(started);
    for (std::string& t : tags) r.add_tags(std::move(t));
    r.set_events(5);
    r.set_file(std::string("FPPOINTS1\n\0\x01", 12) + std::string(1000, id));
    return r;
  };
  const wire::DevRun a = run('a', 1000, {"startup", "shutdown"}), b = run('b', 2000, {"startup"});
  for (const auto& [name, put, get] : {std::tuple{"clickhouse", one->get(), other->get()},
                                       std::tuple{"rocksdb", rocks->get(), rocks->get()}}) {
    bool duplicate = true;
    ASSERT_TRUE(put->Put("alice", a, 1, &duplicate).ok()) << name;
    EXPECT_FALSE(duplicate) << name;
    ASSERT_TRUE(get->Put("alice", a, 2, &duplicate).ok()) << name;
    EXPECT_TRUE(duplicate) << name << ": kept already";
    ASSERT_TRUE(put->Put("alice", b, 3, &duplicate).ok()) << name;
    StatusOr<std::vector<DevTag>> tags = get->Tags("alice");
    ASSERT_TRUE(tags.ok()) << name << ": " << tags.status().ToString();
    ASSERT_EQ(tags->size(), 2u) << name;
    EXPECT_EQ((*tags)[0].tag, "startup") << name << ": the most recently run first";
    EXPECT_EQ((*tags)[0].runs, 2u) << name;
    EXPECT_EQ((*tags)[0].last_started_unix_ns, 2000) << name;
    EXPECT_EQ((*tags)[1].tag, "shutdown") << name;
    StatusOr<std::vector<DevRunInfo>> runs = get->Runs("alice", "startup", "", 0, 3000);
    ASSERT_TRUE(runs.ok()) << name;
    ASSERT_EQ(runs->size(), 2u) << name;
    EXPECT_EQ((*runs)[0].id, HexEncode(a.id())) << name << ": oldest first";
    EXPECT_EQ((*runs)[0].bytes, a.file().size()) << name;
    EXPECT_EQ(get->Runs("alice", "startup", "", 1500, 3000)->size(), 1u) << name;
    EXPECT_EQ(get->Runs("alice", "startup", "other", 0, 3000)->size(), 0u) << name;
    StatusOr<wire::DevRun> back = get->Get("alice", HexEncode(b.id()));
    ASSERT_TRUE(back.ok()) << name;
    EXPECT_EQ(back->file(), b.file()) << name;
    EXPECT_EQ(get->Get("bob", HexEncode(b.id())).status().code(), StatusCode::kNotFound) << name;
    EXPECT_TRUE(get->Tags("bob")->empty()) << name;
    StatusOr<wire::DevUser> user = get->User("alice");
    ASSERT_TRUE(user.ok()) << name;
    EXPECT_EQ(user->runs(), 2u) << name;
    EXPECT_EQ(user->events(), 10u) << name;
  }
  // Two aggregators take the same runs at the same moment (an agent's
  // retry racing its first try): both may find a run not kept yet and
  // both keep it, yet the developer's counts hold each run once.
  constexpr int kRaced = 12;
  for (int i = 0; i < kRaced; ++i) {
    const wire::DevRun r = run(static_cast<char>('c' + i), 4000 + i, {"startup"});
    bool dup_one = false, dup_other = false;
    Status s_one, s_other;
    std::thread t([&] { s_other = (*other)->Put("alice", r, 4, &dup_other); });
    s_one = (*one)->Put("alice", r, 4, &dup_one);
    t.join();
    ASSERT_TRUE(s_one.ok() && s_other.ok()) << s_one.ToString() << " " << s_other.ToString();
  }
  StatusOr<wire::DevUser> user = (*one)->User("alice");
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  EXPECT_EQ(user->runs(), 2u + kRaced);
  EXPECT_EQ(user->events(), 5u * (2 + kRaced));
  EXPECT_EQ((*one)->Runs("alice", "startup", "", 4000, 5000)->size(), static_cast<size_t>(kRaced));

  // A run still being written goes up in parts: each appended once, in
  // order; one sent again changes nothing; one out of order or with other
  // bytes is refused; readers see the run as grown so far.
  for (const auto& [name, put, get] : {std::tuple{"clickhouse", one->get(), other->get()},
                                       std::tuple{"rocksdb", rocks->get(), rocks->get()}}) {
    wire::DevRun first = run('p', 5000, {"startup"});
    first.set_open(true);
    first.set_events(3);
    wire::DevRun second;
    second.set_id(first.id());
    second.set_program("myprog");
    second.set_offset(first.file().size());
    second.set_file(std::string(300, 'q'));
    second.set_open(true);
    second.set_events(7);
    second.add_tags("startup");
    second.add_tags("late");
    bool duplicate = true;
    ASSERT_TRUE(put->Put("carol", first, 1, &duplicate).ok()) << name;
    EXPECT_FALSE(duplicate) << name;
    Status s = get->Extend("carol", second, 2, &duplicate);
    ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
    EXPECT_FALSE(duplicate) << name;
    ASSERT_TRUE(put->Extend("carol", second, 3, &duplicate).ok()) << name;
    EXPECT_TRUE(duplicate) << name << ": a part sent again";
    wire::DevRun gap = second;
    gap.set_offset(second.offset() + 400);
    EXPECT_EQ(put->Extend("carol", gap, 4, &duplicate).code(), StatusCode::kInvalidArgument)
        << name << ": a part after a missing one";
    wire::DevRun other_bytes = second;
    other_bytes.set_file(std::string(300, 'z'));
    EXPECT_EQ(put->Extend("carol", other_bytes, 4, &duplicate).code(), StatusCode::kInvalidArgument)
        << name << ": other bytes at a kept offset";
    wire::DevRun orphan = second;
    orphan.set_id(std::string(16, '#'));
    EXPECT_EQ(put->Extend("carol", orphan, 4, &duplicate).code(), StatusCode::kInvalidArgument)
        << name << ": a part of no run";
    wire::DevRun last = second;
    last.set_offset(second.offset() + second.file().size() - 100);  // overlaps the kept end
    last.set_file(std::string(100, 'q') + "X");
    last.set_open(false);
    last.set_events(8);
    ASSERT_TRUE(get->Extend("carol", last, 5, &duplicate).ok()) << name;
    EXPECT_FALSE(duplicate) << name;
    StatusOr<wire::DevRun> back = get->Get("carol", HexEncode(first.id()));
    ASSERT_TRUE(back.ok()) << name;
    EXPECT_EQ(back->file(), first.file() + std::string(300, 'q') + "X") << name;
    EXPECT_FALSE(back->open()) << name;
    StatusOr<std::vector<DevRunInfo>> runs = put->Runs("carol", "late", "", 0, 10000);
    ASSERT_TRUE(runs.ok()) << name;
    ASSERT_EQ(runs->size(), 1u) << name << ": a tag first seen in a later part lists the run";
    EXPECT_EQ((*runs)[0].bytes, back->file().size()) << name;
    EXPECT_EQ((*runs)[0].events, 8u) << name;
    EXPECT_EQ(put->Runs("carol", "startup", "", 0, 10000)->size(), 1u) << name;
    StatusOr<wire::DevUser> carol = get->User("carol");
    ASSERT_TRUE(carol.ok()) << name;
    EXPECT_EQ(carol->runs(), 1u) << name;
    EXPECT_EQ(carol->events(), 8u) << name;
    EXPECT_EQ(carol->bytes(), back->file().size()) << name;
  }
}

// Lab profiles kept in ClickHouse: what one aggregator keeps, another
// lists and reads back byte for byte (any bytes, NULs and all, 1 MiB); the
// same id kept twice is one row and says so; an id never kept is NotFound,
// also with one of two servers away, and with ClickHouse gone it is an
// error, never NotFound.
TEST_F(ClickHouseStoreTest, LabProfilesKeptThroughOneAreReadThroughAnother) {
  auto store = Open();  // makes the schema
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ClickHouseStoreOptions o;
  o.url = server_->Url();
  o.database = database_;
  auto one = ClickHouseLabStorage(o);
  auto other = ClickHouseLabStorage(o);
  ASSERT_TRUE(one.ok() && other.ok()) << one.status().ToString();
  std::string big(1 << 20, '\0');
  std::mt19937_64 rng(5);
  for (char& c : big) c = static_cast<char>(rng());
  const std::string small = std::string("lab\0profile\n\t'\\", 17);
  const std::string a(32, 'a'), b(32, 'b');
  bool duplicate = true;
  ASSERT_TRUE((*one)->Put(b, big, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  ASSERT_TRUE((*one)->Put(a, small, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  ASSERT_TRUE((*other)->Put(a, small, &duplicate).ok());
  EXPECT_TRUE(duplicate) << "kept through the other aggregator already";
  StatusOr<std::vector<std::string>> ids = (*other)->List();
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, (std::vector<std::string>{a, b}));
  StatusOr<std::string> got = (*other)->Get(b);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == big) << "1 MiB read back as " << got->size() << " bytes";
  got = (*other)->Get(a);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, small);
  ClickHouseClient ch(server_->Options());
  StatusOr<std::string> rows =
      ch.Query("SELECT count() FROM " + database_ + ".fp_lab_profiles FORMAT TSV");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, "2\n");
  EXPECT_EQ((*one)->Get(std::string(32, 'c')).status().code(), StatusCode::kNotFound);
  // Another aggregator with the local kind: the same contract on files.
  testing::TempDir dir;
  std::unique_ptr<LabStorage> local = LocalLabStorage(dir.File("lab"));
  ASSERT_TRUE(local->List().ok());
  EXPECT_TRUE(local->List()->empty());
  ASSERT_TRUE(local->Put(a, small, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  ASSERT_TRUE(local->Put(a, small, &duplicate).ok());
  EXPECT_TRUE(duplicate);
  EXPECT_EQ(*local->Get(a), small);
  EXPECT_EQ(local->Get(b).status().code(), StatusCode::kNotFound);
  // One of two servers away: a profile is on two, so what the other lacks
  // is not kept, and what it has is read.
  ClickHouseStoreOptions half = o;
  half.url = server_->Url() + ",http://127.0.0.1:" + std::to_string(testing::FreePort());
  auto one_down = ClickHouseLabStorage(half);
  ASSERT_TRUE(one_down.ok());
  EXPECT_EQ((*one_down)->Get(std::string(32, 'c')).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE((*one_down)->Get(a).ok());
  EXPECT_EQ(*(*one_down)->Get(a), small);
  // ClickHouse gone: an error that is not "no such profile".
  ClickHouseStoreOptions dead = o;
  dead.url = "http://127.0.0.1:" + std::to_string(testing::FreePort());
  auto gone = ClickHouseLabStorage(dead);
  ASSERT_TRUE(gone.ok());
  StatusOr<std::string> lost = (*gone)->Get(a);
  EXPECT_FALSE(lost.ok());
  EXPECT_NE(lost.status().code(), StatusCode::kNotFound) << lost.status().ToString();
  EXPECT_FALSE((*gone)->Put(std::string(32, 'd'), small, &duplicate).ok());
  EXPECT_FALSE((*gone)->List().ok());
}

// The real aggregator with --store clickhouse: a batch posted twice is
// applied once, the query API answers the exact sums, /healthz follows
// ClickHouse, and with ClickHouse gone a batch is refused (503), never
// acknowledged.
TEST(ClickHouseAggregatorTest, TheAggregatorOverClickHouse) {
  testing::TempDir dir;
  testing::ClickHouseProcess server(dir);
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  // Values near 2^62 ns: no machine measures them (the plausibility
  // rules would refuse them), but the sums must hold them exactly.
  testing::AggregatorProcess agg(dir, testing::FreePort(),
                                 {"--store", "clickhouse", "--clickhouse_url", server.Url(),
                                  "--plausible_runs_per_minute", "0"});
  agg.Start();
  HttpsClient http(agg.Options());
  const uint64_t big = (uint64_t{1} << 62) + 7;
  const wire::Batch a = MakeBatch('x', {{"huge", {big, big, 3}}, {"small", {5, 6}}});
  for (int i = 0; i < 2; ++i) {
    StatusOr<HttpReply> r =
        http.Post("/v1/batches", "application/x-protobuf", a.SerializeAsString());
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
    EXPECT_NE(r->body.find(i == 0 ? "\"duplicate\":false" : "\"duplicate\":true"),
              std::string::npos)
        << r->body;
  }
  StatusOr<HttpReply> api = http.Get("/v1/api?module=libch.so.1&symbol=huge");
  ASSERT_TRUE(api.ok() && api->status == 200) << (api.ok() ? api->body : "");
  Histogram want = HistogramFromWire(a.records(0).histogram());
  EXPECT_NE(api->body.find("\"count\":" + std::to_string(want.count())), std::string::npos)
      << api->body;
  EXPECT_NE(api->body.find("\"sum\":\"" + Uint128ToString(want.sum()) + "\""), std::string::npos)
      << api->body;
  StatusOr<HttpReply> report = http.Get("/v1/report?module=libch.so.1");
  ASSERT_TRUE(report.ok() && report->status == 200);
  StatusOr<HttpReply> health = http.Get("/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
  // ClickHouse gone: unhealthy, and a new batch is refused, not acknowledged.
  server.Kill();
  // The health check is cached for a second: unhealthy once it looks again.
  EXPECT_TRUE(fieldprof::testing::WaitUntil([&] {
    health = http.Get("/healthz");
    return health.ok() && health->status == 503;
  })) << (health.ok() ? health->body : health.status().ToString());
  const wire::Batch b = MakeBatch('y', {{"small", {1}}});
  StatusOr<HttpReply> refused =
      http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 503) << refused->body;
}

// Two aggregators over one ClickHouse with one token secret: a token is
// spent for both, whichever took it first, also after a restart (the
// spent set is the batch ids ClickHouse keeps).
TEST(ClickHouseAggregatorTest, ATokenSpentThroughOneAggregatorIsSpentForAll) {
  testing::TempDir dir_a, dir_b;
  testing::ClickHouseProcess server(dir_a);
  ASSERT_TRUE(server.Start());
  const std::string secret = dir_a.File("token.secret");
  { std::ofstream(secret) << "clickhouse-test-token-secret-0123456789abcdef"; }
  std::vector<std::unique_ptr<testing::AggregatorProcess>> agg;
  for (testing::TempDir* d : {&dir_a, &dir_b}) {
    ASSERT_TRUE(testing::MakeCert(d->path()));
    agg.push_back(std::make_unique<testing::AggregatorProcess>(
        *d, testing::FreePort(),
        std::vector<std::string>{"--store", "clickhouse", "--clickhouse_url", server.Url(),
                                 "--token_secret_file", secret}));
    agg.back()->Start();
  }
  // Two tokens from the first.
  HttpsClient a(agg[0]->Options());
  StatusOr<TokenRequestState> req = MakeTokenRequest(2);
  ASSERT_TRUE(req.ok());
  StatusOr<HttpReply> issued =
      a.Post("/v1/tokens", "application/x-protobuf", req->request.SerializeAsString());
  ASSERT_TRUE(issued.ok() && issued->status == 200);
  wire::TokenResponse resp;
  ASSERT_TRUE(resp.ParseFromString(issued->body));
  StatusOr<std::vector<UploadToken>> tokens = FinishTokenRequest(*req, resp, resp.public_key());
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  auto spend = [&](int on, const UploadToken& t) {
    wire::Batch b = MakeBatch('t', {{"small", {5, 6}}});
    b.set_batch_id(t.input);
    b.set_token(t.output);
    b.set_token_epoch(t.epoch);
    HttpsClient c(agg[static_cast<size_t>(on)]->Options());
    StatusOr<HttpReply> r = c.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
    EXPECT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
    return r.ok() && r->body.find("\"duplicate\":true") != std::string::npos;
  };
  EXPECT_FALSE(spend(0, (*tokens)[0]));
  EXPECT_TRUE(spend(1, (*tokens)[0])) << "spent through the other aggregator";
  EXPECT_FALSE(spend(1, (*tokens)[1]));
  EXPECT_TRUE(spend(0, (*tokens)[1]));
  agg[1]->Term();
  agg[1]->Start();
  EXPECT_TRUE(spend(1, (*tokens)[0])) << "after a restart";
  StatusOr<HttpReply> api =
      HttpsClient(agg[1]->Options()).Get("/v1/api?module=libch.so.1&symbol=small");
  ASSERT_TRUE(api.ok() && api->status == 200) << (api.ok() ? api->body : "");
  EXPECT_NE(api->body.find("\"runs\":2"), std::string::npos) << "two batches, once each\n"
                                                             << api->body;
}

}  // namespace
}  // namespace fieldprof::aggregator
