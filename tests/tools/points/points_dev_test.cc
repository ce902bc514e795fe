// Developer mode end to end: runs recorded by `fieldprof points
// record` go up to a real aggregator with a developer's token, exactly
// once, survive its restart, and come back byte for byte to that developer
// only; another developer, or none, reads nothing of them, and the field
// sums hold none of them.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "agent/daemon/dev_uploader.h"
#include "common/crypto/signing.h"
#include "common/net/https_client.h"
#include "common/points/points_file.h"
#include "common/proto/fieldprof.pb.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"
#include "tests/tools/snapshot_fixture.h"

namespace fieldprof {
namespace {

using nlohmann::json;
using testing::RunCommand;
using testing::TempDir;

const std::string kCli = FIELDPROF_CLI_BIN;
const std::string kProg = FIELDPROF_POINTSPROG;  // tag "startup"
// Tag "stacks": step passed from via_a and via_b (A and B times a run).
const std::string kStacksProg = FIELDPROF_POINTSTACKS;
const std::string kAgent = FIELDPROF_AGENT_BIN;
const std::string kRuntime = FIELDPROF_RUNTIME_LIB;
const std::string kAlice = "alice-token-0123456789", kBob = "bob-token-0123456789ab";

// The SHA-256 of each *.fppoints file under `dir`.
std::set<std::string> FileDigests(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".fppoints") continue;
    std::ifstream in(e.path(), std::ios::binary);
    out.insert(Sha256(std::string(std::istreambuf_iterator<char>(in), {})));
  }
  return out;
}

// Runs a page check of tests/aggregator/ui/ (SCRIPT URL WANT TOKEN
// SCREENSHOTS) against the aggregator on `port`, as Alice.
void CheckInChromium(const std::string& script, int port, const std::string& want) {
  std::string browser;
  EXPECT_EQ(
      RunCommand("node " + std::string(FIELDPROF_SOURCE_DIR) + "/tests/aggregator/ui/" + script +
                     " https://127.0.0.1:" + std::to_string(port) + "/ui/ " + want + " " + kAlice +
                     " " + std::string(FIELDPROF_BUILD_DIR) + "/ui-screenshots 2>&1",
                 &browser),
      0)
      << browser;
  EXPECT_NE(browser.find("checks passed"), std::string::npos) << browser;
}

