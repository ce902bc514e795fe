// The field's costs of a profile's frames: looked up by symbol in a
// snapshot cache; a demangled C++ frame finds its mangled API; what is no
// symbol is not looked up.
#include "tools/record/field_marks.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"
#include "tests/tools/snapshot_fixture.h"

namespace fieldprof {
namespace {

TEST(FieldMarksTest, FramesFindTheirApisCxxNamesTheirMangledSymbols) {
  testing::TempDir dir;
  testing::Cache cache(dir.File("cache"));
  const Histogram fast = testing::Spread(1000, 2000, 400);
  const Histogram slow = testing::Spread(50000, 60000, 100);
  cache.Write(1, {testing::MakeRecord("libx.so.1", "x_parse", wire::METRIC_WALL_TIME_NS, fast, 4),
                  testing::MakeRecord("libx.so.1", "_ZN3sqx6Parser5parseEPKc",
                                      wire::METRIC_WALL_TIME_NS, slow, 10)});
  const std::vector<std::string> names = {"",
                                          "x_parse",
                                          "sqx::Parser::parse(char const*)",
                                          "libx.so.1+0x1a2b",
                                          "[unknown]",
                                          "sqx::Parser::other(int)",
                                          "0x7f0012345678"};
  StatusOr<std::map<uint32_t, tools::FieldCostOfName>> costs =
      tools::FieldCostsOfNames(names, cache.dir());
  ASSERT_TRUE(costs.ok()) << costs.status().ToString();
  ASSERT_EQ(costs->size(), 2u);
  const tools::FieldCostOfName& c = costs->at(1);
  EXPECT_EQ(c.runs, 4u);
  EXPECT_DOUBLE_EQ(c.calls_a_run, 100);
  EXPECT_GE(c.p50_ns, 1024);
  EXPECT_LT(c.p99_ns, 2048);
  const tools::FieldCostOfName& cxx = costs->at(2);
  EXPECT_EQ(cxx.runs, 10u);
  EXPECT_DOUBLE_EQ(cxx.calls_a_run, 10);
  EXPECT_GE(cxx.p50_ns, 32768);
  EXPECT_EQ(tools::FieldCostText(c).rfind("field: p50 ", 0), 0u);
  // No snapshot: said.
  StatusOr<std::map<uint32_t, tools::FieldCostOfName>> none =
      tools::FieldCostsOfNames(names, dir.File("empty"));
  EXPECT_FALSE(none.ok());
}

}  // namespace
}  // namespace fieldprof
