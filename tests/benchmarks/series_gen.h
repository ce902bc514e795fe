// Synthetic series for the benchmarks at 100k and 1M series: two metrics
// per API (wall time, bytes allocated) under 997 modules libmodN.so.1,
// log-normal histograms of 1..2000 calls, seeded (the same every run).
#ifndef FIELDPROF_TESTS_BENCHMARKS_SERIES_GEN_H_
#define FIELDPROF_TESTS_BENCHMARKS_SERIES_GEN_H_

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"

namespace fieldprof {

inline std::vector<wire::Record> MakeSeries(uint64_t series) {
  std::vector<wire::Record> out;
  out.reserve(series);
  std::mt19937_64 rng(42);
  for (uint64_t s = 0; s < series; ++s) {
    const uint64_t api = s / 2;
    wire::Record r;
    wire::ApiKey* k = r.mutable_key();
    k->set_module("libmod" + std::to_string(api % 997) + ".so.1");
    k->set_module_version("1.0");
    k->set_symbol("fn_" + std::to_string(api));
    k->set_metric(s % 2 == 0 ? wire::METRIC_WALL_TIME_NS : wire::METRIC_ALLOC_BYTES_INCLUSIVE);
    k->mutable_platform()->set_os(wire::OS_LINUX);
    k->mutable_platform()->set_arch(wire::ARCH_X86_64);
    k->mutable_platform()->set_cpu_vendor(wire::CPU_VENDOR_AMD);
    k->mutable_platform()->set_cpu_family(25);
    Histogram h;
    std::lognormal_distribution<double> cost(4.0 + static_cast<double>(api % 11), 1.0);
    const int calls = 1 + static_cast<int>(rng() % 2000);
    for (int c = 0; c < calls; ++c) h.Record(static_cast<uint64_t>(cost(rng)));
    HistogramToWire(h, r.mutable_histogram());
    r.set_runs(1 + rng() % std::min<uint64_t>(50, static_cast<uint64_t>(calls)));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace fieldprof

#endif  // FIELDPROF_TESTS_BENCHMARKS_SERIES_GEN_H_
