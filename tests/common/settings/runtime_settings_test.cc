#include "common/settings/runtime_settings.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>
#include <vector>

#include "common/settings/agent_state.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

TEST(RuntimeSettingsTest, FormatThenParseGivesTheSameSettings) {
  RuntimeSettings s;
  s.consent = true;
  s.fleet.k = 4;
  s.fleet.slots = 9;
  s.fleet.max_load_per_cpu = 0.75;
  s.fleet.overhead_budget = 0.005;
  s.fleet.sample_fraction = 0.125;
  s.fleet.max_runs_per_minute = 30;
  s.fleet.allow_modules = "libsqlite3.so.0,libz.so.1";
  s.fleet.deny_modules = "libssl.so.3";
  s.spool_dir = "/var/tmp/spool";
  s.spool_cap_mib = 8;
  s.slot_dir = "/run/fp-slots";
  s.seed = "42";
  s.points = "libsqlite3.so.0:sqlite3_step, myprog:load_config";
  s.tsc_hz = 2096033036;
  s.version = s.fleet.Version();
  auto back = ParseRuntimeSettings(FormatRuntimeSettings(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  // batch_bytes and max_age_s are the agent's: not in the runtime's file.
  EXPECT_EQ(*back, s);
}

TEST(RuntimeSettingsTest, TheRuntimesRulesApply) {
  // What the runtime refuses (agent/preload/runtime/front/decide.cc Apply) is refused here.
  for (const char* bad : {"k = 0", "k = 9", "slots = 0", "consent = maybe", "overhead_budget = -1",
                          "max_load_per_cpu = x", "colour = blue", "seed = 12ab", "no equals",
                          "sample_fraction = 1.5", "sample_fraction = -0.1",
                          "max_runs_per_minute = -1", "max_runs_per_minute = 2.5",
                          "tsc_hz = 999999", "tsc_hz = 100000000001", "tsc_hz = 2.1e9"}) {
    EXPECT_FALSE(ParseRuntimeSettings(std::string(bad) + "\n").ok()) << bad;
  }
  auto ok = ParseRuntimeSettings("# comment\n\n consent = yes \nk=8\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->consent);
  EXPECT_EQ(ok->fleet.k, 8);
}

// Every writer of the settings file (the agent, fieldprof optin/optout)
// changes it under one lock: concurrent read-modify-writes lose nothing
// (an optout between the agent's read and its write must not come back).
TEST(RuntimeSettingsTest, ConcurrentUpdatesLoseNoChange) {
  testing::TempDir dir;
  const std::string path = dir.File("config/runtime.conf");
  constexpr int kThreads = 4, kEach = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        Status s = UpdateRuntimeSettings(
            path, [](const std::optional<RuntimeSettings>& now, RuntimeSettings* next) {
              next->spool_cap_mib = (now ? now->spool_cap_mib : 0) + 1;
              return true;
            });
        EXPECT_TRUE(s.ok()) << s.ToString();
      }
    });
  }
  for (auto& t : threads) t.join();
  auto got = ReadRuntimeSettings(path);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->spool_cap_mib, kThreads * kEach);
  // A file someone broke by hand is left as it is.
  std::ofstream(path) << "consent = maybe\n";
  Status s = UpdateRuntimeSettings(path, [](const auto&, RuntimeSettings*) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  std::ifstream in(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "consent = maybe\n");
}

TEST(FleetSettingsTest, JsonRoundTripAndChecks) {
  FleetSettings f;
  f.k = 3;
  f.deny_modules = "libz.so.1";
  f.batch_bytes = 65536;
  f.sample_fraction = 0.03125;
  f.max_runs_per_minute = 0;
  auto back = FleetSettingsFromJson(FleetSettingsToJson(f, true));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, f);
  // Equal content, equal version; any change, another version.
  FleetSettings g = f;
  EXPECT_EQ(g.Version(), f.Version());
  g.slots = 7;
  EXPECT_NE(g.Version(), f.Version());

  std::string tampered = FleetSettingsToJson(f, true);
  tampered.replace(tampered.find("\"k\":3"), 5, "\"k\":4");
  EXPECT_FALSE(FleetSettingsFromJson(tampered).ok());               // version no longer matches
  EXPECT_TRUE(FleetSettingsFromJson(FleetSettingsToJson(g)).ok());  // no version: accepted
  g.k = 50;
  EXPECT_FALSE(FleetSettingsFromJson(FleetSettingsToJson(g)).ok());  // out of range
  EXPECT_FALSE(FleetSettingsFromJson(R"({"k": 2})").ok());           // fields missing
  EXPECT_FALSE(FleetSettingsFromJson("[1, 2").ok());                 // not JSON
  g = f;
  g.deny_modules = "libz.so.1\nconsent = yes";  // would inject a line into the file
  EXPECT_FALSE(FleetSettingsFromJson(FleetSettingsToJson(g)).ok());
}

TEST(AgentStateTest, FormatThenParse) {
  AgentState s;
  s.last_upload_unix_ms = 1795000000123;
  s.last_upload_result = "unreachable: connecting to x:1: Connection refused";
  s.next_attempt_unix_ms = 1795000009999;
  s.failures = 3;
  s.records_dropped = 2;
  s.settings_version = "0a901f083eccb33a";
  s.settings_result = "ok";
  auto back = ParseAgentState(FormatAgentState(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  EXPECT_TRUE(ParseAgentState("future_field = 1\n").ok());  // a newer agent's file
  EXPECT_FALSE(ParseAgentState("failures = many\n").ok());
}

}  // namespace
}  // namespace fieldprof
