// Field stacks end to end (docs/field-stacks.md): a real program under the
// real runtime, the real agent with this machine's dpkg database, the real
// aggregator over TLS on loopback.
//
// The privacy test: the program's own functions and an unpackaged
// library's have names with "fp_zz_secret" in them; after its runs none of
// those names, nor the files' names, is in the spool, the outbox (the
// batches' bytes as they go on the wire), the aggregator's files, its
// published fragments or any answer; and every stack that leaves is a
// packaged module's. Then exactness: what /v1/stacks answers is what the
// spool held.
#include "common/field_stacks.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "common/https_client.h"
#include "common/spool.h"
#include "common/wire.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"

namespace fieldprof::agent {
namespace {

namespace fs = std::filesystem;
using testing::AggregatorProcess;
using testing::FreePort;
using testing::TempDir;

constexpr char kSecret[] = "fp_zz_secret";
constexpr char kToken[] = "stacks-admin-token-0123456789";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every file under `dir` that holds `needle` (bytes).
std::vector<std::string> FilesHolding(const std::string& dir, const std::string& needle) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && Slurp(e.path()).find(needle) != std::string::npos) {
      out.push_back(e.path().string());
    }
  }
  return out;
}

class FieldStacksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeCert(dir_.path()));
    std::ofstream(dir_.File("admin.token")) << kToken << "\n";
    const std::string cmd = std::string(FIELDPROF_SOURCE_DIR) + "/deploy/make-signing-key.sh " +
                            dir_.File("keys") + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  // The program under `fieldprof run`, for about `cpu_ms` of CPU time,
  // sampled `hz` times a CPU second. The API it measures is zlib's: the
  // field measures the APIs an unpackaged library exports under their
  // names too (keyed by build id), and those are not what this tests.
  void RunProgram(int cpu_ms, int hz) const {
    const std::string cmd =
        "env FIELDPROF_STACK_HZ=" + std::to_string(hz) + " " + FIELDPROF_CLI_BIN +
        " run --apis 1 --force libz.so.1:compress2 --spool " + dir_.File("spool") + " -- " +
        FIELDPROF_STACK_PROG + " " + std::to_string(cpu_ms) + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  std::vector<wire::RunRecord> SpoolRuns() const {
    std::vector<wire::RunRecord> runs;
    auto files = ListSpool(dir_.File("spool"));
    EXPECT_TRUE(files.ok());
    for (const SpoolEntry& e : *files) {
      auto run = ReadRunRecord(e.path);
      EXPECT_TRUE(run.ok()) << run.status().ToString();
      if (run.ok()) runs.push_back(*run);
    }
    return runs;
  }

  AgentConfig Config(uint16_t port) const {
    AgentConfig c;
    c.server_host = "127.0.0.1";
    c.server_port = port;
    c.ca_file = dir_.File("cert.pem");
    c.spool_dir = dir_.File("spool");
    c.state_dir = dir_.File("state");
    c.timeout_ms = 5000;
    c.backoff_initial_ms = 10;
    return c;  // dpkg_dir: this machine's
  }

  std::vector<std::string> AggregatorArgs() const {
    return {"--signing_key",         dir_.File("keys/snapshot-signing.key"),
            "--snapshot_dir",        dir_.File("published"),
            "--admin_token_file",    dir_.File("admin.token"),
            "--fragment_count",      "4",
            "--fragments_per_cycle", "4"};
  }

  std::string Get(AggregatorProcess& agg, const std::string& path) const {
    HttpsClient c(agg.Options());
    auto r = c.Get(path);
    EXPECT_TRUE(r.ok() && r->status == 200) << path << ": " << (r.ok() ? r->body : "");
    return r.ok() ? r->body : "";
  }

  TempDir dir_;
};

// The CPU time of the spool's stack records of `module`, and their stacks.
uint64_t SpoolStackNs(const std::vector<wire::RunRecord>& runs, const std::string& module,
                      std::set<std::string>* stacks) {
  uint64_t ns = 0;
  for (const wire::RunRecord& run : runs) {
    for (const wire::Record& r : run.records()) {
      if (r.key().metric() != wire::METRIC_STACK_CPU_NS || r.key().module() != module) continue;
      ns += r.histogram().sum_lo();
      stacks->insert(r.key().symbol());
    }
  }
  return ns;
}