TEST(PointsDevTest, RunsGoUpOnceAndComeBackToTheirDeveloperOnly) {
  TempDir dir;
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  std::ofstream(dir.File("developers")) << "# name token programs\n"
                                        << "alice " << kAlice << " fieldprof_points*\n"
                                        << "bob " << kBob << " otherprog\n";
  testing::AggregatorProcess agg(dir, testing::FreePort(),
                                 {"--developers_file", dir.File("developers")});
  agg.Start();
  const std::string host =
      " --host 127.0.0.1:" + std::to_string(agg.port()) + " --ca " + dir.File("cert.pem");
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("runs") + " --runs 3 -- " + kProg +
                           " 200 2>&1",
                       &out),
            0)
      << out;
  const std::set<std::string> recorded = FileDigests(dir.File("runs"));
  ASSERT_EQ(recorded.size(), 3u);

  // Up once: a second upload finds every run there already.
  ASSERT_EQ(RunCommand(kCli + " points upload " + dir.File("runs") + host + " --token " + kAlice +
                           " 2>/dev/null",
                       &out),
            0)
      << out;
  EXPECT_EQ(out, "3 runs uploaded, 0 already there\n");
  ASSERT_EQ(RunCommand("FIELDPROF_DEV_TOKEN=" + kAlice + " " + kCli + " points upload " +
                           dir.File("runs") + host + " 2>/dev/null",
                       &out),
            0)
      << out;
  EXPECT_EQ(out, "0 runs uploaded, 3 already there\n");

  // Kept through a restart.
  agg.Term();
  agg.Start();
  ASSERT_EQ(RunCommand(kCli + " points tags" + host + " --token " + kAlice, &out), 0) << out;
  EXPECT_NE(out.find("startup"), std::string::npos) << out;
  EXPECT_NE(out.find("fieldprof_pointsprog"), std::string::npos) << out;
  EXPECT_NE(out.find("       3  "), std::string::npos) << out;

  // Back byte for byte, over a day range that holds today, and read as
  // the local runs are.
  ASSERT_EQ(RunCommand(kCli + " points pull --tag startup --from 2000-01-01 --to 2199-12-31 -o " +
                           dir.File("pulled") + host + " --token " + kAlice + " 2>&1",
                       &out),
            0)
      << out;
  EXPECT_EQ(FileDigests(dir.File("pulled")), recorded);
  std::string local, pulled;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("runs") + " --json", &local), 0);
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("pulled") + " --json", &pulled), 0);
  EXPECT_EQ(json::parse(pulled)["tags"], json::parse(local)["tags"]);
  // The aggregator's own analysis of them (what the dashboard draws) is
  // the command's.
  {
    HttpsClient http(agg.Options());
    StatusOr<HttpReply> report =
        http.Get("/v1/dev/report?tag=startup", {{"Authorization", "Bearer " + kAlice}});
    ASSERT_TRUE(report.ok() && report->status == 200) << (report.ok() ? report->body : "");
    EXPECT_EQ(json::parse(report->body)["tags"], json::parse(local)["tags"]);
    EXPECT_EQ(json::parse(report->body)["runs"].size(), 3u);
    // A second group: another build of the program (a copy by another
    // name), six runs of ten times the rounds. The aggregator compares the
    // two groups as `points compare` does on the same runs.
    const std::string build_b = dir.File("fieldprof_points_b");
    std::filesystem::copy_file(kProg, build_b);
    ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("runs_b") + " --runs 6 -- " +
                             build_b + " 2000 2>&1",
                         &out),
              0)
        << out;
    ASSERT_EQ(RunCommand(kCli + " points upload " + dir.File("runs_b") + host + " --token " +
                             kAlice + " 2>/dev/null",
                         &out),
              0)
        << out;
    std::string compared;
    ASSERT_EQ(RunCommand(kCli + " points compare " + dir.File("runs") + " " + dir.File("runs_b") +
                             " --tag startup --json",
                         &compared),
              0)
        << compared;
    const json want_compare = json::parse(compared);
    ASSERT_FALSE(want_compare.empty()) << compared;
    const std::string compare_target =
        "/v1/dev/compare?tag=startup&program=fieldprof_pointsprog&b_program=fieldprof_points_b";
    StatusOr<HttpReply> c = http.Get(compare_target, {{"Authorization", "Bearer " + kAlice}});
    ASSERT_TRUE(c.ok() && c->status == 200) << (c.ok() ? c->body : "");
    const json got = json::parse(c->body);
    EXPECT_EQ(got["segments"], want_compare) << c->body;
    EXPECT_EQ(got["a"]["runs"], 3) << c->body;
    // Six runs in B: a run the machine's load made twice as long is
    // removed as dirty (from five runs a group up), as the command does.
    EXPECT_EQ(got["b"]["runs"].get<int>() + got["b"]["removed"].get<int>(), 6) << c->body;
    size_t significant = 0;
    for (const json& row : got["segments"]) significant += row["significant"].get<bool>() ? 1 : 0;
    EXPECT_GT(significant, 0u) << "ten times the rounds is a change: " << c->body;
    // Ten times the calls a run: a call's time is the runs' time over
    // their calls, in each group. (How a call's change is judged is
    // tests/common/points/points_analysis_test.cc's; runs of 200 calls, 17 us,
    // are too short here to hold a call's time to a bound: one preemption
    // in one of A's three runs can double it.)
    bool parse_seen = false;
    for (const json& row : got["segments"]) {
      if (row["segment"] != "parse (scope)") continue;
      parse_seen = true;
      EXPECT_TRUE(row["calls_differ"].get<bool>()) << row.dump();
      EXPECT_DOUBLE_EQ(row["calls_a"].get<double>(), 200) << row.dump();
      EXPECT_DOUBLE_EQ(row["calls_b"].get<double>(), 2000) << row.dump();
      EXPECT_NEAR(row["per_call_a_ns"].get<double>(), row["mean_a_ns"].get<double>() / 200,
                  1e-9 * row["mean_a_ns"].get<double>())
          << row.dump();
      EXPECT_NEAR(row["per_call_b_ns"].get<double>(), row["mean_b_ns"].get<double>() / 2000,
                  1e-9 * row["mean_b_ns"].get<double>())
          << row.dump();
    }
    EXPECT_TRUE(parse_seen) << c->body;
    // How sure and how large: the command's --fdr and --min_effect, the
    // same answer. Ten times the rounds is about +900%, under a least
    // change of 1000%; a busy machine can stretch a segment of group B past
    // that, so each row is held to the rule itself rather than a count.
    std::string strict;
    ASSERT_EQ(RunCommand(kCli + " points compare " + dir.File("runs") + " " + dir.File("runs_b") +
                             " --tag startup --json --fdr 0.1 --min_effect 10",
                         &strict),
              0)
        << strict;
    const json want_strict = json::parse(strict);
    c = http.Get(compare_target + "&fdr=0.1&min_effect=10",
                 {{"Authorization", "Bearer " + kAlice}});
    ASSERT_TRUE(c.ok() && c->status == 200) << (c.ok() ? c->body : "");
    EXPECT_EQ(json::parse(c->body)["segments"], want_strict) << c->body;
    EXPECT_EQ(json::parse(c->body)["fdr"], 0.1) << c->body;
    EXPECT_EQ(json::parse(c->body)["min_effect"], 10) << c->body;
    // The parameter's old name is still read.
    c = http.Get(compare_target + "&fdr=0.1&min_change=10",
                 {{"Authorization", "Bearer " + kAlice}});
    ASSERT_TRUE(c.ok() && c->status == 200) << (c.ok() ? c->body : "");
    EXPECT_EQ(json::parse(c->body)["min_effect"], 10) << c->body;
    for (const json& row : want_strict) {
      const double a = row["mean_a_ns"].get<double>(), b = row["mean_b_ns"].get<double>();
      EXPECT_EQ(row["significant"].get<bool>(),
                row["q"].get<double>() <= 0.1 && std::fabs(b - a) >= 10 * a)
          << row.dump();
    }
    for (const char* bad : {"&fdr=0.9", "&fdr=x", "&min_effect=-1", "&min_effect=1e9"}) {
      c = http.Get(compare_target + bad, {{"Authorization", "Bearer " + kAlice}});
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->status, 400) << bad << ": " << c->body;
    }
    c = http.Get("/v1/dev/compare?tag=startup&program=fieldprof_pointsprog",
                 {{"Authorization", "Bearer " + kAlice}});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->status, 400) << "A against itself: " << c->body;
    for (const std::string& token : {std::string(), std::string("Bearer ") + kBob}) {
      c = http.Get(compare_target,
                   token.empty() ? HttpHeaders{} : HttpHeaders{{"Authorization", token}});
      ASSERT_TRUE(c.ok());
      if (token.empty()) {
        EXPECT_EQ(c->status, 401) << c->body;
      } else {  // Bob's view of Alice's programs: no runs in either group
        ASSERT_EQ(c->status, 200) << c->body;
        EXPECT_EQ(json::parse(c->body)["a"]["runs"], 0) << c->body;
        EXPECT_TRUE(json::parse(c->body)["segments"].empty()) << c->body;
      }
    }
    // Groups of chosen runs (the tag page's boxes), by the listing's ids:
    // A's two oldest against B's three oldest answer what `points compare`
    // answers on directories holding just those files.
    std::map<std::string, std::filesystem::path> file_of;  // run id -> its file
    for (const char* d : {"runs", "runs_b"}) {
      for (const auto& e : std::filesystem::directory_iterator(dir.File(d))) {
        if (e.path().extension() != ".fppoints") continue;
        std::ifstream in(e.path(), std::ios::binary);
        file_of[HexEncode(
            Sha256(std::string(std::istreambuf_iterator<char>(in), {})).substr(0, 16))] = e.path();
      }
    }
    auto ids_of = [&](const std::string& program) {
      StatusOr<HttpReply> l = http.Get("/v1/dev/runs?tag=startup&program=" + program,
                                       {{"Authorization", "Bearer " + kAlice}});
      std::vector<std::string> ids;
      EXPECT_TRUE(l.ok() && l->status == 200) << (l.ok() ? l->body : "");
      if (!l.ok()) return ids;
      const json listing = json::parse(l->body);
      for (const json& run : listing["runs"]) ids.push_back(run["id"]);
      return ids;
    };
    const std::vector<std::string> ids_a = ids_of("fieldprof_pointsprog");
    const std::vector<std::string> ids_b = ids_of("fieldprof_points_b");
    ASSERT_EQ(ids_a.size(), 3u);
    ASSERT_EQ(ids_b.size(), 6u);
    auto joined = [](const std::vector<std::string>& ids, size_t n) {
      std::string s;
      for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + ids[i];
      return s;
    };
    c = http.Get(
        "/v1/dev/compare?tag=startup&runs=" + joined(ids_a, 3) + "&b_runs=" + joined(ids_b, 6),
        {{"Authorization", "Bearer " + kAlice}});
    ASSERT_TRUE(c.ok() && c->status == 200) << (c.ok() ? c->body : "");
    EXPECT_EQ(json::parse(c->body)["segments"], want_compare) << "every run chosen: " << c->body;
    for (const auto& [d, ids, n] : {std::tuple{"pick_a", &ids_a, 2}, {"pick_b", &ids_b, 3}}) {
      std::filesystem::create_directory(dir.File(d));
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(file_of.count((*ids)[i])) << (*ids)[i];
        std::filesystem::copy_file(
            file_of[(*ids)[i]],
            dir.File(std::string(d) + "/" + file_of[(*ids)[i]].filename().string()));
      }
    }
    std::string picked;
    ASSERT_EQ(RunCommand(kCli + " points compare " + dir.File("pick_a") + " " + dir.File("pick_b") +
                             " --tag startup --json",
                         &picked),
              0)
        << picked;
    const std::string pick_target =
        "/v1/dev/compare?tag=startup&runs=" + joined(ids_a, 2) + "&b_runs=" + joined(ids_b, 3);
    c = http.Get(pick_target, {{"Authorization", "Bearer " + kAlice}});
    ASSERT_TRUE(c.ok() && c->status == 200) << (c.ok() ? c->body : "");
    const json got_pick = json::parse(c->body);
    EXPECT_EQ(got_pick["segments"], json::parse(picked)) << c->body;
    EXPECT_EQ(got_pick["a"]["runs"], 2) << c->body;
    EXPECT_EQ(got_pick["a"]["chosen"], 2) << c->body;
    EXPECT_EQ(got_pick["b"]["runs"], 3) << c->body;
    const std::string zeros(32, '0');
    const std::pair<std::string, int> bad_picks[] = {
        {"runs=" + ids_a[0] + "&b_runs=" + ids_a[0] + "," + ids_b[0], 400},  // in both groups
        {"runs=" + zeros + "&b_runs=" + ids_b[0], 404},                      // no such run
        {"runs=" + ids_b[0] + "&b_runs=" + ids_a[0] + "&program=fieldprof_pointsprog",
         404},  // not in A's program
        {"runs=../etc&b_runs=" + ids_b[0], 400},
        {"runs=" + ids_a[0] + ",&b_runs=" + ids_b[0], 400},
    };
    for (const auto& [q, status] : bad_picks) {
      c = http.Get("/v1/dev/compare?tag=startup&" + q, {{"Authorization", "Bearer " + kAlice}});
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->status, status) << q << ": " << c->body;
    }
    c = http.Get(pick_target, {{"Authorization", "Bearer " + kBob}});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->status, 404) << "Bob cannot choose Alice's runs: " << c->body;

    // The dashboard's developer pages draw it, in Chromium.
    json want;
    want["tag"] = "startup";
    want["program"] = "fieldprof_pointsprog";
    want["runs"] = 3;
    want["segments"] = json::parse(local)["tags"][0]["segments"];
    want["compare"]["b_program"] = "fieldprof_points_b";
    want["compare"]["segments"] = want_compare;
    want["compare"]["strict"] = want_strict;  // --fdr 0.1 --min_effect 10
    want["pick"]["a"] = std::vector<std::string>(ids_a.begin(), ids_a.begin() + 2);
    want["pick"]["b"] = std::vector<std::string>(ids_b.begin(), ids_b.begin() + 3);
    want["pick"]["segments"] = json::parse(picked);
    std::ofstream(dir.File("dev-want.json")) << want.dump(2);
    CheckInChromium("dev_pages.mjs", agg.port(), dir.File("dev-want.json"));
    report = http.Get("/v1/dev/report?tag=startup", {{"Authorization", "Bearer " + kBob}});
    ASSERT_TRUE(report.ok() && report->status == 200);
    EXPECT_TRUE(json::parse(report->body)["runs"].empty()) << report->body;
  }
  // A day range before the runs holds none of them.
  ASSERT_EQ(RunCommand(kCli + " points pull --tag startup --to 2001-01-01 -o " + dir.File("none") +
                           host + " --token " + kAlice + " 2>/dev/null",
                       &out),
            0);
  EXPECT_TRUE(FileDigests(dir.File("none")).empty());

  // Bob sees nothing of Alice's, by list or by id, and may not upload
  // runs of her program; without a token, nothing at all.
  HttpsClient http(agg.Options());
  const HttpHeaders bob = {{"Authorization", "Bearer " + kBob}};
  const HttpHeaders alice = {{"Authorization", "Bearer " + kAlice}};
  StatusOr<HttpReply> r = http.Get("/v1/dev/tags", bob);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(json::parse(r->body)["tags"].empty()) << r->body;
  r = http.Get("/v1/dev/runs?tag=startup&program=fieldprof_pointsprog", alice);
  ASSERT_TRUE(r.ok() && r->status == 200);
  const json runs = json::parse(r->body)["runs"];
  ASSERT_EQ(runs.size(), 3u) << r->body;
  const std::string id = runs[0]["id"];
  r = http.Get("/v1/dev/runs?tag=startup", bob);
  ASSERT_TRUE(r.ok() && r->status == 200);
  EXPECT_TRUE(json::parse(r->body)["runs"].empty()) << r->body;
  r = http.Get("/v1/dev/runs/" + id, bob);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404) << r->body;
  const std::vector<std::string> targets = {"/v1/dev/tags", "/v1/dev/runs?tag=startup",
                                            "/v1/dev/runs/" + id, "/v1/dev/report?tag=startup",
                                            "/v1/dev/compare?tag=startup&b_from=2001-01-01"};
  for (const std::string& target : targets) {
    r = http.Get(target);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 401) << target;
    r = http.Get(target, {{"Authorization", "Bearer not-a-developer-token"}});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 401) << target;
  }
  EXPECT_NE(
      RunCommand(kCli + " points upload " + dir.File("runs") + host + " --token " + kBob + " 2>&1",
                 &out),
      0);
  EXPECT_NE(out.find("403"), std::string::npos) << out;

  // A run whose id is not its file's hash, or with a path for a tag, is
  // refused.
  r = http.Get("/v1/dev/runs/" + id, alice);
  ASSERT_TRUE(r.ok() && r->status == 200);
  wire::DevUpload up;
  up.set_schema_version(1);
  wire::DevRun* run = up.add_runs();
  run->set_file(r->body + "x");
  run->set_id(Sha256(r->body).substr(0, 16));
  run->set_program("fieldprof_pointsprog");
  run->add_tags("startup");
  r = http.Request("POST", "/v1/dev/runs", "application/x-protobuf", up.SerializeAsString(), alice);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400) << r->body;
  run->set_id(Sha256(run->file()).substr(0, 16));
  run->set_tags(0, "/home/alice/notes");
  r = http.Request("POST", "/v1/dev/runs", "application/x-protobuf", up.SerializeAsString(), alice);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400) << r->body;

  // The field sums hold none of it.
  r = http.Get("/v1/apis?limit=1000");
  ASSERT_TRUE(r.ok() && r->status == 200);
  EXPECT_TRUE(json::parse(r->body)["apis"].empty()) << r->body;
}

