// The published snapshot end to end: the real aggregator binary publishes
// (key from deploy/make-signing-key.sh, cycles through the admin call), and
// the client refresh of common/snapshot/snapshot_cache.h fetches over TLS on
// loopback into a cache in a temp dir.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "agent/daemon/agent.h"
#include "common/snapshot/snapshot.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"

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
    return RefreshSnapshot(c, cache_,
                           {.max_fragments = k, .public_key_pem = public_key_, .progress = {}});
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
  // ?all=1 rebuilds every fragment at once, not the next in rotation.
  const HttpHeaders auth = {{"Authorization", std::string("Bearer ") + kToken}};
  auto all = c.Request("POST", "/v1/admin/publish?all=1", "", "", auth);
  ASSERT_TRUE(all.ok());
  EXPECT_NE(all->body.find("\"rebuilt\":" + std::to_string(kFragments)), std::string::npos)
      << all->body;
  auto one = c.Request("POST", "/v1/admin/publish", "", "", auth);
  EXPECT_NE(one->body.find("\"rebuilt\":" + std::to_string(kPerCycle)), std::string::npos)
      << one->body;
  EXPECT_EQ(c.Request("POST", "/v1/admin/publish?all=yes", "", "", auth)->status, 400);
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

// Runs `cmd`, returns its exit code and stdout (stderr into `err`).
int RunCli(const std::string& cmd, std::string* out, std::string* err, const TempDir& dir) {
  const int rc =
      std::system((cmd + " > " + dir.File("out.txt") + " 2> " + dir.File("err.txt")).c_str());
  *out = ReadFile(dir.File("out.txt"));
  *err = ReadFile(dir.File("err.txt"));
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The bucket a value lies in (-1 for zero).
int BucketOf(double v) { return v < 1 ? -1 : BucketIndex(static_cast<uint64_t>(v)); }

TEST_F(SnapshotClientTest, CostMatchesStatisticsComputedFromTheRawValues) {
  // Two builds of one library, with raw per-call values known here: time,
  // bytes allocated, file I/O.
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> time_ns(9.0, 1.2), bytes(5.0, 2.0);
  std::vector<double> times, allocs, files;
  uint64_t runs = 0;
  HttpsClient c(agg_->Options());
  for (int b = 0; b < 6; ++b) {
    wire::Batch batch = SimpleBatch(IdOf(9000 + b), "libcost.so.2", "cost_fn", 1, 1);
    batch.mutable_records(0)->mutable_key()->set_module_version(b % 2 ? "build-a" : "build-b");
    Histogram t, a, f;
    for (int i = 0; i < 500; ++i) {
      const uint64_t tv = static_cast<uint64_t>(time_ns(rng)) + 1;
      const uint64_t av = i % 3 == 0 ? 0 : static_cast<uint64_t>(bytes(rng));
      const uint64_t fv = i % 10 == 0 ? 4096 : 0;
      t.Record(tv), a.Record(av), f.Record(fv);
      times.push_back(static_cast<double>(tv));
      allocs.push_back(static_cast<double>(av));
      files.push_back(static_cast<double>(fv));
    }
    wire::Record base = batch.records(0);
    batch.clear_records();
    const std::pair<wire::Metric, const Histogram*> metrics[] = {
        {wire::METRIC_WALL_TIME_NS, &t},
        {wire::METRIC_ALLOC_BYTES_INCLUSIVE, &a},
        {wire::METRIC_FILE_IO_BYTES, &f}};
    for (const auto& [metric, h] : metrics) {
      wire::Record* r = batch.add_records();
      *r = base;
      r->mutable_key()->set_metric(metric);
      HistogramToWire(*h, r->mutable_histogram());
      r->set_runs(3);
    }
    runs += 3;
    auto reply = c.Post("/v1/batches", "application/x-protobuf", batch.SerializeAsString());
    ASSERT_TRUE(reply.ok() && reply->status == 200) << (reply.ok() ? reply->body : "");
  }
  for (int i = 0; i < 30; ++i) Ingest(i, i, 100, 1);  // other APIs around it
  PublishAll();

  const std::string cli = FIELDPROF_CLI_BIN;
  const std::string common = " --cache " + cache_.dir() + " ";
  const std::string server = " --port " + std::to_string(port_) + " --ca " + dir_.File("cert.pem") +
                             " --key " + dir_.File("keys/snapshot-signing.pub");
  std::string out, err;
  // Before any pull: a clear message.
  EXPECT_EQ(RunCli(cli + " cost" + common + "cost_fn", &out, &err, dir_), 1);
  EXPECT_NE(err.find("fieldprof pull --all"), std::string::npos) << err;
  ASSERT_EQ(RunCli(cli + " pull --all --quiet" + common + server, &out, &err, dir_), 0) << err;
  EXPECT_NE(out.find(std::to_string(kFragments) + " of " + std::to_string(kFragments) + " current"),
            std::string::npos)
      << out;
  ASSERT_EQ(RunCli(cli + " cost --json" + common + "libcost.so.2:cost_fn", &out, &err, dir_), 0)
      << err;

  // The same statistics, from the raw values.
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  const double m = mean(times);
  double var = 0;
  for (double x : times) var += (x - m) * (x - m);
  const double sd = std::sqrt(var / static_cast<double>(times.size()));
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  auto quantile = [&](double q) {  // nearest rank
    return sorted[static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size()))) - 1];
  };
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j.at("calls").get<uint64_t>(), times.size());
  EXPECT_EQ(j.at("runs").get<uint64_t>(), runs);
  EXPECT_EQ(j.at("series").get<uint64_t>(), 2u);
  EXPECT_NEAR(j.at("mean").get<double>(), m, m * 1e-5);
  EXPECT_NEAR(j.at("stddev").get<double>(), sd, sd * 1e-5);
  EXPECT_EQ(j.at("min").get<double>(), sorted.front());
  EXPECT_EQ(j.at("max").get<double>(), sorted.back());
  for (const auto& [key, q] : {std::pair{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}}) {
    // A log2 histogram places a quantile within the bucket of the true one.
    EXPECT_EQ(BucketOf(j.at(key).get<double>()), BucketOf(quantile(q))) << key;
  }
  EXPECT_NEAR(j.at("per_call").at("alloc_bytes").get<double>(), mean(allocs), mean(allocs) * 1e-5);
  EXPECT_NEAR(j.at("per_call").at("file_io_bytes").get<double>(), mean(files), 1e-6);
  uint64_t bucketed = 0;
  for (const auto& b : j.at("histogram").at("buckets")) bucketed += b.at("count").get<uint64_t>();
  EXPECT_EQ(bucketed, times.size());

  // The human view says the same, with a bar per bucket.
  ASSERT_EQ(RunCli(cli + " cost --color never" + common + "cost_fn", &out, &err, dir_), 0) << err;
  EXPECT_NE(out.find("calls 3,000"), std::string::npos) << out;
  EXPECT_NE(out.find("2 series in 1 module, 18 runs"), std::string::npos) << out;
  EXPECT_NE(out.find("\u2588"), std::string::npos) << out;
  EXPECT_EQ(out.find("\033["), std::string::npos) << "colour with --color never";
  ASSERT_EQ(RunCli(cli + " cost --color always" + common + "cost_fn", &out, &err, dir_), 0);
  EXPECT_NE(out.find("\033[38;"), std::string::npos);

  // A misspelt name gets suggestions; an unknown metric a clear error.
  EXPECT_EQ(RunCli(cli + " cost" + common + "cost_fm", &out, &err, dir_), 1);
  EXPECT_NE(err.find("Did you mean:\n  libcost.so.2:cost_fn"), std::string::npos) << err;
  EXPECT_EQ(RunCli(cli + " cost" + common + "--metric bogus cost_fn", &out, &err, dir_), 2);
  EXPECT_NE(err.find("unknown metric"), std::string::npos) << err;
  EXPECT_EQ(RunCli(cli + " cost" + common + "--metric socket_io_bytes cost_fn", &out, &err, dir_),
            1);
  EXPECT_NE(err.find("has no socket_io_bytes data"), std::string::npos) << err;
}

