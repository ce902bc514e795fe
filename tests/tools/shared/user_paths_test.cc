// What a new user types first, with the real binaries:
//   - every command that writes a file the user names, given a bare name in
//     the current directory, exits 0 and leaves the file there, readable by
//     others as the umask allows (0644 under 022), as any tool's output;
//   - --host takes HOST:PORT, https://HOST:PORT/ and [IPv6]:PORT, and a
//     port given twice, differently, is a usage error naming both.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/net/https_client.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"
#include "tests/tools/snapshot_fixture.h"
#include "tools/shared/lab_profile.h"

namespace fieldprof {
namespace {

using json = nlohmann::json;
using testing::Cache;
using testing::MakeRecord;
using testing::RunCommand;
using testing::Spread;
using testing::TempDir;

const std::string kCli = FIELDPROF_CLI_BIN;
const std::string kProg = FIELDPROF_LABPROG;

// The permission bits of `path`, or -1 when it does not exist.
int Mode(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

// A field of one module at two versions, and a real aggregator holding it
// (listening on both address families: "::" takes IPv4 too).
class UserPathsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_TRUE(testing::MakeCert(dir_->path()));
    std::vector<wire::Record> records;
    for (const std::string version : {"1.0", "1.1"}) {
      for (const std::string symbol : {"demo_open", "demo_read"}) {
        wire::Record r = MakeRecord("libdemo.so.1", symbol, wire::METRIC_WALL_TIME_NS,
                                    Spread(100, version == "1.0" ? 800 : 1600, 400), 12);
        r.mutable_key()->set_module_version(version);
        records.push_back(r);
      }
    }
    Cache(dir_->File("cache")).Write(1, records);
    agg_ = new testing::AggregatorProcess(*dir_, testing::FreePort(), {"--listen", "::"});
    agg_->Start();
  }
  static void TearDownTestSuite() {
    delete agg_;
    delete dir_;
  }
  // Runs `args` in the directory `cwd` under umask 022: exit status, and
  // stdout and stderr in *out.
  static int In(const std::string& cwd, const std::string& args, std::string* out) {
    return RunCommand("cd '" + cwd + "' && umask 022 && " + kCli + " " + args + " 2>&1", out);
  }
  static std::string Port() { return std::to_string(agg_->port()); }
  static std::string Ca() { return " --ca " + dir_->File("cert.pem"); }

