// Posts a module's field stacks to an aggregator, for the flame graph and
// /v1/stacks benchmarks (deploy/bench-stacks-page.sh): N distinct stacks
// (stack_gen.h) in batches of at most 4,000 records.
//
//   stacks_post PORT CA_FILE MODULE N
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/net/https_client.h"
#include "common/wire/wire.h"
#include "tests/benchmarks/stack_gen.h"

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
    for (wire::Record& r : *b.mutable_records()) r.set_first_from_machine(true);
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
  StackGen gen(module);
  while (static_cast<long>(gen.made()) < n) {
    *b.add_records() = gen.Next();
    if (b.records_size() == 4000 && !post()) return 1;
  }
  if (!post()) return 1;
  std::printf("%zu stacks in %ld batches\n", gen.made(), batches);
  return 0;
}
