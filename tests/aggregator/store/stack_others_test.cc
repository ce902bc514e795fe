// Rare stacks folded under the frames k machines share
// (aggregator/store/stack_others.h).
#include "aggregator/store/stack_others.h"

#include <gtest/gtest.h>

namespace fieldprof::aggregator {
namespace {

ApiAggregate Stack(const std::string& symbol, uint64_t ns, std::vector<std::string> machines) {
  ApiAggregate a;
  a.key.module = "libx.so.1";
  a.key.module_version = "1.0";
  a.key.symbol = symbol;
  a.key.metric = wire::METRIC_STACK_CPU_NS;
  a.histogram.Record(ns);
  a.runs = 1;
  for (const std::string& m : machines) a.machines.Add(MachineHash(m));
  return a;
}

TEST(StackOthersTest, ARareStackFoldsUnderTheDeepestPrefixKMachinesShare) {
  StackOthers others(/*k=*/2);
  // Two one-machine stacks under api;+10 reach k together; a third under
  // api;+30 does not, nor does api;[other] with it alone: withheld whole.
  others.Add(Stack("api;+10;+20", 100, {"a"}));
  others.Add(Stack("api;+10;+21;+22", 200, {"b"}));
  others.Add(Stack("solo;+30", 400, {"c"}));
  std::map<std::string, std::string> into;
  const std::vector<ApiAggregate> out = others.Fold(&into);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key.symbol, "api;+10;[other]");
  EXPECT_EQ(static_cast<uint64_t>(out[0].histogram.sum()), 300u);
  EXPECT_EQ(out[0].runs, 2u);
  EXPECT_EQ(out[0].machines.Estimate(), 2u);
  EXPECT_EQ(into.size(), 2u);
  // Deeper stacks are folded before shallower ones: +21;+22 first tries
  // api;+10;+21;[other] (one machine), then api;+10;[other] with +20.
  StackOthers deeper(2);
  deeper.Add(Stack("api;+10;+21;+22", 1, {"a"}));
  deeper.Add(Stack("api;+10;+21;+23", 2, {"b"}));
  deeper.Add(Stack("api;+10;+24", 4, {"c"}));
  const std::vector<ApiAggregate> d = deeper.Fold();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].key.symbol, "api;+10;+21;[other]");
  EXPECT_EQ(static_cast<uint64_t>(d[0].histogram.sum()), 3u);  // +24 alone: withheld
}

}  // namespace
}  // namespace fieldprof::aggregator