// The one file under `dir` (a run just recorded there): its path, or ""
// with a failure when there is not exactly one.
std::string OnlyFile(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  EXPECT_EQ(files.size(), 1u) << dir;
  return files.size() == 1 ? files[0] : "";
}

// The parts sealed in the developer outbox `outbox`, in its order, each
// with the name of its upload; `one_run_each`: every upload holds one.
std::vector<std::pair<std::string, wire::DevRun>> OutboxParts(const std::string& outbox,
                                                              bool one_run_each) {
  std::vector<std::pair<std::string, wire::DevRun>> out;
  for (const auto& e : std::filesystem::directory_iterator(outbox)) {
    if (e.path().extension() != ".batch") continue;
    std::ifstream f(e.path(), std::ios::binary);
    wire::DevUpload up;
    EXPECT_TRUE(up.ParseFromString(std::string(std::istreambuf_iterator<char>(f), {})));
    if (one_run_each) {
      EXPECT_EQ(up.runs_size(), 1) << e.path();
    }
    for (const wire::DevRun& run : up.runs()) out.emplace_back(e.path().filename().string(), run);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

// Developer mode's settings with everything under `dir` (spool/, outbox/,
// quarantine/, token) and a time threshold of an hour.
agent::DevConfig DevConfigIn(TempDir& dir) {
  agent::DevConfig c;
  c.spool_dir = dir.File("spool");
  c.token_file = dir.File("token");
  c.outbox_dir = dir.File("outbox");
  c.quarantine_dir = dir.File("quarantine");
  c.max_age_ms = 3600 * 1000;
  return c;
}

// The agent's thresholds, without a server: runs wait until the oldest has
// waited max_age, or until they come to max_bytes, and then go in uploads
// of at most max_bytes (sealed in the developer outbox, the run files
// consumed).
TEST(PointsDevTest, TheAgentSealsOnItsTimeAndSizeThresholds) {
  TempDir dir;
  std::string out;
  // Six runs of about 30 KB each.
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("spool") + " --runs 6 -- " + kProg +
                           " 2000 2>&1",
                       &out),
            0)
      << out;
  agent::DevConfig c = DevConfigIn(dir);
  c.max_bytes = 1000 * 1000;  // 180 KB waiting: under both thresholds
  HttpsClient unused(HttpsClientOptions{});
  {
    agent::DevUploader d(c);
    ASSERT_TRUE(d.Init().ok());
    auto r = d.Pass(/*flush=*/false, /*upload=*/false, unused);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->runs_sealed, 0);
  }
  // The size threshold: 64 KiB, two runs an upload.
  c.max_bytes = 64 * 1024;
  {
    agent::DevUploader d(c);
    ASSERT_TRUE(d.Init().ok());
    auto r = d.Pass(false, false, unused);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->runs_sealed, 6);
    EXPECT_EQ(r->uploads_sealed, 3);
    EXPECT_EQ(r->uploads_waiting, 3);
  }
  size_t runs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.File("outbox"))) {
    if (e.path().extension() != ".batch") continue;
    EXPECT_LE(std::filesystem::file_size(e.path()), 64u * 1024) << e.path();
    wire::DevUpload up;
    std::ifstream in(e.path(), std::ios::binary);
    ASSERT_TRUE(up.ParseFromString(std::string(std::istreambuf_iterator<char>(in), {})));
    runs += static_cast<size_t>(up.runs_size());
  }
  EXPECT_EQ(runs, 6u);
  EXPECT_EQ(FileDigests(dir.File("spool")).size(), 0u) << "the runs were consumed";
  // The time threshold: a run is kept until the oldest has waited max_age.
  ASSERT_EQ(
      RunCommand(kCli + " points record -o " + dir.File("spool") + " -- " + kProg + " 100 2>&1",
                 &out),
      0);
  c.max_bytes = 1000 * 1000;
  c.max_age_ms = 1000;
  agent::DevUploader d(c);
  ASSERT_TRUE(d.Init().ok());
  const auto sealed = [&] {
    auto r = d.Pass(false, false, unused);
    return r.ok() && r->runs_sealed == 1;
  };
  ASSERT_TRUE(testing::WaitUntil(sealed, std::chrono::seconds(30)));
}

