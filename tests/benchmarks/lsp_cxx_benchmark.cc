// The language server on C++ (calls resolved by libclang), against clangd
// on the same file:
//   lsp_cxx_benchmark [LINES] [HOVERS]
// writes a C++ file of about LINES lines (default 2000) that includes the
// heavy standard headers (<regex>, <filesystem>, <iostream>, ...) and calls
// libstdc++ APIs on most lines, and a snapshot cache with those APIs, then
// drives the real `fieldprof lsp` on pipes and prints:
//   1. the first hover after the file opens (the parse included);
//   2. later hovers at random calls: mean, p50, p99 of the round trip;
//   3. code lenses for the whole file once parsed;
//   4. the first hover after an edit (a reparse, which builds the
//      preamble), and after a second edit (the preamble reused);
//   5. the same first and later hovers from clangd, when it is installed,
//      and the ratios.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "tests/tools/ide/lsp_client.h"
#include "tests/tools/snapshot_fixture.h"

using namespace fieldprof;
using Clock = std::chrono::steady_clock;
using fieldprof::testing::json;

namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

const char* kStd = "_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE";

// One function of the file: ten lines, seven calls into libstdc++.
std::string Function(int i) {
  const std::string n = std::to_string(i);
  return "size_t Work" + n + "(const std::string& s, std::ofstream& out, const fs::path& p) {\n" +
         "  size_t a = s.find(\"x" + n + "\", 0, 2);\n" +  // find(const char*, size_t, size_t)
         "  size_t b = s.find('q');\n" +                   // find(char, size_t)
         "  out.write(s.data(), 3);\n" +                   // std::ostream::write
         "  std::cout << " + n + ";\n" +                   // std::ostream::operator<<(int)
         "  fs::file_status st = fs::status(p);\n" +       // std::filesystem::status
         "  std::vector<int> v;\n  v.push_back(" + n + ");\n" +  // inline: no library symbol
         "  return a + b + v.size() + static_cast<size_t>(st.type());\n}\n";
}

struct Position {
  int line, character;
};

std::string MakeSource(int lines, std::vector<Position>* calls) {
  std::string text =
      "#include <chrono>\n#include <filesystem>\n#include <fstream>\n#include <iostream>\n"
      "#include <regex>\n#include <sstream>\n#include <string>\n#include <vector>\n\n"
      "namespace fs = std::filesystem;\n\n";
  int line = 11;
  for (int i = 0; line < lines; ++i) {
    const std::string f = Function(i);
    // The `find` of the line after the signature: a call with field data.
    calls->push_back({line + 1, static_cast<int>(std::string("  size_t a = s.").size())});
    calls->push_back({line + 3, static_cast<int>(std::string("  out.").size())});
    text += f;
    line += static_cast<int>(std::count(f.begin(), f.end(), '\n'));
  }
  return text;
}

void WriteCache(const std::string& dir) {
  const std::vector<std::string> symbols = {
      std::string(kStd) + "4findEPKcmm", std::string(kStd) + "4findEcm", "_ZNSo5writeEPKcl",
      "_ZNSolsEi", "_ZNSt10filesystem6statusERKNS_7__cxx114pathE"};
  std::vector<wire::Record> records;
  for (size_t i = 0; i < symbols.size(); ++i) {
    records.push_back(fieldprof::testing::MakeRecord(
        "libstdc++.so.6", symbols[i], wire::METRIC_WALL_TIME_NS,
        fieldprof::testing::Spread(1000 * (i + 1), 9000 * (i + 1), 5000), 100));
  }
  fieldprof::testing::Cache(dir).Write(1, records);
}

struct Hovers {
  double open_ms = 0;  // the first, after didOpen
  std::vector<double> later_us;
  double lens_ms = 0;
  double edit1_ms = 0, edit2_ms = 0;
  bool ok = true;
};

json HoverAt(fieldprof::testing::LspClient& c, const std::string& uri, Position p) {
  return c.Call("textDocument/hover",
                {{"textDocument", {{"uri", uri}}},
                 {"position", {{"line", p.line}, {"character", p.character}}}});
}
bool Shown(const json& r) { return r.contains("result") && !r["result"].is_null(); }

