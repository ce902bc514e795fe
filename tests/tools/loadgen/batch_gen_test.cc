#include "tools/loadgen/batch_gen.h"

#include <gtest/gtest.h>

#include <set>

#include "common/wire/validate.h"

namespace fieldprof::tools {
namespace {

TEST(BatchGenTest, BatchesAreValidAndNearTargetSize) {
  BatchGenerator gen({.seed = 1});
  std::set<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    wire::Batch b = gen.Next();
    Status s = ValidateBatch(b);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const size_t size = b.ByteSizeLong();
    EXPECT_GE(size, 128u * 1024);
    EXPECT_LT(size, 128u * 1024 + 4096);
    ids.insert(b.batch_id());
  }
  EXPECT_EQ(ids.size(), 5u);
}

TEST(BatchGenTest, PopularityIsSkewed) {
  BatchGenerator gen({.seed = 2});
  std::map<std::string, int> seen;
  wire::Batch b = gen.Next();
  for (const auto& r : b.records()) seen[r.key().module() + " " + r.key().symbol()]++;
  int top = 0;
  for (auto& [k, n] : seen) top = std::max(top, n);
  // Zipf: the hottest API appears many times, most appear once.
  EXPECT_GT(top, 20);
  EXPECT_GT(seen.size(), 100u);
}

TEST(BatchGenTest, SameSeedSameBatches) {
  BatchGenerator a({.seed = 9}), b({.seed = 9});
  EXPECT_EQ(a.Next().SerializeAsString(), b.Next().SerializeAsString());
}

}  // namespace
}  // namespace fieldprof::tools
