// fieldprof lsp on C++: a call's API is the function Clang resolves it to,
// by the mangled symbol the field keys it by: members, overloads,
// constructors, a deleting destructor, operators, calls through auto,
// typedefs and namespace aliases, virtual calls, calls in lambdas and in a
// macro's body, and C calls. The symbols expected are checked against
// libstdc++'s own exports (dlsym), so the table below is the library's
// truth, not this test's. Each is asked over the protocol, and from Neovim.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"
#include "tests/tools/ide/lsp_client.h"
#include "tests/tools/snapshot_fixture.h"
#include "tools/shared/format.h"

namespace fieldprof {
namespace {

using json = nlohmann::json;
using testing::Cache;
using testing::LspClient;
using testing::MakeRecord;
using testing::Spread;
using testing::TempDir;

// Every call form of the issue, one a line. FP_FROM_DB is defined only by
// the compile_commands.json the test writes, and FP_FROM_INC by a header
// found only through its relative -I: the flags are the project's.
const char kCxxSource[] = R"(#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp_flags.h"

namespace fs = std::filesystem;
using Str = std::string;
#define FIND_IN(s, x) (s).find(x)

int compress(int level) { return level * 2; }

int Calls(const fs::path& p, std::exception& e) {
  std::string s("hello world");
  size_t a = s.find("wor", 0, 3);
  size_t b = s.find('o');
  size_t c = s.find("wor");
  std::ofstream out("/tmp/x");
  auto& o = out;
  o.write("x", 1);
  std::cout << 42;
  std::string t = s + s;
  Str u("abc");
  size_t d = u.find('b');
  fs::file_status st = fs::status(p);
  auto now = std::chrono::system_clock::now();
  const char* w = e.what();
  auto f = [&] { return s.find("ld", 0, 2); };
  size_t g = FIND_IN(s, 'w');
  std::vector<int> v;
  v.push_back(1);
  std::stringstream* q = new std::stringstream();
  q->~basic_stringstream();
  delete new std::runtime_error("x");
  size_t n = strlen(w);
  int z = compress(9);
#if defined(FP_FROM_DB) && defined(FP_FROM_INC)
  fs::path here = fs::current_path();
#endif
  return int(a + b + c + d + f() + g + n) + z + int(fs::file_size(p));
}
)";

const std::string kStdString = "_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE";

struct CxxCase {
  const char* form;
  const char* needle;  // the hover is asked at its first character
  std::string symbol;  // the API the hover must name
  bool data;           // the field has data for it here
  const char* also;    // more text the hover must hold, or ""
};

std::vector<CxxCase> CxxCases() {
  return {
      {"member function", "find(\"wor\", 0, 3)", kStdString + "4findEPKcmm", true, ""},
      {"overload (char)", "find('o')", kStdString + "4findEcm", true, ""},
      {"overload without data, inline", "find(\"wor\");", kStdString + "4findEPKcm", false,
       "`libstdc++.so.6` exports it"},
      {"constructor", "out(\"/tmp/x\")",
       "_ZNSt14basic_ofstreamIcSt11char_traitsIcEEC1EPKcSt13_Ios_Openmode", true, ""},
      {"through auto", "write(\"x\", 1)", "_ZNSo5writeEPKcl", true, ""},
      {"member operator", "<< 42", "_ZNSolsEi", true, ""},
      {"free operator template", "+ s;",
       "_ZStplIcSt11char_traitsIcESaIcEENSt7__cxx1112basic_stringIT_T0_T1_EERKS8_SA_", false,
       "`libstdc++.so.6` exports it"},
      {"through a typedef", "find('b')", kStdString + "4findEcm", true, ""},
      {"through a namespace alias", "status(p)", "_ZNSt10filesystem6statusERKNS_7__cxx114pathE",
       true, ""},
      {"static member", "now()", "_ZNSt6chrono3_V212system_clock3nowEv", true, ""},
      {"virtual", "what()", "_ZNKSt9exception4whatEv", true, "Virtual"},
      {"in a lambda", "find(\"ld\", 0, 2)", kStdString + "4findEPKcmm", true, ""},
      {"in a macro's body", "FIND_IN(s, 'w')", kStdString + "4findEcm", true, "macro `FIND_IN`"},
      {"inline with no library symbol", "push_back(1)", "_ZNSt6vectorIiSaIiEE9push_backEOi", false,
       "Defined in a header"},
      {"destructor", "~basic_stringstream()",
       "_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEED1Ev", true, ""},
      {"deleting destructor", "delete new", "_ZNSt13runtime_errorD0Ev", true, "Virtual"},
      {"C function", "strlen(w)", "strlen", true, ""},
      {"library template instance", "file_size(p)",
       "_ZNSt10filesystem9file_sizeERKNS_7__cxx114pathE", true, ""},
      {"only with the project's flags", "current_path()",
       "_ZNSt10filesystem12current_pathB5cxx11Ev", true, ""},
  };
}

json PositionOfNeedle(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  int line = 0;
  size_t start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') ++line, start = i + 1;
  }
  return {{"line", line}, {"character", static_cast<int>(at - start)}};
}

class LspCxxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v g++ > /dev/null 2>&1") != 0) GTEST_SKIP() << "no g++";
    cache_ = std::make_unique<Cache>(dir_.File("cache"));
    void* libstdcxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(libstdcxx, nullptr);
    std::set<std::string> done;
    int i = 0;
    for (const CxxCase& c : CxxCases()) {
      if (c.data) {
        // The symbol is one libstdc++ (or libc) exports: the table is true.
        EXPECT_NE(dlsym(RTLD_DEFAULT, c.symbol.c_str()), nullptr) << c.form << ": " << c.symbol;
      }
      if (!c.data || !done.insert(c.symbol).second) continue;
      const std::string module = c.symbol == "strlen" ? "libc.so.6" : "libstdc++.so.6";
      // Each API its own spread, so a hover showing another's is caught.
      const Histogram h = Spread(2000 + 1000 * i, 5000 + 2000 * i, 3000);
      records_.push_back(MakeRecord(module, c.symbol, wire::METRIC_WALL_TIME_NS, h, 40));
      p50_[c.symbol] = h.Stats().p50;
      ++i;
    }
    // A library's compress, which the program's own compress() is not.
    records_.push_back(MakeRecord("libz.so.1", "compress", wire::METRIC_WALL_TIME_NS,
                                  Spread(8000, 9000, 2000), 30));
    cache_->Write(3, records_);
    src_ = dir_.File("forms.cc");
    std::ofstream(src_) << kCxxSource;
    const json db = json::array(
        {{{"directory", dir_.path()},
          {"file", src_},
          {"arguments",
           {"g++", "-std=c++17", "-DFP_FROM_DB=1", "-Iinc", "-c", "-o", "forms.o", src_}}}});
    std::ofstream(dir_.File("compile_commands.json")) << db.dump(2);
    std::filesystem::create_directories(dir_.File("inc"));
    std::ofstream(dir_.File("inc/fp_flags.h")) << "#define FP_FROM_INC 1\n";
  }

  LspClient* Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{FIELDPROF_CLI_BIN, "lsp", "--cache", cache_->dir()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto* c = new LspClient(argv);
    json r =
        c->Call("initialize",
                {{"processId", getpid()}, {"rootUri", nullptr}, {"capabilities", json::object()}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    c->Notify("initialized", json::object());
    EXPECT_TRUE(c->AwaitLog("index of"));
    c->Notify("textDocument/didOpen", {{"textDocument",
                                        {{"uri", "file://" + src_},
                                         {"languageId", "cpp"},
                                         {"version", 1},
                                         {"text", std::string(kCxxSource)}}}});
    clients_.emplace_back(c);
    return c;
  }
  std::string HoverText(LspClient& c, const json& pos, const std::string& uri = "") {
    json r = c.Call(
        "textDocument/hover",
        {{"textDocument", {{"uri", uri.empty() ? "file://" + src_ : uri}}}, {"position", pos}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    if (!r.contains("result") || r["result"].is_null()) return "";
    return r["result"]["contents"]["value"];
  }
  // What a hover must hold for `c`.
  void Check(const CxxCase& c, const std::string& hover) {
    SCOPED_TRACE(c.form);
    EXPECT_NE(hover.find("`" + c.symbol + "`"), std::string::npos) << hover;
    EXPECT_NE(hover.find(c.data ? "— field cost" : "— no field data"), std::string::npos) << hover;
    if (c.data) {
      EXPECT_NE(hover.find(tools::FormatNanos(p50_[c.symbol])), std::string::npos) << hover;
    }
    EXPECT_NE(hover.find(c.also), std::string::npos) << hover;
  }
  void TearDown() override {
    for (const auto& c : clients_) EXPECT_EQ(c->problem, "");
  }

  TempDir dir_;
  std::unique_ptr<Cache> cache_;
  std::vector<wire::Record> records_;
  std::map<std::string, double> p50_;
  std::string src_;
  std::vector<std::unique_ptr<LspClient>> clients_;
};

TEST_F(LspCxxTest, EveryCallFormAnswersItsExactApi) {
  LspClient& c = *Start();
  for (const CxxCase& k : CxxCases())
    Check(k, HoverText(c, PositionOfNeedle(kCxxSource, k.needle)));
  // The inline overload's card names the exported one the field has.
  const std::string inline_find = HoverText(c, PositionOfNeedle(kCxxSource, "find(\"wor\");"));
  EXPECT_NE(inline_find.find("std::string::find(char const*, unsigned long, unsigned long) const"),
            std::string::npos)
      << inline_find;
  EXPECT_NE(inline_find.find("other overloads of `find`"), std::string::npos) << inline_find;
  // The program's own compress() is not libz's, though the name is.
  EXPECT_EQ(HoverText(c, PositionOfNeedle(kCxxSource, "compress(9)")), "");
  EXPECT_TRUE(c.AwaitLog("C++ calls are resolved by libclang"));
}

TEST_F(LspCxxTest, LensesAndHintsSitOnTheCallsWithData) {
  LspClient& c = *Start();
  json r = c.Call("textDocument/codeLens", {{"textDocument", {{"uri", "file://" + src_}}}});
  std::set<int> lines, want;
  for (const json& l : r["result"]) {
    lines.insert(l["range"]["start"]["line"].get<int>());
    EXPECT_NE(l["command"]["title"].get<std::string>().find(" p50"), std::string::npos) << l;
  }
  for (const CxxCase& k : CxxCases()) {
    if (k.data) want.insert(PositionOfNeedle(kCxxSource, k.needle)["line"].get<int>());
  }
  EXPECT_EQ(lines, want) << r.dump();
  json h = c.Call(
      "textDocument/inlayHint",
      {{"textDocument", {{"uri", "file://" + src_}}},
       {"range",
        {{"start", {{"line", 0}, {"character", 0}}}, {"end", {{"line", 200}, {"character", 0}}}}}});
  std::set<int> hint_lines;
  for (const json& x : h["result"]) hint_lines.insert(x["position"]["line"].get<int>());
  EXPECT_EQ(hint_lines, want) << h.dump();
  // A hint sits just past its call's closing parenthesis.
  const std::string call = "find(\"wor\", 0, 3)";
  const json at = PositionOfNeedle(kCxxSource, call);
  bool seen = false;
  for (const json& x : h["result"]) {
    if (x["position"]["line"] != at["line"]) continue;
    EXPECT_EQ(x["position"]["character"].get<int>(),
              at["character"].get<int>() + static_cast<int>(call.size()));
    seen = true;
  }
  EXPECT_TRUE(seen) << h.dump();
}

// An edit reparses: a call added is found at its new place.
TEST_F(LspCxxTest, AnEditIsParsedAgain) {
  LspClient& c = *Start();
  const json at = PositionOfNeedle(kCxxSource, "  size_t n = strlen(w);");
  c.Notify("textDocument/didChange",
           {{"textDocument", {{"uri", "file://" + src_}, {"version", 2}}},
            {"contentChanges",
             {{{"range", {{"start", at}, {"end", at}}}, {"text", "  std::cout.write(w, 1);\n"}}}}});
  std::string text = kCxxSource;
  text.insert(text.find("  size_t n = strlen(w);"), "  std::cout.write(w, 1);\n");
  Check({"after an edit", "write(w, 1)", "_ZNSo5writeEPKcl", true, ""},
        HoverText(c, PositionOfNeedle(text, "write(w, 1)")));
  Check({"moved by an edit", "strlen(w)", "strlen", true, ""},
        HoverText(c, PositionOfNeedle(text, "strlen(w)")));
}

// A compile_commands.json is a file anyone may hand over: flags that would
// write files (-MF, -MD), print on the server's stdout (--version), load
// code (-Xclang -load, -fplugin=) or move its directory (-working-directory)
// are dropped; the ones that change how the source reads still count.
TEST_F(LspCxxTest, AHostileCompileDatabaseWritesNothingAndBreaksNothing) {
  const std::string dep = dir_.File("written.d");
  const json db = json::array({{{"directory", dir_.path()},
                                {"file", src_},
                                {"arguments",
                                 {"g++",
                                  "--version",
                                  "-MD",
                                  "-MF",
                                  dep,
                                  "-MF" + dep + "2",
                                  "-Wp,-MD," + dep + "3",
                                  "-Xclang",
                                  "-load",
                                  "-Xclang",
                                  dir_.File("no-such-plugin.so"),
                                  "-fplugin=" + dir_.File("no-such-plugin.so"),
                                  "-working-directory=/",
                                  "--help",
                                  "-std=c++17",
                                  "-DFP_FROM_DB=1",
                                  "-Iinc",
                                  "-c",
                                  "-o",
                                  "forms.o",
                                  src_}}}});
  std::ofstream(dir_.File("compile_commands.json")) << db.dump(2);
  LspClient& c = *Start();
  for (const CxxCase& k : CxxCases())
    Check(k, HoverText(c, PositionOfNeedle(kCxxSource, k.needle)));
  for (const std::string& f : {dep, dep + "2", dep + "3"}) {
    EXPECT_FALSE(std::filesystem::exists(f)) << f;
  }
  // Nothing but frames on stdout, the server still there: TearDown checks.
}

// A URI with escapes names the file it escapes: the database that lists
// "my forms.cc" gives its flags to file:///.../my%20forms.cc.
TEST_F(LspCxxTest, AnEscapedUriFindsItsFilesFlags) {
  const std::string spaced = dir_.File("my forms.cc");
  std::ofstream(spaced) << kCxxSource;
  const json db = json::array(
      {{{"directory", dir_.path()},
        {"file", spaced},
        {"arguments", {"g++", "-std=c++17", "-DFP_FROM_DB=1", "-Iinc", "-c", spaced}}}});
  std::ofstream(dir_.File("compile_commands.json")) << db.dump(2);
  LspClient& c = *Start();
  std::string uri = "file://" + dir_.File("my%20forms.cc");
  c.Notify(
      "textDocument/didOpen",
      {{"textDocument",
        {{"uri", uri}, {"languageId", "cpp"}, {"version", 1}, {"text", std::string(kCxxSource)}}}});
  const CxxCase only_with_flags = CxxCases().back();
  Check(only_with_flags, HoverText(c, PositionOfNeedle(kCxxSource, only_with_flags.needle), uri));
}

// Positions count UTF-16 units, libclang bytes: a call after non-ASCII
// text on its line is still found where the editor says.
TEST_F(LspCxxTest, TextBeforeACallInAnyScriptKeepsItsPlace) {
  LspClient& c = *Start();
  std::string text = kCxxSource;
  const std::string line = "  size_t n = strlen(w);";
  const std::string wide = "  /* h\u00e9llo \u4e16\u754c \U0001F642 */ size_t n = strlen(w);";
  text.replace(text.find(line), line.size(), wide);
  c.Notify("textDocument/didChange", {{"textDocument", {{"uri", "file://" + src_}, {"version", 2}}},
                                      {"contentChanges", {{{"text", text}}}}});
  json at = PositionOfNeedle(text, "strlen(w)");
  // The bytes before it on its line, counted as UTF-16: é 2 bytes 1 unit,
  // each CJK 3 bytes 1 unit, the emoji 4 bytes 2 units.
  at["character"] = at["character"].get<int>() - 1 - 2 * 2 - 2;
  Check({"after non-ASCII text", "strlen(w)", "strlen", true, ""}, HoverText(c, at));
}

// cxx turned off from the editor: names as in C; on again: Clang's.
TEST_F(LspCxxTest, TheCxxSettingTurnsResolutionOffAndOn) {
  LspClient& c = *Start();
  const json at = PositionOfNeedle(kCxxSource, "find('o')");
  Check(CxxCases()[1], HoverText(c, at));
  auto set = [&](bool on) {
    c.Notify("workspace/didChangeConfiguration", {{"settings", {{"fieldprof", {{"cxx", on}}}}}});
  };
  set(false);
  EXPECT_EQ(HoverText(c, at), "");  // "find" by name: no such API
  set(true);
  Check(CxxCases()[1], HoverText(c, at));
}

// More C++ files open than units kept parsed: each still answers, the
// first, dropped meanwhile, parsed again.
TEST_F(LspCxxTest, MoreOpenFilesThanUnitsKeptAllAnswer) {
  LspClient& c = *Start();
  const int files = 10;  // over CxxCalls::kMaxUnits (8)
  auto uri = [&](int i) { return "file://" + dir_.File("f" + std::to_string(i) + ".cc"); };
  const std::string text =
      "#include <cstring>\nunsigned long F(const char* s) { return strlen(s); }\n";
  const json at = PositionOfNeedle(text, "strlen(s)");
  auto hover = [&](int i) {
    json r = c.Call("textDocument/hover", {{"textDocument", {{"uri", uri(i)}}}, {"position", at}});
    return r.contains("result") && r["result"].is_object()
               ? r["result"]["contents"]["value"].get<std::string>()
               : "";
  };
  for (int i = 0; i < files; ++i) {
    c.Notify("textDocument/didOpen",
             {{"textDocument",
               {{"uri", uri(i)}, {"languageId", "cpp"}, {"version", 1}, {"text", text}}}});
    EXPECT_NE(hover(i).find("`strlen`"), std::string::npos) << i;
  }
  EXPECT_NE(hover(0).find("`strlen`"), std::string::npos);
  // f0.cc was parsed when opened and again after it was dropped (each
  // parse is logged before the answer that needed it).
  int parses = 0;
  for (const json& m : c.seen) {
    if (m.value("method", "") == "window/logMessage" &&
        m["params"]["message"].get<std::string>().find("C++ parse of " + dir_.File("f0.cc") +
                                                       ":") != std::string::npos) {
      ++parses;
    }
  }
  EXPECT_EQ(parses, 2);
}

// Without libclang: one message says what would resolve C++ calls, and
// names are looked up as in C.
TEST_F(LspCxxTest, WithoutLibclangNamesAreLookedUpAsInC) {
  LspClient& c = *Start({"--libclang", dir_.File("no-such-libclang.so")});
  const std::string strlen_hover = HoverText(c, PositionOfNeedle(kCxxSource, "strlen(w)"));
  EXPECT_NE(strlen_hover.find("### strlen"), std::string::npos) << strlen_hover;
  EXPECT_EQ(HoverText(c, PositionOfNeedle(kCxxSource, "find('o')")), "");
  EXPECT_TRUE(c.AwaitLog("C++ calls are found by name only"));
}

// A header that is not there: the parse goes on, the calls it could still
// resolve answer, and one message says what was missing.
TEST_F(LspCxxTest, AMissingHeaderIsSaidAndTheRestResolves) {
  LspClient& c = *Start();
  std::string text = kCxxSource;
  text.insert(0, "#include \"no_such_header.h\"\n");
  c.Notify("textDocument/didChange", {{"textDocument", {{"uri", "file://" + src_}, {"version", 2}}},
                                      {"contentChanges", {{{"text", text}}}}});
  Check(CxxCases()[0], HoverText(c, PositionOfNeedle(text, CxxCases()[0].needle)));
  EXPECT_TRUE(c.AwaitLog("no_such_header.h"));
}

// `fieldprof lsp --hover FILE:LINE:COL` from the file's folder, both paths
// relative (lines and columns from 1): the card an editor would show; a
// place with no call says so; a malformed place is a usage error.
TEST_F(LspCxxTest, OneHoverFromTheCommandLine) {
  const json at = PositionOfNeedle(kCxxSource, "write(\"x\", 1)");
  auto run = [&](const std::string& where, int* status) {
    const std::string out = dir_.File("hover.out");
    const std::string cmd = "cd " + dir_.path() + " && " + FIELDPROF_CLI_BIN +
                            " lsp --cache cache --hover '" + where + "' > " + out + " 2>&1";
    *status = WEXITSTATUS(std::system(cmd.c_str()));
    std::ifstream in(out);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  int status = -1;
  const std::string card = run("forms.cc:" + std::to_string(at["line"].get<int>() + 1) + ":" +
                                   std::to_string(at["character"].get<int>() + 1),
                               &status);
  EXPECT_EQ(status, 0) << card;
  EXPECT_NE(card.find("`_ZNSo5writeEPKcl`"), std::string::npos) << card;
  EXPECT_NE(card.find("— field cost"), std::string::npos) << card;
  EXPECT_NE(card.find(tools::FormatNanos(p50_["_ZNSo5writeEPKcl"])), std::string::npos) << card;
  const std::string none = run("forms.cc:1:1", &status);
  EXPECT_EQ(status, 0) << none;
  EXPECT_NE(none.find("No field cost at forms.cc:1:1"), std::string::npos) << none;
  EXPECT_EQ((run("forms.cc:x:1", &status), status), 2);
  EXPECT_EQ((run("no-such.cc:1:1", &status), status), 1);
}

// Debian's Neovim as the editor: each form's hover, as its client asks.
TEST_F(LspCxxTest, NeovimShowsEachFormsApi) {
  if (std::system("command -v nvim > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no nvim (deploy/install-deps.sh installs Debian's neovim)";
  }
  json positions = json::array();
  for (const CxxCase& k : CxxCases()) positions.push_back(PositionOfNeedle(kCxxSource, k.needle));
  std::ofstream(dir_.File("positions.json")) << positions.dump();
  const std::string out = dir_.File("nvim-out.json");
  const std::string cmd =
      "cd " + dir_.path() + " && FP_BIN=" + FIELDPROF_CLI_BIN + " FP_CACHE=" + cache_->dir() +
      " FP_SRC=" + src_ + " FP_POSITIONS=" + dir_.File("positions.json") + " FP_OUT=" + out +
      " HOME=" + dir_.path() + " XDG_STATE_HOME=" + dir_.File("state") +
      " timeout 120 nvim --headless -u NONE -i NONE -n -c 'luafile " + FIELDPROF_SOURCE_DIR +
      "/tests/tools/ide/nvim_lsp_cxx.lua' > " + dir_.File("nvim.log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log(dir_.File("nvim.log"));
  ASSERT_EQ(rc, 0) << cmd << "\n" << std::string(std::istreambuf_iterator<char>(log), {});
  std::ifstream in(out);
  ASSERT_TRUE(in.good()) << "Neovim wrote no result";
  const json r = json::parse(in);
  EXPECT_EQ(r["filetype"], "cpp");
  ASSERT_EQ(r["hovers"].size(), CxxCases().size()) << r.dump();
  for (size_t i = 0; i < CxxCases().size(); ++i)
    Check(CxxCases()[i], r["hovers"][i].get<std::string>());
  EXPECT_EQ(r["exit_code"], 0);
}

}  // namespace
}  // namespace fieldprof
