// A snapshot cache written for a test with the cache's own writer (an
// unsigned manifest: readers do not check signatures), and records to fill
// it with. Shared by the language server's and fieldprof check's tests.
#ifndef FIELDPROF_TESTS_TOOLS_SNAPSHOT_FIXTURE_H_
#define FIELDPROF_TESTS_TOOLS_SNAPSHOT_FIXTURE_H_

#include <map>
#include <string>
#include <vector>

#include "common/snapshot/snapshot_cache.h"
#include "common/spool/spool.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace fieldprof::testing {

inline wire::Record MakeRecord(const std::string& module, const std::string& symbol,
                               wire::Metric metric, const Histogram& h, uint64_t runs,
                               uint32_t cpu_family = 25) {
  wire::Record r;
  wire::ApiKey* k = r.mutable_key();
  k->set_module(module);
  k->set_module_version("1.0");
  k->set_symbol(symbol);
  k->set_metric(metric);
  k->mutable_platform()->set_os(wire::OS_LINUX);
  k->mutable_platform()->set_arch(wire::ARCH_X86_64);
  k->mutable_platform()->set_cpu_vendor(wire::CPU_VENDOR_AMD);
  k->mutable_platform()->set_cpu_family(cpu_family);
  HistogramToWire(h, r.mutable_histogram());
  r.set_runs(runs);
  return r;
}

// Values spread over [lo, hi) ns, `n` of them.
inline Histogram Spread(uint64_t lo, uint64_t hi, int n) {
  Histogram h;
  for (int i = 0; i < n; ++i) h.Record(lo + (hi - lo) * static_cast<uint64_t>(i) / n);
  return h;
}

// A snapshot cache with a few APIs (two fragments).
class Cache {
 public:
  explicit Cache(const std::string& dir) : cache_(dir) {}
  void Write(uint64_t version, const std::vector<wire::Record>& records) {
    wire::Manifest m;
    m.set_schema_version(1);
    m.set_snapshot_version(version);
    m.set_created_unix_ms(1795392000000);  // 2026-11-23 00:00 UTC
    m.set_fragment_schema_version(1);
    m.set_fragment_count(2);
    wire::Fragment f[2];
    for (int i = 0; i < 2; ++i) {
      f[i].set_schema_version(1);
      f[i].set_index(i);
      f[i].set_fragment_count(2);
    }
    for (size_t i = 0; i < records.size(); ++i) *f[i % 2].add_records() = records[i];
    wire::SignedManifest sm;
    sm.set_manifest(m.SerializeAsString());
    ASSERT_TRUE(
        cache_.StoreManifest(sm.SerializeAsString(), m, "e" + std::to_string(version)).ok());
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(cache_.StoreFragment(i, version * 10 + i, f[i].SerializeAsString()).ok());
    }
  }
  const std::string& dir() const { return cache_.dir(); }

 private:
  SnapshotCache cache_;
};

// The records of a spool's run files summed per key (with its run's
// platform) as the aggregator sums them: a field made of real runs.
inline std::vector<wire::Record> SumSpool(const std::string& dir) {
  std::map<std::string, wire::Record> sums;
  StatusOr<std::vector<SpoolEntry>> spool = ListSpool(dir);
  if (!spool.ok()) return {};
  for (const SpoolEntry& e : *spool) {
    StatusOr<wire::RunRecord> run = ReadRunRecord(e.path);
    if (!run.ok()) continue;
    for (const wire::Record& r : run->records()) {
      wire::Record k = r;
      *k.mutable_key()->mutable_platform() = run->platform();
      auto [it, fresh] = sums.emplace(k.key().SerializeAsString(), k);
      if (fresh) continue;
      Histogram h = HistogramFromWire(it->second.histogram());
      h.Merge(HistogramFromWire(k.histogram()));
      HistogramToWire(h, it->second.mutable_histogram());
      it->second.set_runs(it->second.runs() + 1);
    }
  }
  std::vector<wire::Record> out;
  for (auto& [_, r] : sums) out.push_back(r);
  return out;
}

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_TOOLS_SNAPSHOT_FIXTURE_H_
