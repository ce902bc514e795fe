// fieldprof lsp, run as the editor runs it: the real binary on
// pipes, speaking framed JSON-RPC, over a snapshot cache written here with
// the cache's own writer. The figures it shows are checked against the
// statistics of the values recorded. A last test drives it from Neovim.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/snapshot/snapshot_cache.h"
#include "common/snapshot/snapshot_index.h"
#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"
#include "tests/tools/ide/lsp_client.h"
#include "tests/tools/snapshot_fixture.h"
#include "tools/ide/source.h"
#include "tools/shared/format.h"

namespace fieldprof {
namespace {

using json = nlohmann::json;
using testing::Cache;
using testing::LspClient;
using testing::MakeRecord;
using testing::Spread;
using testing::TempDir;

class LspTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = std::make_unique<Cache>(dir_.File("cache"));
    prepare_ = Spread(4000, 20000, 5000);  // 4..20 us
    deflate_ = Spread(30000, 90000, 3000);
    cheap_ = Spread(20, 60, 9000);     // under the 1 us default threshold
    rare_ = Spread(50000, 60000, 12);  // too few calls for a lens
    Histogram alloc;
    for (int i = 0; i < 3000; ++i) alloc.Record(4096);
    records_ = {
        MakeRecord("libsqlite3.so.0", "sqlite3_prepare_v2", wire::METRIC_WALL_TIME_NS, prepare_,
                   80),
        MakeRecord("libz.so.1", "deflate", wire::METRIC_WALL_TIME_NS, deflate_, 40),
        MakeRecord("libz.so.1", "deflate", wire::METRIC_ALLOC_BYTES_INCLUSIVE, alloc, 40),
        MakeRecord("libz.so.1", "compress", wire::METRIC_WALL_TIME_NS, Spread(8000, 9000, 2000),
                   30),
        MakeRecord("libfoo.so.2", "compress", wire::METRIC_WALL_TIME_NS,
                   Spread(100000, 200000, 5000), 60),
        MakeRecord("libc.so.6", "strlen", wire::METRIC_WALL_TIME_NS, cheap_, 500),
        MakeRecord("libbar.so.1", "bar_rare", wire::METRIC_WALL_TIME_NS, rare_, 3),
    };
    cache_->Write(7, records_);
  }

