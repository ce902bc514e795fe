// Stack series (metric stack_cpu_ns) seen on fewer than k machines are not
// dropped whole, as other series are: each is folded into "P;[other]",
// where P is its longest proper prefix whose folded series reaches k
// machines. So a flame graph keeps the time of rare stacks under the
// deepest frame that enough machines share, and names none of the rare
// frames. A stack whose every prefix stays under k is withheld.
//
// How many machines a folded series has is the most any of its stacks
// has (MachineSketch::KeepLarger), never their union: a machine's entries
// differ from stack to stack (machine_sketch.h), so a union would count a
// machine once per rare stack it sent, and one machine could publish a
// fold. With every stack under k, a fold therefore reaches k only once
// the agents count machines per prefix too, which they do not yet: today
// rare stacks are withheld whole (docs/privacy.md).
//
//   StackOthers others(k);
//   others.Add(withheld_stack);  ...
//   for (ApiAggregate& a : others.Fold(&into)) publish(a);
#ifndef FIELDPROF_AGGREGATOR_STORE_STACK_OTHERS_H_
#define FIELDPROF_AGGREGATOR_STORE_STACK_OTHERS_H_

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

// The last frame of a folded series.
inline constexpr char kOtherFrame[] = "[other]";

class StackOthers {
 public:
  explicit StackOthers(int k) : k_(k) {}

  // A stack series under k machines (all time). Kept without its dense
  // histogram (a walk may hold back most of a module's stacks).
  void Add(const ApiAggregate& a);
  bool empty() const { return withheld_.empty(); }

  // The folded series that reach k machines, by key. `into`, if given,
  // maps each folded stack's EncodeApiKey to its folded series' (a range
  // query folds the same way as the all-time decision).
  std::vector<ApiAggregate> Fold(std::map<std::string, std::string>* into = nullptr) const;

 private:
  struct Withheld {
    ApiKey key;
    std::vector<std::pair<int, HistogramBucket>> buckets;  // the non-empty ones
    uint64_t zero_count, min, max;
    bool sum_sq_saturated;
    uint64_t runs;
    bool truncated;
    uint64_t resolution_ns;
    MachineSketch machines;
  };

  const int k_;
  std::deque<Withheld> withheld_;
};

// Merges `from` into `to` (histogram, runs, machines, flags).
void MergeAggregate(const ApiAggregate& from, ApiAggregate* to);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_STACK_OTHERS_H_