// A run still being written, past the size threshold: its bytes go in
// parts of at most max_bytes, in order, each beginning where the last
// ended (a part may end inside a record: the bytes written never change);
// once the run has ended, its last part closes it and the file goes.
// Without a server.
TEST(PointsDevTest, ARunStillGoingGoesInPartsOfTheSizeThreshold) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(
      RunCommand(kCli + " points record -o " + dir.File("rec") + " -- " + kProg + " 30000 2>&1",
                 &out),
      0)
      << out;
  const std::string recorded = OnlyFile(dir.File("rec"));
  ASSERT_FALSE(recorded.empty());
  std::ifstream in(recorded, std::ios::binary);
  const std::string whole(std::istreambuf_iterator<char>(in), {});
  ASSERT_EQ(whole.back(), 'X') << "the file's end record";
  ASSERT_GT(whole.size(), 3u * 64 * 1024) << "large enough for several parts";
  // The same file as it was before its end record: a run still going.
  std::filesystem::create_directories(dir.File("spool"));
  const std::string name = "points-1-going.fppoints";
  std::ofstream(dir.File("spool/" + name), std::ios::binary) << whole.substr(0, whole.size() - 1);
  agent::DevConfig c = DevConfigIn(dir);
  c.max_bytes = 64 * 1024;
  HttpsClient unused(HttpsClientOptions{});
  // The parts sealed so far, in the outbox's order.
  const auto parts = [&] { return OutboxParts(dir.File("outbox"), /*one_run_each=*/true); };
  {
    agent::DevUploader d(c);
    ASSERT_TRUE(d.Init().ok());
    auto r = d.Pass(false, false, unused);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_GE(r->uploads_sealed, 3);
  }
  auto sealed = parts();
  ASSERT_GE(sealed.size(), 3u);
  uint64_t end = 0;
  for (const auto& [file, part] : sealed) {
    EXPECT_EQ(part.offset(), end) << file << ": each part begins where the last ended";
    EXPECT_TRUE(part.open()) << file;
    EXPECT_EQ(part.id(), sealed[0].second.id()) << file;
    EXPECT_EQ(part.file(), whole.substr(part.offset(), part.file().size())) << file;
    EXPECT_LE(part.file().size(), 64u * 1024) << file;
    EXPECT_LE(part.ByteSizeLong(), 64u * 1024 + 256) << file << ": the upload, with its fields";
    end = part.offset() + part.file().size();
  }
  EXPECT_EQ(sealed[0].second.id(), Sha256(sealed[0].second.file()).substr(0, 16))
      << "the first part's id is its hash";
  EXPECT_EQ(end, whole.size() - 1) << "all of it so far (its end record not yet written)";
  // It ends: the rest goes as the last part, and the file with it.
  std::ofstream(dir.File("spool/" + name), std::ios::binary | std::ios::app) << "X";
  {
    agent::DevUploader d(c);
    ASSERT_TRUE(d.Init().ok());
    auto r = d.Pass(false, false, unused);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  sealed = parts();
  const wire::DevRun& last = sealed.back().second;
  EXPECT_FALSE(last.open());
  EXPECT_EQ(last.offset() + last.file().size(), whole.size());
  EXPECT_EQ(whole.substr(last.offset()), last.file());
  EXPECT_FALSE(std::filesystem::exists(dir.File("spool/" + name))) << "consumed";
  EXPECT_FALSE(std::filesystem::exists(dir.File("spool/" + name + ".sent"))) << "consumed";
  // A finished run larger than an upload may be goes in parts too.
  std::filesystem::remove_all(dir.File("outbox"));
  std::filesystem::copy_file(recorded, dir.File("spool/points-2-done.fppoints"));
  {
    agent::DevUploader d(c);
    ASSERT_TRUE(d.Init().ok());
    auto r = d.Pass(false, false, unused);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  sealed = parts();
  EXPECT_EQ(sealed.size(), (whole.size() + 64 * 1024 - 1) / (64 * 1024));
  std::string joined;
  for (const auto& [file, part] : sealed) {
    EXPECT_EQ(part.offset(), joined.size()) << file;
    EXPECT_LE(part.file().size(), 64u * 1024) << file;
    EXPECT_EQ(part.open(), &part != &sealed.back().second) << file;
    joined += part.file();
  }
  EXPECT_EQ(joined, whole);
  EXPECT_FALSE(std::filesystem::exists(dir.File("spool/points-2-done.fppoints"))) << "consumed";
}

// The agent daemon with the developer spool DIR/dev and a 1 s time
// threshold, against an aggregator where alice may upload runs of
// fieldprof_points*; the agent's stderr in DIR/agent.log.
class PointsDevAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeCert(dir.path()));
    std::ofstream(dir.File("developers")) << "alice " << kAlice << " fieldprof_points*\n";
    std::ofstream(dir.File("token")) << kAlice << "\n";
    agg.Start();
    std::filesystem::create_directories(dir.File("spool"));
    agent = fork();
    if (agent == 0) {
      const std::string server = "127.0.0.1:" + std::to_string(agg.port());
      const std::string log = dir.File("agent.log");
      if (freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
      execl(kAgent.c_str(), "fieldprof-agent", "--server", server.c_str(), "--ca_file",
            dir.File("cert.pem").c_str(), "--spool", dir.File("spool").c_str(), "--state_dir",
            dir.File("state").c_str(), "--runtime_settings", "", "--snapshot_key", "",
            "--dev_spool", dir.File("dev").c_str(), "--dev_token_file", dir.File("token").c_str(),
            "--dev_max_age_ms", "1000", static_cast<char*>(nullptr));
      _exit(127);
    }
    ASSERT_GT(agent, 0);
  }
  void TearDown() override { StopAgent(); }
  void StopAgent() {
    if (agent <= 0) return;
    kill(agent, SIGTERM);
    waitpid(agent, nullptr, 0);
    agent = 0;
  }
  std::string AgentLog() const {
    std::ifstream log(dir.File("agent.log"));
    return std::string(std::istreambuf_iterator<char>(log), {});
  }

  TempDir dir;
  testing::AggregatorProcess agg{
      dir, testing::FreePort(), {"--developers_file", dir.File("developers")}};
  pid_t agent = 0;
};