// Durations under the runs' timing resolution: a cheap API whose
// calls mostly record 0 after the probe's cost is taken off. The coarsest
// resolution among the runs survives the sums (the aggregator's store, its
// time tree, the snapshot) and every reader shows such figures as "< 20 ns",
// never "0 ns" or "1 ns".
TEST_F(SnapshotClientTest, ValuesUnderTheResolutionReadAsLessThanIt) {
  HttpsClient c(agg_->Options());
  for (int b = 0; b < 2; ++b) {
    wire::Batch batch = SimpleBatch(IdOf(9500 + b), "libcheap.so.1", "cheap_fn", 1, 1);
    wire::Record* r = batch.mutable_records(0);
    Histogram t;
    t.RecordZeros(900);
    for (int i = 0; i < 100; ++i) t.Record(8 + i % 30);
    HistogramToWire(t, r->mutable_histogram());
    r->set_runs(4);
    r->set_resolution_ns(b == 0 ? 12 : 20);
    auto reply = c.Post("/v1/batches", "application/x-protobuf", batch.SerializeAsString());
    ASSERT_TRUE(reply.ok() && reply->status == 200) << (reply.ok() ? reply->body : "");
  }
  PublishAll();
  const std::string cli = FIELDPROF_CLI_BIN;
  const std::string common = " --cache " + cache_.dir() + " ";
  const std::string server = " --port " + std::to_string(port_) + " --ca " + dir_.File("cert.pem");
  std::string out, err;
  ASSERT_EQ(RunCli(cli + " pull --all --quiet" + common + server + " --key " +
                       dir_.File("keys/snapshot-signing.pub"),
                   &out, &err, dir_),
            0)
      << err;
  // fieldprof cost, text and JSON (the snapshot).
  ASSERT_EQ(RunCli(cli + " cost --color never" + common + "cheap_fn", &out, &err, dir_), 0) << err;
  EXPECT_NE(out.find("mean < 20 ns"), std::string::npos) << out;
  EXPECT_NE(out.find("p50 < 20 ns"), std::string::npos) << out;
  EXPECT_NE(out.find("< 20 ns "), std::string::npos) << out;  // the zero bucket's row
  EXPECT_EQ(out.find(" 0 ns"), std::string::npos) << out;
  ASSERT_EQ(RunCli(cli + " cost --json" + common + "cheap_fn", &out, &err, dir_), 0) << err;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j.at("resolution_ns").get<uint64_t>(), 20u);
  std::set<std::string> below;
  for (const auto& v : j.at("below_resolution")) below.insert(v.get<std::string>());
  EXPECT_EQ(below, (std::set<std::string>{"mean", "p50", "p90", "min"})) << out;
  // fieldprof top and fieldprof api (the aggregator's query API).
  ASSERT_EQ(RunCli(cli + " top --module libcheap.so.1" + server, &out, &err, dir_), 0) << err;
  EXPECT_NE(out.find("< 20 ns"), std::string::npos) << out;
  EXPECT_EQ(out.find(" 0 ns"), std::string::npos) << out;
  ASSERT_EQ(RunCli(cli + " api" + server + " libcheap.so.1 cheap_fn", &out, &err, dir_), 0) << err;
  EXPECT_NE(out.find("p50 < 20 ns"), std::string::npos) << out;
  EXPECT_NE(out.find("mean < 20 ns"), std::string::npos) << out;
  EXPECT_EQ(out.find(" 0 ns"), std::string::npos) << out;
  ASSERT_EQ(RunCli(cli + " api --json" + server + " libcheap.so.1 cheap_fn", &out, &err, dir_), 0);
  EXPECT_NE(out.find("\"resolution_ns\":20"), std::string::npos) << out;
}

