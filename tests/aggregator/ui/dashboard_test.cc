// The dashboard: the real aggregator on loopback with data, its
// JSON reads against figures computed straight from the posted histograms,
// and its pages in Debian's chromium driven by playwright-core
// (tests/aggregator/ui/dashboard.mjs): modules -> a module's APIs -> one API, date
// filters, two versions compared, a vendor page refused without its token,
// the keyboard, no JavaScript errors. Screenshots go to the build tree.
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/net/https_client.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/gunzip.h"
#include "tests/support/test_util.h"
#include "tests/tools/snapshot_fixture.h"

namespace fieldprof {
namespace {

using json = nlohmann::json;
using testing::MakeRecord;
using testing::RunCommand;
using testing::TempDir;
using testing::WaitUntil;

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeCert(dir_.path()));
    std::ofstream(dir_.File("vendors")) << "acme " << kToken << " libacme*\n";
    agg_ = std::make_unique<testing::AggregatorProcess>(
        dir_, testing::FreePort(),
        std::vector<std::string>{"--vendors_file", dir_.File("vendors")});
    agg_->Start();
    std::mt19937_64 rng(11);
    auto draw = [&](double mu, double scale, int n) {
      std::lognormal_distribution<double> d(mu, 0.5);
      Histogram h;
      for (int i = 0; i < n; ++i) h.Record(static_cast<uint64_t>(scale * d(rng)));
      return h;
    };
    wire::Batch b;
    b.set_schema_version(kSchemaVersion);
    b.set_batch_id(std::string(16, 'd'));
    b.set_created_unix_ms(1795392000000);
    b.mutable_client_platform()->set_os(wire::OS_LINUX);
    b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
    b.mutable_client_platform()->set_cpu_vendor(wire::CPU_VENDOR_AMD);
    b.mutable_client_platform()->set_cpu_family(25);
    auto add = [&](const std::string& module, const std::string& symbol, const std::string& version,
                   const Histogram& h) {
      wire::Record r = MakeRecord(module, symbol, wire::METRIC_WALL_TIME_NS, h, 40);
      r.mutable_key()->set_module_version(version);
      *b.add_records() = r;
      if (module == "libopen.so.1") wall_[symbol].Merge(h);
    };
    // Versions as the agent keys Debian's packages: VERSION_BUILDID16.
    for (const std::string v : {kVersionA, kVersionB}) {
      add("libopen.so.1", "open_fast", v, draw(5, 1, 3000));
      add("libopen.so.1", "open_slow", v, draw(8.5, v == kVersionB ? 1.6 : 1, 3000));
      add("libopen.so.1", "_ZN4open6Parser5parseEv", v, draw(7, 1, 2000));
    }
    add("libacme.so.2", "acme_call", "2.0", draw(6, 1, 1000));
    // Calls under the timing resolution (10 ns): read as "< 10 ns".
    Histogram tiny;
    for (int i = 0; i < 500; ++i) tiny.Record(static_cast<uint64_t>(i % 8));
    wire::Record t = MakeRecord("libtiny.so.1", "tiny_call", wire::METRIC_WALL_TIME_NS, tiny, 5);
    t.set_resolution_ns(10);
    *b.add_records() = t;
    HttpsClient http(agg_->Options());
    StatusOr<HttpReply> r =
        http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
    agg_->WaitApplied();
  }

  static constexpr const char* kToken = "acme-secret-token-0123456789";
  static constexpr const char* kVersionA = "3.40.1-2_5221b80bd99650e3";
  static constexpr const char* kVersionB = "3.40.1-3_0a1b2c3d4e5f6071";
  TempDir dir_;
  std::unique_ptr<testing::AggregatorProcess> agg_;
  std::map<std::string, Histogram> wall_;
  wire::Batch batch_;
};

