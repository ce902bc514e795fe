// The published snapshot end to end: the real aggregator binary publishes
// (key from deploy/make-signing-key.sh, cycles through the admin call), and
// the client refresh of common/snapshot_cache.h fetches over TLS on
// loopback into a cache in a temp dir.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/histogram.h"
#include "common/snapshot.h"
#include "common/snapshot_cache.h"
#include "common/wire.h"
#include "tests/aggregator_process.h"
#include "tests/test_util.h"

namespace fieldprof {
namespace {

namespace fs = std::filesystem;
using testing::AggregatorProcess;
using testing::IdOf;
using testing::SimpleBatch;
using testing::TempDir;

constexpr uint32_t kFragments = 8;
constexpr uint32_t kPerCycle = 2;
constexpr char kToken[] = "test-admin-token-0123456789";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

class SnapshotClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeCert(dir_.path()));
    MakeKey("keys");
    WriteFile(dir_.File("admin.token"), std::string(kToken) + "\n");
    public_key_ = ReadFile(dir_.File("keys/snapshot-signing.pub"));
    agg_ = std::make_unique<AggregatorProcess>(dir_, port_, Args("keys"));
    agg_->Start();
  }

  void MakeKey(const std::string& sub) {
    const std::string cmd = std::string(FIELDPROF_SOURCE_DIR) + "/deploy/make-signing-key.sh " +
                            dir_.File(sub) + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::vector<std::string> Args(const std::string& keys) const {
    return {"--signing_key",         dir_.File(keys + "/snapshot-signing.key"),
            "--snapshot_dir",        dir_.File("published"),
            "--admin_token_file",    dir_.File("admin.token"),
            "--fragment_count",      std::to_string(kFragments),
            "--fragments_per_cycle", std::to_string(kPerCycle),
            "--fold_interval_ms",    "20"};
  }

  // `calls` calls of `value` ns to fn_<sym>.
  void Ingest(int id, int sym, uint64_t value, int calls) {
    HttpsClient c(agg_->Options());
    const wire::Batch b =
        SimpleBatch(IdOf(id), "libsnap.so.1", "fn_" + std::to_string(sym), value, calls);
    auto r = c.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  }
  // One publish cycle through the admin call; returns the new snapshot version.
  uint64_t Publish() {
    agg_->WaitApplied();
    HttpsClient c(agg_->Options());
    auto r = c.Request("POST", "/v1/admin/publish", "", "",
                       {{"Authorization", std::string("Bearer ") + kToken}});
    EXPECT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
    if (!r.ok()) return 0;
    const size_t at = r->body.find("\"snapshot_version\":");
    return std::stoull(r->body.substr(at + 19));
  }
  // Enough cycles for the rotation to rebuild every fragment (the
  // aggregator's own first cycle, at start, saw an empty store).
  void PublishAll() {
    for (uint32_t c = 0; c < kFragments / kPerCycle; ++c) Publish();
  }
  StatusOr<SnapshotRefreshResult> Refresh(int k) {
    HttpsClient c(agg_->Options());
    return RefreshSnapshot(c, cache_, {.max_fragments = k, .public_key_pem = public_key_});
  }
  // Calls per symbol in the client's cache.
  std::map<std::string, uint64_t> CachedCalls() const {
    std::map<std::string, uint64_t> out;
    Status s = cache_.ForEachRecord([&](const wire::Record& r) {
      out[r.key().symbol()] += HistogramFromWire(r.histogram()).count();
      return true;
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }
  std::map<std::string, std::string> CachedFiles() const {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(cache_.dir())) {
      if (e.is_regular_file()) out[e.path().string()] = ReadFile(e.path().string());
    }
    return out;
  }

  TempDir dir_;
  uint16_t port_ = testing::FreePort();
  std::string public_key_;
  std::unique_ptr<AggregatorProcess> agg_;
  SnapshotCache cache_{dir_.File("cache")};
};

TEST_F(SnapshotClientTest, EndpointsAnswerWithCachingHeaders) {
  for (int i = 0; i < 40; ++i) Ingest(i, i, 1000 + i, 3);
  PublishAll();
  const uint64_t v = Publish();
  HttpsClient c(agg_->Options());

  auto m = c.Get("/v1/snapshot/manifest");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->status, 200) << m->body;
  EXPECT_EQ(m->content_type, "application/x-protobuf");
  EXPECT_EQ(m->etag, "\"m" + std::to_string(v) + "\"");
  auto opened = OpenSignedManifest(m->body, public_key_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->snapshot_version(), v);
  auto again = c.Get("/v1/snapshot/manifest", {{"If-None-Match", m->etag}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());

  // The current fragment, then the same by version: immutable.
  auto f = c.Get("/v1/snapshot/fragments/3");
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->status, 200);
  EXPECT_TRUE(CheckFragment(*opened, 3, f->body).ok());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(opened->fragments(3).version()));
  EXPECT_EQ(f->etag, std::string("\"") + hex + "\"");
  auto pinned = c.Get(std::string("/v1/snapshot/fragments/3?version=") + hex);
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->body, f->body);
  auto not_modified = c.Get("/v1/snapshot/fragments/3", {{"If-None-Match", f->etag}});
  EXPECT_EQ(not_modified->status, 304);

  // New data: the old version stays downloadable for clients mid-rotation.
  for (int i = 0; i < 40; ++i) Ingest(100 + i, i, 5, 1);
  PublishAll();
  auto now = OpenSignedManifest(c.Get("/v1/snapshot/manifest")->body, public_key_);
  ASSERT_TRUE(now.ok());
  EXPECT_NE(now->fragments(3).version(), opened->fragments(3).version());
  auto old = c.Get(std::string("/v1/snapshot/fragments/3?version=") + hex);
  EXPECT_EQ(old->status, 200);
  EXPECT_EQ(old->body, f->body);

  // Bad requests get clear errors.
  EXPECT_EQ(c.Get("/v1/snapshot/fragments/8")->status, 404);
  EXPECT_EQ(c.Get("/v1/snapshot/fragments/x")->status, 400);
  EXPECT_EQ(c.Get("/v1/snapshot/fragments/1?version=zz")->status, 400);
  EXPECT_EQ(c.Get("/v1/snapshot/fragments/1?version=1234")->status, 404);
  EXPECT_EQ(c.Post("/v1/admin/publish", "", "")->status, 401);
  EXPECT_EQ(c.Request("POST", "/v1/admin/publish", "", "",
                      {{"Authorization", "Bearer wrong-token-0123456789x"}})
                ->status,
            401);
  EXPECT_EQ(c.Get("/v1/admin/publish")->status, 405);
}