// The agent daemon in developer mode against a real aggregator: a run
// recorded into its developer spool arrives with the developer's token
// once the time threshold (1 s) is met, without a flush.
TEST_F(PointsDevAgentTest, TheAgentDaemonUploadsARunAfterItsTimeThreshold) {
  std::string out;
  ASSERT_TRUE(testing::WaitUntil([&] { return std::filesystem::exists(dir.File("dev")); },
                                 std::chrono::seconds(30)));
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("dev") + " -- " + kProg + " 100 2>&1",
                       &out),
            0)
      << out;
  const auto written = std::chrono::steady_clock::now();
  HttpsClient http(agg.Options());
  const HttpHeaders alice = {{"Authorization", "Bearer " + kAlice}};
  const bool arrived = testing::WaitUntil(
      [&] {
        StatusOr<HttpReply> r = http.Get("/v1/dev/runs?tag=startup", alice);
        return r.ok() && r->status == 200 && json::parse(r->body)["runs"].size() == 1;
      },
      std::chrono::seconds(60));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - written).count();
  StopAgent();
  ASSERT_TRUE(arrived) << AgentLog();
  std::printf("a run arrived %.2f s after it was written (threshold 1 s)\n", waited);
  EXPECT_TRUE(FileDigests(dir.File("dev")).empty()) << "the agent consumed the run";
}

