// Distinct field stacks of one module for the /v1/stacks benchmarks
// (stacks_post, stacks_answer): stacks of 4 to 14 frames over a tree that
// branches like a library's (a few entry points, internal functions called
// from many places), CPU times spread over four orders of magnitude,
// seeded (the same stacks every run).
#ifndef FIELDPROF_TESTS_BENCHMARKS_STACK_GEN_H_
#define FIELDPROF_TESTS_BENCHMARKS_STACK_GEN_H_

#include <cstdio>
#include <random>
#include <set>
#include <string>

#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"

namespace fieldprof {

class StackGen {
 public:
  explicit StackGen(std::string module) : module_(std::move(module)) {}

  // The next distinct stack's record (one run of it).
  wire::Record Next() {
    std::string stack;
    do {
      stack = "api_" + std::to_string(fanout_(rng_) % 12);
      const int depth = 3 + static_cast<int>(rng_() % 11);
      for (int d = 0; d < depth; ++d) {
        char frame[24];
        std::snprintf(frame, sizeof frame, ";+%x", 0x1000 + (fanout_(rng_) + 7 * d) * 0x40);
        stack += frame;
      }
    } while (!seen_.insert(stack).second);
    wire::Record r;
    r.mutable_key()->set_module(module_);
    r.mutable_key()->set_module_version("1.0-1_0123456789abcdef");
    r.mutable_key()->set_symbol(stack);
    r.mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
    Histogram h;
    h.Record(static_cast<uint64_t>(ms_(rng_) * 1e6) + 1);
    HistogramToWire(h, r.mutable_histogram());
    r.set_runs(1);
    return r;
  }

  size_t made() const { return seen_.size(); }

 private:
  std::string module_;
  std::mt19937_64 rng_{68};
  std::set<std::string> seen_;
  std::geometric_distribution<int> fanout_{0.35};
  std::lognormal_distribution<double> ms_{1.0, 1.6};
};

}  // namespace fieldprof

#endif  // FIELDPROF_TESTS_BENCHMARKS_STACK_GEN_H_
