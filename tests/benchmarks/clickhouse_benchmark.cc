// Reads and publishing at scale on the ClickHouse store, against the
// RocksDB store over the same series in the same run
// (deploy/bench-scale-out.sh starts the ClickHouse cluster):
//   clickhouse_benchmark SERIES CLICKHOUSE_URL CLUSTER [REPEATS]
// 1. fills both stores with SERIES series (series_gen.h) through ApplyBatch,
//    in batches of 2,500 records (ClickHouse: 1 aggregator's ingest path);
// 2. times GET /v1/api for one API (the router's handler in process, no
//    TLS: the same code the server runs) and GET /v1/module for one module,
//    medians and worst of REPEATS, and a publish cycle of every fragment
//    and one rotation cycle (64 fragments, 8 a cycle);
// 3. ClickHouse again after its roll-up folded the day into day nodes (the
//    state older data is read from).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/clickhouse/snapshot_storage_clickhouse.h"
#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/http/router.h"
#include "aggregator/metrics.h"
#include "aggregator/publish/publisher.h"
#include "aggregator/publish/snapshot_storage.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/crypto/signing.h"
#include "common/wire/batch_view.h"
#include "common/wire/wire.h"
#include "tests/benchmarks/series_gen.h"
#include "tests/support/test_util.h"

using namespace fieldprof;
using namespace fieldprof::aggregator;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

constexpr int32_t kDay = 20400;

// The series as batches of 2,500 records.
std::vector<std::string> Batches(const std::vector<wire::Record>& records) {
  std::vector<std::string> out;
  for (size_t at = 0, n = 0; at < records.size(); at += 2500, ++n) {
    wire::Batch b;
    b.set_schema_version(kSchemaVersion);
    std::string id(16, 'b');
    for (int i = 0; i < 8; ++i) id[i] = static_cast<char>(n >> (8 * i));
    b.set_batch_id(id);
    b.set_created_unix_ms(1795000000000);
    b.mutable_client_platform()->set_os(wire::OS_LINUX);
    b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
    b.mutable_client_platform()->set_cpu_vendor(wire::CPU_VENDOR_AMD);
    b.mutable_client_platform()->set_cpu_family(25);
    for (size_t i = at; i < std::min(records.size(), at + 2500); ++i) *b.add_records() = records[i];
    out.push_back(b.SerializeAsString());
  }
  return out;
}

bool Fill(Store& store, const std::vector<std::string>& batches, const char* name) {
  const auto t0 = Clock::now();
  for (const std::string& body : batches) {
    BatchView v;
    if (!DecodeBatchView(body, &v).ok()) return false;
    StatusOr<ApplyResult> r = store.ApplyBatch(v, body, kDay);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, r.status().ToString().c_str());
      return false;
    }
  }
  if (!store.WaitApplied(std::chrono::minutes(30)).ok()) return false;
  const double s = Ms(Clock::now() - t0) / 1000;
  std::printf("  %-10s filled in %6.1f s (%zu batches of 2,500 records, %.0f records/s)\n", name, s,
              batches.size(), static_cast<double>(batches.size()) * 2500 / s);
  return true;
}

struct Times {
  double median = 0, worst = 0;
};
Times Of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.back()};
}

// GET /v1/api for random APIs and /v1/module for random modules, through
// the router's handler.
void Reads(Store& store, const char* name, uint64_t series, int repeats) {
  Metrics metrics;
  RouterParts parts;
  parts.store = &store;
  parts.metrics = &metrics;
  Router router(std::move(parts));
  std::mt19937_64 rng(7);
  std::vector<double> api, module;
  size_t api_bytes = 0, module_bytes = 0;
  for (int i = 0; i < repeats; ++i) {
    const uint64_t fn = rng() % (series / 2);
    const auto t0 = Clock::now();
    HttpResponse r = router.Handle("GET",
                                   "/v1/api?module=libmod" + std::to_string(fn % 997) +
                                       ".so.1&symbol=fn_" + std::to_string(fn),
                                   "", "");
    api.push_back(Ms(Clock::now() - t0));
    if (r.status != 200)
      std::fprintf(stderr, "%s /v1/api: %d %s\n", name, r.status, r.body.c_str());
    api_bytes = r.body.size();
  }
  for (int i = 0; i < std::max(3, repeats / 10); ++i) {
    const auto t0 = Clock::now();
    HttpResponse r = router.Handle(
        "GET", "/v1/module?module=libmod" + std::to_string(rng() % 997) + ".so.1", "", "");
    module.push_back(Ms(Clock::now() - t0));
    module_bytes = r.body.size();
  }
  const Times a = Of(api), m = Of(module);
  std::printf("  %-10s GET /v1/api     median %8.2f ms  worst %8.2f ms  (%zu bytes)\n", name,
              a.median, a.worst, api_bytes);
  std::printf("  %-10s GET /v1/module  median %8.2f ms  worst %8.2f ms  (%zu bytes)\n", name,
              m.median, m.worst, module_bytes);
}