TEST_F(DashboardTest, JsonReadsEqualTheHistograms) {
  HttpsClient http(agg_->Options());
  StatusOr<HttpReply> r = http.Get("/v1/report?module=libopen.so.1");
  ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : "");
  const json rep = json::parse(r->body);
  ASSERT_EQ(rep["apis"].size(), 3u);
  for (const json& a : rep["apis"]) {
    const HistogramStats st = wall_.at(a["symbol"]).Stats();
    EXPECT_EQ(a["calls"].get<uint64_t>(), st.count);
    EXPECT_DOUBLE_EQ(a["metrics"]["wall_time_ns"]["p50"].get<double>(), st.p50);
    EXPECT_DOUBLE_EQ(a["metrics"]["wall_time_ns"]["mean"].get<double>(), st.mean);
  }
  // Versions asked for as people write them: the package version, or a
  // build id's first digits.
  r = http.Get("/v1/diff?module=libopen.so.1&a_version=3.40.1-2&b_version=0a1b2c3d");
  ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : "");
  const json d = json::parse(r->body);
  EXPECT_EQ(d["slower"], 1) << r->body;
  // Two date ranges: today against itself, nothing changed.
  char day[16];
  const time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(day, sizeof day, "%Y-%m-%d", &tm);
  const std::string d_ = day;
  r = http.Get("/v1/diff?module=libopen.so.1&a_from=" + d_ + "&a_to=" + d_ + "&b_from=" + d_ +
               "&b_to=" + d_);
  ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : "");
  EXPECT_EQ(json::parse(r->body)["apis_compared"], 3) << r->body;
  EXPECT_EQ(json::parse(r->body)["slower"], 0) << r->body;
  // The vendor's module: 401 without its token, 200 with it.
  r = http.Get("/v1/report?module=libacme.so.2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  r = http.Get("/v1/report?module=libacme.so.2",
               {{"Authorization", std::string("Bearer ") + kToken}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  r = http.Get("/v1/diff?module=libacme.so.2&a_version=2.0&b_version=2.0");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  // Seen recently: the batch's APIs once each, even after a second batch
  // of the same keys.
  r = http.Get("/v1/recent");
  ASSERT_TRUE(r.ok() && r->status == 200);
  const size_t distinct = json::parse(r->body)["apis"].size();
  EXPECT_EQ(distinct, 5u) << r->body;  // open_fast, open_slow, open::Parser::parse, acme_call, tiny
  wire::Batch again = batch_;
  again.set_batch_id(std::string(16, 'e'));
  ASSERT_TRUE(http.Post("/v1/batches", "application/x-protobuf", again.SerializeAsString()).ok());
  r = http.Get("/v1/recent");
  ASSERT_TRUE(r.ok() && r->status == 200);
  EXPECT_EQ(json::parse(r->body)["apis"].size(), distinct) << r->body;
  // The static files: served, and nothing from elsewhere allowed.
  r = http.Get("/ui/");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("<script src=\"app.js\">"), std::string::npos);
  r = http.Get("/ui/app.js");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.find("http://"), r->body.find("http://www.w3.org/2000/svg"));
  r = http.Get("/ui/../v1/config");
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->status, 200);
}

TEST_F(DashboardTest, PagesInARealBrowser) {
  json want;
  want["open_module"] = "libopen.so.1";
  want["vendor_module"] = "libacme.so.2";
  want["vendor_symbol"] = "acme_call";
  want["versions"] = {kVersionA, kVersionB};
  want["readable_versions"] = {"3.40.1-2 (5221b80b)", "3.40.1-3 (0a1b2c3d)"};
  want["tiny_module"] = "libtiny.so.1";
  want["verdicts"] = {{"open_slow", "slower"}, {"open_fast", "same"}};
  double total = 0;
  for (const auto& [s, h] : wall_) total += h.Mean() * static_cast<double>(h.count());
  for (const auto& [s, h] : wall_) {
    const HistogramStats st = h.Stats();
    want["apis"][s] = {{"calls", st.count},
                       {"p50", st.p50},
                       {"p90", st.p90},
                       {"mean", st.mean},
                       {"share", st.mean * static_cast<double>(st.count) / total}};
  }
  want["api"] = {{"symbol", "open_slow"},
                 {"calls", wall_.at("open_slow").count()},
                 {"p50", wall_.at("open_slow").Stats().p50}};
  char today[16];
  const time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(today, sizeof today, "%Y-%m-%d", &tm);
  want["today"] = today;
  std::ofstream(dir_.File("want.json")) << want.dump(2);
  const std::string shots = std::string(FIELDPROF_BUILD_DIR) + "/ui-screenshots";
  std::string out;
  const int rc = RunCommand("node " + std::string(FIELDPROF_SOURCE_DIR) +
                                "/tests/aggregator/ui/dashboard.mjs " +
                                "https://127.0.0.1:" + std::to_string(agg_->port()) + "/ui/ " +
                                dir_.File("want.json") + " " + kToken + " " + shots + " 2>&1",
                            &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("checks passed"), std::string::npos) << out;
  std::cout << out.substr(out.rfind("ok: no JavaScript")) << std::flush;
}

