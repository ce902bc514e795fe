// FoldTable against std::map on random keys: same series, same sums, through
// many growths and probe collisions.
#include "aggregator/store/fold_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "common/wire/wire.h"
#include "tests/support/test_util.h"

namespace fieldprof::aggregator {
namespace {

TEST(FoldTableTest, MatchesAMapOnRandomKeys) {
  std::mt19937_64 rng(7);
  FoldTable table;
  std::map<std::string, uint64_t> expected;  // key -> runs added
  const wire::Batch b = testing::SimpleBatch(testing::IdOf(1), "libz.so.1", "deflate", 100, 2);
  for (int i = 0; i < 50000; ++i) {
    // Keys of varied length sharing long prefixes, like series keys.
    std::string key = "libmodule" + std::to_string(rng() % 300) + std::string(1, '\0') + "symbol_" +
                      std::to_string(rng() % 100);
    if (rng() % 2) key += std::string(rng() % 40, 'x');
    wire::Record r = b.records(0);
    const uint64_t runs = 1 + rng() % 3;
    r.set_runs(runs);
    table[key].AddRecord(r);
    expected[key] += runs;
  }
  ASSERT_EQ(table.size(), expected.size());
  size_t seen = 0;
  table.ForEach([&](std::string_view key, const SparseAggregate& sum) {
    auto it = expected.find(std::string(key));
    ASSERT_NE(it, expected.end()) << key;
    EXPECT_EQ(sum.runs(), it->second) << key;
    ++seen;
  });
  EXPECT_EQ(seen, expected.size());
  table.clear();
  EXPECT_TRUE(table.empty());
  table["a"].AddRecord(b.records(0));
  EXPECT_EQ(table.size(), 1u);
}

}  // namespace
}  // namespace fieldprof::aggregator
