// The snapshot publisher on a real RocksDB store in a temp dir: every series
// lands in exactly one fragment and the client's checks accept them; a
// cycle without new data gives byte-identical fragments; rotation reaches
// every fragment within fragment_count / per_cycle cycles.
#include "aggregator/publish/publisher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "aggregator/store/store_rocksdb.h"
#include "common/wire/wire.h"
#include "tests/support/test_util.h"

namespace fieldprof::aggregator {
namespace {

using fieldprof::testing::IdOf;
using fieldprof::testing::SimpleBatch;
using fieldprof::testing::TempDir;
using fieldprof::testing::WaitUntil;

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = OpenRocksDbStore({.path = dir_.File("db")});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    auto k = Ed25519Signer::Generate();
    ASSERT_TRUE(k.ok());
    signer_ = std::make_unique<Ed25519Signer>(std::move(*k));
  }
  // Batch `id` adds `value` twice to series `sym` (module and symbol from `sym`).
  void Add(int id, int sym, uint64_t value) {
    const std::string body = SimpleBatch(IdOf(id), "libp" + std::to_string(sym % 7) + ".so.1",
                                         "fn_" + std::to_string(sym), value, 2)
                                 .SerializeAsString();
    BatchView view;
    ASSERT_TRUE(DecodeBatchView(body, &view).ok());
    ASSERT_TRUE(store_->ApplyBatch(view, body, 20000).ok());
  }
  void Settle() { ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(30)).ok()); }
  // The calls the store's all-time sums hold for `symbol` (any module).
  uint64_t StoredCalls(const std::string& symbol) {
    ApiFilter f;
    f.symbol_prefix = symbol;
    f.symbol_exact = true;
    uint64_t n = 0;
    IgnoreError(store_->ForEachApi(f, [&](ApiAggregate&& a) {
      n += a.key.symbol == symbol ? a.histogram.count() : 0;
      return true;
    }));
    return n;
  }
  std::unique_ptr<Publisher> Make(uint32_t count, uint32_t per_cycle) {
    PublisherOptions o;
    o.dir = dir_.File("snapshot");
    o.fragment_count = count;
    o.per_cycle = per_cycle;
    auto p = std::make_unique<Publisher>(store_.get(), signer_.get(), o);
    EXPECT_TRUE(p->Init().ok());
    return p;
  }
  // The client's view: manifest opened with the public key, every fragment
  // checked; returns each series' fragment by its key encoding.
  std::map<std::string, uint32_t> ReadAll(const Publisher& p) {
    std::map<std::string, uint32_t> where;
    auto m = OpenSignedManifest(*p.SignedManifestBytes(), signer_->PublicKeyPem());
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return where;
    for (uint32_t i = 0; i < m->fragment_count(); ++i) {
      auto bytes = p.FragmentBytes(i);
      EXPECT_TRUE(bytes.ok()) << i;
      EXPECT_TRUE(CheckFragment(*m, i, *bytes).ok()) << i;
      wire::Fragment f;
      EXPECT_TRUE(f.ParseFromString(*bytes));
      for (const wire::Record& r : f.records()) {
        const ApiKey key = ApiKeyFromWire(r.key(), wire::Platform());
        EXPECT_EQ(FragmentOf(key, m->fragment_count()), i) << key.symbol;
        EXPECT_TRUE(where.emplace(EncodeApiKey(key), i).second) << "twice: " << key.symbol;
      }
    }
    return where;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ed25519Signer> signer_;
};

TEST_F(PublisherTest, EverySeriesInExactlyOneVerifiedFragment) {
  for (int i = 0; i < 300; ++i) Add(i, i, 100 + i);
  Settle();
  auto p = Make(16, 4);
  EXPECT_EQ(p->SignedManifestBytes().status().code(), StatusCode::kNotFound);
  auto r = p->Cycle(1795000000000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rebuilt, 16u);  // the first cycle builds all
  EXPECT_EQ(r->series, 300u);
  const auto where = ReadAll(*p);
  EXPECT_EQ(where.size(), 300u);
}

