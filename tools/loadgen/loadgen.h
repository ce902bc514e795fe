// The load generator: realistic ~128 KiB batches (batch_gen.h) over many
// concurrent keep-alive TLS connections, with throughput and latency figures
// and an optional check that the aggregator's sums moved by exactly what
// was acknowledged.
//
//   LoadOptions o; o.client.port = 8443; o.client.ca_file = "cert.pem";
//   StatusOr<LoadReport> r = RunLoad(o, &std::cerr);
#ifndef FIELDPROF_TOOLS_LOADGEN_LOADGEN_H_
#define FIELDPROF_TOOLS_LOADGEN_LOADGEN_H_

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>

#include "common/base/status.h"
#include "common/net/https_client.h"
#include "tools/loadgen/batch_gen.h"

namespace fieldprof::tools {

struct LoadOptions {
  HttpsClientOptions client;
  BatchGenOptions gen;
  // Concurrent connections, one thread each. Default: 16.
  int connections = 16;
  // Batches to send in all (0 = until `duration_s`). Default: 1000.
  int64_t batches = 1000;
  // Stop after this many seconds (0 = no limit). Default: 0.
  int64_t duration_s = 0;
  // Stop sending new batches once this is set, whatever the count and
  // time say: a batch already on its way still gets all its attempts
  // (and, with resend_duplicates, its second send), as at the deadline.
  // Not owned; may be null. A caller that injects faults ends the load a
  // while after its fault, not at a fixed time.
  const std::atomic<bool>* stop = nullptr;
  // Distinct batch bodies generated up front and re-sent under fresh ids.
  int pool = 32;
  // Compare the aggregator's sums before/after with what was acknowledged.
  bool verify = false;
  // Send every batch a second time under the same id (checks dedupe).
  bool resend_duplicates = false;
  // Attempts per send before a batch counts as failed (retried on network
  // errors, 429 and 5xx with jittered exponential backoff up to 5 s).
  // Default: 20.
  int max_attempts = 20;
  // Write the generated bodies (with fresh ids) to this directory and exit.
  std::string dump_dir;
  // Machines the batches come from (a day key each, cycled over the pool);
  // 0: none, as agents before the key.
  int machines = 0;
  // Spend an anonymous upload token per batch (an aggregator with
  // --token_secret_file): taken from POST /v1/tokens before the load, as
  // many as `batches` (which must be set), so issuance is not timed.
  bool tokens = false;
};

struct LoadReport {
  int64_t batches_ok = 0;         // stored: a 200 for the batch's first send
  int64_t batches_recovered = 0;  // of those, answered duplicate after a failed
                                  // attempt (that attempt was stored)
  int64_t batches_duplicate = 0;  // a resend (same id) answered 200 {"duplicate":true}
  int64_t duplicates_missed = 0;  // a resend answered as new (it must still count once)
  int64_t batches_retried = 0;    // 503/429/5xx answers that were retried
  int64_t batches_failed = 0;     // 4xx or network errors
  // TLS connections opened: one per --connections, more when a server
  // went away mid-stream (the HTTPS client resends a request whose kept-
  // alive connection died on a new one, unseen by the counts above).
  int64_t connections_opened = 0;
  int64_t records_ok = 0;
  int64_t bytes_ok = 0;
  double seconds = 0;
  // The load generator's own CPU (all its threads) while it sent: on a
  // machine it shares with the server, what the server did not get.
  double cpu_seconds = 0;
  double latency_p50_ms = 0, latency_p90_ms = 0, latency_p99_ms = 0, latency_max_ms = 0;
  int64_t keys_verified = 0;
  int64_t stack_keys_verified = 0;  // of them, field stack series
  int64_t keys_mismatched = 0;
  std::string first_mismatch;
  std::string first_error;

  double batches_per_second() const { return seconds > 0 ? batches_ok / seconds : 0; }
  double records_per_second() const { return seconds > 0 ? records_ok / seconds : 0; }
  std::string ToText() const;
  std::string ToJson() const;
};

// Progress lines go to `progress` (may be null).
[[nodiscard]] StatusOr<LoadReport> RunLoad(const LoadOptions& options, std::ostream* progress);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_LOADGEN_LOADGEN_H_