// A program that runs on: its run goes up in parts while it runs (each
// part the bytes written since the last, once the time threshold is met),
// grows on the aggregator, and its last part closes it whole.
TEST_F(PointsDevAgentTest, ARunStillGoingGoesUpInPartsAndEndsWhole) {
  ASSERT_TRUE(testing::WaitUntil([&] { return std::filesystem::exists(dir.File("dev")); },
                                 std::chrono::seconds(30)));
  const std::string stop = dir.File("stop"), printed = dir.File("prog.out");
  const auto began = std::chrono::steady_clock::now();
  const pid_t prog = fork();
  if (prog == 0) {
    const std::string cmd = kCli + " points record -o " + dir.File("dev") + " -- " + kProg +
                            " 5 --until " + stop + " >" + printed + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(prog, 0);
  HttpsClient http(agg.Options());
  const HttpHeaders alice = {{"Authorization", "Bearer " + kAlice}};
  uint64_t events = 0;
  bool open = true;
  const auto listed = [&] {
    StatusOr<HttpReply> r = http.Get("/v1/dev/runs?tag=startup", alice);
    if (!r.ok() || r->status != 200) return false;
    const json runs = json::parse(r->body)["runs"];
    if (runs.size() != 1) return false;
    events = runs[0]["events"].get<uint64_t>();
    open = runs[0]["open"].get<bool>();
    return true;
  };
  // While it runs (it stops only when told): its first part, then more.
  const bool arrived =
      testing::WaitUntil([&] { return listed() && events > 0; }, std::chrono::seconds(60));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  if (!arrived) {
    ADD_FAILURE() << "no part arrived while the program ran; the agent's log:\n"
                  << AgentLog() << "\nthe aggregator's:\n"
                  << agg.LogTail();
  }
  EXPECT_EQ(waitpid(prog, nullptr, WNOHANG), 0) << "the program still runs";
  const uint64_t first = events;
  EXPECT_TRUE(
      testing::WaitUntil([&] { return listed() && events > first; }, std::chrono::seconds(60)))
      << "a later part adds to the run";
  EXPECT_EQ(waitpid(prog, nullptr, WNOHANG), 0) << "the program still runs";
  // It stops; its last part closes the run: every event once.
  std::ofstream(stop) << "stop\n";
  int status = 0;
  ASSERT_EQ(waitpid(prog, &status, 0), prog);
  std::ifstream in(printed);
  const std::string said(std::istreambuf_iterator<char>(in), {});
  const size_t at = said.find("rounds ");
  ASSERT_NE(at, std::string::npos) << said;
  const uint64_t rounds = std::stoull(said.substr(at + 7));
  // Its events may all be up before the part with its end mark.
  const bool whole = testing::WaitUntil([&] { return listed() && events == 4 * rounds && !open; },
                                        std::chrono::seconds(60));
  StopAgent();
  ASSERT_TRUE(whole) << events << " events of " << 4 * rounds << (open ? ", open" : "") << "\n"
                     << AgentLog();
  std::printf("first part of a run still going arrived %.2f s after it began (threshold 1 s)\n",
              waited);
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points pull --tag startup -o " + dir.File("pulled") +
                           " --host 127.0.0.1:" + std::to_string(agg.port()) + " --ca " +
                           dir.File("cert.pem") + " --token " + kAlice + " 2>&1",
                       &out),
            0)
      << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("pulled") + " --json", &out), 0) << out;
  const json shown = json::parse(out);
  ASSERT_EQ(shown["runs"].size(), 1u) << out;
  EXPECT_TRUE(shown["runs"][0]["complete"].get<bool>()) << "the run's end came up too";
  EXPECT_EQ(shown["runs"][0]["events"].get<uint64_t>(), 4 * rounds);
  for (const auto& e : std::filesystem::directory_iterator(dir.File("dev"))) {
    ADD_FAILURE() << "left in the spool: " << e.path();
  }
}

