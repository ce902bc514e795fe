// Writes N realistic run records into a spool directory, as the runtime
// would leave them after N program runs: each run measured k = 2 APIs drawn
// (Zipf-like) from 2,000 symbols across 50 modules, 6 metrics each, with
// 1..200 calls per API. For deploy/bench-agent.sh.
//
//   make_spool DIR N [SEED]
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "common/proto/fieldprof.pb.h"
#include "common/wire/api_key.h"
#include "common/wire/wire.h"

int main(int argc, char** argv) {
  using namespace fieldprof;
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_spool DIR N [SEED]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int n = std::atoi(argv[2]);
  std::mt19937_64 rng(argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1);
  std::filesystem::create_directories(dir);
  std::uniform_real_distribution<double> u(0, 1);
  const wire::Metric metrics[] = {
      wire::METRIC_WALL_TIME_NS,          wire::METRIC_ALLOC_BYTES_INCLUSIVE,
      wire::METRIC_ALLOC_BYTES_EXCLUSIVE, wire::METRIC_ALLOC_COUNT,
      wire::METRIC_FILE_IO_BYTES,         wire::METRIC_SOCKET_IO_BYTES};
  const int64_t t0 = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count() -
                     n;  // as if they had ended over the last n ms
  for (int i = 0; i < n; ++i) {
    wire::RunRecord run;
    run.set_schema_version(kSchemaVersion);
    run.mutable_platform()->set_os(wire::OS_LINUX);
    run.mutable_platform()->set_arch(wire::ARCH_X86_64);
    run.mutable_platform()->set_cpu_vendor(wire::CPU_VENDOR_INTEL);
    run.mutable_platform()->set_cpu_family(6);
    for (int a = 0; a < 2; ++a) {
      const int sym = static_cast<int>(2000 * u(rng) * u(rng));  // popular ones more often
      const int calls = 1 + static_cast<int>(rng() % 200);
      for (const wire::Metric m : metrics) {
        wire::Record* r = run.add_records();
        r->mutable_key()->set_module("libbench" + std::to_string(sym % 50) + ".so.1");
        r->mutable_key()->set_module_version("4f2a9c1d0e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c");
        r->mutable_key()->set_symbol("bench_api_" + std::to_string(sym));
        r->mutable_key()->set_metric(m);
        Histogram h;
        for (int c = 0; c < calls; ++c) {
          const bool zero = m != wire::METRIC_WALL_TIME_NS && u(rng) < 0.8;
          h.Record(zero ? 0 : static_cast<uint64_t>(std::exp(u(rng) * 12)));
        }
        HistogramToWire(h, r->mutable_histogram());
        r->set_runs(1);
      }
    }
    run.mutable_counters()->set_calls_measured(1);
    run.set_ended_unix_ms(t0 + i);
    const std::string name = "run-" + std::to_string(t0 + i) + "-" + std::to_string(i) + "-0.fpr";
    std::ofstream(dir + "/." + name + ".tmp", std::ios::binary) << run.SerializeAsString();
    std::filesystem::rename(dir + "/." + name + ".tmp", dir + "/" + name);
  }
  return 0;
}
