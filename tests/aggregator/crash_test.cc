// Crash safety: SIGKILL the real aggregator binary at random moments during a
// stream of uploads, restart it, repeat. Every batch that got a 200 must be
// present exactly once, and no batch may be half-applied.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "common/net/https_client.h"
#include "common/wire/wire.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"
#include "tools/loadgen/api_query.h"

namespace fieldprof {
namespace {

using testing::AggregatorProcess;
using testing::FreePort;
using testing::IdOf;
using testing::TempDir;

constexpr int kSharedSeries = 8;

// Batch i: one marker series of its own plus contributions to shared
// series (half of them field stacks).
wire::Batch CrashBatch(int i) {
  wire::Batch b = testing::SimpleBatch(IdOf(1000 + i), "libcrash.so.1",
                                       "marker_" + std::to_string(i), 1000 + i, 1);
  for (int j = 0; j < kSharedSeries; ++j) {
    wire::Record* r = b.add_records();
    r->mutable_key()->set_module("libshared.so.1");
    r->mutable_key()->set_module_version("1.0");
    // Every other shared series is a field stack (docs/field-stacks.md):
    // stack series take the same path through a kill.
    if (j % 2 == 0) {
      r->mutable_key()->set_symbol("shared_" + std::to_string(j));
      r->mutable_key()->set_metric(wire::METRIC_WALL_TIME_NS);
    } else {
      r->mutable_key()->set_symbol("shared_" + std::to_string(j) + ";+1a0;[libc.so.6]");
      r->mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
    }
    Histogram h;
    for (int k = 0; k <= (i + j) % 5; ++k) h.Record(100 + i * 7 + j);
    HistogramToWire(h, r->mutable_histogram());
    r->set_runs(1);
  }
  // Filler: realistic bulk, so writes and folds take long enough for the
  // kills to land in the middle of them.
  for (int j = 0; j < 300; ++j) {
    wire::Record* r = b.add_records();
    r->mutable_key()->set_module("libfiller.so.1");
    r->mutable_key()->set_module_version("1.0");
    r->mutable_key()->set_symbol("filler_" + std::to_string((i * 31 + j) % 2000));
    r->mutable_key()->set_metric(wire::METRIC_ALLOC_BYTES_INCLUSIVE);
    Histogram h;
    for (int k = 0; k < 1 + j % 7; ++k) h.Record(64u << (k % 10));
    HistogramToWire(h, r->mutable_histogram());
    r->set_runs(1);
  }
  return b;
}

ApiKey KeyOf(const wire::Batch& b, int i) {
  return ApiKeyFromWire(b.records(i).key(), b.client_platform());
}

TEST(CrashTest, KillDuringUploadsNeverLosesOrDoublesAcknowledgedBatches) {
  TempDir dir;
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  AggregatorProcess agg(dir, FreePort());
  constexpr int kBatches = 3000;
  constexpr int kRounds = 6;
  std::vector<wire::Batch> batches;
  for (int i = 0; i < kBatches; ++i) batches.push_back(CrashBatch(i));
  std::vector<std::atomic<bool>> acked(kBatches);
  std::mt19937 rng(12345);
  std::atomic<int> next{0};  // batches [0, next) have been attempted

  for (int round = 0; round < kRounds; ++round) {
    agg.Start();
    std::atomic<bool> stop{false};
    std::vector<std::thread> senders;
    for (int t = 0; t < 4; ++t) {
      senders.emplace_back([&] {
        HttpsClient c(agg.Options());
        while (!stop) {
          int i = next++;
          if (i >= kBatches) break;
          auto r = c.Post("/v1/batches", "application/x-protobuf", batches[i].SerializeAsString());
          if (r.ok() && r->status == 200) acked[i] = true;
          if (!r.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      });
    }
    // Kill after a random number of this round's batches were attempted
    // (not after a time: a faster machine would send them all before the
    // last round), with a deadline.
    const int kill_at = std::min(kBatches - 1, next.load() + 100 + static_cast<int>(rng() % 250));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (next.load() < kill_at && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    agg.Kill();
    stop = true;
    for (auto& s : senders) s.join();

    // Restart: everything acknowledged so far is there exactly once.
    agg.Start();
    HttpsClient c(agg.Options());
    for (int w = 0; w < 200; ++w) {
      auto m = c.Get("/metrics");
      if (m.ok() && m->body.find("\nfieldprof_pending_batches 0\n") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    int present = 0;
    for (int i = 0; i < kBatches; ++i) {
      if (!acked[i]) continue;
      auto s = tools::FetchSeries(c, KeyOf(batches[i], 0));
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      EXPECT_EQ(s->count, 1u) << "round " << round << ": acknowledged batch " << i;
      ++present;
    }
    agg.Kill();
    int n = 0;
    for (auto& a : acked) n += a ? 1 : 0;
    std::printf("round %d: %d of %d attempted batches acknowledged, %d checked present once\n",
                round, n, std::min(next.load(), kBatches), present);
  }

  // Finally send what was never acknowledged (as an agent would retry), then
  // every marker is present exactly once and the shared series equal the sum
  // of all batches: no batch was lost, doubled or half-applied.
  agg.Start();
  HttpsClient c(agg.Options());
  const int attempted = std::min(next.load(), kBatches);
  ASSERT_LT(attempted, kBatches) << "make the kills come sooner or the batches more";
  for (int i = 0; i < attempted; ++i) {
    if (acked[i]) continue;
    auto r = c.Post("/v1/batches", "application/x-protobuf", batches[i].SerializeAsString());
    ASSERT_TRUE(r.ok() && r->status == 200);
  }
  for (int w = 0; w < 200; ++w) {
    auto m = c.Get("/metrics");
    if (m.ok() && m->body.find("\nfieldprof_pending_batches 0\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int i = 0; i < attempted; ++i) {
    auto s = tools::FetchSeries(c, KeyOf(batches[i], 0));
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->count, 1u) << "batch " << i;
  }
  for (int j = 0; j < kSharedSeries; ++j) {
    Histogram want;
    for (int i = 0; i < attempted; ++i) {
      want.Merge(HistogramFromWire(batches[i].records(1 + j).histogram()));
    }
    auto s = tools::FetchSeries(c, KeyOf(batches[0], 1 + j));
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(tools::CompareDelta({}, *s, want), "") << "shared_" << j;
  }
  agg.Term();
}

// A full disk: the database on a real filesystem of 24 MiB (a tmpfs), an
// 8 MiB file beside it, uploads until the disk is under the reserve. The
// aggregator answers 507 with Retry-After and no server path, stays up,
// says why on /healthz and /metrics, and takes uploads again by itself once
// the file is deleted; every acknowledged batch is there exactly once, also
// after a restart.
TEST(FullDiskTest, TheAggregatorStaysUpAndLosesNothingAcknowledged) {
  TempDir dir;
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  const std::string fs = dir.File("fs");
  std::filesystem::create_directories(fs);
  testing::SmallDisk disk(fs, "24m");
  if (!disk.ok()) GTEST_SKIP() << disk.why();
  const std::string filler = fs + "/filler";
  {
    std::ofstream f(filler, std::ios::binary);
    const std::string mib(1 << 20, 'x');
    for (int i = 0; i < 8; ++i) f << mib;
  }
  AggregatorProcess agg(dir, FreePort(), {"--db", fs + "/db", "--min_free_mib", "6"});
  agg.Start();
  HttpsClient c(agg.Options());
  constexpr int kMax = 3000;
  std::vector<wire::Batch> batches;
  std::vector<bool> acked;
  int refused = 0;
  std::string refusal;
  for (int i = 0; i < kMax && refused < 20; ++i) {
    batches.push_back(CrashBatch(i));
    auto r = c.Post("/v1/batches", "application/x-protobuf", batches[i].SerializeAsString());
    ASSERT_TRUE(r.ok()) << "batch " << i << ": " << r.status().ToString();
    acked.push_back(r->status == 200);
    if (r->status == 200) continue;
    ASSERT_EQ(r->status, 507) << r->body;
    EXPECT_GT(r->retry_after_seconds, 0);
    ++refused;
    refusal = r->body;
  }
  ASSERT_EQ(refused, 20) << "the disk never filled";
  const int sent = static_cast<int>(batches.size());
  EXPECT_GT(sent - refused, 50) << "the disk filled too soon";
  EXPECT_NE(refusal.find("NoSpace"), std::string::npos) << refusal;
  EXPECT_EQ(refusal.find(dir.path()), std::string::npos) << "a server path: " << refusal;
  // Up, and saying why.
  auto health = c.Get("/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("reserve"), std::string::npos) << health->body;
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("\nfieldprof_store_writable 0\n"), std::string::npos);
  // Space returns: taken again without a restart.
  std::filesystem::remove(filler);
  bool healthy = false;
  for (int w = 0; w < 100 && !healthy; ++w) {
    auto h = c.Get("/healthz");
    healthy = h.ok() && h->status == 200;
    if (!healthy) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(healthy);
  for (int i = 0; i < sent; ++i) {  // what was refused, sent again as an agent would
    if (acked[i]) continue;
    auto r = c.Post("/v1/batches", "application/x-protobuf", batches[i].SerializeAsString());
    ASSERT_TRUE(r.ok() && r->status == 200) << "batch " << i << ": " << (r.ok() ? r->body : "");
  }
  // Every batch exactly once, before and after a restart.
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      agg.Term();
      agg.Start();
    }
    HttpsClient q(agg.Options());
    agg.WaitApplied();
    for (int i = 0; i < sent; ++i) {
      auto got = tools::FetchSeries(q, KeyOf(batches[i], 0));
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(got->count, 1u) << "round " << round << ": batch " << i;
    }
  }
  std::printf(
      "%d batches acknowledged before the disk filled, %d refused with 507, all %d "
      "present once after space returned\n",
      sent - refused, refused, sent);
  agg.Term();
}

}  // namespace
}  // namespace fieldprof