// The agent refreshes on its own schedule, at most snapshot_per_day
// fragments in a day, and `fieldprof status` reports a bad signature.
TEST_F(SnapshotClientTest, TheAgentRefreshesWithinItsDailyAllowanceAndReportsABadSignature) {
  for (int i = 0; i < 40; ++i) Ingest(i, i, 100, 1);
  PublishAll();
  agent::AgentConfig a;
  a.server_port = port_;
  a.ca_file = dir_.File("cert.pem");
  a.spool_dir = dir_.File("spool");
  a.state_dir = dir_.File("state");
  a.snapshot_key = dir_.File("keys/snapshot-signing.pub");
  a.snapshot_cache = cache_.dir();
  a.snapshot_per_day = 3;
  {
    agent::Agent agent(a);
    ASSERT_TRUE(agent.Init().ok());
    auto r = agent.Pass(/*flush=*/false);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->snapshot_fetched, 3);
    EXPECT_EQ(cache_.Fragments().size(), 3u);
    // Not due again for a day (plus jitter).
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    EXPECT_GE(agent.snapshot_next_unix_ms(), now + 23 * 3600 * 1000);
    r = agent.Pass(false);
    EXPECT_EQ(r->snapshot_fetched, -1);
    // Forced (as after a backoff), the day's allowance is still spent.
    r = agent.Pass(false, /*upload=*/false, /*force_snapshot=*/true);
    EXPECT_EQ(r->snapshot_fetched, 0);
    EXPECT_EQ(cache_.Fragments().size(), 3u);
  }
  // The aggregator now signs with another key: refused, reported, cache kept.
  agg_->Kill();
  MakeKey("other-keys");
  agg_ = std::make_unique<AggregatorProcess>(dir_, port_, Args("other-keys"));
  agg_->Start();
  Publish();
  const auto before = CachedFiles();
  a.snapshot_per_day = 100;
  agent::Agent agent(a);
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(false, false, /*force_snapshot=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->snapshot_fetched, 0);
  EXPECT_EQ(CachedFiles(), before);
  EXPECT_NE(agent.state().snapshot_result.find("signature"), std::string::npos)
      << agent.state().snapshot_result;
  std::string out, err;
  ASSERT_EQ(RunCli(std::string(FIELDPROF_CLI_BIN) + " status --state_dir " + dir_.File("state") +
                       " --spool " + dir_.File("spool") + " --runtime_settings " +
                       dir_.File("none.conf") + " --cache " + cache_.dir(),
                   &out, &err, dir_),
            0)
      << err;
  EXPECT_NE(out.find("3 of 8 fragments held (3 current)"), std::string::npos) << out;
  EXPECT_NE(out.find("snapshot check: "), std::string::npos) << out;
  EXPECT_NE(out.find("manifest rejected, cache kept: manifest signature"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace fieldprof
