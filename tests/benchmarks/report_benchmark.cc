// Vendor reports and the dashboard at scale:
//   report_benchmark SERIES [REPEATS]
// 1. writes a snapshot cache of SERIES series (two metrics per API, under
//    997 modules, log-normal histograms of 1..2000 calls) and times the
//    real `fieldprof report --module libmod0.so.1` on it: the first, which
//    builds the cache's index, then as text and as HTML through it;
// 2. posts the same series to the real aggregator (batches of 2,500
//    records) and times the dashboard's reads on it: GET /v1/report and
//    /v1/diff for that module, /v1/api for one of its APIs, /v1/modules (a
//    scan of every series), and /ui/app.js; medians and worst of REPEATS.
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/net/https_client.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "tests/benchmarks/series_gen.h"
#include "tests/support/aggregator_process.h"

using namespace fieldprof;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void WriteCache(const std::string& dir, const std::vector<wire::Record>& records) {
  constexpr uint32_t kFragments = 64;
  SnapshotCache cache(dir);
  std::vector<wire::Fragment> frags(kFragments);
  for (uint32_t i = 0; i < kFragments; ++i) {
    frags[i].set_schema_version(1);
    frags[i].set_index(i);
    frags[i].set_fragment_count(kFragments);
  }
  for (size_t i = 0; i < records.size(); ++i)
    *frags[(i / 2) % kFragments].add_records() = records[i];
  wire::Manifest m;
  m.set_schema_version(1);
  m.set_snapshot_version(1);
  m.set_created_unix_ms(1795392000000);
  m.set_fragment_schema_version(1);
  m.set_fragment_count(kFragments);
  wire::SignedManifest sm;
  sm.set_manifest(m.SerializeAsString());
  if (!cache.StoreManifest(sm.SerializeAsString(), m, "e").ok()) std::abort();
  for (uint32_t i = 0; i < kFragments; ++i) {
    if (!cache.StoreFragment(i, i + 1, frags[i].SerializeAsString()).ok()) std::abort();
  }
}

double RunMs(const std::string& cmd) {
  const auto t0 = Clock::now();
  const int rc = std::system(cmd.c_str());
  const double ms = Ms(Clock::now() - t0);
  if (rc != 0) std::fprintf(stderr, "report_benchmark: '%s' exited %d\n", cmd.c_str(), rc);
  return ms;
}

void Line(const char* what, std::vector<double> ms, size_t bytes) {
  std::sort(ms.begin(), ms.end());
  std::printf("  %-44s median %9.2f ms   worst %9.2f ms   %8zu bytes\n", what, ms[ms.size() / 2],
              ms.back(), bytes);
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t series = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  fieldprof::testing::TempDir dir;
  const auto t0 = Clock::now();
  const std::vector<wire::Record> records = MakeSeries(series);
  WriteCache(dir.File("cache"), records);
  std::printf(
      "%llu series (%llu APIs under 997 modules; libmod0.so.1 holds %llu series), made in "
      "%.0f ms\n",
      static_cast<unsigned long long>(series), static_cast<unsigned long long>(series / 2),
      static_cast<unsigned long long>((series / 2 + 996) / 997 * 2), Ms(Clock::now() - t0));

  std::printf("fieldprof report --module libmod0.so.1, from the snapshot cache:\n");
  const std::string report = std::string(FIELDPROF_CLI_BIN) +
                             " report --module libmod0.so.1 --cache " + dir.File("cache") +
                             " --top 0";
  // The first builds the cache's index (a pass over every fragment, as
  // fieldprof pull does after a download); later ones read the module's
  // records through it.
  const double first = RunMs(report + " > " + dir.File("out") + " 2>&1");
  Line("first (builds the index)", {first}, std::filesystem::file_size(dir.File("out")));
  for (const char* fmt : {"text", "html"}) {
    std::vector<double> ms;
    for (int i = 0; i < std::max(3, repeats / 3); ++i) {
      ms.push_back(RunMs(report + " --format " + fmt + " > " + dir.File("out") + " 2>&1"));
    }
    Line(fmt, ms, std::filesystem::file_size(dir.File("out")));
  }

  if (!fieldprof::testing::MakeCert(dir.path())) return 1;
  fieldprof::testing::AggregatorProcess agg(dir, fieldprof::testing::FreePort());
  agg.Start();
  HttpsClient http(agg.Options());
  const auto l0 = Clock::now();
  for (size_t at = 0; at < records.size(); at += 2500) {
    wire::Batch b;
    b.set_schema_version(kSchemaVersion);
    char id[17];
    std::snprintf(id, sizeof id, "%016zx", at);
    b.set_batch_id(std::string(id, 16));
    b.set_created_unix_ms(1795392000000);
    *b.mutable_client_platform() = records[0].key().platform();
    for (size_t i = at; i < std::min(records.size(), at + 2500); ++i) *b.add_records() = records[i];
    StatusOr<HttpReply> r =
        http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
    if (!r.ok() || r->status != 200) {
      std::fprintf(stderr, "report_benchmark: a batch was refused: %s\n",
                   r.ok() ? r->body.c_str() : r.status().ToString().c_str());
      return 1;
    }
  }
  agg.WaitApplied();
  std::printf("the aggregator took the %llu series in %.1f s; the dashboard's reads:\n",
              static_cast<unsigned long long>(series), Ms(Clock::now() - l0) / 1000);
  const std::vector<std::pair<const char*, std::string>> reads = {
      {"GET /v1/report?module=libmod0.so.1", "/v1/report?module=libmod0.so.1"},
      {"GET /v1/report (one day's range)",
       "/v1/report?module=libmod0.so.1&from=2026-01-01&to=2030-12-31"},
      {"GET /v1/api (one API, wall time)", "/v1/api?module=libmod0.so.1&symbol=fn_0"},
      {"GET /v1/diff (two versions)", "/v1/diff?module=libmod0.so.1&a_version=1.0&b_version=1.0"},
      {"GET /v1/modules (first: a scan)", "/v1/modules"},
      {"GET /v1/modules (kept a minute)", "/v1/modules"},
      {"GET /ui/app.js", "/ui/app.js"},
  };
  for (const auto& [name, target] : reads) {
    std::vector<double> ms;
    size_t bytes = 0;
    const int n = std::string(name).find("scan") != std::string::npos ? 1 : repeats;
    for (int i = 0; i < n; ++i) {
      const auto s0 = Clock::now();
      StatusOr<HttpReply> r = http.Get(target);
      ms.push_back(Ms(Clock::now() - s0));
      if (!r.ok() || r->status != 200) {
        std::fprintf(stderr, "report_benchmark: %s: %s\n", target.c_str(),
                     r.ok() ? std::to_string(r->status).c_str() : r.status().ToString().c_str());
        break;
      }
      bytes = r->body.size();
    }
    Line(name, ms, bytes);
  }
  return 0;
}
