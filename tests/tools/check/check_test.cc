// fieldprof check, the real binary: run records of one slowed
// API among several against a field snapshot of the same APIs. Only the
// slowed API is flagged, the exit code gates on its excess, the JSON says
// the same, and a field of another CPU family is used and said so.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/net/https_client.h"
#include "common/spool/spool.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"
#include "tests/tools/snapshot_fixture.h"

namespace fieldprof {
namespace {

using json = nlohmann::json;
using testing::Cache;
using testing::MakeRecord;
using testing::RunCommand;
using testing::SumSpool;
using testing::TempDir;

// Log-normal calls around exp(mu) ns, `scale` times slower.
Histogram Calls(std::mt19937_64& rng, int n, double mu, double scale = 1) {
  std::lognormal_distribution<double> d(mu, 0.6);
  Histogram h;
  for (int i = 0; i < n; ++i) h.Record(static_cast<uint64_t>(scale * d(rng)));
  return h;
}

class CheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(77);
    // The field: 12 APIs, 20,000 calls each, from 500 runs.
    field_.clear();  // SetUp runs again after a change of family_
    std::vector<wire::Record>& field = field_;
    for (int a = 0; a < 12; ++a) {
      field.push_back(MakeRecord("libx.so.1", "api" + std::to_string(a), wire::METRIC_WALL_TIME_NS,
                                 Calls(rng, 20000, 7 + 0.3 * a), 500));
    }
    Cache(dir_.File("cache")).Write(3, field);
    std::filesystem::create_directories(dir_.File("spool"));
    // The user's runs: 5 record files, each with ~300 calls of every API;
    // api4 is 35% slower here.
    for (int run = 0; run < 5; ++run) {
      wire::RunRecord r;
      r.set_schema_version(1);
      r.mutable_platform()->set_os(wire::OS_LINUX);
      r.mutable_platform()->set_arch(wire::ARCH_X86_64);
      r.mutable_platform()->set_cpu_vendor(wire::CPU_VENDOR_AMD);
      r.mutable_platform()->set_cpu_family(family_);
      r.set_ended_unix_ms(1795392000000 + run);
      for (int a = 0; a < 12; ++a) {
        *r.add_records() =
            MakeRecord("libx.so.1", "api" + std::to_string(a), wire::METRIC_WALL_TIME_NS,
                       Calls(rng, 300, 7 + 0.3 * a, a == 4 ? 1.35 : 1.0), 1, family_);
      }
      std::ofstream(dir_.File("spool/run-" + std::to_string(run) + ".fpr"), std::ios::binary)
          << r.SerializeAsString();
    }
  }
  std::string Cmd(const std::string& flags) {
    return std::string(FIELDPROF_CLI_BIN) + " check --cache " + dir_.File("cache") + " --spool " +
           dir_.File("spool") + " " + flags + " 2>&1";
  }

  TempDir dir_;
  uint32_t family_ = 25;
  std::vector<wire::Record> field_;
};