// A full publish cycle and a rotation cycle.
void Publish(Store& store, SnapshotStorage* storage, const std::string& dir, const char* name) {
  auto key = Ed25519Signer::Generate();
  PublisherOptions po;
  po.dir = dir;
  po.fragment_count = 64;
  po.per_cycle = 8;
  Publisher p(&store, &*key, po, storage);
  if (!p.Init().ok()) std::abort();
  for (int i = 0; i < 2; ++i) {
    const auto t0 = Clock::now();
    StatusOr<CycleResult> c = p.Cycle(1795000000000 + i * 3600000, /*all=*/i == 0);
    const double ms = Ms(Clock::now() - t0);
    if (!c.ok()) {
      std::fprintf(stderr, "%s publish: %s\n", name, c.status().ToString().c_str());
      return;
    }
    std::printf("  %-10s publish %-9s %9.0f ms  (%llu series scanned, %u fragments, %.1f MiB)\n",
                name, i == 0 ? "all" : "rotation", ms, static_cast<unsigned long long>(c->series),
                c->rebuilt, c->bytes / 1048576.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: clickhouse_benchmark SERIES CLICKHOUSE_URL CLUSTER [REPEATS]\n");
    return 2;
  }
  const uint64_t series = std::strtoull(argv[1], nullptr, 10);
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 50;
  testing::TempDir dir;
  const std::vector<std::string> batches = Batches(MakeSeries(series));
  std::printf("%llu series (two metrics per API under 997 modules)\n",
              static_cast<unsigned long long>(series));

  auto rocks = OpenRocksDbStore({.path = dir.File("db"), .today = [] { return kDay; }});
  if (!rocks.ok()) return 1;
  std::atomic<int32_t> today{kDay};
  ClickHouseStoreOptions o;
  o.url = argv[2];
  o.cluster = argv[3];
  o.database = "fp_bench_" + std::to_string(getpid());
  o.rollup_interval = std::chrono::milliseconds(500);
  o.drop_grace = std::chrono::seconds(0);
  o.today = [&today] { return today.load(); };
  auto ch = OpenClickHouseStore(o);
  if (!ch.ok()) {
    std::fprintf(stderr, "%s\n", ch.status().ToString().c_str());
    return 1;
  }
  if (!Fill(**rocks, batches, "RocksDB") || !Fill(**ch, batches, "ClickHouse")) return 1;

  std::printf("\nreads (raw rows: today's data, before any roll-up):\n");
  Reads(**rocks, "RocksDB", series, repeats);
  Reads(**ch, "ClickHouse", series, repeats);
  std::printf("\npublishing (64 fragments, 8 a cycle):\n");
  Publish(**rocks, nullptr, dir.File("snapshot"), "RocksDB");
  auto shared = OpenClickHouseSnapshotStorage(o);
  if (!shared.ok()) return 1;
  Publish(**ch, shared->get(), "", "ClickHouse");

  // Three days on: the day is folded into day nodes.
  today = kDay + o.horizon_days + 1;
  const auto f0 = Clock::now();
  std::string metrics;
  for (int i = 0; i < 36000; ++i) {
    metrics.clear();
    (*ch)->AppendMetrics(&metrics);
    if (metrics.find("\nfieldprof_rollup_days_total 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("\nClickHouse folded the day into day nodes in %.1f s\n",
              Ms(Clock::now() - f0) / 1000);
  std::printf("reads and publishing from day nodes:\n");
  Reads(**ch, "ClickHouse", series, repeats);
  Publish(**ch, shared->get(), "", "ClickHouse");
  IgnoreError((*ch)->Close());
  return 0;
}
