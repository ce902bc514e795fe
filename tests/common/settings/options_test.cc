#include "common/settings/options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "common/base/json_writer.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

TEST(OptionsTest, FlagsOverrideConfigFile) {
  testing::TempDir dir;
  {
    std::ofstream f(dir.File("a.conf"));
    f << "# comment\nport = 9000\nname = from-file  # trailing comment\n\nverbose = true\n";
  }
  int64_t port = 1;
  std::string name = "default";
  bool verbose = false;
  OptionTable t("prog", "summary");
  t.AddInt("port", &port, "port", 0, 65535);
  t.AddString("name", &name, "name");
  t.AddBool("verbose", &verbose, "verbose");
  std::string conf = "--config=" + dir.File("a.conf");
  const char* argv[] = {"prog", conf.c_str(), "--port", "9100", "positional"};
  Status s = t.Parse(5, argv);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(port, 9100);
  EXPECT_EQ(name, "from-file");
  EXPECT_TRUE(verbose);
  ASSERT_EQ(t.positional().size(), 1u);
  EXPECT_EQ(t.positional()[0], "positional");
}

TEST(OptionsTest, ErrorsSayWhatWasWrong) {
  int64_t port = 1;
  OptionTable t("prog", "summary");
  t.AddInt("port", &port, "port", 1, 100);
  const char* a1[] = {"prog", "--port=500"};
  Status s = t.Parse(2, a1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("outside 1..100"), std::string::npos) << s.message();
  const char* a2[] = {"prog", "--nope=1"};
  s = t.Parse(2, a2);
  EXPECT_NE(s.message().find("unknown flag --nope"), std::string::npos) << s.message();
  const char* a3[] = {"prog", "--port=12x"};
  s = t.Parse(2, a3);
  EXPECT_NE(s.message().find("not an integer"), std::string::npos) << s.message();
}

TEST(OptionsTest, ARenamedFlagSaysWhatToWriteInstead) {
  testing::TempDir dir;
  double effect = 0.05;
  OptionTable t("prog", "summary");
  t.AddDouble("min_effect", &effect, "least effect", 0, 1);
  t.AddRenamed("min_change", "write --min_effect, a fraction (0.05: 5%)");
  const char* flag[] = {"prog", "--min_change=5"};
  Status s = t.Parse(2, flag);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "--min_change was renamed: write --min_effect, a fraction (0.05: 5%)");
  {
    std::ofstream f(dir.File("old.conf"));
    f << "min_change = 5\n";
  }
  s = t.ParseFile(dir.File("old.conf"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--min_change was renamed"), std::string::npos) << s.message();
  const char* other[] = {"prog", "--min_changes=5"};
  s = t.Parse(2, other);
  EXPECT_NE(s.message().find("unknown flag --min_changes"), std::string::npos) << s.message();
  const char* now[] = {"prog", "--min_effect=0.1"};
  ASSERT_TRUE(t.Parse(2, now).ok());
  EXPECT_EQ(effect, 0.1);
}

TEST(OptionsTest, CorruptConfigFileNamesTheLine) {
  testing::TempDir dir;
  {
    std::ofstream f(dir.File("bad.conf"));
    f << "port = 5\nthis line has no equals sign\n";
  }
  int64_t port = 1;
  OptionTable t("prog", "summary");
  t.AddInt("port", &port, "port", 1, 100);
  Status s = t.ParseFile(dir.File("bad.conf"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad.conf:2"), std::string::npos) << s.message();
  EXPECT_EQ(t.ParseFile(dir.File("missing.conf")).code(), StatusCode::kNotFound);
}

TEST(OptionsTest, HelpListsOptionsWithDefaults) {
  int64_t port = 8443;
  OptionTable t("prog", "Does things.");
  t.AddInt("port", &port, "TCP port", 0, 65535);
  const char* argv[] = {"prog", "--help"};
  ASSERT_TRUE(t.Parse(2, argv).ok());
  EXPECT_TRUE(t.help_requested());
  EXPECT_NE(t.Help().find("--port=VALUE"), std::string::npos);
  EXPECT_NE(t.Help().find("default: 8443"), std::string::npos);
  // A default decided later is said as given.
  bool points = true;
  t.AddBool("points", &points, "record points");
  t.SayDefault("points", "when the command has points");
  EXPECT_NE(t.Help().find("record points (default: when the command has points)"),
            std::string::npos)
      << t.Help();
  EXPECT_EQ(t.Help().find("default: true"), std::string::npos) << t.Help();
}

TEST(JsonWriterTest, EscapesAndSeparates) {
  JsonWriter j;
  j.BeginObject().Key("s").String("a\"b\\c\n\x01").Key("n").Uint(3);
  j.Key("arr").BeginArray().Int(-1).Double(0.5).Bool(false).Null().EndArray();
  j.Key("nan").Double(std::nan(""));
  j.EndObject();
  EXPECT_EQ(j.str(),
            "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"n\":3,\"arr\":[-1,0.5,false,null],\"nan\":null}");
}

}  // namespace
}  // namespace fieldprof
