// The lab's timing plan alone: no two APIs seen on one stack share a set.
#include "tools/lab/timing_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace fieldprof::tools {
namespace {

wire::ApiKey Key(const std::string& symbol) {
  wire::ApiKey k;
  k.set_module("libx.so.1");
  k.set_module_version("1");
  k.set_symbol(symbol);
  return k;
}

std::vector<uint32_t> All(const LabGraph& g) {
  std::vector<uint32_t> all(g.size());
  for (uint32_t a = 0; a < g.size(); ++a) all[a] = a;
  return all;
}

// Every API planned exactly once, and no pair of the graph in one set.
void ExpectValid(const LabGraph& g, const TimingPlan& plan) {
  std::map<uint32_t, size_t> set_of;
  for (size_t s = 0; s < plan.sets.size(); ++s) {
    for (uint32_t a : plan.sets[s]) EXPECT_TRUE(set_of.emplace(a, s).second) << "twice: " << a;
  }
  EXPECT_EQ(set_of.size(), g.size());
  for (const auto& [pair, calls] : g.pairs()) {
    if (pair.first == pair.second) continue;
    EXPECT_NE(set_of[pair.first], set_of[pair.second])
        << pair.first << " and " << pair.second << " were on one stack";
  }
  EXPECT_LE(plan.lower_bound, plan.sets.size());
}

TEST(TimingPlanTest, APIsNeverOnOneStackShareOneSet) {
  LabGraph g;
  for (const char* s : {"a", "b", "c", "d"}) g.Add(Key(s));
  const TimingPlan plan = PlanTiming(g, All(g), 1);
  ExpectValid(g, plan);
  EXPECT_EQ(plan.sets.size(), 1u);
  EXPECT_EQ(plan.lower_bound, 1u);
}

TEST(TimingPlanTest, AStackOfThreeNeedsThreeSetsAndRecursionIsNoted) {
  LabGraph g;
  const uint32_t a = g.Add(Key("a")), b = g.Add(Key("b")), c = g.Add(Key("c"));
  const uint32_t lone = g.Add(Key("lone"));
  g.AddPair(a, b, 10);
  g.AddPair(b, c, 10);
  g.AddPair(a, c, 0);  // deeper only
  g.AddPair(c, c, 3);  // c calls itself
  const TimingPlan plan = PlanTiming(g, All(g), 3);
  ExpectValid(g, plan);
  EXPECT_EQ(plan.sets.size(), 3u);
  EXPECT_EQ(plan.lower_bound, 3u);
  EXPECT_EQ(plan.recursive, std::vector<uint32_t>{c});
  // The lone API joins a set, not one of its own.
  size_t with_lone = 0;
  for (const auto& s : plan.sets) with_lone += std::count(s.begin(), s.end(), lone);
  EXPECT_EQ(with_lone, 1u);
}

TEST(TimingPlanTest, RandomGraphsGetValidPlansNoWiderThanTheGreedyBound) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    LabGraph g;
    const uint32_t n = 2 + rng() % 40;
    for (uint32_t i = 0; i < n; ++i) g.Add(Key("f" + std::to_string(i)));
    size_t max_degree = 0;
    std::map<uint32_t, std::set<uint32_t>> adj;
    for (uint32_t e = 0; e < n * 2; ++e) {
      const uint32_t x = rng() % n, y = rng() % n;
      g.AddPair(x, y, rng() % 3);
      if (x != y) {
        adj[x].insert(y);
        adj[y].insert(x);
      }
    }
    for (const auto& [k, v] : adj) max_degree = std::max(max_degree, v.size());
    const TimingPlan plan = PlanTiming(g, All(g), 2);
    ExpectValid(g, plan);
    // A greedy colouring never needs more than the largest degree + 1.
    EXPECT_LE(plan.sets.size(), max_degree + 1);
    // The same graph, the same plan.
    EXPECT_EQ(PlanTiming(g, All(g), 2).sets, plan.sets);
  }
}

}  // namespace
}  // namespace fieldprof::tools