TEST_F(CheckTest, OnlyTheSlowedApiIsFlaggedAndTheExitCodeGates) {
  std::string out;
  ASSERT_EQ(RunCommand(Cmd("--json"), &out), 0) << out;
  const json j = json::parse(out);
  EXPECT_EQ(j["apis_compared"], 12);
  ASSERT_EQ(j["findings"].size(), 1u) << out;
  const json& f = j["findings"][0];
  EXPECT_EQ(f["symbol"], "api4");
  EXPECT_EQ(f["evidence"], true);
  EXPECT_LE(f["adjusted_p"].get<double>(), 0.05);
  EXPECT_GT(f["excess"].get<double>(), 0);
  EXPECT_EQ(f["local"]["calls"], 1500);
  EXPECT_EQ(f["field"]["calls"], 20000);
  EXPECT_EQ(f["field"]["platform_match"], "the same platform class");
  // The text report names it; --all shows every API.
  ASSERT_EQ(RunCommand(Cmd(""), &out), 0) << out;
  std::printf("%s", out.c_str());  // the report, for whoever reads the test's log
  EXPECT_NE(out.find("libx.so.1:api4"), std::string::npos) << out;
  EXPECT_EQ(out.find("libx.so.1:api3"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(Cmd("--all --json"), &out), 0);
  EXPECT_EQ(json::parse(out)["findings"].size(), 12u);
  // Gating: an excess threshold under api4's fails the run, one over it passes.
  const double excess = f["excess"].get<double>();
  EXPECT_EQ(RunCommand(Cmd("--fail_on_excess_ns " + std::to_string(excess / 2)), &out), 1) << out;
  EXPECT_EQ(RunCommand(Cmd("--fail_on_excess_ns " + std::to_string(excess * 2)), &out), 0) << out;
  // The same seed, the same p-values.
  std::string again;
  ASSERT_EQ(RunCommand(Cmd("--json"), &again), 0);
  EXPECT_EQ(json::parse(again)["findings"][0]["p_value"], f["p_value"]);
}

// A field figure the aggregator marked suspect is said beside it, in the
// text report and the JSON; the finding itself stands.
TEST_F(CheckTest, ASuspectFieldFigureIsSaidBesideIt) {
  field_[4].set_suspect("2026-11-22: mean -60% against its history, from 90 runs on 1 machines");
  Cache(dir_.File("cache")).Write(4, field_);
  std::string out;
  ASSERT_EQ(RunCommand(Cmd("--json"), &out), 0) << out;
  const json j = json::parse(out);
  ASSERT_EQ(j["findings"].size(), 1u) << out;
  EXPECT_EQ(j["findings"][0]["field"]["suspect"], true);
  EXPECT_EQ(j["findings"][0]["field"]["suspect_reason"], field_[4].suspect());
  ASSERT_EQ(RunCommand(Cmd(""), &out), 0) << out;
  EXPECT_NE(out.find("field figure SUSPECT: " + field_[4].suspect()), std::string::npos) << out;
  ASSERT_EQ(RunCommand(Cmd("--all --json"), &out), 0);
  for (const json& f : json::parse(out)["findings"]) {
    EXPECT_EQ(f["field"]["suspect"], f["symbol"] == "api4") << f.dump();
  }
}

// The field from an aggregator's query API (--host) instead of the cache:
// the same records posted as a batch to the real server on loopback give
// the same finding.
TEST_F(CheckTest, TheFieldCanComeFromAnAggregator) {
  ASSERT_TRUE(testing::MakeCert(dir_.path()));
  testing::AggregatorProcess agg(dir_, testing::FreePort());
  agg.Start();
  wire::Batch b;
  b.set_schema_version(kSchemaVersion);
  b.set_batch_id(std::string(16, 'c'));
  b.set_created_unix_ms(1795392000000);
  b.mutable_client_platform()->set_os(wire::OS_LINUX);
  b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
  b.mutable_client_platform()->set_cpu_vendor(wire::CPU_VENDOR_AMD);
  b.mutable_client_platform()->set_cpu_family(25);
  for (const wire::Record& r : field_) {
    wire::Record* x = b.add_records();
    *x = r;
    x->mutable_key()->clear_platform();  // the batch's platform applies
    x->set_runs(1);
  }
  HttpsClient c(agg.Options());
  auto reply = c.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
  ASSERT_TRUE(reply.ok() && reply->status == 200) << (reply.ok() ? reply->body : "");
  agg.WaitApplied();
  std::string out;
  const std::string cmd = std::string(FIELDPROF_CLI_BIN) + " check --json --spool " +
                          dir_.File("spool") + " --host 127.0.0.1 --port " +
                          std::to_string(agg.port()) + " --ca " + dir_.File("cert.pem") + " 2>&1";
  ASSERT_EQ(RunCommand(cmd, &out), 0) << out;
  const json j = json::parse(out);
  EXPECT_EQ(j["apis_compared"], 12);
  ASSERT_EQ(j["findings"].size(), 1u) << out;
  EXPECT_EQ(j["findings"][0]["symbol"], "api4");
  EXPECT_EQ(j["findings"][0]["field"]["calls"], 20000);
  EXPECT_EQ(j["findings"][0]["field"]["platform_match"], "the same platform class");
  // A dead server is a clear error.
  agg.Kill();
  EXPECT_EQ(RunCommand(cmd, &out), 1);
  EXPECT_NE(out.find("fieldprof check:"), std::string::npos) << out;
}

// SARIF for code scanning and JUnit XML for CI, read back with real parsers
// (nlohmann-json; Python's xml.etree for the XML).
TEST_F(CheckTest, SarifAndJunitCarryTheFindings) {
  std::string out;
  ASSERT_EQ(
      RunCommand(Cmd("--sarif " + dir_.File("a.sarif") + " --junit " + dir_.File("a.xml")), &out),
      0)
      << out;
  std::ifstream in(dir_.File("a.sarif"));
  const json sarif = json::parse(in);
  EXPECT_EQ(sarif["version"], "2.1.0");
  const json& run = sarif["runs"][0];
  EXPECT_EQ(run["tool"]["driver"]["rules"][0]["id"], "fieldprof/api-excess-cost");
  ASSERT_EQ(run["results"].size(), 1u) << sarif.dump(2);
  const json& r = run["results"][0];
  EXPECT_EQ(r["ruleId"], "fieldprof/api-excess-cost");
  EXPECT_EQ(r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"], "libx.so.1:api4");
  EXPECT_NE(
      r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].get<std::string>().find(
          ".fpr"),
      std::string::npos);
  EXPECT_NE(r["message"]["text"].get<std::string>().find("libx.so.1:api4 costs you"),
            std::string::npos);
  const std::string fingerprint = r["partialFingerprints"]["fieldprofApi/v1"];
  EXPECT_EQ(fingerprint.size(), 16u);
  // The fingerprint is the API's, not the run's: the same on another run.
  ASSERT_EQ(RunCommand(Cmd("--seed 9 --sarif " + dir_.File("b.sarif")), &out), 0) << out;
  std::ifstream in2(dir_.File("b.sarif"));
  EXPECT_EQ(json::parse(in2)["runs"][0]["results"][0]["partialFingerprints"]["fieldprofApi/v1"],
            fingerprint);
  // JUnit: 12 cases, 1 failure, named after the API.
  const std::string py =
      "/usr/bin/python3 -c \"import sys, xml.etree.ElementTree as E; s = "
      "E.parse(sys.argv[1]).getroot()[0]; print(s.get('tests'), s.get('failures'), "
      "[c.get('classname') + ':' + c.get('name') for c in s if c.find('failure') is not None])\" " +
      dir_.File("a.xml");
  ASSERT_EQ(RunCommand(py, &out), 0) << out;
  EXPECT_EQ(out, "12 1 ['libx.so.1:api4']\n");
}

TEST_F(CheckTest, AFieldOfAnotherCpuFamilyIsUsedAndSaidSo) {
  family_ = 26;
  TearDown();
  SetUp();
  std::string out;
  ASSERT_EQ(RunCommand(Cmd("--json"), &out), 0) << out;
  const json j = json::parse(out);
  ASSERT_EQ(j["findings"].size(), 1u) << out;
  EXPECT_EQ(j["findings"][0]["field"]["platform_match"], "the same CPU vendor");
}

TEST_F(CheckTest, NoDataAndBadFlagsAreClearErrors) {
  std::string out;
  EXPECT_EQ(RunCommand(std::string(FIELDPROF_CLI_BIN) + " check --cache " + dir_.File("cache") +
                           " --spool " + dir_.File("empty") + " 2>&1",
                       &out),
            3);
  EXPECT_NE(out.find("no wall_time_ns data"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(Cmd("--statistic p200"), &out), 2);
  EXPECT_NE(out.find("--statistic"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(std::string(FIELDPROF_CLI_BIN) + " check --cache " + dir_.File("none") +
                           " --spool " + dir_.File("spool") + " 2>&1",
                       &out),
            3);
  EXPECT_NE(out.find("no field data"), std::string::npos) << out;
}

// A field of the test program at 1.4 us a call of fp_test_spin_ns: ten
// runs under the runtime, their records summed as the aggregator sums
// them, in the snapshot cache at dir/cache. False when no run left one.
bool SpinField(const TempDir& dir) {
  const std::string prog = std::string(FIELDPROF_TESTPROG) + " spin ";
  std::filesystem::create_directories(dir.File("field-spool"));
  std::string out;
  for (int i = 0; i < 10; ++i) {
    RunCommand(std::string(FIELDPROF_CLI_BIN) +
                   " run --force fp_test_spin_ns --apis 1 --max_load 1000000 --budget 1000 " +
                   "--slots 1000 --spool " + dir.File("field-spool") + " -- " + prog +
                   "1400 2000 outer " + dir.File("truth") + " > /dev/null 2>&1",
               &out);
  }
  const std::vector<wire::Record> field = SumSpool(dir.File("field-spool"));
  if (field.empty()) return false;
  Cache(dir.File("cache")).Write(1, field);
  return true;
}

// -- COMMAND: a real program under the runtime. The field is built from
// runs of the test program spinning 1.4 us per call of fp_test_spin_ns;
// then `fieldprof check -- testprog` spinning 1.4 us passes the gate, and
// 3 us is flagged and fails it. Both lie well inside one log2 bucket
// ([1024, 2048) and [2048, 4096) ns): at 2 us a call plus the probe's cost
// sat on the 2048 ns edge, and a loaded machine moved the median across it
// (a call is taken at its bucket's mean). The field has more calls than
// the runs checked, as a real one has: with two equal counts perfectly
// apart, half of all relabellings put the pooled median's edge on the
// other side too, and the median test has no power (p ~ 0.5). The
// command's output is kept off the JSON. Without --apis the lab profiles
// the program, and the same API is flagged among all it calls.
TEST(CheckCommandTest, ARealProgramSlowedIsFlaggedAndGated) {
  TempDir dir;
  const std::string cli = FIELDPROF_CLI_BIN;
  const std::string prog = std::string(FIELDPROF_TESTPROG) + " spin ";
  std::string out;
  ASSERT_TRUE(SpinField(dir)) << "the field runs left no record";

  // 12,000 calls; the gate: the median 20% up, adjusted p <= 0.01. (Not the
  // mean: under the whole suite's load a few preempted calls moved a run's
  // mean by 25% while its median stayed within 0.2%.)
  const std::string check = cli + " check --json --cache " + dir.File("cache") +
                            " --apis fp_test_spin_ns --repeat 6 --statistic p50 --min_effect 0.2 " +
                            "--fail_on_p 0.01 -- " + prog;
  EXPECT_EQ(RunCommand(check + "1400 2000 outer " + dir.File("truth") + " 2>/dev/null", &out), 0)
      << out;
  json j = json::parse(out);  // only the report on stdout
  EXPECT_EQ(j["apis_compared"], 1) << out;
  EXPECT_EQ(RunCommand(check + "3000 2000 outer " + dir.File("truth") + " 2>/dev/null", &out), 1)
      << out;
  j = json::parse(out);
  ASSERT_EQ(j["findings"].size(), 1u) << out;
  EXPECT_EQ(j["findings"][0]["symbol"], "fp_test_spin_ns");
  EXPECT_EQ(j["findings"][0]["local"]["calls"], 12000);
  EXPECT_GT(j["findings"][0]["local"]["p50"].get<double>(),
            j["findings"][0]["field"]["p50"].get<double>() + 500);
  // Without --apis the lab finds what the program calls: every API with
  // field data is checked, and the slowed one is flagged.
  const std::string lab_check =
      cli + " check --json --cache " + dir.File("cache") +
      " --repeat 2 --statistic p50 --min_effect 0.2 --fail_on_p 0.01 -- " + prog;
  EXPECT_EQ(RunCommand(lab_check + "3000 2000 outer " + dir.File("truth") + " 2>/dev/null", &out),
            1)
      << out;
  j = json::parse(out);
  EXPECT_GE(j["apis_compared"].get<int>(), 1) << out;
  ASSERT_EQ(j["findings"].size(), 1u) << out;
  EXPECT_EQ(j["findings"][0]["symbol"], "fp_test_spin_ns");
  EXPECT_EQ(RunCommand(lab_check + "1400 2000 outer " + dir.File("truth") + " 2>/dev/null", &out),
            0)
      << out;
  // The program's output is shown once, however many runs (both ways).
  for (const std::string apis : {"", "--apis fp_test_spin_ns "}) {
    RunCommand(cli + " check --cache " + dir.File("cache") + " --repeat 3 " + apis + "-- " + prog +
                   "1400 20 outer " + dir.File("truth") + " 2>&1",
               &out);
    size_t shown = 0;
    for (size_t at = out.find("done spin"); at != std::string::npos;
         at = out.find("done spin", at + 1)) {
      ++shown;
    }
    EXPECT_EQ(shown, 1u) << apis << out;
  }
  // --apis without a command is a usage error.
  EXPECT_EQ(RunCommand(cli + " check --apis strlen 2>&1", &out), 2);
  EXPECT_NE(out.find("--apis needs -- COMMAND"), std::string::npos) << out;
}

// The field on the profile: a program whose API costs it more than the
// field (the field built from runs at 1.4 us a call, the program at 3 us),
// recorded with fieldprof record; record show --check with the report of
// `fieldprof check --json` marks that API where it sits in the stack, and
// no other frame: in the tree's text, as pprof's label over_field (read
// by go tool pprof), and on the page in chromium (its flame graph and its
// functions table).
TEST(CheckCommandTest, AnApiCostingMoreThanTheFieldIsMarkedOnItsStack) {
  TempDir dir;
  const std::string cli = FIELDPROF_CLI_BIN;
  const std::string prog = std::string(FIELDPROF_TESTPROG) + " spin ";
  std::string out;
  ASSERT_TRUE(SpinField(dir)) << "the field runs left no record";
  ASSERT_EQ(RunCommand(cli + " check --json --cache " + dir.File("cache") +
                           " --apis fp_test_spin_ns --repeat 6 --statistic p50 --min_effect 0.2 "
                           "-- " +
                           prog + "3000 2000 outer " + dir.File("truth") + " > " +
                           dir.File("check.json") + " 2>/dev/null",
                       &out),
            0);
  std::ifstream in(dir.File("check.json"));
  const json report = json::parse(in);
  ASSERT_EQ(report["findings"].size(), 1u) << report.dump();
  ASSERT_TRUE(report["findings"][0]["evidence"].get<bool>()) << report.dump();
  // 100,000 calls of 3 us: some 300 samples, most of them in the API.
  const std::string rec = dir.File("t.fprec");
  ASSERT_EQ(RunCommand(cli + " record -o " + rec + " -- " + prog + "3000 100000 outer " +
                           dir.File("truth") + " >/dev/null 2>&1",
                       &out),
            7)  // the test program's own exit status, passed on
      << out;
  ASSERT_EQ(RunCommand(cli + " record show " + rec + " --check " + dir.File("check.json") +
                           " --min_percent 0 --color never 2>&1",
                       &out),
            0)
      << out;
  int marked = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("  <-- costs more than the field");
    if (at == std::string::npos) continue;
    ++marked;
    EXPECT_NE(line.substr(0, at).find("fp_test_spin_ns"), std::string::npos) << line;
  }
  EXPECT_GE(marked, 1) << out;
  EXPECT_NE(out.find("1 frame of APIs that cost more than the field"), std::string::npos) << out;
  // --field: what the field says each API frame costs, after its line:
  // fp_test_spin_ns's p50 (a call spins 1.4 us), and 2,000 calls a run.
  ASSERT_EQ(RunCommand(cli + " record show " + rec + " --field --cache " + dir.File("cache") +
                           " --min_percent 0 --color never 2>&1",
                       &out),
            0)
      << out;
  const size_t api = out.find(" fp_test_spin_ns  [field: p50 ");
  ASSERT_NE(api, std::string::npos) << out;
  double p50_us = 0;
  ASSERT_EQ(std::sscanf(out.c_str() + api, " fp_test_spin_ns  [field: p50 %lf us", &p50_us), 1)
      << out.substr(api, 120);
  EXPECT_GE(p50_us, 1.024);  // 1.4 us spun, in the bucket from 1,024 ns up
  EXPECT_NE(out.find("2,000 calls a run", api), std::string::npos) << out.substr(api, 160);
  EXPECT_EQ(out.find("[field:", api + 20), std::string::npos) << "one API frame: " << out;
  // The same in a tree of the recording: after the API's node in the
  // text, and as numbers in --json; no other node has them.
  ASSERT_EQ(RunCommand(cli + " tree show " + rec + " --field --cache " + dir.File("cache") +
                           " --min_percent 0 --color never 2>&1",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find(" fp_test_spin_ns  [field: p50 "), std::string::npos) << out;
  ASSERT_EQ(RunCommand(cli + " tree show " + rec + " --field --cache " + dir.File("cache") +
                           " --json 2>/dev/null",
                       &out),
            0)
      << out;
  std::vector<const json*> with_field;
  const json tree = json::parse(out);
  std::vector<const json*> unvisited = {&tree["root"]};
  while (!unvisited.empty()) {
    const json* n = unvisited.back();
    unvisited.pop_back();
    if (n->contains("field")) with_field.push_back(n);
    for (const json& c : (*n)["children"]) unvisited.push_back(&c);
  }
  ASSERT_FALSE(with_field.empty()) << out.substr(0, 2000);
  for (const json* n : with_field) {
    EXPECT_EQ((*n)["name"], "fp_test_spin_ns") << n->dump();
    EXPECT_GE((*n)["field"]["p50_ns"].get<double>(), 1024) << n->dump();
    EXPECT_NEAR((*n)["field"]["calls_a_run"].get<double>(), 2000, 1) << n->dump();
  }
  // record --check: the check runs after the recording, into
  // OUTPUT.check.json, and record show marks its findings without being
  // told where the report is.
  const std::string checked = dir.File("c.fprec");
  ASSERT_EQ(
      RunCommand(cli + " record --check --cache " + dir.File("cache") + " -o " + checked + " -- " +
                     prog + "3000 100000 outer " + dir.File("truth") + " 2>&1 >/dev/null",
                 &out),
      7)
      << out;
  EXPECT_NE(out.find("more here than in the field (" + checked + ".check.json)"), std::string::npos)
      << out;
  std::ifstream beside(checked + ".check.json");
  const json report_beside = json::parse(beside);
  size_t found = 0;
  for (const json& f : report_beside["findings"]) {
    if (!f.value("evidence", false)) continue;
    ++found;
    EXPECT_EQ(f["symbol"], "fp_test_spin_ns") << report_beside.dump();
  }
  ASSERT_EQ(
      RunCommand(cli + " record show " + checked + " --min_percent 0 --color never 2>&1", &out), 0)
      << out;
  const std::string said = std::to_string(found) + (found == 1 ? " frame of" : " frames of");
  EXPECT_NE(out.find(said + " APIs that cost more than the field"), std::string::npos) << out;
  EXPECT_EQ(out.find("  <-- costs more than the field") != std::string::npos, found > 0) << out;
  // Without a snapshot, --field says so.
  EXPECT_NE(
      RunCommand(cli + " tree show " + rec + " --field --cache " + dir.File("no-cache") + " 2>&1",
                 &out),
      0);
  EXPECT_NE(out.find("no snapshot"), std::string::npos) << out;
  // pprof: the stacks through it carry the label.
  if (RunCommand("command -v go", &out) == 0) {
    ASSERT_EQ(RunCommand(cli + " record show " + rec + " --check " + dir.File("check.json") +
                             " --pprof " + dir.File("t.pb.gz") + " 2>&1",
                         &out),
              0)
        << out;
    ASSERT_EQ(
        RunCommand("HOME=" + dir.path() + " go tool pprof -tags " + dir.File("t.pb.gz") + " 2>&1",
                   &out),
        0)
        << out;
    EXPECT_NE(out.find("over_field"), std::string::npos) << out;
    EXPECT_NE(out.find("fp_test_spin_ns"), std::string::npos) << out;
  }
  // The page, in chromium.
  ASSERT_TRUE(testing::BrowserInstalled(FIELDPROF_SOURCE_DIR)) << testing::kBrowserMissing;
  ASSERT_EQ(
      RunCommand(cli + " record show " + rec + " --check " + dir.File("check.json") + " --cache " +
                     dir.File("cache") + " --html " + dir.File("t.html") + " 2>&1",
                 &out),
      0)
      << out;
  ASSERT_EQ(RunCommand("node " + std::string(FIELDPROF_SOURCE_DIR) +
                           "/tests/tools/record/record_page_state.mjs " + dir.File("t.html") + " " +
                           FIELDPROF_BUILD_DIR + "/ui-screenshots record-over-field.png",
                       &out),
            0)
      << out;
  const json page = json::parse(out.substr(out.find('{')));
  ASSERT_FALSE(page["over_field"].empty()) << page.dump();
  for (const auto& name : page["over_field"]) {
    EXPECT_EQ(name.get<std::string>(), "fp_test_spin_ns") << page.dump();
  }
  ASSERT_EQ(page["over_field_rows"].size(), 1u) << page.dump();
  EXPECT_EQ(page["over_field_rows"][0], "fp_test_spin_ns");
  // The field's cost in the API frame's tooltip, and in its row's.
  ASSERT_FALSE(page["field_tips"].empty()) << page.dump();
  EXPECT_EQ(page["field_tips"][0].get<std::string>().rfind("field: p50 ", 0), 0u) << page.dump();
  ASSERT_EQ(page["field_rows"].size(), 1u) << page.dump();
  EXPECT_EQ(page["field_rows"][0].get<std::string>().rfind("fp_test_spin_ns: field: p50", 0), 0u);
}

}  // namespace
}  // namespace fieldprof
