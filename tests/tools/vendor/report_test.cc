// fieldprof report, the real binary on a snapshot cache of known
// histograms: every figure equals the one computed straight from the stored
// histograms; the filters (version, platform, namespace) pick the right
// series; CSV (Python's csv), JSON and the HTML page parse, the page is
// self-contained and escapes every name; Markdown has a row per API.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/net/https_client.h"
#include "common/stacks/cxx_names.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"
#include "tests/tools/snapshot_fixture.h"
#include "tools/shared/format.h"

namespace fieldprof {
namespace {

using json = nlohmann::json;
using testing::Cache;
using testing::MakeRecord;
using testing::RunCommand;
using testing::Spread;
using testing::TempDir;

const std::string kCli = FIELDPROF_CLI_BIN;
const char* const kModule = "libdemo.so.1";

const std::vector<std::string> kSymbols = {
    "_ZNSt6vectorIiSaIiEE9push_backERKi",  // std::vector<int, ...>::push_back(int const&)
    "_ZN12_GLOBAL__N_16Parser5parseEv",    // (anonymous namespace)::Parser::parse()
    "_ZZN2ns3fooEvENKUliE_clEi",           // ns::foo()::{lambda(int)#1}::operator()(int) const
    "_ZN2nsltERKNS_1AES2_",                // ns::operator<(ns::A const&, ns::A const&)
    "_ZN2ns1A3barEv",                      // ns::A::bar()
    "demo_c_function",
};

struct Fixture {
  std::vector<wire::Record> records;
  // symbol -> metric -> the histogram every series sums to, per filter.
  std::map<std::string, Histogram> wall_all, wall_v1, wall_fam25, alloc_all;
  std::map<std::string, uint64_t> runs_all;
};

Fixture MakeFixture() {
  Fixture f;
  for (size_t i = 0; i < kSymbols.size(); ++i) {
    const std::string& s = kSymbols[i];
    for (const std::string version : {"v1", "v2"}) {
      for (uint32_t family : {25u, 23u}) {
        const uint64_t lo = 100 * (i + 1) + (version == "v2" ? 50 : 0) + family;
        const int n = 200 + 50 * static_cast<int>(i) + (family == 25 ? 30 : 0);
        Histogram wall = Spread(lo, lo * 8, n);
        wire::Record r = MakeRecord(kModule, s, wire::METRIC_WALL_TIME_NS, wall, 10 + i, family);
        r.mutable_key()->set_module_version(version);
        r.set_resolution_ns(9);
        f.records.push_back(r);
        f.wall_all[s].Merge(wall);
        f.runs_all[s] += 10 + i;
        if (version == "v1") f.wall_v1[s].Merge(wall);
        if (family == 25) f.wall_fam25[s].Merge(wall);
        Histogram alloc = Spread(16 * (i + 1), 64 * (i + 1), n);
        wire::Record a =
            MakeRecord(kModule, s, wire::METRIC_ALLOC_BYTES_INCLUSIVE, alloc, 10 + i, family);
        a.mutable_key()->set_module_version(version);
        f.records.push_back(a);
        f.alloc_all[s].Merge(alloc);
      }
    }
  }
  // Another module, which no report of libdemo may show.
  f.records.push_back(
      MakeRecord("libother.so.3", "other_api", wire::METRIC_WALL_TIME_NS, Spread(10, 20, 5000), 4));
  return f;
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = MakeFixture();
    Cache(dir_.File("cache")).Write(1, fixture_.records);
  }
  std::string Report(const std::string& flags, int* rc = nullptr) {
    std::string out;
    const int r = RunCommand(kCli + " report --module " + kModule + " --cache " +
                                 dir_.File("cache") + " " + flags + " 2>&1",
                             &out);
    if (rc != nullptr) *rc = r;
    return out;
  }
  static double Total(const Histogram& h) { return h.Mean() * static_cast<double>(h.count()); }