  // A started client, kept until the test ends; TearDown checks that
  // nothing but frames came on its stdout and nothing hung.
  LspClient* Start(const json& init_options = json::object(),
                   const json& capabilities = json::object()) {
    auto* c = new LspClient(std::vector<std::string>{FIELDPROF_CLI_BIN, "lsp", "--cache",
                                                     cache_->dir(), "--refresh_ms", "100"});
    json r = c->Call("initialize", {{"processId", getpid()},
                                    {"rootUri", nullptr},
                                    {"capabilities", capabilities},
                                    {"initializationOptions", init_options}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    c->Notify("initialized", json::object());
    EXPECT_TRUE(c->AwaitLog("index of"));
    clients_.emplace_back(c);
    return c;
  }
  void TearDown() override {
    for (const auto& c : clients_) EXPECT_EQ(c->problem, "");
  }

  static json Pos(int line, int ch) { return {{"line", line}, {"character", ch}}; }
  static json Doc(const std::string& uri) { return {{"uri", uri}}; }
  void Open(LspClient& c, const std::string& uri, const std::string& text) {
    c.Notify(
        "textDocument/didOpen",
        {{"textDocument", {{"uri", uri}, {"languageId", "c"}, {"version", 1}, {"text", text}}}});
  }
  std::string HoverText(LspClient& c, const std::string& uri, int line, int ch) {
    json r =
        c.Call("textDocument/hover", {{"textDocument", Doc(uri)}, {"position", Pos(line, ch)}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    if (!r.contains("result") || r["result"].is_null()) return "";
    return r["result"]["contents"]["value"];
  }

  TempDir dir_;
  std::unique_ptr<Cache> cache_;
  Histogram prepare_, deflate_, cheap_, rare_;
  std::vector<wire::Record> records_;
  std::vector<std::unique_ptr<LspClient>> clients_;
};

const char kSource[] =
    "#include <sqlite3.h>\n"                                          // 0
    "#include <zlib.h>\n"                                             // 1
    "int f(sqlite3 *db, const char *sql, z_stream *zs) {\n"           // 2
    "  sqlite3_stmt *st;\n"                                           // 3
    "  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);\n"        // 4
    "  rc += deflate(zs, Z_FINISH); /* deflate(x) in a comment */\n"  // 5
    "  rc += (int)strlen(sql) + bar_rare(1);\n"                       // 6
    "  const char *s = \"compress(\";\n"                              // 7
    "  return rc + compress(0, 0, 0, 0);\n"                           // 8
    "}\n";

TEST_F(LspTest, InitializeAnnouncesTheFeaturesAndShutdownThenExitEndsWithZero) {
  LspClient c({FIELDPROF_CLI_BIN, "lsp", "--cache", cache_->dir()});
  // Before initialize: ServerNotInitialized.
  json early =
      c.Call("textDocument/hover", {{"textDocument", Doc("file:///x.c")}, {"position", Pos(0, 0)}});
  EXPECT_EQ(early["error"]["code"], -32002) << early.dump();
  json r = c.Call("initialize", {{"processId", nullptr}, {"capabilities", json::object()}});
  const json& caps = r["result"]["capabilities"];
  EXPECT_EQ(caps["hoverProvider"], true);
  EXPECT_TRUE(caps.contains("codeLensProvider"));
  EXPECT_TRUE(caps.contains("inlayHintProvider"));
  EXPECT_EQ(caps["textDocumentSync"]["change"], 2);  // incremental
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "fieldprof");
  json s = c.Call("shutdown", nullptr);
  EXPECT_TRUE(s.contains("result") && s["result"].is_null()) << s.dump();
  json after =
      c.Call("textDocument/hover", {{"textDocument", Doc("file:///x.c")}, {"position", Pos(0, 0)}});
  EXPECT_EQ(after["error"]["code"], -32600);
  c.Notify("exit", nullptr);
  EXPECT_EQ(c.Wait(), 0);
  EXPECT_EQ(c.problem, "");
}

TEST_F(LspTest, ExitWithoutShutdownOrAClosedInputEndsWithOne) {
  {
    LspClient c({FIELDPROF_CLI_BIN, "lsp", "--cache", cache_->dir()});
    c.Call("initialize", {{"capabilities", json::object()}});
    c.Notify("exit", nullptr);
    EXPECT_EQ(c.Wait(), 1);
  }
  LspClient c({FIELDPROF_CLI_BIN, "lsp", "--cache", cache_->dir()});
  c.Call("initialize", {{"capabilities", json::object()}});
  EXPECT_EQ(c.Exit(), 1);
  EXPECT_EQ(c.problem, "");
}

TEST_F(LspTest, HoverShowsTheFieldFiguresOfTheRecordedValues) {
  auto c = Start();
  Open(*c, "file:///src/a.c", kSource);
  const std::string md = HoverText(*c, "file:///src/a.c", 4, 14);  // inside sqlite3_prepare_v2
  const HistogramStats st = prepare_.Stats();
  using tools::FormatNanos;
  EXPECT_NE(md.find("### sqlite3_prepare_v2"), std::string::npos) << md;
  EXPECT_EQ(md.find("####"), std::string::npos) << "clangd: headings of level 3 at most\n" << md;
  EXPECT_NE(md.find("\n---\n"), std::string::npos) << "a ruler between parts\n" << md;
  EXPECT_NE(md.find("`libsqlite3.so.0`"), std::string::npos) << md;
  EXPECT_NE(md.find("| " + FormatNanos(st.p50) + " | " + FormatNanos(st.p90) + " | " +
                    FormatNanos(st.p99) + " | " + FormatNanos(st.mean) + " ± " +
                    FormatNanos(st.stddev) + " |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("5,000 calls in 80 runs · 1 platform (x86_64/amd/25)"), std::string::npos)
      << md;
  EXPECT_NE(md.find("```text\n"), std::string::npos) << md;
  EXPECT_NE(md.find("\u2588"), std::string::npos) << md;
  EXPECT_NE(md.find("Field snapshot 7 of 2026-11-23"), std::string::npos) << md;
  // The bars: one row per bucket from 4 us to 20 us; the counts sum to the calls.
  uint64_t rows_total = 0;
  for (int i = 0; i < kNumBuckets; ++i) rows_total += prepare_.bucket(i).count;
  EXPECT_EQ(rows_total, 5000u);
  EXPECT_NE(md.find(tools::FormatCount(prepare_.bucket(BucketIndex(8192)).count)),
            std::string::npos);

  // Allocation per call (deflate: 4 KiB in 1 allocation... counted as bytes).
  const std::string d = HoverText(*c, "file:///src/a.c", 5, 10);
  EXPECT_NE(d.find("### deflate"), std::string::npos) << d;
  EXPECT_NE(d.find("Per call: " + tools::FormatBytes(4096) + " allocated"), std::string::npos) << d;
  EXPECT_EQ(d.find("I/O"), std::string::npos) << "no I/O data: not shown as 0\n" << d;
  EXPECT_EQ(md.find("Per call"), std::string::npos) << "no allocation or I/O data\n" << md;

  // Names without field data, keywords, comments' words that are not APIs: nothing.
  EXPECT_EQ(HoverText(*c, "file:///src/a.c", 4, 32), "");   // sql
  EXPECT_EQ(HoverText(*c, "file:///src/a.c", 2, 1), "");    // int
  EXPECT_EQ(HoverText(*c, "file:///nowhere.c", 0, 0), "");  // a document never opened
}

// Where an API's time goes inside its library, from the field stacks
// rooted at it (docs/field-stacks.md): the frames with the most of it and
// their shares, under the figures; none for an API without stacks.
TEST_F(LspTest, HoverShowsWhereAnApisTimeGoesInsideTheLibrary) {
  auto stack = [](const std::string& symbol, uint64_t ns) {
    Histogram h;
    h.Record(ns);
    wire::Record r = MakeRecord("libsqlite3.so.0", symbol, wire::METRIC_STACK_CPU_NS, h, 1);
    r.set_machine_count(3);
    return r;
  };
  records_.push_back(stack("sqlite3_prepare_v2;sqlite3LockAndPrepare;+1a0;+2b0", 600));
  records_.push_back(stack("sqlite3_prepare_v2;sqlite3LockAndPrepare;+1a0", 300));
  records_.push_back(stack("sqlite3_prepare_v2;+3c0;[libc.so.6]", 100));
  records_.push_back(stack("sqlite3_prepare_v2x;+999", 5000));  // another API, same start
  cache_->Write(8, records_);
  auto c = Start();
  Open(*c, "file:///src/a.c", kSource);
  const std::string md = HoverText(*c, "file:///src/a.c", 4, 14);
  EXPECT_NE(md.find("Inside libsqlite3.so.0 (field stacks, 1.00 us of sampled CPU): "
                    "`+1a0` 90% · `sqlite3LockAndPrepare` 90% · `+2b0` 60%"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("+999"), std::string::npos) << md;
  const std::string d = HoverText(*c, "file:///src/a.c", 5, 10);  // deflate: no stacks
  EXPECT_EQ(d.find("Inside"), std::string::npos) << d;
}

TEST_F(LspTest, TheIncludesDecideWhichModuleANameBelongsTo) {
  auto c = Start();
  Open(*c, "file:///src/a.c", kSource);
  std::string md = HoverText(*c, "file:///src/a.c", 8, 16);  // compress, <zlib.h> included
  EXPECT_NE(md.find("`libz.so.1` (by this source's includes)"), std::string::npos) << md;
  EXPECT_NE(md.find("Also in: `libfoo.so.2`"), std::string::npos) << md;
  // Without the include, both modules are shown and the hover says why.
  Open(*c, "file:///src/b.c", "int g(void) { return compress(0, 0, 0, 0); }\n");
  md = HoverText(*c, "file:///src/b.c", 0, 23);
  EXPECT_NE(md.find("Found in 2 modules"), std::string::npos) << md;
  EXPECT_NE(md.find("`libz.so.1`"), std::string::npos) << md;
  EXPECT_NE(md.find("`libfoo.so.2`"), std::string::npos) << md;
  // <foo/foo.h> names libfoo.
  Open(*c, "file:///src/c.c",
       "#include \"foo/foo.h\"\nint g(void) { return compress(0, 0, 0, 0); }\n");
  md = HoverText(*c, "file:///src/c.c", 1, 23);
  EXPECT_NE(md.find("`libfoo.so.2` (by this source's includes)"), std::string::npos) << md;
}

TEST_F(LspTest, LensesAndHintsOnlyWhereTheDataIsSolidAndAboveTheThreshold) {
  auto c = Start();
  Open(*c, "file:///src/a.c", kSource);
  json lenses =
      c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///src/a.c")}})["result"];
  std::map<int, std::string> by_line;
  for (const json& l : lenses) by_line[l["range"]["start"]["line"]] = l["command"]["title"];
  const HistogramStats st = prepare_.Stats();
  ASSERT_EQ(by_line.count(4), 1u) << lenses.dump();
  EXPECT_EQ(by_line[4].rfind("sqlite3_prepare_v2 ≈ " + tools::FormatNanos(st.p50) + " p50", 0), 0u)
      << by_line[4];
  EXPECT_EQ(by_line.count(5), 1u) << "deflate, once (not the one in the comment)";
  EXPECT_EQ(by_line.count(6), 0u) << "strlen is under the threshold, bar_rare has 12 calls";
  EXPECT_EQ(by_line.count(7), 0u) << "inside a string literal";
  EXPECT_EQ(by_line.count(8), 1u);
  int on_line5 = 0;
  for (const json& l : lenses) on_line5 += l["range"]["start"]["line"] == 5;
  EXPECT_EQ(on_line5, 1);

  json hints = c->Call("textDocument/inlayHint",
                       {{"textDocument", Doc("file:///src/a.c")},
                        {"range", {{"start", Pos(0, 0)}, {"end", Pos(5, 100)}}}})["result"];
  ASSERT_EQ(hints.size(), 2u) << hints.dump();
  // After the call's closing parenthesis.
  EXPECT_EQ(hints[0]["position"], Pos(4, 53)) << hints.dump();
  EXPECT_EQ(hints[0]["label"], "≈ " + tools::FormatNanos(st.p50) + " p50");

  // Thresholds from the editor's settings: strlen's 9,000 calls at ~40 ns now qualify.
  c->Notify("workspace/didChangeConfiguration",
            {{"settings", {{"fieldprof", {{"minP50Ns", 0}, {"minRuns", 1}, {"minCalls", 10}}}}}});
  lenses = c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///src/a.c")}})["result"];
  int on_line6 = 0;
  for (const json& l : lenses) on_line6 += l["range"]["start"]["line"] == 6;
  EXPECT_EQ(on_line6, 2) << lenses.dump();
  // A number out of range is ignored, not cast: the lenses stay.
  c->Notify("workspace/didChangeConfiguration",
            {{"settings", {{"fieldprof", {{"minCalls", 1e300}, {"minRuns", -5}}}}}});
  EXPECT_EQ(c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///src/a.c")}})["result"],
            lenses);
  c->Notify("workspace/didChangeConfiguration",
            {{"settings", {{"fieldprof", {{"codeLens", false}}}}}});
  lenses = c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///src/a.c")}})["result"];
  EXPECT_TRUE(lenses.empty());
}

TEST_F(LspTest, InitializationOptionsSetTheThresholds) {
  auto c = Start({{"minCalls", 100000}});
  Open(*c, "file:///src/a.c", kSource);
  json lenses =
      c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///src/a.c")}})["result"];
  EXPECT_TRUE(lenses.empty()) << lenses.dump();
}

// A series the aggregator marked suspect (its latest day moved far, from
// few machines) says so beside the figure: in the hover, the lens and the
// hint; the others do not.
TEST_F(LspTest, ASuspectFigureSaysSoBesideIt) {
  const std::string why =
      "2026-11-22: mean +200% against its history, from 60 runs on 1 machines (60.0 runs a "
      "machine; 2.0 before)";
  records_[1].set_suspect(why);  // deflate's wall time
  cache_->Write(8, records_);
  auto c = Start();
  Open(*c, "file:///src/a.c", kSource);
  const std::string d = HoverText(*c, "file:///src/a.c", 5, 10);
  EXPECT_NE(d.find("⚠ **Suspect:** " + why), std::string::npos) << d;
  EXPECT_EQ(HoverText(*c, "file:///src/a.c", 4, 14).find("Suspect"), std::string::npos);
  json lenses =
      c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///src/a.c")}})["result"];
  std::map<int, std::string> by_line;
  for (const json& l : lenses) by_line[l["range"]["start"]["line"]] = l["command"]["title"];
  EXPECT_NE(by_line[5].find("⚠ suspect"), std::string::npos) << by_line[5];
  EXPECT_EQ(by_line[4].find("suspect"), std::string::npos) << by_line[4];
  json hints =
      c->Call("textDocument/inlayHint", {{"textDocument", Doc("file:///src/a.c")}})["result"];
  int marked = 0;
  for (const json& h : hints)
    marked += h["label"].get<std::string>().find("⚠") != std::string::npos;
  EXPECT_EQ(marked, 1) << hints.dump();
}

TEST_F(LspTest, IncrementalChangesInUtf16PositionsKeepTheTextRight) {
  auto c = Start();
  // Two characters before the call on line 1 take 1 and 2 UTF-16 units.
  Open(*c, "file:///src/u.c", "int x;\n/*é😀*/ int y;\n");
  // Insert a call after "/*é😀*/ " (UTF-16 character 8 of line 1).
  c->Notify(
      "textDocument/didChange",
      {{"textDocument", {{"uri", "file:///src/u.c"}, {"version", 2}}},
       {"contentChanges",
        {{{"range", {{"start", Pos(1, 8)}, {"end", Pos(1, 8)}}}, {"text", "deflate(0, 0); "}}}}});
  // Then replace "int x;" with a second line of text.
  c->Notify(
      "textDocument/didChange",
      {{"textDocument", {{"uri", "file:///src/u.c"}, {"version", 3}}},
       {"contentChanges",
        {{{"range", {{"start", Pos(0, 0)}, {"end", Pos(0, 6)}}}, {"text", "int x;\nint z;"}}}}});
  json lenses =
      c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///src/u.c")}})["result"];
  ASSERT_EQ(lenses.size(), 1u) << lenses.dump();
  EXPECT_EQ(lenses[0]["range"]["start"], Pos(2, 8));
  EXPECT_EQ(lenses[0]["range"]["end"], Pos(2, 15));
  EXPECT_NE(HoverText(*c, "file:///src/u.c", 2, 10).find("### deflate"), std::string::npos);
}

TEST_F(LspTest, BadInputGetsErrorsAndNeverStopsTheServer) {
  auto c = Start();
  json r = c->Call("textDocument/definition", {{"textDocument", Doc("file:///a.c")}});
  EXPECT_EQ(r["error"]["code"], -32601) << r.dump();
  c->Notify("$/setTrace", {{"value", "off"}});                   // an unknown notification: nothing
  c->SendRaw("{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": ");  // cut short
  r = c->Await(nullptr);
  EXPECT_EQ(r["error"]["code"], -32700) << r.dump();
  c->SendRaw("[1, 2]");
  r = c->Await(nullptr);
  EXPECT_EQ(r["error"]["code"], -32600) << r.dump();
  r = c->Call("textDocument/hover", {{"textDocument", 42}});  // wrong types
  EXPECT_EQ(r["error"]["code"], -32602) << r.dump();
  // A request cancelled before it is handled.
  c->Notify("$/cancelRequest", {{"id", 900}});
  c->SendRaw(json{{"jsonrpc", "2.0"},
                  {"id", 900},
                  {"method", "textDocument/codeLens"},
                  {"params", {{"textDocument", Doc("file:///a.c")}}}}
                 .dump());
  r = c->Await(900);
  EXPECT_EQ(r["error"]["code"], -32800) << r.dump();
  // A large document (5 MiB) with a call at its end.
  std::string big;
  while (big.size() < (5u << 20)) big += "int pad_" + std::to_string(big.size()) + " = 1;\n";
  big += "int g(void) { return deflate(0, 0); }\n";
  Open(*c, "file:///big.c", big);
  const int last = static_cast<int>(std::count(big.begin(), big.end(), '\n')) - 1;
  EXPECT_NE(HoverText(*c, "file:///big.c", last, 24).find("### deflate"), std::string::npos);
  // Lenses over a large file with 20,000 call sites, and one minified line
  // of 5,000 nested calls: each found where it is.
  std::string many = "#include <zlib.h>\n";
  for (int i = 0; i < 20000; ++i) many += "/* é */ x += deflate(s, " + std::to_string(i) + ");\n";
  for (int i = 0; i < 5000; ++i) many += "deflate(";
  many += std::string(5000, ')') + ";\n";
  Open(*c, "file:///many.c", many);
  json lenses =
      c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///many.c")}})["result"];
  ASSERT_EQ(lenses.size(), 25000u);
  EXPECT_EQ(lenses[19999]["range"]["start"], Pos(20000, 13));  // é is one UTF-16 unit
  EXPECT_EQ(lenses[20001]["range"]["start"], Pos(20001, 8));
  // Still answering.
  r = c->Call("shutdown", nullptr);
  EXPECT_TRUE(r.contains("result"));
  c->Notify("exit", nullptr);
  EXPECT_EQ(c->Wait(), 0);
}

TEST_F(LspTest, ANewSnapshotIsPickedUpWithoutARestart) {
  json caps = {{"workspace", {{"codeLens", {{"refreshSupport", true}}}}}};
  auto c = Start(json::object(), caps);
  Open(*c, "file:///src/a.c", kSource);
  EXPECT_NE(HoverText(*c, "file:///src/a.c", 4, 14).find("5,000 calls in 80 runs"),
            std::string::npos);
  // The agent stores a newer snapshot: twice the calls.
  Histogram more = prepare_;
  more.Merge(prepare_);
  records_[0] =
      MakeRecord("libsqlite3.so.0", "sqlite3_prepare_v2", wire::METRIC_WALL_TIME_NS, more, 160);
  cache_->Write(8, records_);
  EXPECT_TRUE(c->AwaitLog("snapshot 8"));
  // The client is asked to refresh its lenses.
  bool asked = false;
  for (const json& m : c->seen)
    asked = asked || m.value("method", "") == "workspace/codeLens/refresh";
  EXPECT_TRUE(asked);
  EXPECT_NE(HoverText(*c, "file:///src/a.c", 4, 14).find("10,000 calls in 160 runs"),
            std::string::npos);
}

TEST_F(LspTest, NoSnapshotIsSaidOnceAndHoversStayEmpty) {
  TempDir empty;
  LspClient c({FIELDPROF_CLI_BIN, "lsp", "--cache", empty.File("none")});
  c.Call("initialize", {{"capabilities", json::object()}});
  EXPECT_TRUE(c.AwaitLog("no snapshot in"));
  Open(c, "file:///a.c", kSource);
  json r = c.Call("textDocument/hover",
                  {{"textDocument", Doc("file:///a.c")}, {"position", Pos(4, 14)}});
  EXPECT_TRUE(r["result"].is_null()) << r.dump();
  EXPECT_EQ(c.problem, "");
}

// Editors ask for lenses (and often a hover) right after opening a file,
// and many (Neovim 0.7) never ask again: requests that come before the
// first load wait for it. Initialize, open, hover and codeLens in one
// write, 50 times, each answered with data.
TEST_F(LspTest, RequestsBeforeTheFirstLoadWaitForIt) {
  const std::string uri = "file:///src/a.c";
  for (int round = 0; round < 50; ++round) {
    LspClient c({FIELDPROF_CLI_BIN, "lsp", "--cache", cache_->dir()});
    c.SendTogether({
        {{"jsonrpc", "2.0"},
         {"id", 1},
         {"method", "initialize"},
         {"params", {{"capabilities", json::object()}}}},
        {{"jsonrpc", "2.0"}, {"method", "initialized"}, {"params", json::object()}},
        {{"jsonrpc", "2.0"},
         {"method", "textDocument/didOpen"},
         {"params",
          {{"textDocument",
            {{"uri", uri}, {"languageId", "c"}, {"version", 1}, {"text", kSource}}}}}},
        {{"jsonrpc", "2.0"},
         {"id", 2},
         {"method", "textDocument/hover"},
         {"params", {{"textDocument", Doc(uri)}, {"position", Pos(4, 14)}}}},
        {{"jsonrpc", "2.0"},
         {"id", 3},
         {"method", "textDocument/codeLens"},
         {"params", {{"textDocument", Doc(uri)}}}},
    });
    const json hover = c.Await(2);
    ASSERT_TRUE(hover.contains("result") && hover["result"].is_object())
        << "round " << round << ": " << hover.dump();
    EXPECT_NE(
        hover["result"]["contents"]["value"].get<std::string>().find("### sqlite3_prepare_v2"),
        std::string::npos);
    const json lens = c.Await(3);
    ASSERT_TRUE(lens.contains("result") && lens["result"].is_array()) << lens.dump();
    EXPECT_EQ(lens["result"].size(), 3u) << "round " << round << ": " << lens.dump();
    EXPECT_EQ(c.problem, "");
  }
}

// A cache that does not load within the bound (its manifest a FIFO nobody
// writes: a hung disk): the request is answered without data after
// --load_wait_ms, and a log message says why.
TEST_F(LspTest, ACacheSlowerThanTheBoundIsAnsweredWithoutDataAndSaysWhy) {
  TempDir slow;
  std::filesystem::create_directories(slow.File("cache"));
  ASSERT_EQ(mkfifo(slow.File("cache/manifest.signed").c_str(), 0600), 0);
  LspClient c({FIELDPROF_CLI_BIN, "lsp", "--cache", slow.File("cache"), "--load_wait_ms", "300"});
  c.Call("initialize", {{"capabilities", json::object()}});
  Open(c, "file:///a.c", kSource);
  json r = c.Call("textDocument/hover",
                  {{"textDocument", Doc("file:///a.c")}, {"position", Pos(4, 14)}});
  EXPECT_TRUE(r.contains("result") && r["result"].is_null()) << r.dump();
  EXPECT_TRUE(c.AwaitLog("textDocument/hover answered without field data"));
  EXPECT_TRUE(c.AwaitLog("still loading after 300 ms"));
  // The disk answers: the blocked read gets an empty manifest (a writer
  // opens and closes the FIFO, under a name later reads will not find).
  ASSERT_EQ(rename(slow.File("cache/manifest.signed").c_str(), slow.File("fifo").c_str()), 0);
  const int fd = open(slow.File("fifo").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_TRUE(c.Call("shutdown", json()).contains("result"));
  c.Notify("exit", nullptr);
  EXPECT_EQ(c.Wait(), 0);
}

// Debian's Neovim (0.7) as the editor: its LSP client starts the server,
// shows the hover, the code lenses, and sends an edit incrementally.
TEST_F(LspTest, NeovimShowsHoversAndLenses) {
  if (std::system("command -v nvim > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no nvim (deploy/install-deps.sh installs Debian's neovim)";
  }
  const std::string src = dir_.File("a.c");
  std::ofstream(src) << kSource;
  const std::string out = dir_.File("nvim-out.json");
  const std::string cmd = "cd " + dir_.path() + " && FP_BIN=" + FIELDPROF_CLI_BIN +
                          " FP_CACHE=" + cache_->dir() + " FP_SRC=" + src + " FP_OUT=" + out +
                          " HOME=" + dir_.path() + " XDG_STATE_HOME=" + dir_.File("state") +
                          " timeout 120 nvim --headless -u NONE -i NONE -n -c 'luafile " +
                          FIELDPROF_SOURCE_DIR + "/tests/tools/ide/nvim_lsp.lua' > " +
                          dir_.File("nvim.log") + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  ASSERT_TRUE(in.good()) << "Neovim wrote no result";
  const json r = json::parse(in);
  EXPECT_EQ(r["initialized"], true) << r.dump();
  const std::string hover = r.value("hover", "");
  EXPECT_NE(hover.find("### sqlite3_prepare_v2"), std::string::npos) << r.dump();
  EXPECT_NE(hover.find(tools::FormatNanos(prepare_.Stats().p50)), std::string::npos) << hover;
  EXPECT_EQ(r["hover_on_other_name"], "none");
  std::set<int> lines, lines_after;
  for (const json& l : r["lenses"]) lines.insert(l["line"].get<int>());
  for (const json& l : r["lenses_after_edit"]) lines_after.insert(l["line"].get<int>());
  EXPECT_EQ(lines, (std::set<int>{4, 5, 8})) << r.dump();
  EXPECT_EQ(lines_after, (std::set<int>{4, 5, 6, 9})) << r.dump();
  EXPECT_EQ(r["sync_kind"], 2);
  EXPECT_EQ(r["exit_code"], 0) << "shutdown and exit, as Neovim stops a client";
}

// An instrumentation point's hover (docs/points.md): the field's point_ns
// series of its tag, read by prefix, the segments through the point in a
// table with the statistics of the values recorded, the rest in brief;
// then its lens and inlay hint where the data is solid.
TEST_F(LspTest, APointsHoverShowsTheFieldDurationsOfItsSegments) {
  const Histogram load_parsed_a = Spread(700000, 800000, 600);
  const Histogram load_parsed_b = Spread(750000, 900000, 400);
  const Histogram parsed_load = Spread(30000, 40000, 999);
  const Histogram parse = Spread(300000, 400000, 1000);
  auto point = [](const std::string& module, const std::string& symbol, const Histogram& h,
                  uint64_t runs, const std::string& version) {
    wire::Record r = MakeRecord(module, symbol, wire::METRIC_POINT_NS, h, runs);
    r.mutable_key()->set_module_version(version);
    r.set_machine_count(runs / 2);
    return r;
  };
  records_.push_back(point("main", "startup$load$parsed", load_parsed_a, 6, "b1"));
  records_.push_back(point("main", "startup$load$parsed", load_parsed_b, 4, "b2"));
  records_.push_back(point("main", "startup$parsed$load", parsed_load, 10, "b1"));
  records_.push_back(point("main", "startup$parse", parse, 10, "b1"));
  records_.push_back(point("libfoo.so.2", "startup$load$parsed", Spread(5000, 6000, 50), 3, "1.0"));
  // Not the tag: a longer tag with the same start, and an API named like it.
  records_.push_back(point("main", "startupx$load$parsed", Spread(1, 2, 77), 2, "b1"));
  records_.push_back(MakeRecord("main", "startup", wire::METRIC_WALL_TIME_NS, cheap_, 5));
  cache_->Write(8, records_);
  const std::string src =
      "#include <fieldprof/points.h>\n"            // 0
      "int main() {\n"                             // 1
      "  FP_POINT(\"startup\", \"load\");\n"       // 2
      "  { FP_SCOPE(\"startup\", \"parse\"); }\n"  // 3
      "  FP_POINT_V(\"startup\",\n"                // 4
      "             \"parsed\", 3);\n"             // 5
      "  FP_POINT(\"quiet\", \"x\");\n"            // 6
      "  /* FP_POINT(\"startup\", \"load\") */\n"  // 7
      "  return startup();\n"                      // 8
      "}\n";
  auto c = Start();
  Open(*c, "file:///src/p.c", src);
  using tools::FormatCount;
  using tools::FormatNanos;
  auto row = [&](const std::string& label, const Histogram& h, uint64_t runs) {
    const HistogramStats st = h.Stats();
    return "| " + label + " | " + FormatNanos(st.p50) + " | " + FormatNanos(st.p90) + " | " +
           FormatNanos(st.p99) + " | " + FormatNanos(st.mean) + " | " + FormatCount(st.count) +
           " | " + FormatCount(runs) + " |";
  };
  Histogram both = load_parsed_a;
  both.Merge(load_parsed_b);
  for (int ch : {3, 12, 20, 26}) {  // the macro's name, the tag, the name, its end
    const std::string md = HoverText(*c, "file:///src/p.c", 2, ch);
    EXPECT_NE(md.find("### FP_POINT startup · load — field durations"), std::string::npos)
        << ch << "\n"
        << md;
    EXPECT_NE(md.find("`main` (2 builds)"), std::string::npos) << md;
    EXPECT_NE(md.find(row("load → parsed", both, 10)), std::string::npos) << md;
    EXPECT_NE(md.find(row("parsed → load", parsed_load, 10)), std::string::npos) << md;
    EXPECT_EQ(md.find("| parse (scope)"), std::string::npos) << "not through this point\n" << md;
    EXPECT_NE(
        md.find("Other segments of `startup`: parse (scope) p50 " + FormatNanos(parse.Stats().p50)),
        std::string::npos)
        << md;
    EXPECT_NE(md.find("`libfoo.so.2`"), std::string::npos) << md;
    EXPECT_NE(md.find("Seen on 5+ machines."), std::string::npos) << md;
    EXPECT_EQ(md.find("startupx"), std::string::npos) << md;
    EXPECT_EQ(md.find("| 77 |"), std::string::npos) << md;
    EXPECT_NE(md.find("Field snapshot 8 of"), std::string::npos) << md;
  }
  const std::string scope = HoverText(*c, "file:///src/p.c", 3, 20);
  EXPECT_NE(scope.find("### FP_SCOPE startup · parse"), std::string::npos) << scope;
  EXPECT_NE(scope.find(row("parse (scope)", parse, 10)), std::string::npos) << scope;
  // Over two lines, the _V form.
  const std::string v = HoverText(*c, "file:///src/p.c", 5, 16);
  EXPECT_NE(v.find("### FP_POINT_V startup · parsed"), std::string::npos) << v;
  EXPECT_NE(v.find(row("load → parsed", both, 10)), std::string::npos) << v;
  // A tag without data says so; a comment is not a point; the API hover
  // still answers for a plain name.
  const std::string quiet = HoverText(*c, "file:///src/p.c", 6, 14);
  EXPECT_NE(quiet.find("No field durations for tag `quiet` yet"), std::string::npos) << quiet;
  EXPECT_EQ(HoverText(*c, "file:///src/p.c", 7, 8), "");
  const std::string api = HoverText(*c, "file:///src/p.c", 8, 12);
  EXPECT_NE(api.find("### startup — field cost"), std::string::npos) << api;

  // Lenses and hints where the data is solid (defaults: 1,000 calls in 10
  // runs): the scope's own duration, and the segment that ends at a point
  // (parsed -> load has 999 calls: none at load; libfoo's 50: not chosen).
  json lenses =
      c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///src/p.c")}})["result"];
  std::map<int, std::string> by_line;
  for (const json& l : lenses) by_line[l["range"]["start"]["line"]] = l["command"]["title"];
  EXPECT_EQ(by_line.size(), 2u) << lenses.dump();
  EXPECT_EQ(by_line[3].rfind("startup: parse ≈ " + FormatNanos(parse.Stats().p50) + " p50", 0), 0u)
      << by_line[3];
  EXPECT_EQ(by_line[4].rfind("startup: load → parsed ≈ " + FormatNanos(both.Stats().p50), 0), 0u)
      << by_line[4];
  EXPECT_NE(by_line[4].find("(field, main)"), std::string::npos) << by_line[4];
  json hints = c->Call("textDocument/inlayHint",
                       {{"textDocument", Doc("file:///src/p.c")},
                        {"range", {{"start", Pos(0, 0)}, {"end", Pos(9, 0)}}}})["result"];
  ASSERT_EQ(hints.size(), 2u) << hints.dump();
  EXPECT_EQ(hints[0]["position"], Pos(3, 32)) << "after the scope's parenthesis: " << hints.dump();
  EXPECT_EQ(hints[0]["label"], "≈ " + FormatNanos(parse.Stats().p50) + " p50");
  EXPECT_EQ(hints[1]["position"], Pos(5, 21)) << "closed on another line: after its name";
  EXPECT_EQ(hints[1]["label"], "≈ " + FormatNanos(both.Stats().p50) + " p50 since load");
  c->Notify("workspace/didChangeConfiguration",
            {{"settings", {{"fieldprof", {{"minRuns", 1}, {"minCalls", 10}}}}}});
  lenses = c->Call("textDocument/codeLens", {{"textDocument", Doc("file:///src/p.c")}})["result"];
  by_line.clear();
  for (const json& l : lenses) by_line[l["range"]["start"]["line"]] = l["command"]["title"];
  EXPECT_EQ(by_line[2].rfind("startup: parsed → load ≈ " + FormatNanos(parsed_load.Stats().p50), 0),
            0u)
      << lenses.dump();
}

// The symbol index fieldprof cost reads through (common/snapshot/snapshot_index.h):
// every record of a symbol, none of another; rebuilt when the cache changes
// or its file is damaged, kept in memory when the cache cannot be written.
TEST_F(LspTest, TheSymbolIndexFindsEveryRecordAndFollowsTheCache) {
  SnapshotCache cache(cache_->dir());
  auto records_of = [&](const SnapshotIndex& ix, const std::string& sym) {
    std::vector<std::string> got;
    EXPECT_TRUE(ix.ForEachRecordOf(sym, [&](const wire::Record& r) {
                    got.push_back(r.SerializeAsString());
                    return true;
                  }).ok());
    std::sort(got.begin(), got.end());
    return got;
  };
  auto expected_of = [&](const std::string& sym) {
    std::vector<std::string> want;
    for (const wire::Record& r : records_) {
      if (r.key().symbol() == sym) want.push_back(r.SerializeAsString());
    }
    std::sort(want.begin(), want.end());
    return want;
  };
  bool rebuilt = false;
  StatusOr<SnapshotIndex> ix = SnapshotIndex::Open(cache, &rebuilt);
  ASSERT_TRUE(ix.ok()) << ix.status().ToString();
  EXPECT_TRUE(rebuilt);
  EXPECT_EQ(ix->symbols(), 5u);
  for (const char* sym : {"sqlite3_prepare_v2", "deflate", "compress", "strlen", "bar_rare"}) {
    EXPECT_EQ(records_of(*ix, sym), expected_of(sym)) << sym;
  }
  EXPECT_TRUE(records_of(*ix, "deflat").empty());
  EXPECT_TRUE(records_of(*ix, "zzz").empty());
  // A module's records (fieldprof report reads them so): all of them, none
  // of another module, and module entries are not symbols.
  std::set<std::string> modules;
  for (const wire::Record& r : records_) modules.insert(r.key().module());
  for (const std::string& m : modules) {
    std::vector<std::string> got, want;
    ASSERT_TRUE(ix->ForEachRecordOfModule(m, [&](const wire::Record& r) {
                    got.push_back(r.SerializeAsString());
                    return true;
                  }).ok());
    for (const wire::Record& r : records_) {
      if (r.key().module() == m) want.push_back(r.SerializeAsString());
    }
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << m;
  }
  EXPECT_TRUE(records_of(*ix, "\x01libz.so.1").empty()) << "a module is not found as a symbol";
  std::vector<std::string> names;
  ix->ForEachSymbol([&](std::string_view n) { names.emplace_back(n); });
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.size(), 5u);
  // Opened again: the file is used as it is.
  ix = SnapshotIndex::Open(cache, &rebuilt);
  ASSERT_TRUE(ix.ok());
  EXPECT_FALSE(rebuilt);
  EXPECT_EQ(records_of(*ix, "deflate"), expected_of("deflate"));
  // A new snapshot: rebuilt, with the new records.
  records_[1] = MakeRecord("libz.so.1", "deflate", wire::METRIC_WALL_TIME_NS, cheap_, 99);
  cache_->Write(8, records_);
  ix = SnapshotIndex::Open(cache, &rebuilt);
  ASSERT_TRUE(ix.ok());
  EXPECT_TRUE(rebuilt);
  EXPECT_EQ(records_of(*ix, "deflate"), expected_of("deflate"));
  // A damaged file: rebuilt.
  {
    std::ofstream f(cache_->dir() + "/symbols.idx", std::ios::trunc);
    f << "FPSIDX01garbage";
  }
  ix = SnapshotIndex::Open(cache, &rebuilt);
  ASSERT_TRUE(ix.ok());
  EXPECT_TRUE(rebuilt);
  EXPECT_EQ(records_of(*ix, "compress"), expected_of("compress"));
  // A fragment file whose bytes changed under the same name: the index no
  // longer matches it. The read says so and removes the index; the next
  // open builds it afresh and reads right.
  {
    std::vector<std::string> frags;
    for (const auto& e : std::filesystem::directory_iterator(cache_->dir() + "/fragments")) {
      frags.push_back(e.path().string());
    }
    std::sort(frags.begin(), frags.end());
    ASSERT_EQ(frags.size(), 2u);
    std::filesystem::copy_file(frags[1], frags[0],
                               std::filesystem::copy_options::overwrite_existing);
    ix = SnapshotIndex::Open(cache, &rebuilt);
    ASSERT_TRUE(ix.ok());
    EXPECT_FALSE(rebuilt);  // the names, hence the signature, are the same
    Status bad = Status::Ok();
    for (const char* sym : {"sqlite3_prepare_v2", "deflate", "compress", "strlen", "bar_rare"}) {
      Status st = ix->ForEachRecordOf(sym, [](const wire::Record&) { return true; });
      if (!st.ok()) bad = st;
    }
    EXPECT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("rebuilt on the next call"), std::string::npos) << bad.ToString();
    ix = SnapshotIndex::Open(cache, &rebuilt);
    ASSERT_TRUE(ix.ok());
    EXPECT_TRUE(rebuilt);
    for (const char* sym : {"sqlite3_prepare_v2", "deflate", "compress", "strlen", "bar_rare"}) {
      EXPECT_TRUE(ix->ForEachRecordOf(sym, [](const wire::Record&) { return true; }).ok()) << sym;
    }
  }
  // Many symbols: past the index's sample spacing (every 64th entry).
  std::vector<wire::Record> many;
  for (int i = 0; i < 1000; ++i) {
    many.push_back(MakeRecord("libm" + std::to_string(i % 7) + ".so", "s" + std::to_string(i),
                              wire::METRIC_WALL_TIME_NS, Spread(100, 200 + i, 3), 1));
  }
  records_ = many;
  cache_->Write(9, records_);
  ix = SnapshotIndex::Open(cache);
  ASSERT_TRUE(ix.ok());
  for (int i = 0; i < 1000; i += 37) {
    const std::string sym = "s" + std::to_string(i);
    EXPECT_EQ(records_of(*ix, sym), expected_of(sym)) << sym;
  }
  // By prefix (a point tag's series): "s1" holds s1, s10..s19 and
  // s100..s199, 111 entries across several samples; "s99" ends the index.
  for (const std::string prefix : {"s1", "s5", "s99", "s", "t", "r"}) {
    std::vector<std::string> got, want;
    ASSERT_TRUE(ix->ForEachRecordWithPrefix(prefix, [&](const wire::Record& r) {
                    got.push_back(r.SerializeAsString());
                    return true;
                  }).ok());
    for (const wire::Record& r : records_) {
      if (r.key().symbol().rfind(prefix, 0) == 0) want.push_back(r.SerializeAsString());
    }
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got.size(), want.size()) << prefix;
    EXPECT_EQ(got, want) << prefix;
  }
  int stopped = 0;
  ASSERT_TRUE(
      ix->ForEachRecordWithPrefix("s1", [&](const wire::Record&) { return ++stopped < 5; }).ok());
  EXPECT_EQ(stopped, 5) << "false from the callback stops the walk";
}

// Source parsing: call sites and includes.
TEST(LspSourceTest, CallSitesSkipCommentsStringsMembersAndKeywords) {
  const std::string text =
      "#define M(x) foo(x)\n"
      "if (a) b(1); // c(2)\n"
      "s.d(3); p->e(4); /* f(5) */ \"g(6)\" 'h' i (7);\n"
      "R\"x(j(8))x\" k(\n  9);\n";
  std::vector<std::string> names;
  for (const auto& cs : tools::CallSites(text)) names.push_back(cs.name);
  EXPECT_EQ(names, (std::vector<std::string>{"b", "i", "k"}));
}

TEST(LspSourceTest, IncludesNameTheirModules) {
  using tools::ModuleMatchesIncludes;
  EXPECT_TRUE(ModuleMatchesIncludes("libz.so.1", {"zlib.h"}));
  EXPECT_TRUE(ModuleMatchesIncludes("libsqlite3.so.0", {"sqlite3.h"}));
  EXPECT_TRUE(ModuleMatchesIncludes("libcrypto.so.3", {"openssl/evp.h"}));
  EXPECT_TRUE(ModuleMatchesIncludes("libc.so.6", {"string.h"}));
  EXPECT_TRUE(ModuleMatchesIncludes("libc.so.6", {"sys/socket.h"}));
  EXPECT_TRUE(ModuleMatchesIncludes("libm.so.6", {"math.h"}));
  EXPECT_TRUE(ModuleMatchesIncludes("libpng16.so.16", {"png.h"}));
  EXPECT_TRUE(ModuleMatchesIncludes("libglib-2.0.so.0", {"glib.h"}));
  EXPECT_FALSE(ModuleMatchesIncludes("libz.so.1", {"string.h", "sqlite3.h"}));
  EXPECT_FALSE(ModuleMatchesIncludes("libzstd.so.1", {"zlib.h"}));
  EXPECT_FALSE(ModuleMatchesIncludes("libc.so.6", {"zlib.h"}));
}

}  // namespace
}  // namespace fieldprof