// One server's figures on the file. `fieldprof`: its index is awaited
// first (a log line), and lenses and edits are measured too.
Hovers Measure(const std::vector<std::string>& argv, bool fieldprof, const std::string& path,
               const std::string& text, const std::vector<Position>& calls, int hovers) {
  Hovers h;
  fieldprof::testing::LspClient c(argv);
  const std::string uri = "file://" + path;
  c.Call("initialize", {{"processId", getpid()},
                        {"rootUri", "file://" + std::filesystem::path(path).parent_path().string()},
                        {"capabilities", json::object()}});
  c.Notify("initialized", json::object());
  if (fieldprof && !c.AwaitLog("index of")) {
    std::fprintf(stderr, "lsp_cxx_benchmark: no index: %s\n", c.problem.c_str());
    h.ok = false;
    return h;
  }
  auto t0 = Clock::now();
  c.Notify(
      "textDocument/didOpen",
      {{"textDocument", {{"uri", uri}, {"languageId", "cpp"}, {"version", 1}, {"text", text}}}});
  json r = HoverAt(c, uri, calls[0]);
  h.open_ms = Ms(Clock::now() - t0);
  if (!Shown(r)) {
    std::fprintf(stderr, "lsp_cxx_benchmark: no first hover from %s: %s\n", argv[0].c_str(),
                 r.dump().c_str());
    h.ok = false;
    return h;
  }
  std::mt19937 rng(1);
  for (int i = 0; i < hovers; ++i) {
    const Position p = calls[rng() % calls.size()];
    t0 = Clock::now();
    r = HoverAt(c, uri, p);
    h.later_us.push_back(Ms(Clock::now() - t0) * 1000);
    if (!Shown(r)) {
      std::fprintf(stderr, "lsp_cxx_benchmark: no hover at %d:%d\n", p.line, p.character);
      h.ok = false;
    }
  }
  std::sort(h.later_us.begin(), h.later_us.end());
  if (fieldprof) {
    t0 = Clock::now();
    r = c.Call("textDocument/codeLens", {{"textDocument", {{"uri", uri}}}});
    h.lens_ms = Ms(Clock::now() - t0);
    std::printf("fieldprof lsp: %zu lenses\n", r.value("result", json::array()).size());
    // Two edits, each a line inserted at the top of the body, then a hover.
    for (double* out : {&h.edit1_ms, &h.edit2_ms}) {
      const json at = {{"line", 11}, {"character", 0}};
      c.Notify("textDocument/didChange",
               {{"textDocument", {{"uri", uri}, {"version", 2}}},
                {"contentChanges", {{{"range", {{"start", at}, {"end", at}}}, {"text", "\n"}}}}});
      t0 = Clock::now();
      r = HoverAt(c, uri, {calls[0].line + (out == &h.edit1_ms ? 1 : 2), calls[0].character});
      *out = Ms(Clock::now() - t0);
      if (!Shown(r)) h.ok = false;
    }
  }
  c.Call("shutdown", nullptr);
  c.Notify("exit", nullptr);
  c.Wait();
  return h;
}

double Mean(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m += x / static_cast<double>(v.size());
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const int lines = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int hovers = argc > 2 ? std::atoi(argv[2]) : 500;
  if (lines < 20 || hovers < 1) {
    std::fprintf(stderr, "usage: lsp_cxx_benchmark [LINES >= 20] [HOVERS >= 1]\n");
    return 2;
  }
  char tmpl[] = "/tmp/fieldprof-lspcxx-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  std::vector<Position> calls;
  const std::string text = MakeSource(lines, &calls);
  const std::string path = dir + "/big.cc";
  std::ofstream(path) << text;
  WriteCache(dir + "/cache");
  std::printf("file: %zu lines, %zu calls hovered at random, %d hovers\n",
              static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), calls.size(),
              hovers);
  const Hovers f = Measure({FIELDPROF_CLI_BIN, "lsp", "--cache", dir + "/cache"}, true, path, text,
                           calls, hovers);
  if (!f.ok) return 1;
  const auto& u = f.later_us;
  std::printf(
      "fieldprof lsp: first hover %.0f ms after open (parse included); later hovers %.0f us "
      "mean, %.0f us p50, %.0f us p99; lenses for the file %.1f ms; first hover after an edit "
      "%.0f ms (preamble built), after a second %.0f ms\n",
      f.open_ms, Mean(u), u[u.size() / 2], u[u.size() * 99 / 100], f.lens_ms, f.edit1_ms,
      f.edit2_ms);
  if (std::system("command -v clangd > /dev/null 2>&1") == 0) {
    const Hovers c = Measure({"/usr/bin/clangd", "--log=error", "--background-index=false"}, false,
                             path, text, calls, hovers);
    if (c.ok) {
      const auto& v = c.later_us;
      std::printf(
          "clangd (peer): first hover %.0f ms after open; later hovers %.0f us mean, %.0f us "
          "p50, %.0f us p99\n",
          c.open_ms, Mean(v), v[v.size() / 2], v[v.size() * 99 / 100]);
      std::printf("ratio fieldprof/clangd: first hover %.2f, later hover p99 %.2f\n",
                  f.open_ms / c.open_ms, u[u.size() * 99 / 100] / v[v.size() * 99 / 100]);
    }
  } else {
    std::printf("clangd (peer): not installed\n");
  }
  std::filesystem::remove_all(dir);
  return 0;
}