// An aggregator below k (a trial with one machine): the modules page says
// what is held back and which setting decides, in Chromium, with the
// counts of /v1/modules; /v1/apis carries the same counts.
TEST(DashboardBelowKTest, TheModulesPageSaysWhatIsHeldBack) {
  TempDir dir;
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  testing::AggregatorProcess agg(dir, testing::FreePort(), {"--k_anonymity", "5"});
  agg.Start();
  HttpsClient http(agg.Options());
  // One machine: two batches of two modules, three series in all.
  for (int i = 0; i < 2; ++i) {
    wire::Batch b = testing::SimpleBatch(testing::IdOf(40 + i),
                                         i == 0 ? "libone.so.1" : "libtwo.so.2", "call_a", 1000);
    *b.add_records() = b.records(0);
    b.mutable_records(1)->mutable_key()->set_symbol("call_b");
    if (i == 1) b.mutable_records()->RemoveLast();
    b.set_machine_key(std::string(16, 'm'));
    for (wire::Record& r : *b.mutable_records()) r.set_first_from_machine(true);
    StatusOr<HttpReply> r =
        http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  }
  agg.WaitApplied();
  for (const std::string target : {"/v1/modules", "/v1/apis"}) {
    StatusOr<HttpReply> r = http.Get(target);
    ASSERT_TRUE(r.ok() && r->status == 200);
    const json j = json::parse(r->body);
    EXPECT_EQ(j[target == "/v1/apis" ? "apis" : "modules"].size(), 0u) << j.dump();
    ASSERT_TRUE(j.contains("withheld")) << target << ": " << j.dump();
    EXPECT_EQ(j["withheld"]["k"], 5);
    EXPECT_EQ(j["withheld"]["series"], 3) << j.dump();
    EXPECT_EQ(j["withheld"]["modules"], 2) << j.dump();
    EXPECT_EQ(j["withheld"]["machines"], 1) << j.dump();
    EXPECT_EQ(j["withheld"]["setting"], "k_anonymity");
    EXPECT_EQ(r->body.find("libone"), std::string::npos) << "counts only, never names";
  }
  std::string out;
  const int rc = RunCommand(
      "node " + std::string(FIELDPROF_SOURCE_DIR) +
          "/tests/aggregator/ui/below_k.mjs https://127.0.0.1:" + std::to_string(agg.port()) +
          "/ui/ 3 2 1 5 " + std::string(FIELDPROF_BUILD_DIR) + "/ui-screenshots 2>&1",
      &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("checks passed"), std::string::npos) << out;
}

// Runs field_stacks.mjs (Chromium) on `module`'s page of `agg` against
// `want` (its WANT_JSON); expects every check to pass, and gives what it
// printed.
std::string CheckStacksPage(const testing::AggregatorProcess& agg, const TempDir& dir,
                            const std::string& module, const json& want) {
  std::ofstream(dir.File("want.json")) << want.dump();
  std::string out;
  const int rc = RunCommand(
      "node " + std::string(FIELDPROF_SOURCE_DIR) +
          "/tests/aggregator/ui/field_stacks.mjs https://127.0.0.1:" + std::to_string(agg.port()) +
          "/ui/ " + module + " " + dir.File("want.json") + " " + std::string(FIELDPROF_BUILD_DIR) +
          "/ui-screenshots 2>&1",
      &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("checks passed"), std::string::npos) << out;
  return out;
}

