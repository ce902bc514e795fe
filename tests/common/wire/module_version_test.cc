// A key's module_version (common/wire/module_version.h): read, shown and asked
// for as people do.
#include "common/wire/module_version.h"

#include "gtest/gtest.h"

namespace fieldprof {
namespace {

constexpr char kBuildId[] = "5221b80bd99650e3e55370b0e24f4b4dbe81264f";

TEST(ModuleVersionTest, PackageVersionAndBuildIdJoinAndSplit) {
  const std::string v = JoinModuleVersion("3.40.1-2+deb12u2", kBuildId);
  EXPECT_EQ(v, "3.40.1-2+deb12u2_5221b80bd99650e3");
  const ModuleVersionParts p = SplitModuleVersion(v);
  EXPECT_EQ(p.version, "3.40.1-2+deb12u2");
  EXPECT_EQ(p.build_id, "5221b80bd99650e3");
  EXPECT_EQ(JoinModuleVersion("1:1.2.13.dfsg-1", kBuildId), "1:1.2.13.dfsg-1_5221b80bd99650e3");
  // What would break the key rules, or the split, is not joined.
  EXPECT_EQ(JoinModuleVersion(std::string(60, '1'), kBuildId), "");
  EXPECT_EQ(JoinModuleVersion("1.0 beta", kBuildId), "");
  EXPECT_EQ(JoinModuleVersion("1_0", kBuildId), "");
  EXPECT_EQ(JoinModuleVersion("1.0", "unknown"), "");
  // A bare build id and a vendor's token are what they are.
  EXPECT_EQ(SplitModuleVersion(kBuildId).build_id, kBuildId);
  EXPECT_EQ(SplitModuleVersion(kBuildId).version, "");
  EXPECT_EQ(SplitModuleVersion("1.3").version, "1.3");
  EXPECT_EQ(SplitModuleVersion("1.3").build_id, "");
  EXPECT_EQ(SplitModuleVersion("a_b").version, "a_b");
}

TEST(ModuleVersionTest, ShownAsPeopleReadThem) {
  EXPECT_EQ(ReadableModuleVersion("3.40.1-2_5221b80bd99650e3"), "3.40.1-2 (5221b80b)");
  EXPECT_EQ(ReadableModuleVersion(kBuildId), kBuildId);
  EXPECT_EQ(ReadableModuleVersion("1.3"), "1.3");
}

TEST(ModuleVersionTest, AskedForByVersionTokenOrBuildIdPrefix) {
  const char* key = "3.40.1-2_5221b80bd99650e3";
  EXPECT_TRUE(ModuleVersionMatches(key, ""));
  EXPECT_TRUE(ModuleVersionMatches(key, key));
  EXPECT_TRUE(ModuleVersionMatches(key, "3.40.1-2"));
  EXPECT_TRUE(ModuleVersionMatches(key, "5221b80b"));
  EXPECT_TRUE(ModuleVersionMatches(key, kBuildId));  // the whole id, on the 16 digits kept
  EXPECT_FALSE(ModuleVersionMatches(key, "3.40.1-3"));
  EXPECT_FALSE(ModuleVersionMatches(key, "3.40.1"));
  EXPECT_FALSE(ModuleVersionMatches(key, "5221b80"));  // 7 digits: too short to name a build
  EXPECT_FALSE(ModuleVersionMatches(key, "5221b80c"));
  EXPECT_TRUE(ModuleVersionMatches(kBuildId, "5221b80bd996"));
  EXPECT_FALSE(ModuleVersionMatches(kBuildId, "3.40.1-2"));
  EXPECT_TRUE(ModuleVersionMatches("1.3", "1.3"));
  EXPECT_FALSE(ModuleVersionMatches("1.3", "1.30"));
}

}  // namespace
}  // namespace fieldprof