// A full disk under the snapshot directory: the cycle fails
// with NoSpace, the snapshot already published stays whole and verified
// (the manifest is written last, and only after every fragment), and once
// space returns the next cycle publishes everything.
TEST_F(PublisherTest, AFullDiskFailsTheCycleAndKeepsTheSnapshot) {
  const std::string dir = dir_.File("snapshot");
  std::filesystem::create_directories(dir);
  fieldprof::testing::SmallDisk disk(dir, "64k");
  if (!disk.ok()) GTEST_SKIP() << disk.why();
  for (int i = 0; i < 40; ++i) Add(i, i, 100 + i);
  Settle();
  auto p = Make(8, 8);
  ASSERT_TRUE(p->Cycle(1795000000000).ok());
  ASSERT_EQ(ReadAll(*p).size(), 40u);
  const std::string manifest = *p->SignedManifestBytes();
  // Far more than 64 KiB of fragments.
  for (int i = 40; i < 4000; ++i) Add(i, i, 100 + i);
  Settle();
  auto r = p->Cycle(1795000060000, /*all=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNoSpace) << r.status().ToString();
  EXPECT_EQ(*p->SignedManifestBytes(), manifest);
  EXPECT_EQ(ReadAll(*p).size(), 40u);
  // What a restarted aggregator would serve is the same snapshot.
  EXPECT_EQ(ReadAll(*Make(8, 8)).size(), 40u);

  ASSERT_TRUE(disk.Resize("16m"));
  r = p->Cycle(1795000120000, /*all=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(*p).size(), 4000u);
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
  }
}

TEST_F(PublisherTest, NoNewDataMeansIdenticalBytes) {
  for (int i = 0; i < 100; ++i) Add(i, i, 50 + i);
  Settle();
  auto p = Make(8, 8);
  ASSERT_TRUE(p->Cycle(1795000000000).ok());
  std::vector<std::string> before;
  for (uint32_t i = 0; i < 8; ++i) before.push_back(*p->FragmentBytes(i));
  auto r = p->Cycle(1795000060000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rebuilt, 8u);
  EXPECT_EQ(r->changed, 0u);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(*p->FragmentBytes(i), before[i]) << i;
  EXPECT_EQ(p->CurrentManifest()->snapshot_version(), 2u);
  // A restarted publisher carries on from the manifest on disk.
  auto again = Make(8, 8);
  EXPECT_EQ(again->CurrentManifest()->snapshot_version(), 2u);
}

TEST_F(PublisherTest, RotationReachesEveryFragmentInCountOverPerCycleCycles) {
  for (int i = 0; i < 200; ++i) Add(i, i, 10 + i);
  Settle();
  auto p = Make(16, 4);
  ASSERT_TRUE(p->Cycle(1795000000000).ok());
  const wire::Manifest first = *p->CurrentManifest();
  // New data in every series; after 16 / 4 = 4 cycles every fragment has
  // the new bytes, and none before its turn.
  for (int i = 0; i < 200; ++i) Add(1000 + i, i, 7);
  Settle();
  std::set<uint32_t> changed;
  for (int c = 1; c <= 4; ++c) {
    auto r = p->Cycle(1795000000000 + c * 60000);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->rebuilt, 4u);
    const wire::Manifest m = *p->CurrentManifest();
    for (uint32_t i = 0; i < 16; ++i) {
      if (m.fragments(i).sha256() != first.fragments(i).sha256()) changed.insert(i);
    }
    EXPECT_EQ(changed.size(), 4u * c) << "cycle " << c;
  }
  // The old versions are still there for a client mid-rotation.
  for (uint32_t i = 0; i < 16; ++i) {
    EXPECT_TRUE(p->FragmentBytes(i, first.fragments(i).version()).ok()) << i;
  }
  EXPECT_EQ(ReadAll(*p).size(), 200u);
}

// Keys a and b sit in different fragments; every batch adds one call to
// both, in one atomic fold. A cycle reads one snapshot, so in every
// manifest it publishes a and b have the same count, however the cycle and
// the folds interleave; and ingest keeps going while cycles run.
TEST_F(PublisherTest, ACycleDuringIngestIsOneSnapshotAndIngestGoesOn) {
  constexpr uint32_t kCount = 16;
  wire::Batch pair = SimpleBatch(IdOf(0), "libpair.so.1", "pair_a", 100, 1);
  const wire::Platform platform = pair.client_platform();
  const uint32_t fa = FragmentOf(ApiKeyFromWire(pair.records(0).key(), platform), kCount);
  *pair.add_records() = pair.records(0);
  for (int n = 0;; ++n) {
    pair.mutable_records(1)->mutable_key()->set_symbol("pair_b" + std::to_string(n));
    if (FragmentOf(ApiKeyFromWire(pair.records(1).key(), platform), kCount) != fa) break;
  }
  // Bulk so that a cycle takes a while.
  for (int i = 0; i < 3000; ++i) Add(1000000 + i, i, 10 + i);
  Settle();
  auto p = Make(kCount, kCount);  // every cycle rebuilds every fragment

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> applied{0};
  std::thread ingest([&] {
    wire::Batch b = pair;
    for (uint64_t id = 1; !stop.load(); ++id) {
      b.set_batch_id(IdOf(id));
      const std::string body = b.SerializeAsString();
      BatchView view;
      ASSERT_TRUE(DecodeBatchView(body, &view).ok());
      ASSERT_TRUE(store_->ApplyBatch(view, body, 20000).ok());
      applied.fetch_add(1);
    }
  });
  auto count_of = [&](const wire::Manifest& m, const std::string& symbol) -> uint64_t {
    for (uint32_t i = 0; i < kCount; ++i) {
      wire::Fragment f;
      EXPECT_TRUE(f.ParseFromString(*p->FragmentBytes(i, m.fragments(i).version())));
      for (const wire::Record& r : f.records()) {
        if (r.key().symbol() == symbol) return HistogramFromWire(r.histogram()).Stats().count;
      }
    }
    return 0;
  };
  uint64_t during = 0, last_a = 0;
  std::set<uint64_t> seen;
  for (int c = 0; c < 12; ++c) {
    const uint64_t before = applied.load();
    auto r = p->Cycle(1795000000000 + c * 1000);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    during += applied.load() - before;
    const wire::Manifest m = *p->CurrentManifest();
    const uint64_t a = count_of(m, "pair_a");
    EXPECT_EQ(a, count_of(m, pair.records(1).key().symbol())) << "cycle " << c;
    EXPECT_GE(a, last_a);
    last_a = a;
    seen.insert(a);
    // The next cycle has something new to publish once the sums hold more
    // than this one published.
    ASSERT_TRUE(WaitUntil([&] { return StoredCalls("pair_a") > a; })) << "cycle " << c;
  }
  stop = true;
  ingest.join();
  EXPECT_GT(during, 0u) << "no batch was accepted while a cycle ran";
  EXPECT_GT(seen.size(), 1u) << "the published counts never moved";
}

}  // namespace
}  // namespace fieldprof::aggregator