// The field's side: a measured run's point sums go through the agent to
// the aggregator like any key, and `points field` reads them back there.
// The bytes of the names record at the end of a run file the command
// named (points_format.h: 'N', a count, then address, length, name).
size_t NamesRecordSize(const std::string& file) {
  StatusOr<fieldprof::PointsRun> run = fieldprof::DecodePointsRun(file);
  if (!run.ok() || run->frame_names.empty()) return 0;
  size_t n = 1 + 4;
  for (const auto& [ip, name] : run->frame_names) n += 8 + 2 + name.size();
  return n;
}

// A run whose stacks the command names as it ends: the agent takes its
// end mark for its end only once the names came (or the file went
// unwritten for 10 s), so they go up with it. Without a server.
TEST(PointsDevTest, TheAgentWaitsForTheStacksNames) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record --stacks -o " + dir.File("rec") + " -- " +
                           kStacksProg + " 30 70 5 2>&1",
                       &out),
            0)
      << out;
  const std::string recorded = OnlyFile(dir.File("rec"));
  ASSERT_FALSE(recorded.empty());
  std::ifstream in(recorded, std::ios::binary);
  const std::string whole(std::istreambuf_iterator<char>(in), {});
  const size_t names = NamesRecordSize(whole);
  ASSERT_GT(names, 5u) << "the command named the stacks";
  const std::string ended = whole.substr(0, whole.size() - names);
  ASSERT_EQ(ended.back(), 'X') << "the names come after the end record";
  std::filesystem::create_directories(dir.File("spool"));
  const std::string path = dir.File("spool/points-1-stacks.fppoints");
  std::ofstream(path, std::ios::binary) << ended;
  agent::DevConfig c = DevConfigIn(dir);
  HttpsClient unused(HttpsClientOptions{});
  const auto pass = [&] {
    agent::DevUploader d(c);
    ASSERT_TRUE(d.Init().ok());
    auto r = d.Pass(/*flush=*/true, /*upload=*/false, unused);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  };
  const auto parts = [&] { return OutboxParts(dir.File("outbox"), /*one_run_each=*/false); };
  // Ended, its names not yet written: flushed, it goes up as far as it
  // is, still open, and stays.
  pass();
  auto sealed = parts();
  ASSERT_FALSE(sealed.empty());
  for (const auto& [file, part] : sealed) EXPECT_TRUE(part.open()) << file;
  EXPECT_TRUE(std::filesystem::exists(path)) << "kept for its names";
  // The names come: the rest goes, closing the run, and the file with it.
  std::ofstream(path, std::ios::binary | std::ios::app) << whole.substr(ended.size());
  pass();
  sealed = parts();
  std::string up;
  for (const auto& [file, part] : sealed) {
    EXPECT_EQ(part.offset(), up.size()) << file;
    up += part.file();
  }
  EXPECT_FALSE(sealed.back().second.open());
  EXPECT_EQ(up, whole) << "the run went up whole, its names with it";
  EXPECT_FALSE(std::filesystem::exists(path)) << "consumed";
}

// Stacks on the aggregator: runs recorded with --stacks go up named, and
// /v1/dev/report?stacks=1 gives, for the tag, where each point was passed
// as `points show --stacks --json` does on the same runs, though the
// program is gone and the aggregator never had it; the tag's page shows
// each segment's stacks (Chromium).
TEST(PointsDevTest, TheStacksGoUpNamedAndTheTagPageShowsThem) {
  TempDir dir;
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  std::ofstream(dir.File("developers")) << "alice " << kAlice << " fieldprof_*\n";
  testing::AggregatorProcess agg(dir, testing::FreePort(),
                                 {"--developers_file", dir.File("developers")});
  agg.Start();
  const std::string prog = dir.File("fieldprof_pointstacks_copy");
  std::filesystem::copy_file(kStacksProg, prog);
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record --stacks --runs 2 -o " + dir.File("runs") + " -- " +
                           prog + " 30 70 5 2>&1",
                       &out),
            0)
      << out;
  std::filesystem::remove(prog);
  std::string local;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("runs") + " --stacks --json", &local), 0);
  const json want = json::parse(local)["stacks"];
  ASSERT_EQ(want["runs_named"], 2) << local;
  ASSERT_EQ(RunCommand(kCli + " points upload " + dir.File("runs") +
                           " --host 127.0.0.1:" + std::to_string(agg.port()) + " --ca " +
                           dir.File("cert.pem") + " --token " + kAlice + " 2>/dev/null",
                       &out),
            0)
      << out;
  HttpsClient http(agg.Options());
  const HttpHeaders alice = {{"Authorization", "Bearer " + kAlice}};
  StatusOr<HttpReply> r = http.Get("/v1/dev/report?tag=stacks&stacks=1", alice);
  ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  const json got = json::parse(r->body);
  EXPECT_EQ(got["stacks"], want) << r->body;
  EXPECT_EQ(got["tags"], json::parse(local)["report"]["tags"]);
  // Without stacks=1 the report is as before; a bad value is refused.
  r = http.Get("/v1/dev/report?tag=stacks", alice);
  ASSERT_TRUE(r.ok() && r->status == 200);
  EXPECT_FALSE(json::parse(r->body).contains("stacks"));
  r = http.Get("/v1/dev/report?tag=stacks&stacks=yes", alice);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400) << r->body;

  // The tag's page: the scope "inner" shows where it began, its most
  // frequent stack first, innermost frame first.
  const json* inner = nullptr;
  for (const json& site : want["sites"]) {
    if (site["name"] == "inner" && site["scope"] == true) inner = &site;
  }
  ASSERT_NE(inner, nullptr) << want.dump();
  json page;
  page["program"] = "fieldprof_pointstacks_copy";
  page["segment"] = "inner (scope)";
  page["site"] = "inner";
  page["stacks"] = (*inner)["stacks"].size();
  page["events"] = (*inner)["stacks"][0]["events"];
  auto frames = (*inner)["stacks"][0]["frames"].get<std::vector<std::string>>();
  std::reverse(frames.begin(), frames.end());
  page["frames"] = frames;
  std::ofstream(dir.File("stacks-want.json")) << page.dump(2);
  CheckInChromium("dev_stacks.mjs", agg.port(), dir.File("stacks-want.json"));
}

