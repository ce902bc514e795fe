// Posts a module's field stacks to an aggregator, for the flame graph and
// /v1/stacks benchmarks (deploy/bench-stacks-page.sh): N distinct stacks of
// 4 to 14 frames over a tree that branches like a library's (a few entry
// points, internal functions called from many places), CPU times spread
// over four orders of magnitude, in batches of at most 4,000 records.
//
//   stacks_post PORT CA_FILE MODULE N
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>

#include "common/histogram.h"
#include "common/https_client.h"
#include "common/wire.h"

int main(int argc, char** argv) {
  using namespace fieldprof;
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: stacks_post PORT CA_FILE MODULE N [FIRST_BATCH]\n");
    return 2;
  }
  HttpsClientOptions o;
  o.port = static_cast<uint16_t>(std::atoi(argv[1]));
  o.ca_file = argv[2];
  const std::string module = argv[3];
  const long n = std::atol(argv[4]);
  HttpsClient http(o);
  std::mt19937_64 rng(68);
  std::set<std::string> seen;
  wire::Batch b;
  // Batch ids count from FIRST_BATCH (default 10,000,000): a second
  // poster into the same aggregator gives its own.
  const long first_batch = argc == 6 ? std::atol(argv[5]) : 10000000;
  long batches = 0;
  auto post = [&]() {
    if (b.records_size() == 0) return true;
    b.set_schema_version(kSchemaVersion);
    b.set_batch_id(std::string(8, 'S') + std::to_string(first_batch + batches++));
    b.set_created_unix_ms(1795000000000);
    b.set_machine_key(std::string(16, 'M'));
    b.mutable_client_platform()->set_os(wire::OS_LINUX);
    b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
    auto r = http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
    if (!r.ok() || r->status != 200) {
      std::fprintf(stderr, "stacks_post: %s\n",
                   r.ok() ? r->body.c_str() : r.status().ToString().c_str());
      return false;
    }
    b.Clear();
    return true;
  };
  std::geometric_distribution<int> fanout(0.35);
  std::lognormal_distribution<double> ms(1.0, 1.6);
  while (static_cast<long>(seen.size()) < n) {
    std::string stack = "api_" + std::to_string(fanout(rng) % 12);
    const int depth = 3 + static_cast<int>(rng() % 11);
    for (int d = 0; d < depth; ++d) {
      char frame[24];
      std::snprintf(frame, sizeof frame, ";+%x", 0x1000 + (fanout(rng) + 7 * d) * 0x40);
      stack += frame;
    }
    if (!seen.insert(stack).second) continue;
    wire::Record* r = b.add_records();
    r->mutable_key()->set_module(module);
    r->mutable_key()->set_module_version("1.0-1_0123456789abcdef");
    r->mutable_key()->set_symbol(stack);
    r->mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
    Histogram h;
    h.Record(static_cast<uint64_t>(ms(rng) * 1e6) + 1);
    HistogramToWire(h, r->mutable_histogram());
    r->set_runs(1);
    if (b.records_size() == 4000 && !post()) return 1;
  }
  if (!post()) return 1;
  std::printf("%zu stacks in %ld batches\n", seen.size(), batches);
  return 0;
}