  TempDir dir_;
  Fixture fixture_;
};

TEST_F(ReportTest, JsonFiguresEqualTheStoredHistograms) {
  int rc = 0;
  const std::string out = Report("--format json", &rc);
  ASSERT_EQ(rc, 0) << out;
  const json j = json::parse(out);
  ASSERT_EQ(j["apis"].size(), kSymbols.size()) << out;
  double module_total = 0;
  for (const auto& [s, h] : fixture_.wall_all) module_total += Total(h);
  double previous = 1e300;
  for (const json& a : j["apis"]) {
    const std::string s = a["symbol"];
    const Histogram& h = fixture_.wall_all.at(s);
    const HistogramStats st = h.Stats();
    const json& w = a["metrics"]["wall_time_ns"];
    EXPECT_EQ(a["calls"].get<uint64_t>(), h.count()) << s;
    EXPECT_EQ(a["runs"].get<uint64_t>(), fixture_.runs_all.at(s)) << s;
    EXPECT_DOUBLE_EQ(w["mean"].get<double>(), st.mean) << s;
    EXPECT_DOUBLE_EQ(w["sd"].get<double>(), st.stddev) << s;
    EXPECT_DOUBLE_EQ(w["p50"].get<double>(), st.p50) << s;
    EXPECT_DOUBLE_EQ(w["p90"].get<double>(), st.p90) << s;
    EXPECT_DOUBLE_EQ(w["p99"].get<double>(), st.p99) << s;
    EXPECT_NEAR(w["share"].get<double>(), Total(h) / module_total, 1e-12) << s;
    EXPECT_DOUBLE_EQ(a["metrics"]["alloc_bytes_inclusive"]["mean"].get<double>(),
                     fixture_.alloc_all.at(s).Mean())
        << s;
    EXPECT_EQ(a["demangled"], Demangle(s));
    // Ranked by share.
    EXPECT_LE(w["share"].get<double>(), previous);
    previous = w["share"].get<double>();
  }
  // Scopes: ns holds three APIs, and its share is theirs.
  bool seen_ns = false;
  for (const json& sc : j["scopes"]) {
    if (sc["scope"] != "ns") continue;
    seen_ns = true;
    EXPECT_EQ(sc["apis"], 3);
    double ns_total = 0;
    for (const std::string s :
         {"_ZZN2ns3fooEvENKUliE_clEi", "_ZN2nsltERKNS_1AES2_", "_ZN2ns1A3barEv"})
      ns_total += Total(fixture_.wall_all.at(s));
    EXPECT_NEAR(sc["wall_time_share"].get<double>(), ns_total / module_total, 1e-12);
  }
  EXPECT_TRUE(seen_ns) << out;
}

TEST_F(ReportTest, TextSaysWhatWeighsAndGroupsByScope) {
  int rc = 0;
  const std::string out = Report("--top 3", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.rfind("libdemo.so.1: 6 APIs", 0), 0u) << out;
  EXPECT_NE(out.find("call-weighted"), std::string::npos) << out;
  EXPECT_NE(out.find("... 3 more (--top)"), std::string::npos) << out;
  EXPECT_NE(out.find("by C++ namespace and class"), std::string::npos) << out;
  EXPECT_EQ(out.find("other_api"), std::string::npos) << out;
}

TEST_F(ReportTest, FiltersPickTheirSeries) {
  int rc = 0;
  json j = json::parse(Report("--format json --version v1", &rc));
  ASSERT_EQ(rc, 0);
  for (const json& a : j["apis"]) {
    EXPECT_EQ(a["calls"].get<uint64_t>(), fixture_.wall_v1.at(a["symbol"]).count());
    EXPECT_EQ(a["versions"], json::parse(R"(["v1"])"));
  }
  j = json::parse(Report("--format json --platform x86_64/amd/25", &rc));
  ASSERT_EQ(rc, 0);
  for (const json& a : j["apis"]) {
    EXPECT_EQ(a["calls"].get<uint64_t>(), fixture_.wall_fam25.at(a["symbol"]).count());
  }
  j = json::parse(Report("--format json --namespace ns", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(j["apis"].size(), 3u);
  for (const json& a : j["apis"]) EXPECT_EQ(a["scopes"][0], "ns");
  // Errors: no such version, bad platform, ranges without an aggregator.
  Report("--version v9", &rc);
  EXPECT_EQ(rc, 3);
  std::string out = Report("--platform sparc", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("unknown architecture"), std::string::npos) << out;
  out = Report("--from 2026-11-01", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("need --host"), std::string::npos) << out;
}

TEST_F(ReportTest, CsvMarkdownAndHtmlParseAndAgree) {
  int rc = 0;
  const std::string csv_path = dir_.File("r.csv");
  Report("-o " + csv_path, &rc);
  ASSERT_EQ(rc, 0);
  // Python's csv module reads it back: one row per API, the calls of each.
  std::string out;
  ASSERT_EQ(RunCommand("/usr/bin/python3 -c \"import csv,sys; rows=list(csv.DictReader(open('" +
                           csv_path +
                           "'))); print(len(rows)); [print(r['symbol'], r['calls'], "
                           "r['demangled']) for r in rows]\"",
                       &out),
            0)
      << out;
  EXPECT_EQ(out.substr(0, out.find('\n')), std::to_string(kSymbols.size()));
  for (const std::string& s : kSymbols) {
    EXPECT_NE(
        out.find(s + " " + std::to_string(fixture_.wall_all.at(s).count()) + " " + Demangle(s)),
        std::string::npos)
        << s << "\n"
        << out;
  }
  const std::string md = Report("--format md");
  size_t rows = 0;
  for (size_t p = md.find("\n| "); p != std::string::npos; p = md.find("\n| ", p + 1)) ++rows;
  // Header, APIs, the scopes' header, and every scope prefix: std,
  // std::vector, (anonymous namespace), ...::Parser, ns, ns::foo,
  // ns::foo::{lambda(int)#1}, ns::A.
  EXPECT_EQ(rows, 1 + kSymbols.size() + 1 + 8) << md;
  EXPECT_NE(md.find("| ns::foo::{lambda(int)#1} |"), std::string::npos) << md;

  const std::string html_path = dir_.File("r.html");
  Report("-o " + html_path, &rc);
  ASSERT_EQ(rc, 0);
  std::ifstream in(html_path);
  const std::string html(std::istreambuf_iterator<char>(in), {});
  // Well-formed: Python's HTML parser sees every opened element closed, in
  // order (void elements aside).
  const std::string checker =
      "import sys, html.parser\n"
      "VOID={'meta','br','img','input','link','hr'}\n"
      "class P(html.parser.HTMLParser):\n"
      "  def __init__(s): super().__init__(); s.stack=[]; s.bad=[]\n"
      "  def handle_starttag(s,t,a):\n"
      "    if t not in VOID: s.stack.append(t)\n"
      "  def handle_startendtag(s,t,a): pass\n"
      "  def handle_endtag(s,t):\n"
      "    if not s.stack or s.stack[-1]!=t: s.bad.append((t, list(s.stack[-3:])))\n"
      "    else: s.stack.pop()\n"
      "p=P(); p.feed(open(sys.argv[1]).read()); p.close()\n"
      "print('ok' if not p.bad and not p.stack else ('bad', p.bad[:3], p.stack))\n";
  std::ofstream(dir_.File("check.py")) << checker;
  ASSERT_EQ(RunCommand("/usr/bin/python3 " + dir_.File("check.py") + " " + html_path, &out), 0);
  EXPECT_EQ(out, "ok\n");
  // Self-contained, escaped, one histogram per API row.
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("http://") == std::string::npos ||
                html.find("http://") == html.find("http://www.w3.org/2000/svg"),
            true);
  EXPECT_NE(html.find("std::vector&lt;int, std::allocator&lt;int&gt; &gt;::push_back"),
            std::string::npos);
  EXPECT_EQ(html.find("vector<int"), std::string::npos);
  size_t svgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, kSymbols.size());

  // In Chromium, the page kit draws each API's histogram: as many calls in
  // its bars as the API has, a tooltip on each bar; a click on "calls"
  // sorts the rows by it.
  ASSERT_EQ(RunCommand("node " + std::string(FIELDPROF_SOURCE_DIR) +
                           "/tests/tools/vendor/report_page.mjs " + html_path + " " +
                           FIELDPROF_BUILD_DIR + "/ui-screenshots",
                       &out),
            0)
      << out;
  const json page = json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_FALSE(page.is_discarded()) << out;
  ASSERT_EQ(page["rows"].size(), kSymbols.size()) << out;
  for (const json& r : page["rows"]) {
    const std::string symbol = r["symbol"];
    EXPECT_EQ(r["counted"].get<uint64_t>(), fixture_.wall_all.at(symbol).count()) << symbol;
    EXPECT_GE(r["bars"].get<int>(), 1) << symbol;
    EXPECT_EQ(r["marks_left"].get<int>(), 0) << symbol;
    EXPECT_NE(r["tip"].get<std::string>().find(" .. "), std::string::npos) << r;
  }
  std::vector<double> sorted = page["sorted"].get<std::vector<double>>();
  EXPECT_TRUE(std::is_sorted(sorted.begin(), sorted.end())) << page["sorted"];
}

// fieldprof docs: a Markdown and an HTML snippet per API, with the API's
// p50 as the model computes it, its histogram, and the dashboard link.
TEST_F(ReportTest, DocsWritesASnippetPerApi) {
  std::string out;
  const std::string docs = dir_.File("docs");
  ASSERT_EQ(RunCommand(kCli + " docs --module libdemo.so.1 --cache " + dir_.File("cache") + " -o " +
                           docs + " --link https://agg.example/ui/ 2>&1",
                       &out),
            0)
      << out;
  std::ifstream in(docs + "/index.json");
  const json index = json::parse(in);
  ASSERT_EQ(index["apis"].size(), kSymbols.size());
  for (const json& a : index["apis"]) {
    const std::string s = a["symbol"];
    EXPECT_EQ(a["file"], s);  // mangled names are file names as they are
    std::ifstream h(docs + "/" + s + ".html"), m(docs + "/" + s + ".md");
    const std::string html(std::istreambuf_iterator<char>(h), {});
    const std::string md(std::istreambuf_iterator<char>(m), {});
    const HistogramStats st = fixture_.wall_all.at(s).Stats();
    const std::string p50 = tools::FormatMetricValue(wire::METRIC_WALL_TIME_NS, st.p50, 9);
    EXPECT_NE(html.find("p50 " + p50), std::string::npos) << html;
    EXPECT_NE(md.find("p50 " + p50), std::string::npos) << md;
    EXPECT_NE(md.find("(https://agg.example/ui/#api/libdemo.so.1/" + s + ")"), std::string::npos)
        << md;
    EXPECT_NE(html.find("<svg"), std::string::npos);
    EXPECT_NE(html.find(tools::FormatCount(st.count) + " calls"), std::string::npos) << html;
  }
}

// fieldprof diff on two versions of a module: one API made 50% slower, one
// 40% faster, one the same distribution drawn again, one new. Only the
// first two are called changed, each the right way, with the statistics of
// the stored histograms; --fail_on_slower gates; the HTML parses.
TEST(DiffTest, TwoVersionsSlowerFasterAndTheSame) {
  TempDir dir;
  std::mt19937_64 rng(5);
  auto draw = [&](double mu, double scale, int n) {
    std::lognormal_distribution<double> d(mu, 0.5);
    Histogram h;
    for (int i = 0; i < n; ++i) h.Record(static_cast<uint64_t>(scale * d(rng)));
    return h;
  };
  std::vector<wire::Record> records;
  std::map<std::string, Histogram> before, after;
  auto add = [&](const std::string& sym, const std::string& version, const Histogram& h) {
    wire::Record r = MakeRecord("libdiff.so.1", sym, wire::METRIC_WALL_TIME_NS, h, 50);
    r.mutable_key()->set_module_version(version);
    records.push_back(r);
    (version == "v1" ? before : after)[sym] = h;
  };
  add("slowed", "v1", draw(7, 1, 4000));
  add("slowed", "v2", draw(7, 1.5, 4000));
  add("sped", "v1", draw(8, 1, 4000));
  add("sped", "v2", draw(8, 0.6, 4000));
  add("same", "v1", draw(6, 1, 4000));
  add("same", "v2", draw(6, 1, 4000));
  add("newcomer", "v2", draw(6, 1, 4000));
  Cache(dir.File("cache")).Write(1, records);
  const std::string diff =
      kCli + " diff --module libdiff.so.1 --versions v1,v2 --cache " + dir.File("cache") + " ";
  std::string out;
  ASSERT_EQ(RunCommand(diff + "--format json --all", &out), 0) << out;
  const json j = json::parse(out);
  EXPECT_EQ(j["apis_compared"], 3);
  EXPECT_EQ(j["slower"], 1);
  EXPECT_EQ(j["faster"], 1);
  EXPECT_EQ(j["only_after"], json::parse(R"(["newcomer"])"));
  std::map<std::string, std::string> verdict;
  for (const json& a : j["apis"]) {
    const std::string s = a["symbol"];
    verdict[s] = a["verdict"];
    EXPECT_DOUBLE_EQ(a["before"].get<double>(), before.at(s).Mean()) << s;
    EXPECT_DOUBLE_EQ(a["after"].get<double>(), after.at(s).Mean()) << s;
    EXPECT_DOUBLE_EQ(a["change"].get<double>(), after.at(s).Mean() / before.at(s).Mean() - 1) << s;
  }
  EXPECT_EQ(verdict["slowed"], "slower");
  EXPECT_EQ(verdict["sped"], "faster");
  EXPECT_EQ(verdict["same"], "same");
  EXPECT_EQ(RunCommand(diff + "--fail_on_slower > /dev/null", &out), 1);
  EXPECT_EQ(RunCommand(diff + "--versions v1,v1 --fail_on_slower", &out), 0) << out;
  ASSERT_EQ(RunCommand(diff + "-o " + dir.File("d.html"), &out), 0) << out;
  std::ifstream in(dir.File("d.html"));
  const std::string html(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(html.find("<tr class=\"slower\">"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"faster\">"), std::string::npos);
  // The platform filter applies (the records are of family 25).
  ASSERT_EQ(RunCommand(diff + "--platform x86_64/amd/25 --format json", &out), 0) << out;
  EXPECT_EQ(json::parse(out)["apis_compared"], 3);
  EXPECT_EQ(RunCommand(diff + "--platform x86_64/amd/23 2>&1", &out), 3) << out;
  EXPECT_EQ(RunCommand(diff + "--versions v1 2>&1", &out), 2);
  EXPECT_NE(out.find("BEFORE,AFTER"), std::string::npos) << out;
}

// The same data posted to the real aggregator: GET /v1/module serves it,
// the report from there equals the report from the cache, and a vendor's
// module needs the vendor's token (401 and no data without it), while other
// modules and the agents' endpoints stay open.
// Modules keyed by package version (as the agent keys Debian's): diff and
// report take the version as people write it, or a build id's first
// digits, and show "1:1.3-1 (bbbbbbbb)".
TEST(DiffTest, PackageVersionsAreAskedForAndShownReadably) {
  TempDir dir;
  const std::string a = "1:1.2.13.dfsg-1_aaaaaaaa00000001", b = "1:1.3-1_bbbbbbbb00000002";
  std::vector<wire::Record> records;
  for (const std::string& v : {a, b}) {
    wire::Record r = MakeRecord("libz.so.1", "deflate", wire::METRIC_WALL_TIME_NS,
                                Spread(1000, v == a ? 2000 : 4000, 3000), 40);
    r.mutable_key()->set_module_version(v);
    records.push_back(r);
  }
  Cache(dir.File("cache")).Write(1, records);
  const std::string base = kCli + " diff --module libz.so.1 --cache " + dir.File("cache");
  std::string by_version, by_id;
  ASSERT_EQ(RunCommand(base + " --versions 1:1.2.13.dfsg-1,1:1.3-1 2>&1", &by_version), 0)
      << by_version;
  EXPECT_NE(by_version.find("libz.so.1: 1:1.2.13.dfsg-1 (aaaaaaaa) -> 1:1.3-1 (bbbbbbbb)"),
            std::string::npos)
      << by_version;
  EXPECT_NE(by_version.find("deflate"), std::string::npos) << by_version;
  ASSERT_EQ(RunCommand(base + " --versions aaaaaaaa,bbbbbbbb 2>&1", &by_id), 0) << by_id;
  EXPECT_EQ(by_id, by_version);
  std::string none;
  EXPECT_EQ(RunCommand(base + " --versions 1:1.2.13,1:1.3-1 2>&1", &none), 3) << none;
  std::string report;
  ASSERT_EQ(RunCommand(kCli + " report --module libz.so.1 --cache " + dir.File("cache") + " 2>&1",
                       &report),
            0)
      << report;
  EXPECT_NE(report.find("versions: 1:1.2.13.dfsg-1 (aaaaaaaa), 1:1.3-1 (bbbbbbbb)"),
            std::string::npos)
      << report;
  ASSERT_EQ(
      RunCommand(kCli + " report --module libz.so.1 --version 1:1.3-1 --format json --cache " +
                     dir.File("cache") + " 2>&1",
                 &report),
      0)
      << report;
  EXPECT_EQ(json::parse(report)["versions"], json::array({b})) << report;  // JSON keeps the key
}

TEST_F(ReportTest, FromAnAggregatorWithVendorTokens) {
  ASSERT_TRUE(testing::MakeCert(dir_.path()));
  const std::string token = "acme-0123456789abcdef";
  std::ofstream(dir_.File("vendors"))
      << "# name token patterns\nacme " << token << " libdemo.so*,libacme*\n";
  testing::AggregatorProcess agg(dir_, testing::FreePort(),
                                 {"--vendors_file", dir_.File("vendors")});
  agg.Start();
  wire::Batch b;
  b.set_schema_version(kSchemaVersion);
  b.set_batch_id(std::string(16, 'r'));
  b.set_created_unix_ms(1795392000000);
  b.mutable_client_platform()->set_os(wire::OS_LINUX);
  b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
  b.mutable_client_platform()->set_cpu_vendor(wire::CPU_VENDOR_AMD);
  b.mutable_client_platform()->set_cpu_family(25);
  for (const wire::Record& r : fixture_.records) *b.add_records() = r;
  HttpsClient http(agg.Options());
  StatusOr<HttpReply> posted =
      http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
  ASSERT_TRUE(posted.ok() && posted->status == 200) << (posted.ok() ? posted->body : "");
  agg.WaitApplied();
  const std::string flags =
      " --host 127.0.0.1 --port " + std::to_string(agg.port()) + " --ca " + dir_.File("cert.pem");
  std::string remote, local;
  ASSERT_EQ(RunCommand(kCli + " report --module libdemo.so.1 --format json --token " + token +
                           flags + " 2>&1",
                       &remote),
            0)
      << remote;
  local = Report("--format json");
  json r = json::parse(remote), l = json::parse(local);
  ASSERT_EQ(r["apis"].size(), l["apis"].size());
  for (size_t i = 0; i < r["apis"].size(); ++i) {
    EXPECT_EQ(r["apis"][i]["symbol"], l["apis"][i]["symbol"]);
    EXPECT_EQ(r["apis"][i]["calls"], l["apis"][i]["calls"]);
    EXPECT_EQ(r["apis"][i]["metrics"], l["apis"][i]["metrics"]) << r["apis"][i]["symbol"];
  }
  // Without the token, or with another: 401, no data.
  for (const std::string& bad : {std::string(""), std::string(" --token wrong-token-0123456789")}) {
    std::string out;
    EXPECT_EQ(
        RunCommand(kCli + " report --module libdemo.so.1 --format json" + bad + flags + " 2>&1",
                   &out),
        1);
    EXPECT_NE(out.find("401"), std::string::npos) << out;
    EXPECT_EQ(out.find("push_back"), std::string::npos) << out;
  }
  StatusOr<HttpReply> raw = http.Get("/v1/module?module=libdemo.so.1");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->status, 401);
  EXPECT_EQ(raw->body.find("_ZN"), std::string::npos) << raw->body;
  // Another module is open; so are the agents' endpoints.
  StatusOr<HttpReply> other = http.Get("/v1/module?module=libother.so.3");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 200) << other->body;
  EXPECT_NE(other->body.find("other_api"), std::string::npos);
  StatusOr<HttpReply> config = http.Get("/v1/config");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->status, 200);
  // The token is never in the log.
  std::ifstream log(dir_.File("aggregator.log"));
  const std::string text(std::istreambuf_iterator<char>(log), {});
  EXPECT_EQ(text.find(token), std::string::npos) << text;
}

}  // namespace
}  // namespace fieldprof