// A module's field stacks on its page, behind k = 2: two machines send
// the same stacks and each a stack of its own, which the graph does not
// show, not even folded together under the frame both share (that would
// count each machine once per stack: stack_others.h).
TEST(DashboardStacksTest, TheModulePageDrawsItsFieldStacksAndNotOneMachinesOwn) {
  TempDir dir;
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  testing::AggregatorProcess agg(dir, testing::FreePort(), {"--k_anonymity", "2"});
  agg.Start();
  HttpsClient http(agg.Options());
  const std::vector<std::pair<std::string, uint64_t>> shared = {
      {"flame_api;+10;+20", 600000000},
      {"flame_api;+10", 300000000},
      {"flame_api;+30;[libc.so.6]", 100000000}};
  for (int m = 0; m < 2; ++m) {
    wire::Batch b = testing::SimpleBatch(testing::IdOf(70 + m), "libflame.so.1", "flame_api", 1000);
    b.set_machine_key(std::string(15, 'k') + static_cast<char>('0' + m));
    auto stacks = shared;
    // One machine each: withheld.
    stacks.push_back(m == 0 ? std::pair<std::string, uint64_t>{"flame_api;+10;+98", 20000000}
                            : std::pair<std::string, uint64_t>{"flame_api;+10;+99", 30000000});
    for (const auto& [symbol, ns] : stacks) {
      wire::Record* r = b.add_records();
      *r = b.records(0);
      r->mutable_key()->set_symbol(symbol);
      r->mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
      Histogram h;
      h.Record(ns);
      HistogramToWire(h, r->mutable_histogram());
    }
    for (wire::Record& r : *b.mutable_records()) r.set_first_from_machine(true);
    StatusOr<HttpReply> r =
        http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  }
  agg.WaitApplied();
  StatusOr<HttpReply> r = http.Get("/v1/stacks?module=libflame.so.1");
  ASSERT_TRUE(r.ok() && r->status == 200);
  const json s = json::parse(r->body);
  EXPECT_EQ(s["total_ns"], 2000000000u) << s.dump();  // the shared stacks, both machines'
  EXPECT_EQ(s["stacks"].size(), 3u) << s.dump();
  EXPECT_EQ(r->body.find("+99"), std::string::npos) << s.dump();
  EXPECT_EQ(r->body.find("+98"), std::string::npos) << s.dump();
  EXPECT_EQ(r->body.find("[other]"), std::string::npos) << s.dump();
  json want = {{"root", "flame_api"},
               {"root_ns", 2000000000u},
               {"frames", {"+10", "+20", "+30", "[libc.so.6]"}},
               {"absent", {"+98", "+99", "[other]"}},
               {"zoom", "+10"}};
  CheckStacksPage(agg, dir, "libflame.so.1", want);
}

// A big kept /v1/stacks answer goes gzipped to whom takes gzip (Chromium
// does) through the real server: the same sums as the plain answer, and
// the page draws it.
TEST(DashboardStacksTest, AKeptStacksAnswerGoesGzippedAndThePageDrawsIt) {
  TempDir dir;
  ASSERT_TRUE(testing::MakeCert(dir.path()));
  testing::AggregatorProcess agg(dir, testing::FreePort(), {"--k_anonymity", "1"});
  agg.Start();
  HttpsClient http(agg.Options());
  wire::Batch b = testing::SimpleBatch(testing::IdOf(90), "libgz.so.1", "gz_api", 1000);
  b.set_machine_key(std::string(16, 'g'));
  uint64_t total = 0;
  for (int i = 0; i < 300; ++i) {
    wire::Record* r = b.add_records();
    *r = b.records(0);
    r->mutable_key()->set_symbol("gz_api;gz_fn_" + std::to_string(i));
    r->mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
    Histogram h;
    h.Record(1000000 * (i + 1));
    total += 1000000 * (i + 1);
    HistogramToWire(h, r->mutable_histogram());
  }
  StatusOr<HttpReply> posted =
      http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
  ASSERT_TRUE(posted.ok() && posted->status == 200);
  agg.WaitApplied();
  // The page's question (limit=100000), plain for a client that does not
  // say it takes gzip.
  const std::string target = "/v1/stacks?module=libgz.so.1&limit=100000";
  StatusOr<HttpReply> plain = http.Get(target);
  ASSERT_TRUE(plain.ok() && plain->status == 200);
  ASSERT_EQ(plain->body.rfind("{", 0), 0u);
  EXPECT_EQ(json::parse(plain->body)["stacks"].size(), 300u);
  HttpReply z;
  ASSERT_TRUE(WaitUntil([&] {
    StatusOr<HttpReply> r = http.Get(target, {{"Accept-Encoding", "gzip, deflate, br"}});
    if (!r.ok() || r->status != 200) return false;
    z = *r;
    return z.body.rfind("\x1f\x8b", 0) == 0;
  }));
  EXPECT_EQ(testing::Gunzip(z.body, 1 << 24), plain->body);
  EXPECT_LT(z.body.size() * 3, plain->body.size());
  // Chromium asks for gzip as every browser does.
  json want = {
      {"root", "gz_api"},        {"root_ns", total},    {"frames", {"gz_fn_299", "gz_fn_298"}},
      {"absent", json::array()}, {"zoom", "gz_fn_299"}, {"gzip", true}};
  const std::string out = CheckStacksPage(agg, dir, "libgz.so.1", want);
  EXPECT_NE(out.find("Content-Encoding \"gzip\""), std::string::npos) << out;
}

}  // namespace
}  // namespace fieldprof