TEST(PointsDevTest, TheFieldsPointSumsAreReadBackByModule) {
  TempDir dir;
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  testing::AggregatorProcess agg(dir, testing::FreePort());
  agg.Start();
  // The program is nobody's package: its developer, measuring it on their
  // own machine, shares it by name, and the field names it so.
  const std::string prog = std::filesystem::path(kProg).filename().string();
  std::ofstream(dir.File("measured.conf"))
      << "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\nmax_load_per_cpu = "
         "1000\nspool_dir = "
      << dir.File("spool") << "\nslot_dir = " << dir.File("slots") << "\nshare_modules = " << prog
      << "\n";
  std::string out;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(RunCommand("FIELDPROF_SETTINGS=" + dir.File("measured.conf") +
                             " LD_PRELOAD=" + kRuntime + " " + kProg + " 1000",
                         &out),
              0);
  }
  const std::string server =
      " --server 127.0.0.1:" + std::to_string(agg.port()) + " --ca_file " + dir.File("cert.pem");
  ASSERT_EQ(RunCommand(kAgent + server + " --spool " + dir.File("spool") + " --state_dir " +
                           dir.File("state") + " --runtime_settings '' --snapshot_key '' --once " +
                           "--flush --share_modules " + prog + " 2>&1",
                       &out),
            0)
      << out;
  agg.WaitApplied();
  const std::string host =
      " --host 127.0.0.1:" + std::to_string(agg.port()) + " --ca " + dir.File("cert.pem");
  ASSERT_EQ(RunCommand(kCli + " points field --module " + prog + " --json" + host + " 2>&1", &out),
            0)
      << out;
  const json j = json::parse(out);
  std::map<std::string, uint64_t> count, runs;
  for (const json& p : j["points"]) {
    EXPECT_EQ(p["tag"], "startup");
    count[p["segment"]] = p["count"];
    runs[p["segment"]] = p["runs"];
  }
  EXPECT_EQ(count["load -> parsed"], 2000u) << out;
  EXPECT_EQ(count["parsed -> load"], 1998u) << out;
  EXPECT_EQ(count["parse (scope)"], 2000u) << out;
  EXPECT_EQ(runs["load -> parsed"], 2u) << out;
  ASSERT_EQ(RunCommand(kCli + " points field --module " + prog + "" + host + " 2>&1", &out), 0)
      << out;
  EXPECT_NE(out.find("load -> parsed"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(kCli + " points field --module libnothing.so.1" + host + " 2>&1", &out), 0);
  EXPECT_NE(out.find("no instrumentation points"), std::string::npos) << out;

  // The module's report (the dashboard's module page reads it) carries
  // the same sums, and the page draws them, in Chromium.
  HttpsClientOptions http_options = agg.Options();
  HttpsClient http(http_options);
  StatusOr<HttpReply> report = http.Get("/v1/report?module=" + prog + "", {});
  ASSERT_TRUE(report.ok() && report->status == 200) << (report.ok() ? report->body : "");
  const json rep = json::parse(report->body);
  ASSERT_EQ(rep["points"].size(), j["points"].size()) << report->body;
  for (const json& p : rep["points"]) {
    EXPECT_EQ(p["count"].get<uint64_t>(), count[p["segment"]]) << p.dump();
    EXPECT_EQ(p["runs"].get<uint64_t>(), runs[p["segment"]]) << p.dump();
  }
  // So does the vendor report, as text and as a page.
  ASSERT_EQ(RunCommand(kCli + " report --module " + prog + "" + host + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("instrumentation points"), std::string::npos) << out;
  EXPECT_NE(out.find("parse (scope)"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(
                kCli + " report --module " + prog + " -o " + dir.File("main.html") + host + " 2>&1",
                &out),
            0)
      << out;
  StatusOr<std::string> page = ReadWholeFile(dir.File("main.html"));
  ASSERT_TRUE(page.ok());
  EXPECT_NE(page->find("<td class=\"name\">load -&gt; parsed</td>"), std::string::npos);
  std::ofstream(dir.File("points-want.json")) << j.dump(2);
  std::string browser;
  EXPECT_EQ(RunCommand("node " + std::string(FIELDPROF_SOURCE_DIR) +
                           "/tests/aggregator/ui/points_module.mjs https://127.0.0.1:" +
                           std::to_string(agg.port()) + "/ui/ " + dir.File("points-want.json") +
                           " " + std::string(FIELDPROF_BUILD_DIR) + "/ui-screenshots 2>&1",
                       &browser),
            0)
      << browser;
  EXPECT_NE(browser.find("checks passed"), std::string::npos) << browser;
}

}  // namespace
}  // namespace fieldprof
