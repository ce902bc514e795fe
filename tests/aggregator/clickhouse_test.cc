// The first parts of the ClickHouse store (issue #20) against a real
// ClickHouse (Debian's 18.16) on loopback: 128-bit sums through 32-bit
// limbs are exact, and the raw rows' read counts a batch once however often
// it was inserted, with sums past 2^64 and sums of squares near 2^128.
#include "aggregator/clickhouse.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/api_key.h"
#include "common/batch_view.h"
#include "common/wire.h"
#include "gtest/gtest.h"
#include "tests/aggregator_process.h"
#include "tests/clickhouse_process.h"
#include "tests/test_util.h"

namespace fieldprof::aggregator {
namespace {

TEST(ClickHouseLimbsTest, LimbSumsJoinToTheExactSum) {
  std::mt19937_64 rng(3);
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + static_cast<int>(rng() % 1000);
    uint128 total = 0;
    bool overflow = false;
    std::array<uint64_t, 4> sums{};
    for (int i = 0; i < n; ++i) {
      const uint128 v = (static_cast<uint128>(rng() >> (rng() % 64)) << 64 | rng()) >> (rng() % 8);
      overflow = overflow || kUint128Max - total < v;
      total += v;
      const auto l = Limbs(v);
      for (int k = 0; k < 4; ++k) sums[k] += l[k];
    }
    uint128 joined = 0;
    EXPECT_EQ(JoinLimbSums(sums, &joined), !overflow);
    if (!overflow) {
      EXPECT_TRUE(joined == total) << round;
    }
  }
  uint128 out;
  EXPECT_FALSE(JoinLimbSums({0, 0, 0, uint64_t{1} << 32}, &out)) << "2^128 does not fit";
  EXPECT_TRUE(JoinLimbSums({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, &out));
  EXPECT_TRUE(out == kUint128Max);
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

TEST(ClickHouseStoreTest, ABatchInsertedTwiceCountsOnceAndSumsAreExact) {
  testing::TempDir dir;
  testing::ClickHouseProcess server(dir);
  ASSERT_TRUE(server.Start()) << "clickhouse-server did not start (deploy/install-deps.sh "
                                 "installs it); see its log under "
                              << dir.File("clickhouse");
  ClickHouseClient ch(server.Options());
  ASSERT_TRUE(ch.Execute(RawRowsTableSql("fp_rows")).ok());
  ASSERT_TRUE(ch.Execute(RawRowsTableSql("fp_rows")).ok()) << "creating it again changes nothing";
  // Values near 2^63: bucket sums past 2^64, sums of squares near 2^127.
  const uint64_t big = (uint64_t{1} << 63) + 12345;
  const wire::Batch a = MakeBatch('a', {{"huge", {big, big, big, big}}, {"small", {1, 2, 3, 0}}});
  const wire::Batch b = MakeBatch('b', {{"huge", {big - 1}}, {"small", {7}}});
  auto insert = [&](const wire::Batch& batch, int32_t day) {
    const std::string body = batch.SerializeAsString();
    BatchView v;
    ASSERT_TRUE(DecodeBatchView(body, &v).ok());
    ASSERT_TRUE(ch.InsertRowBinary("fp_rows", BatchRows(v, day)).ok());
  };
  insert(a, 20000);
  insert(a, 20000);  // a retry: the same rows again
  insert(b, 20001);
  StatusOr<std::vector<ApiAggregate>> sums = ReadSums(ch, "fp_rows", 0, 99999);
  ASSERT_TRUE(sums.ok()) << sums.status().ToString();
  ASSERT_EQ(sums->size(), 2u);
  std::map<std::string, Histogram> want;
  for (const wire::Batch* batch : {&a, &b}) {
    for (const wire::Record& r : batch->records()) {
      want[r.key().symbol()].Merge(HistogramFromWire(r.histogram()));
    }
  }
  for (const ApiAggregate& s : *sums) {
    EXPECT_TRUE(s.histogram == want.at(s.key.symbol)) << s.key.symbol;
    EXPECT_EQ(s.runs, 2u) << s.key.symbol << ": each batch once";
    EXPECT_EQ(s.key.platform.cpu_family, 25);
  }
  EXPECT_GT(want.at("huge").sum(), static_cast<uint128>(UINT64_MAX));
  // A day range: batch b's day alone.
  sums = ReadSums(ch, "fp_rows", 20001, 20001);
  ASSERT_TRUE(sums.ok());
  for (const ApiAggregate& s : *sums) EXPECT_EQ(s.histogram.count(), 1u) << s.key.symbol;
  // A dead server: a clear error.
  testing::TempDir other;
  HttpsClientOptions dead = server.Options();
  dead.port = testing::FreePort();
  ClickHouseClient nobody(dead);
  Status s = nobody.Execute("SELECT 1");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ClickHouse"), std::string::npos) << s.ToString();
}

// The real aggregator with --store clickhouse: a batch posted twice is
// applied once, the query API answers the exact sums, /healthz follows
// ClickHouse, and with ClickHouse gone a batch is refused (503), never
// acknowledged.
TEST(ClickHouseStoreTest, TheAggregatorOverClickHouse) {
  testing::TempDir dir;
  testing::ClickHouseProcess server(dir);
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  testing::AggregatorProcess agg(dir, testing::FreePort(),
                                 {"--store", "clickhouse", "--clickhouse_url",
                                  "http://127.0.0.1:" + std::to_string(server.Options().port)});
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
  health = http.Get("/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 503) << health->body;
  const wire::Batch b = MakeBatch('y', {{"small", {1}}});
  StatusOr<HttpReply> refused =
      http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 503) << refused->body;
}

}  // namespace
}  // namespace fieldprof::aggregator
