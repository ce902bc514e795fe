// Realistic synthetic batches for the load generator, tests and benchmarks.
//
// APIs are drawn Zipf-popular across many modules (a few hot APIs such as
// malloc or sqlite3_step, a long tail of rare ones); per-call costs follow a
// log-normal law around an API-specific median, as real call costs do.
//
//   BatchGenerator gen({.seed = 7});
//   wire::Batch b = gen.Next();   // ~128 KiB encoded, fresh random batch id
#ifndef FIELDPROF_TOOLS_LOADGEN_BATCH_GEN_H_
#define FIELDPROF_TOOLS_LOADGEN_BATCH_GEN_H_

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"

namespace fieldprof::tools {

struct BatchGenOptions {
  uint64_t seed = 1;
  // Number of distinct modules and symbols per module: the API universe.
  int modules = 200;
  int symbols_per_module = 100;
  // Zipf exponent of API popularity. Default: 1.1.
  double zipf_s = 1.1;
  // Encoded batch size to aim for (the batch is sealed once it reaches it).
  size_t target_bytes = 128 * 1024;
  // Calls per record are drawn from 1..max_calls_per_record (log-uniform).
  int max_calls_per_record = 2000;
  // The share of records that are field stacks (metric stack_cpu_ns, the
  // symbol a stack under the API: docs/field-stacks.md), each API with a
  // few stacks. 0 (the default) draws none, and a seed gives the batches
  // it always gave.
  double stack_share = 0;
};

class BatchGenerator {
 public:
  explicit BatchGenerator(const BatchGenOptions& options);

  // A new batch with a random 16-byte id.
  wire::Batch Next();
  // A fresh random 16-byte batch id.
  std::string NewBatchId();

  // The key of API number `rank` (0 = most popular) for `metric`.
  ApiKey KeyFor(int rank, wire::Metric metric) const;
  // The key of stack `variant` (0..7) under API number `rank`.
  ApiKey StackKeyFor(int rank, int variant) const;
  int api_count() const { return static_cast<int>(ranks_cdf_.size()); }

 private:
  int DrawRank();
  wire::Record MakeRecord(int rank, wire::Metric metric);
  wire::Record MakeStackRecord(int rank);

  BatchGenOptions options_;
  std::mt19937_64 rng_;
  std::vector<double> ranks_cdf_;
};

// Ground truth kept by a sender: the merged histogram of every record it had
// acknowledged, by encoded API key (platform resolved from the batch).
class GroundTruth {
 public:
  void Add(const wire::Batch& batch);
  void Merge(const GroundTruth& other);
  const std::map<std::string, Histogram>& by_key() const { return by_key_; }

 private:
  std::map<std::string, Histogram> by_key_;
};

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_LOADGEN_BATCH_GEN_H_
