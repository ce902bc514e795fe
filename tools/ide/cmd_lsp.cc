// fieldprof lsp: the language server (tools/ide/server.h) on stdin/stdout,
// or, with --hover FILE:LINE:COL, one hover as an editor would get it,
// printed (the server run on pipes, in this process).
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/settings/options.h"
#include "common/snapshot/snapshot_cache.h"
#include "tools/commands.h"
#include "tools/ide/server.h"
#include "tools/shared/command_line.h"

namespace fieldprof::tools {
namespace {

using json = nlohmann::json;

std::string Frame(const json& msg) {
  const std::string body = msg.dump();
  return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The hover at `where` (FILE:LINE:COL, both counted from 1 as compilers
// print them): the server is started on pipes, sent what an editor sends,
// and its answer printed as Markdown; its log messages go to stderr.
int OneHover(const std::string& where, LspOptions o) {
  const size_t c2 = where.rfind(':');
  const size_t c1 =
      c2 == std::string::npos || c2 == 0 ? std::string::npos : where.rfind(':', c2 - 1);
  int64_t line = 0, col = 0;
  auto number = [](std::string_view s, int64_t* out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && end == s.data() + s.size();
  };
  const std::string_view w(where);
  if (c1 == std::string::npos || !number(w.substr(c1 + 1, c2 - c1 - 1), &line) ||
      !number(w.substr(c2 + 1), &col) || line < 1 || col < 1) {
    std::cerr << "fieldprof lsp: --hover wants FILE:LINE:COL (from 1), not '" << where << "'\n";
    return 2;
  }
  const std::string file = where.substr(0, c1);
  std::ifstream in(file);
  if (!in) {
    std::cerr << "fieldprof lsp: cannot read " << file << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::error_code ec;
  const std::string path = std::filesystem::absolute(file, ec).lexically_normal().string();
  const std::string ext = std::filesystem::path(path).extension().string();
  // The URI as editors write it: every byte but the unreserved ones and
  // '/' %-escaped.
  std::string uri = "file://";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
      uri += static_cast<char>(c);
    } else {
      char esc[4];
      std::snprintf(esc, sizeof esc, "%%%02X", c);
      uri += esc;
    }
  }
  // The column counts bytes, as compilers print it; LSP counts UTF-16
  // units: the line's bytes before it are counted again.
  const std::string body = text.str();
  size_t line_start = 0;
  for (int64_t l = 1; l < line && line_start != std::string::npos; ++l) {
    line_start = body.find('\n', line_start);
    if (line_start != std::string::npos) ++line_start;
  }
  int64_t character = col - 1;
  if (line_start != std::string::npos) {
    character = 0;
    for (size_t i = line_start;
         i < body.size() && i < line_start + static_cast<size_t>(col - 1) && body[i] != '\n'; ++i) {
      const unsigned char c = static_cast<unsigned char>(body[i]);
      if ((c & 0xC0) == 0x80) continue;         // a continuation byte
      character += (c & 0xF8) == 0xF0 ? 2 : 1;  // 4 bytes: a surrogate pair
    }
  }
  int to_server[2], from_server[2];
  if (pipe(to_server) != 0 || pipe(from_server) != 0) {
    std::cerr << "fieldprof lsp: pipe: " << std::strerror(errno) << "\n";
    return 1;
  }
  o.load_wait_ms = 60 * 1000;  // one question: wait for the cache however long it takes
  o.join_reader = true;        // its input ends right after `exit`
  std::thread server([&] {
    RunLspServer(to_server[0], from_server[1], o);
    close(from_server[1]);
  });
  std::thread writer([&] {
    std::string out;
    out += Frame({{"jsonrpc", "2.0"},
                  {"id", 1},
                  {"method", "initialize"},
                  {"params", {{"processId", getpid()}, {"capabilities", json::object()}}}});
    out += Frame({{"jsonrpc", "2.0"}, {"method", "initialized"}, {"params", json::object()}});
    out += Frame({{"jsonrpc", "2.0"},
                  {"method", "textDocument/didOpen"},
                  {"params",
                   {{"textDocument",
                     {{"uri", uri},
                      {"languageId", ext == ".c" ? "c" : "cpp"},
                      {"version", 1},
                      {"text", body}}}}}});
    out += Frame({{"jsonrpc", "2.0"},
                  {"id", 2},
                  {"method", "textDocument/hover"},
                  {"params",
                   {{"textDocument", {{"uri", uri}}},
                    {"position", {{"line", line - 1}, {"character", character}}}}}});
    out += Frame({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "shutdown"}});
    out += Frame({{"jsonrpc", "2.0"}, {"method", "exit"}});
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = write(to_server[1], out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    close(to_server[1]);
  });
  std::string got;
  char buf[65536];
  for (ssize_t n; (n = read(from_server[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  writer.join();
  server.join();
  close(to_server[0]);
  close(from_server[0]);
  json hover;
  // The server's frames, one after another.
  for (size_t at = 0; at < got.size();) {
    const size_t head = got.find("\r\n\r\n", at);
    if (head == std::string::npos || got.compare(at, 16, "Content-Length: ") != 0) break;
    size_t len = 0;
    const auto [end, ec] = std::from_chars(got.data() + at + 16, got.data() + head, len);
    if (ec != std::errc() || end != got.data() + head || head + 4 + len > got.size()) break;
    const json msg = json::parse(got.substr(head + 4, len), nullptr, false);
    at = head + 4 + len;
    if (msg.is_discarded()) continue;
    if (msg.value("method", "") == "window/logMessage") {
      std::cerr << msg["params"].value("message", "") << "\n";
    }
    if (msg.contains("id") && msg["id"] == 2) hover = msg;
  }
  if (hover.contains("result") && hover["result"].is_object()) {
    std::cout << hover["result"]["contents"].value("value", "") << "\n";
    return 0;
  }
  if (hover.contains("error")) {
    std::cerr << "fieldprof lsp: " << hover["error"].value("message", "") << "\n";
    return 1;
  }
  std::cout << "No field cost at " << where << ": no call of an API the field knows there.\n";
  return 0;
}

}  // namespace

int CmdLsp(int argc, char** argv) {
  LspOptions o;
  o.cache_dir = DefaultSnapshotCacheDir();
  int64_t min_calls = static_cast<int64_t>(o.min_calls),
          min_runs = static_cast<int64_t>(o.min_runs);
  bool stdio = true;
  int64_t refresh_ms = o.refresh_ms, load_wait_ms = o.load_wait_ms;
  OptionTable t("fieldprof lsp",
                "A language server (LSP 3.17, JSON-RPC on stdin/stdout) that shows what library\n"
                "APIs cost in the field: hovers, code lenses and inlay hints at call sites, from\n"
                "the local snapshot cache. Editors start it beside their C/C++ server; see\n"
                "docs/ide.md for Neovim and VS Code. Editor settings (initializationOptions or\n"
                "the \"fieldprof\" settings section) override these flags: cacheDir, minCalls,\n"
                "minRuns, minP50Ns, codeLens, inlayHints, cxx. In C++ files a call's API is\n"
                "the function Clang resolves it to, with the project's compile_commands.json.");
  t.AddString("cache", &o.cache_dir, "the snapshot cache");
  t.AddInt("min_calls", &min_calls, "lenses and hints only for APIs with this many calls", 0,
           int64_t{1} << 62);
  t.AddInt("min_runs", &min_runs, "... from this many runs", 0, int64_t{1} << 62);
  t.AddDouble("min_p50_ns", &o.min_p50_ns, "... whose p50 is at least this (ns)", 0, 1e15);
  t.AddInt("refresh_ms", &refresh_ms, "how often the cache is looked at for a new snapshot (ms)",
           50, 3600 * 1000);
  t.AddInt("load_wait_ms", &load_wait_ms,
           "a request that comes before the cache is first loaded waits this long for it (ms)", 0,
           60 * 1000);
  t.AddBool("cxx", &o.cxx,
            "resolve C++ calls with libclang (the exact member, overload, constructor or "
            "operator); off: by name, as in C");
  t.AddString("libclang", &o.libclang, "libclang to load (default: Debian's newest)");
  std::string hover;
  t.AddString("hover", &hover,
              "print the hover at FILE:LINE:COL (from 1) as an editor would show it, and exit");
  t.AddBool("stdio", &stdio, "talk on stdin/stdout (the only transport; editors pass it)");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (!s.ok()) return UsageError(t, s);
  // The server's paths stay right whatever its current directory becomes.
  if (!o.cache_dir.empty()) {
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(o.cache_dir, ec);
    if (!ec) o.cache_dir = abs.lexically_normal().string();
  }
  o.min_calls = static_cast<uint64_t>(min_calls);
  o.min_runs = static_cast<uint64_t>(min_runs);
  o.refresh_ms = static_cast<int>(refresh_ms);
  o.load_wait_ms = static_cast<int>(load_wait_ms);
  if (!hover.empty()) return OneHover(hover, o);
  return RunLspServer(STDIN_FILENO, STDOUT_FILENO, o);
}

}  // namespace fieldprof::tools