TEST_F(SnapshotClientTest, AfterFOverKRefreshesTheClientHoldsEveryFragment) {
  for (int i = 0; i < 60; ++i) Ingest(i, i, 2000 + i, 2);
  PublishAll();
  constexpr int k = 2;
  int missing = kFragments;
  for (uint32_t r = 1; r <= kFragments / k; ++r) {
    auto got = Refresh(k);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->fetched, k);
    EXPECT_EQ(got->missing, missing - k) << "refresh " << r;
    missing = got->missing;
  }
  EXPECT_EQ(missing, 0);
  auto last = Refresh(k);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->fetched, 0);
  EXPECT_TRUE(last->manifest_not_modified);
  EXPECT_EQ(last->current, static_cast<int>(kFragments));

  // The cache holds exactly what was ingested, and is read without network.
  agg_->Kill();
  const auto calls = CachedCalls();
  ASSERT_EQ(calls.size(), 60u);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(calls.at("fn_" + std::to_string(i)), 2u) << i;
}

TEST_F(SnapshotClientTest, AChangedFragmentReachesTheClientWithinFOverKCycles) {
  for (int i = 0; i < 60; ++i) Ingest(i, i, 2000 + i, 2);
  PublishAll();
  ASSERT_TRUE(Refresh(-1).ok());
  ASSERT_EQ(CachedCalls().at("fn_17"), 2u);
  Ingest(1000, 17, 2000, 5);
  // One publish cycle and one client refresh of k fragments per step.
  constexpr int k = 2;
  int steps = 0;
  while (CachedCalls().at("fn_17") != 7u && steps < 10) {
    Publish();
    auto r = Refresh(k);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ++steps;
  }
  EXPECT_LE(steps, static_cast<int>(kFragments / k));
  EXPECT_EQ(CachedCalls().at("fn_17"), 7u);
}

