// fieldprof-loadgen: drives an aggregator with realistic batches.
#include <iostream>

#include "common/net/endpoint.h"
#include "common/settings/options.h"
#include "tools/loadgen/loadgen.h"
#include "tools/shared/command_line.h"

using namespace fieldprof;
using namespace fieldprof::tools;

int main(int argc, char** argv) {
  LoadOptions o;
  int64_t port = 8443, connections = o.connections, pool = o.pool, modules = o.gen.modules,
          symbols = o.gen.symbols_per_module,
          batch_bytes = static_cast<int64_t>(o.gen.target_bytes),
          seed = static_cast<int64_t>(o.gen.seed), timeout_ms = o.client.timeout.count();
  bool json = false;
  OptionTable t("fieldprof-loadgen",
                "Sends realistic ~128 KiB fieldprof batches (Zipf-popular APIs across many\n"
                "modules) to an aggregator over concurrent keep-alive TLS connections, then\n"
                "prints batches/s, records/s and latency percentiles. With --verify it reads\n"
                "every series before and after and checks the sums moved by exactly what was\n"
                "acknowledged. Exit code 1 on failed batches or mismatches.");
  t.AddString("host", &o.client.host, "aggregator host (name checked against the certificate)");
  t.AddInt("port", &port, "aggregator port, when --host names none", 1, 65535);
  AddEndpointCheck(t, "host", &o.client.host, "port", &port);
  t.AddString("ca", &o.client.ca_file,
              "CA file to verify the aggregator with (default: system store)");
  t.AddBool("insecure", &o.client.insecure, "do not verify the certificate");
  t.AddInt("timeout_ms", &timeout_ms, "per-request deadline", 100, 3600000);
  t.AddInt("connections", &connections, "concurrent connections", 1, 4096);
  t.AddInt("batches", &o.batches, "batches to send (0 = until --duration_s)", 0, 1LL << 40);
  t.AddInt("duration_s", &o.duration_s, "stop after this many seconds (0 = no limit)", 0, 86400);
  t.AddInt("pool", &pool, "distinct batch bodies, re-sent under fresh ids", 1, 100000);
  t.AddInt("modules", &modules, "modules in the API universe", 1, 100000);
  t.AddInt("symbols", &symbols, "symbols per module", 1, 100000);
  t.AddInt("batch_bytes", &batch_bytes, "target encoded batch size", 256, 1 << 20);
  t.AddInt("seed", &seed, "random seed for the batch contents", 0, INT64_MAX);
  t.AddDouble("stack_share", &o.gen.stack_share,
              "share of records that are field stacks (metric stack_cpu_ns, a few stacks per "
              "API; 0: none)",
              0, 1);
  t.AddBool("verify", &o.verify, "check the aggregator's sums against what was acknowledged");
  t.AddBool("duplicates", &o.resend_duplicates, "send every batch twice under the same id");
  int64_t attempts = o.max_attempts;
  t.AddInt("max_attempts", &attempts,
           "attempts per send before the batch counts as failed (backoff up to 5 s)", 1, 1000000);
  t.AddString("dump", &o.dump_dir, "write the generated batch bodies into this directory and exit");
  t.AddBool("json", &json, "print the report as JSON on stdout");
  int64_t machines = 0;
  t.AddInt("machines", &machines, "machines the batches come from (a day key each; 0: none)", 0,
           1 << 30);
  t.AddBool("tokens", &o.tokens,
            "spend an upload token per batch, taken from the aggregator before the load "
            "(needs --batches)");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (!s.ok()) return UsageError(t, s);
  o.client.port = static_cast<uint16_t>(port);
  o.client.timeout = std::chrono::milliseconds(timeout_ms);
  o.connections = static_cast<int>(connections);
  o.pool = static_cast<int>(pool);
  o.machines = static_cast<int>(machines);
  o.max_attempts = static_cast<int>(attempts);
  o.gen.modules = static_cast<int>(modules);
  o.gen.symbols_per_module = static_cast<int>(symbols);
  o.gen.target_bytes = static_cast<size_t>(batch_bytes);
  o.gen.seed = static_cast<uint64_t>(seed);
  StatusOr<LoadReport> r = RunLoad(o, &std::cerr);
  if (!r.ok()) {
    std::cerr << "fieldprof-loadgen: " << r.status().ToString() << "\n";
    return 1;
  }
  if (!o.dump_dir.empty()) return 0;
  if (json) {
    std::cout << r->ToJson() << "\n";
  } else {
    std::cout << r->ToText();
  }
  return (r->batches_failed > 0 || r->keys_mismatched > 0) ? 1 : 0;
}
