// Rare stacks folded under the frames k machines share
// (aggregator/store/stack_others.h), never counting a machine twice.
#include "aggregator/store/stack_others.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "common/stacks/field_stacks.h"

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

// One machine's rare stacks never fold into a series of k machines: a
// machine's entries differ from stack to stack (machine_sketch.h), so
// their union would count it once per stack. Five stacks of one machine
// under api;+10, at k = 5: withheld whole (the union published them as
// api;+10;[other] "of 5 machines").
TEST(StackOthersTest, OneMachinesRareStacksNeverFold) {
  StackOthers others(/*k=*/5);
  for (int i = 0; i < 5; ++i) {
    others.Add(Stack("api;+10;+2" + std::to_string(i), 100, {"a-stack-" + std::to_string(i)}));
  }
  std::map<std::string, std::string> into;
  EXPECT_TRUE(others.Fold(&into).empty());
  EXPECT_TRUE(into.empty());
}

// Where its stacks have machines enough (here, as the fold sees them), a
// group folds under its deepest prefix, deeper stacks before shallower
// ones, and its machines are the most any of its stacks has.
TEST(StackOthersTest, AGroupFoldsUnderTheDeepestPrefixItsStacksReachKAt) {
  StackOthers others(/*k=*/2);
  others.Add(Stack("api;+10;+20", 100, {"a", "b"}));
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
  StackOthers deeper(2);
  deeper.Add(Stack("api;+10;+21;+22", 1, {"a", "b"}));
  deeper.Add(Stack("api;+10;+21;+23", 2, {"b"}));
  deeper.Add(Stack("api;+10;+24", 4, {"c"}));
  const std::vector<ApiAggregate> d = deeper.Fold();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].key.symbol, "api;+10;+21;[other]");
  EXPECT_EQ(static_cast<uint64_t>(d[0].histogram.sum()), 3u);  // +24 alone: withheld
}

// The fold as first written: every withheld stack's whole value
// merged into its group at each depth it tries. Kept here as the
// definition the faster fold must meet.
std::vector<ApiAggregate> FoldByDefinition(const std::vector<ApiAggregate>& withheld, int k) {
  struct Pending {
    const ApiAggregate* stack;
    std::vector<std::string> frames;
    size_t depth;
  };
  std::vector<Pending> pending;
  size_t deepest = 0;
  for (const ApiAggregate& a : withheld) {
    std::vector<std::string> frames = SplitStack(a.key.symbol);
    if (frames.size() < 2) continue;
    deepest = std::max(deepest, frames.size() - 1);
    pending.push_back({&a, frames, frames.size() - 1});
  }
  std::map<std::string, ApiAggregate> out;
  for (size_t depth = deepest; depth >= 1 && !pending.empty(); --depth) {
    std::map<std::string, std::pair<ApiAggregate, std::vector<Pending*>>> groups;
    for (Pending& p : pending) {
      if (p.depth != depth) continue;
      ApiKey key = p.stack->key;
      key.symbol.clear();
      for (size_t i = 0; i < depth; ++i) key.symbol += p.frames[i] + ";";
      key.symbol += kOtherFrame;
      auto [it, fresh] = groups.try_emplace(EncodeApiKey(key));
      if (fresh) it->second.first.key = key;
      MergeAggregate(*p.stack, &it->second.first);
      it->second.second.push_back(&p);
    }
    for (auto& [enc, group] : groups) {
      const bool published = group.first.machines.Estimate() >= static_cast<uint64_t>(k);
      for (Pending* p : group.second) p->depth = published ? ~size_t{0} : p->depth - 1;
      if (published) out.emplace(enc, std::move(group.first));
    }
  }
  std::vector<ApiAggregate> result;
  for (auto& [enc, a] : out) result.push_back(std::move(a));
  return result;
}

// Random stacks over a library-like tree, two versions, 1 to 6 of 12
// machines each: the fold gives exactly the definition's series, sums and
// machines, and maps each folded stack to its series.
TEST(StackOthersTest, TheFoldIsTheDefinitions) {
  std::mt19937_64 rng(76);
  for (int k : {2, 3, 5}) {
    StackOthers others(k);
    std::vector<ApiAggregate> withheld;
    std::set<std::string> seen;
    for (int i = 0; i < 3000; ++i) {
      std::string symbol = "api_" + std::to_string(rng() % 4);
      const int depth = static_cast<int>(rng() % 7);
      for (int d = 0; d < depth; ++d) symbol += ";+" + std::to_string(rng() % (3 + d));
      if (rng() % 5 == 0) symbol += ";[libc.so.6]";
      const std::string version = rng() % 2 ? "1.0" : "2.0";
      if (!seen.insert(version + " " + symbol).second) continue;
      std::vector<std::string> machines;
      for (uint64_t m = 0, n = 1 + rng() % 6; m < n; ++m)
        machines.push_back(std::to_string(rng() % 12));
      ApiAggregate a = Stack(symbol, 1 + rng() % 100000, machines);
      a.key.module_version = version;
      a.runs = 1 + rng() % 4;
      a.resolution_ns = rng() % 3 == 0 ? 1000 : 0;
      withheld.push_back(a);
      others.Add(a);
    }
    std::map<std::string, std::string> into;
    const std::vector<ApiAggregate> got = others.Fold(&into);
    const std::vector<ApiAggregate> want = FoldByDefinition(withheld, k);
    ASSERT_GT(want.size(), 10u) << "k " << k;
    ASSERT_EQ(got.size(), want.size()) << "k " << k;
    size_t folded = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].key, want[i].key);
      EXPECT_EQ(got[i].histogram, want[i].histogram) << got[i].key.symbol;
      EXPECT_EQ(got[i].runs, want[i].runs);
      EXPECT_EQ(got[i].resolution_ns, want[i].resolution_ns);
      EXPECT_EQ(got[i].machines.Estimate(), want[i].machines.Estimate());
      folded += got[i].runs;
    }
    // Each folded stack maps to the series it went into.
    std::set<std::string> series;
    for (const ApiAggregate& a : got) series.insert(EncodeApiKey(a.key));
    uint64_t mapped_runs = 0;
    for (const ApiAggregate& a : withheld) {
      auto it = into.find(EncodeApiKey(a.key));
      if (it == into.end()) continue;
      EXPECT_TRUE(series.contains(it->second));
      mapped_runs += a.runs;
    }
    EXPECT_EQ(mapped_runs, folded);
  }
}

}  // namespace
}  // namespace fieldprof::aggregator