TEST_F(SnapshotClientTest, ATamperedFragmentIsRejectedAndTheOldCopyKept) {
  for (int i = 0; i < 60; ++i) Ingest(i, i, 2000 + i, 2);
  PublishAll();
  ASSERT_TRUE(Refresh(-1).ok());
  const auto before = CachedFiles();
  // New data everywhere, all fragments rebuilt; then every new fragment
  // file on the server gets one byte flipped.
  for (int i = 0; i < 60; ++i) Ingest(100 + i, i, 9, 1);
  std::set<std::string> old_files;
  for (const auto& e : fs::directory_iterator(dir_.File("published/fragments"))) {
    old_files.insert(e.path().string());
  }
  PublishAll();
  int tampered = 0;
  for (const auto& e : fs::directory_iterator(dir_.File("published/fragments"))) {
    if (old_files.count(e.path().string()) != 0) continue;
    std::string bytes = ReadFile(e.path().string());
    bytes[bytes.size() / 2] ^= 0x20;
    WriteFile(e.path().string(), bytes);
    ++tampered;
  }
  ASSERT_EQ(tampered, static_cast<int>(kFragments));
  auto r = Refresh(-1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->fetched, 0);
  EXPECT_EQ(r->rejected, static_cast<int>(kFragments));
  ASSERT_FALSE(r->problems.empty());
  EXPECT_NE(r->problems[0].find("SHA-256"), std::string::npos) << r->problems[0];
  // Every old fragment is still there, byte for byte (the manifest moved on).
  const auto after = CachedFiles();
  for (const auto& [path, bytes] : before) {
    if (path.find("/fragments/") == std::string::npos) continue;
    ASSERT_EQ(after.count(path), 1u) << path;
    EXPECT_EQ(after.at(path), bytes) << path;
  }
  for (int i = 0; i < 60; ++i) EXPECT_EQ(CachedCalls().at("fn_" + std::to_string(i)), 2u);
}

TEST_F(SnapshotClientTest, ATamperedManifestOrAnotherKeyIsRejectedAndTheCacheKept) {
  for (int i = 0; i < 30; ++i) Ingest(i, i, 2000 + i, 2);
  PublishAll();
  ASSERT_TRUE(Refresh(-1).ok());
  const auto before = CachedFiles();

  // The manifest the aggregator serves after a restart is changed (a newer
  // version, so that the client's ETag does not match), the signature kept.
  agg_->Kill();
  std::string signed_bytes = ReadFile(dir_.File("published/manifest.signed"));
  wire::SignedManifest sm;
  wire::Manifest m;
  ASSERT_TRUE(sm.ParseFromString(signed_bytes));
  ASSERT_TRUE(m.ParseFromString(sm.manifest()));
  m.set_snapshot_version(m.snapshot_version() + 1);
  sm.set_manifest(m.SerializeAsString());
  WriteFile(dir_.File("published/manifest.signed"), sm.SerializeAsString());
  agg_ = std::make_unique<AggregatorProcess>(dir_, port_, Args("keys"));
  agg_->Start();
  auto r = Refresh(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("signature"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(CachedFiles(), before);

  // A manifest properly signed, by a key the client does not trust.
  agg_->Kill();
  MakeKey("other-keys");
  agg_ = std::make_unique<AggregatorProcess>(dir_, port_, Args("other-keys"));
  agg_->Start();
  Ingest(500, 3, 10, 1);
  Publish();
  r = Refresh(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(CachedFiles(), before);
  EXPECT_EQ(CachedCalls().at("fn_3"), 2u);
}

}  // namespace
}  // namespace fieldprof