  static TempDir* dir_;
  static testing::AggregatorProcess* agg_;
};
TempDir* UserPathsTest::dir_;
testing::AggregatorProcess* UserPathsTest::agg_;

TEST_F(UserPathsTest, EveryCommandWritesABareFileNameInTheCurrentDirectory) {
  TempDir cwd;
  const std::string cache = " --cache " + dir_->File("cache");
  std::string out;
  // Shared output: exit 0, the file in the current directory, 0644.
  auto written = [&](const std::string& what, int rc, const std::string& name) {
    EXPECT_EQ(rc, 0) << what << ": " << out;
    EXPECT_EQ(Mode(cwd.File(name)), 0644) << what << ": " << name << ": " << out;
  };
  written("report", In(cwd.path(), "report --module libdemo.so.1 -o r.html" + cache, &out),
          "r.html");
  written("diff",
          In(cwd.path(), "diff --module libdemo.so.1 --versions 1.0,1.1 -o d.html" + cache, &out),
          "d.html");
  written("docs", In(cwd.path(), "docs --module libdemo.so.1 -o snippets" + cache, &out),
          "snippets/index.json");
  EXPECT_EQ(Mode(cwd.File("snippets")), 0755);
  EXPECT_EQ(Mode(cwd.File("snippets/demo_open.md")), 0644);
  written("lab -o", In(cwd.path(), "lab --repeat 1 -o p.labprofile -- " + kProg + " 20", &out),
          "p.labprofile");
  // Without -o: NAME.labprofile, NAME the command's.
  written("lab", In(cwd.path(), "lab --repeat 1 -- " + kProg + " 20", &out),
          "fieldprof_labprog.labprofile");
  written(
      "lab merge",
      In(cwd.path(), "lab merge -o m.labprofile p.labprofile fieldprof_labprog.labprofile", &out),
      "m.labprofile");
  StatusOr<wire::LabProfile> merged = tools::ReadLabProfile(cwd.File("m.labprofile"));
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->passes_size(),
            2 * tools::ReadLabProfile(cwd.File("p.labprofile"))->passes_size());
  // check's SARIF and JUnit, the profile against a field made of its own
  // records (so there is data to compare).
  Cache(cwd.File("labcache")).Write(1, {merged->records().begin(), merged->records().end()});
  written("check --sarif",
          In(cwd.path(), "check --cache labcache --sarif s.sarif --junit j.xml p.labprofile", &out),
          "s.sarif");
  EXPECT_EQ(Mode(cwd.File("j.xml")), 0644) << out;
  EXPECT_EQ(json::parse(std::ifstream(cwd.File("s.sarif")))["version"], "2.1.0");
  // lab upload and fetch through the aggregator, the host as HOST:PORT.
  const std::string host = " --host 127.0.0.1:" + Port() + Ca();
  ASSERT_EQ(In(cwd.path(), "lab upload p.labprofile" + host, &out), 0) << out;
  const std::string id = json::parse(out.substr(out.find('\t') + 1))["id"];
  written("lab fetch", In(cwd.path(), "lab fetch " + id + " -o f.labprofile" + host, &out),
          "f.labprofile");
  // Nothing else was left behind: no temporary files.
  for (const auto& e : std::filesystem::directory_iterator(cwd.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
  // Private state stays private: the agent's settings file.
  std::ofstream(cwd.File("machine.conf")) << "participate = yes\n";
  ASSERT_EQ(In(cwd.path(),
               "optin --runtime_settings rt.conf --machine_conf machine.conf --state_dir st "
               "--cache cache",
               &out),
            0)
      << out;
  EXPECT_EQ(Mode(cwd.File("rt.conf")), 0600) << out;
}

TEST_F(UserPathsTest, HostTakesTheFormsPeoplePaste) {
  std::string out;
  std::string reference;
  ASSERT_EQ(In(dir_->path(), "top --json --limit 100 --host 127.0.0.1 --port " + Port() + Ca(),
               &reference),
            0)
      << reference;
  for (const std::string& host :
       {"127.0.0.1:" + Port(), "https://127.0.0.1:" + Port() + "/", "[::1]:" + Port(),
        "https://[::1]:" + Port(), "localhost:" + Port()}) {
    EXPECT_EQ(In(dir_->path(), "top --json --limit 100 --host " + host + Ca(), &out), 0)
        << host << ": " << out;
    EXPECT_EQ(out, reference) << host;
  }
  // The same port twice is fine; two different ones are a usage error.
  EXPECT_EQ(In(dir_->path(), "top --host 127.0.0.1:" + Port() + " --port " + Port() + Ca(), &out),
            0)
      << out;
  EXPECT_EQ(In(dir_->path(), "top --host 127.0.0.1:" + Port() + " --port 1" + Ca(), &out), 2);
  EXPECT_NE(out.find(Port() + " in --host 127.0.0.1:" + Port() + " and 1 in --port"),
            std::string::npos)
      << out;
  EXPECT_EQ(In(dir_->path(), "top --host http://127.0.0.1:" + Port() + Ca(), &out), 2);
  EXPECT_NE(out.find("HTTPS only"), std::string::npos) << out;
  // report with the host as a URL.
  EXPECT_EQ(In(dir_->path(),
               "report --module libdemo.so.1 --host https://127.0.0.1:" + Port() + Ca(), &out),
            3)
      << out;  // the aggregator holds no data for it: "no data", not "not found"
  EXPECT_EQ(out.find("resolving"), std::string::npos) << out;
}

// The test fixture's aggregator, when the free port it was given is taken
// before it binds (another test, between FreePort() and the bind): it
// comes up on another port instead of failing the test.
TEST(AggregatorProcessTest, ATakenPortIsLeftForAFreshOne) {
  TempDir dir;
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  const uint16_t taken = testing::FreePort();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(taken);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  testing::AggregatorProcess agg(dir, taken);
  agg.Start();
  EXPECT_NE(agg.port(), taken);
  HttpsClient c(agg.Options());
  StatusOr<HttpReply> r = c.Get("/healthz");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  close(fd);
}

}  // namespace
}  // namespace fieldprof