TEST_F(FieldStacksTest, NoPrivateFrameLeavesAndThePublishedSumsAreTheSpools) {
  RunProgram(/*cpu_ms=*/700, /*hz=*/200);
  RunProgram(/*cpu_ms=*/700, /*hz=*/200);
  const std::vector<wire::RunRecord> runs = SpoolRuns();
  ASSERT_EQ(runs.size(), 2u);
  // The spool: stacks of packaged modules only, nothing secret in any byte.
  EXPECT_EQ(FilesHolding(dir_.File("spool"), kSecret), std::vector<std::string>{});
  EXPECT_EQ(FilesHolding(dir_.File("spool"), "fpsecret"), std::vector<std::string>{});
  std::set<std::string> modules;
  bool program_marked = false;
  for (const wire::RunRecord& run : runs) {
    for (const wire::Record& r : run.records()) {
      if (r.key().metric() != wire::METRIC_STACK_CPU_NS) continue;
      modules.insert(r.key().module());
      const std::vector<std::string> frames = SplitStack(r.key().symbol());
      program_marked = program_marked || frames.back() == "[program]";
      for (size_t i = 0; i + 1 < frames.size(); ++i) EXPECT_FALSE(IsStackMark(frames[i]));
    }
  }
  EXPECT_TRUE(modules.contains("libz.so.1"));
  EXPECT_FALSE(modules.contains("libfpsecret.so"));
  EXPECT_FALSE(modules.contains("main"));
  for (const std::string& m : modules) {
    EXPECT_TRUE(fs::exists("/lib/x86_64-linux-gnu/" + m) || fs::exists("/lib64/" + m)) << m;
  }
  EXPECT_TRUE(program_marked);  // qsort's comparator: the program's frames, one mark
  std::set<std::string> libz_stacks;
  const uint64_t libz_ns = SpoolStackNs(runs, "libz.so.1", &libz_stacks);
  ASSERT_GT(libz_ns, 0u);

  // The outbox: the batches' bytes, as they go on the wire (the aggregator
  // is down: they wait there).
  {
    Agent agent(Config(FreePort()));
    ASSERT_TRUE(agent.Init().ok());
    auto r = agent.Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->batches_waiting, 1);
  }
  EXPECT_EQ(FilesHolding(dir_.File("state"), kSecret), std::vector<std::string>{});
  EXPECT_EQ(FilesHolding(dir_.File("state"), "fpsecret"), std::vector<std::string>{});

  AggregatorProcess agg(dir_, FreePort(), AggregatorArgs());
  agg.Start();
  {
    Agent agent(Config(agg.port()));
    ASSERT_TRUE(agent.Init().ok());
    auto r = agent.Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok() && r->upload_status.ok()) << r->upload_status.ToString();
    ASSERT_EQ(r->batches_waiting, 0);
  }
  agg.WaitApplied();
  {
    HttpsClient c(agg.Options());
    auto r = c.Request("POST", "/v1/admin/publish", "", "",
                       {{"Authorization", std::string("Bearer ") + kToken}});
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  }
  // Every answer, and every file the aggregator keeps or publishes.
  std::string answers = Get(agg, "/v1/apis?limit=100000") + Get(agg, "/v1/modules");
  for (const std::string& m : modules) {
    answers += Get(agg, "/v1/module?module=" + m) + Get(agg, "/v1/stacks?module=" + m) +
               Get(agg, "/v1/stacks?module=" + m + "&format=folded") +
               Get(agg, "/v1/report?module=" + m);
  }
  EXPECT_EQ(answers.find(kSecret), std::string::npos);
  EXPECT_EQ(answers.find("fpsecret"), std::string::npos);
  EXPECT_EQ(FilesHolding(dir_.File("db"), kSecret), std::vector<std::string>{});
  EXPECT_EQ(FilesHolding(dir_.File("published"), kSecret), std::vector<std::string>{});
  ASSERT_FALSE(FilesHolding(dir_.File("published"), "libz.so.1").empty());  // stacks are there

  // Exactness: libz's stacks as published are the spool's, to the ns, each
  // under zlib's package version.
  const nlohmann::json s = nlohmann::json::parse(Get(agg, "/v1/stacks?module=libz.so.1"));
  EXPECT_EQ(s["total_ns"].get<uint64_t>(), libz_ns);
  EXPECT_EQ(s["stacks_total"].get<size_t>(), libz_stacks.size());
  ASSERT_EQ(s["versions"].size(), 1u);
  EXPECT_NE(s["versions"][0].get<std::string>().find('_'), std::string::npos);  // package_buildid
  std::set<std::string> roots;
  for (const auto& st : s["stacks"]) roots.insert(st["frames"][0].get<std::string>());
  EXPECT_TRUE(roots.contains("compress2")) << s.dump();
}

}  // namespace
}  // namespace fieldprof::agent
