// The runtime's first look (agent/preload/runtime/front/first_look.h): consent and
// sampling decided from a settings file and the kernel's random bytes, the
// way every process the runtime is loaded into starts. Each case hands it
// an environment and an auxiliary vector made here.
#include "agent/preload/runtime/front/first_look.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/settings/runtime_settings.h"
#include "tests/support/test_util.h"

namespace fieldprof::rt {
namespace {

using fieldprof::testing::TempDir;

// An initial stack's environment part: the variables, a null, then the
// auxiliary vector with AT_RANDOM pointing at `random`.
class Stack {
 public:
  Stack(const std::vector<std::string>& env, const unsigned char* random) : env_(env) {
    for (std::string& e : env_) words_.push_back(reinterpret_cast<uintptr_t>(e.data()));
    words_.push_back(0);
    words_.push_back(AT_PAGESZ);
    words_.push_back(4096);
    words_.push_back(AT_RANDOM);
    words_.push_back(reinterpret_cast<uintptr_t>(random));
    words_.push_back(AT_NULL);
    words_.push_back(0);
  }
  char** envp() { return reinterpret_cast<char**>(words_.data()); }

 private:
  std::vector<std::string> env_;
  std::vector<uintptr_t> words_;
};

class FirstLookTest : public ::testing::Test {
 protected:
  FirstLook Look(const std::string& settings, const std::vector<std::string>& extra = {},
                 uint64_t random_seed = 1) {
    const std::string path = dir_.path() + "/runtime.conf";
    std::ofstream(path) << settings;
    std::vector<std::string> env = {"HOME=/nonexistent", "FIELDPROF_SETTINGS=" + path};
    env.insert(env.end(), extra.begin(), extra.end());
    std::mt19937_64 rng(random_seed);
    unsigned char random[16];
    for (unsigned char& b : random) b = static_cast<unsigned char>(rng());
    Stack stack(env, random);
    return LookAtRun(stack.envp());
  }
  TempDir dir_;
};

TEST_F(FirstLookTest, ConsentAndSampling) {
  EXPECT_EQ(Look("consent = no\nsample_fraction = 1\n"), FirstLook::kOff);
  EXPECT_EQ(Look("sample_fraction = 1\n"), FirstLook::kOff);  // consent is never assumed
  EXPECT_EQ(Look("consent = yes\nsample_fraction = 1\n"), FirstLook::kGoOn);
  EXPECT_EQ(Look("  consent=yes \r\n# sample_fraction = 0\nsample_fraction=1\n"), FirstLook::kGoOn);
  EXPECT_EQ(Look("consent = yes\nsample_fraction = 0\n"), FirstLook::kNotSampled);
}

TEST_F(FirstLookTest, NoFileOrABadOneMeansOff) {
  std::vector<std::string> env = {"HOME=/nonexistent", "FIELDPROF_SETTINGS=/nonexistent/x"};
  unsigned char random[16] = {};
  Stack stack(env, random);
  EXPECT_EQ(LookAtRun(stack.envp()), FirstLook::kOff);
  EXPECT_EQ(Look("consent = yes\nsample_fraction = 1\nno equals sign\n"), FirstLook::kOff);
  EXPECT_EQ(Look("consent = yes\nsample_fraction = lots\n"), FirstLook::kOff);
  EXPECT_EQ(Look("consent = yes\nsample_fraction = 1.5\n"), FirstLook::kOff);
  EXPECT_EQ(Look(""), FirstLook::kOff);
  EXPECT_EQ(LookAtRun(nullptr), FirstLook::kOff);
}

// A file longer than the first look's buffer is left to the full
// decision (its consent may be past the part read); a short one never is.
TEST_F(FirstLookTest, ALongFileIsDecidedInFullAndAShortOneAtOnce) {
  std::string comments;
  while (comments.size() < 2100) comments += "# the agent writes settings here\n";
  EXPECT_EQ(Look(comments + "consent = yes\nsample_fraction = 1\n"), FirstLook::kGoOn);
  EXPECT_EQ(Look("k = 2\n\n\n"), FirstLook::kOff);  // 8 bytes, no consent
}

TEST_F(FirstLookTest, AnExplicitRunIsConsentForItself) {
  EXPECT_EQ(Look("consent = no\nsample_fraction = 0\n", {"FIELDPROF_RUN=1"}), FirstLook::kGoOn);
  EXPECT_EQ(Look("consent = no\n", {"FIELDPROF_RUN=11"}), FirstLook::kOff);
}

TEST_F(FirstLookTest, TheFileIsFoundAsTheAgentWritesIt) {
  std::ofstream(dir_.path() + "/fieldprof/runtime.conf") << "";
  std::filesystem::create_directories(dir_.path() + "/cfg/fieldprof");
  std::ofstream(dir_.path() + "/cfg/fieldprof/runtime.conf")
      << "consent = yes\nsample_fraction = 1\n";
  unsigned char random[16] = {};
  {
    std::vector<std::string> env = {"XDG_CONFIG_HOME=" + dir_.path() + "/cfg"};
    Stack stack(env, random);
    EXPECT_EQ(LookAtRun(stack.envp()), FirstLook::kGoOn);
  }
  std::filesystem::create_directories(dir_.path() + "/home/.config/fieldprof");
  std::ofstream(dir_.path() + "/home/.config/fieldprof/runtime.conf")
      << "consent = yes\nsample_fraction = 1\n";
  {
    std::vector<std::string> env = {"XDG_CONFIG_HOME=", "HOME=" + dir_.path() + "/home"};
    Stack stack(env, random);
    EXPECT_EQ(LookAtRun(stack.envp()), FirstLook::kGoOn);
  }
}

// The share of runs sampled is the setting's, over runs that differ only by
// the kernel's random bytes. 8000 runs at p: a 5-sigma band.
TEST_F(FirstLookTest, TheSampledShareIsTheFraction) {
  for (double p : {0.0625, 0.3, 0.9}) {
    RuntimeSettings s;
    s.consent = true;
    s.fleet.sample_fraction = p;
    const std::string text = FormatRuntimeSettings(s);  // as the agent writes it
    constexpr int kRuns = 8000;
    int sampled = 0;
    for (int i = 0; i < kRuns; ++i) {
      sampled += Look(text, {}, 1000 + static_cast<uint64_t>(i)) == FirstLook::kGoOn;
    }
    const double sd = std::sqrt(kRuns * p * (1 - p));
    EXPECT_NEAR(sampled, kRuns * p, 5 * sd) << "fraction " << p;
  }
}

TEST(FractionTest, ParsesWhatTheAgentWrites) {
  for (double f : {0.0, 1.0, 0.5, 0.0625, 1.0 / 3, 0.1, 1e-5, 0.999999, 2.5e-3}) {
    RuntimeSettings s;
    s.fleet.sample_fraction = f;
    const std::string text = FormatRuntimeSettings(s);
    const size_t at = text.find("sample_fraction = ");
    ASSERT_NE(at, std::string::npos);
    const size_t from = at + 18, to = text.find('\n', from);
    const std::string v = text.substr(from, to - from);
    uint64_t q = 0;
    ASSERT_TRUE(ParseFractionQ32(v.data(), v.data() + v.size(), &q)) << v;
    EXPECT_NEAR(static_cast<double>(q), f * 4294967296.0, 1.0) << v;
  }
  uint64_t q = 0;
  for (const char* bad : {"", ".", "1.5", "2", "-0.1", "0.5x", "e3", "1e", "0x1", "1e1"}) {
    EXPECT_FALSE(ParseFractionQ32(bad, bad + std::strlen(bad), &q)) << bad;
  }
  const char* one = "100e-2";
  ASSERT_TRUE(ParseFractionQ32(one, one + 6, &q));
  EXPECT_EQ(q, uint64_t{1} << 32);
}

}  // namespace
}  // namespace fieldprof::rt
