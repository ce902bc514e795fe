#include "tools/ide/server.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/snapshot_cache.h"
#include "tools/cli/format.h"
#include "tools/ide/cost_index.h"
#include "tools/ide/source.h"

namespace fieldprof::tools {

namespace {

using json = nlohmann::json;

// JSON-RPC and LSP error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kServerNotInitialized = -32002;
constexpr int kRequestCancelled = -32800;

// LSP MessageType.
constexpr int kLogError = 1, kLogWarning = 2, kLogInfo = 3;

std::string Time(const ApiCost& c, double ns) {
  return FormatMetricValue(wire::METRIC_WALL_TIME_NS, ns, c.resolution_ns);
}

std::string DateOf(int64_t unix_ms) {
  char out[32] = "?";
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  struct tm tm;
  if (gmtime_r(&secs, &tm) != nullptr) std::strftime(out, sizeof out, "%Y-%m-%d", &tm);
  return out;
}

// The wall-time histogram as text bars, one row per log2 bucket from the
// first to the last with calls (a fenced block: monospace in every client).
std::string Bars(const ApiCost& c) {
  uint64_t top = std::max<uint64_t>(c.zero_count, 1);
  for (uint64_t n : c.buckets) top = std::max(top, n);
  std::vector<std::pair<std::string, uint64_t>> rows;
  if (c.zero_count > 0) {
    rows.emplace_back(ZeroBucketLabel(wire::METRIC_WALL_TIME_NS, c.resolution_ns), c.zero_count);
  }
  for (size_t k = 0; k < c.buckets.size(); ++k) {
    const int i = c.first_bucket + static_cast<int>(k);
    rows.emplace_back(FormatNanos(static_cast<double>(BucketLow(i))) + " .. " +
                          FormatNanos(static_cast<double>(BucketHigh(i))),
                      c.buckets[k]);
  }
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  std::string out = "```text\n";
  for (const auto& [label, n] : rows) {
    const int cells = n == 0
                          ? 0
                          : std::max(1, static_cast<int>(std::lround(24.0 * static_cast<double>(n) /
                                                                     static_cast<double>(top))));
    out += std::string(width - label.size(), ' ') + label + " ";
    for (int k = 0; k < cells; ++k) out += "\u2588";
    out += std::string(static_cast<size_t>(25 - cells), ' ') + FormatCount(n) + "\n";
  }
  return out + "```";
}

// One module's figures: a table, then the per-call costs and where the data
// comes from.
std::string Figures(const ApiCost& c) {
  std::string s = "| p50 | p90 | p99 | mean ± sd |\n|---|---|---|---|\n";
  s += "| " + Time(c, c.time.p50) + " | " + Time(c, c.time.p90) + " | " + Time(c, c.time.p99) +
       " | " + Time(c, c.time.mean) + " ± " + FormatNanos(c.time.stddev) + " |\n\n";
  if (!c.suspect.empty()) s += "⚠ **Suspect:** " + c.suspect + "\n\n";
  std::vector<std::string> per;
  if (c.alloc_bytes >= 0) {
    std::string a = FormatBytes(c.alloc_bytes) + " allocated";
    if (c.alloc_count >= 0) {
      char n[32];
      std::snprintf(n, sizeof n, " in %.2f allocations", c.alloc_count);
      a += n;
    }
    per.push_back(a);
  }
  if (c.file_io_bytes >= 0) per.push_back("file I/O " + FormatBytes(c.file_io_bytes));
  if (c.socket_io_bytes >= 0) per.push_back("socket I/O " + FormatBytes(c.socket_io_bytes));
  for (size_t i = 0; i < per.size(); ++i) s += (i == 0 ? "Per call: " : " · ") + per[i];
  if (!per.empty()) s += "\n\n";
  s += FormatCount(c.time.count) + " calls in " + FormatCount(c.runs) + " runs";
  if (c.machines > 0) s += " on " + FormatCount(c.machines) + "+ machines";
  s += " · " + std::to_string(c.platforms.size()) +
       (c.platforms.size() == 1 ? " platform" : " platforms");
  if (!c.platforms.empty()) {
    s += " (";
    for (size_t i = 0; i < c.platforms.size() && i < 4; ++i) s += (i ? ", " : "") + c.platforms[i];
    if (c.platforms.size() > 4) s += ", …";
    s += ")";
  }
  if (c.truncated) s += " · some runs cut short by the overhead budget";
  return s + "\n";
}

struct Document {
  std::string text;
  int64_t version = 0;
};

class Server {
 public:
  Server(int in_fd, int out_fd, LspOptions o) : in_(in_fd), out_(out_fd), opt_(std::move(o)) {}

  int Run() {
    std::thread reader([this] { ReadLoop(); });
    std::thread indexer([this] { IndexLoop(); });
    int code = 1;
    while (true) {
      json msg;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return !queue_.empty() || input_done_; });
        if (queue_.empty()) break;  // the input ended without exit
        msg = std::move(queue_.front());
        queue_.pop_front();
      }
      if (msg.contains("method") && msg["method"] == "exit") {
        code = shutdown_ ? 0 : 1;
        break;
      }
      Handle(msg);
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    index_cv_.notify_all();
    indexer.join();
    // The reader may be blocked in read(2) on an input that stays open.
    if (input_done_) {
      reader.join();
    } else {
      reader.detach();
    }
    return code;
  }

 private:
  // ------------------------------------------------------------ framing

  // One message's body; false at the end of the input.
  bool ReadFrame(std::string* body, bool* too_big) {
    size_t length = 0;
    bool have_length = false;
    std::string line;
    while (true) {  // headers, up to an empty line
      char ch;
      const ssize_t n = read(in_, &ch, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      if (ch != '\n') {
        line += ch;
        if (line.size() > 4096) line.erase(0, 2048);  // a runaway header line
        continue;
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) {
        if (have_length) break;
        continue;  // stray empty lines between messages
      }
      const std::string lower = [&] {
        std::string s = line.substr(0, line.find(':'));
        for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
      }();
      if (lower == "content-length") {
        const std::string v = line.substr(line.find(':') + 1);
        char* end = nullptr;
        const unsigned long long n2 = std::strtoull(v.c_str(), &end, 10);
        have_length = end != v.c_str();
        length = static_cast<size_t>(n2);
      }
      line.clear();
    }
    *too_big = length > opt_.max_message_bytes;
    body->clear();
    if (!*too_big) body->resize(length);
    size_t got = 0;
    char sink[65536];
    while (got < length) {
      const size_t want = *too_big ? std::min(sizeof sink, length - got) : length - got;
      const ssize_t n = read(in_, *too_big ? sink : body->data() + got, want);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  }

  void Write(const json& msg) {
    const std::string body = msg.dump(-1, ' ', false, json::error_handler_t::replace);
    const std::string frame = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    std::lock_guard<std::mutex> l(out_mu_);
    size_t done = 0;
    while (done < frame.size()) {
      const ssize_t n = write(out_, frame.data() + done, frame.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the client went away
      done += static_cast<size_t>(n);
    }
  }

  void Reply(const json& id, json result) {
    Write({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
  }
  void Error(const json& id, int code, const std::string& message) {
    Write({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
  }
  void Log(int type, const std::string& message) {
    Write({{"jsonrpc", "2.0"},
           {"method", "window/logMessage"},
           {"params", {{"type", type}, {"message", "fieldprof: " + message}}}});
  }

  void ReadLoop() {
    std::string body;
    bool too_big = false;
    while (ReadFrame(&body, &too_big)) {
      if (too_big) {
        Log(kLogError,
            "a message over " + std::to_string(opt_.max_message_bytes >> 20) + " MiB was dropped");
        continue;
      }
      json msg = json::parse(body, nullptr, /*allow_exceptions=*/false);
      if (msg.is_discarded()) {
        Error(nullptr, kParseError, "the message is not JSON");
        Log(kLogWarning, "a message that is not JSON was dropped");
        continue;
      }
      if (!msg.is_object()) {
        Error(nullptr, kInvalidRequest, "a message must be a JSON object");
        continue;
      }
      // A cancel takes effect here, before the request it names is handled.
      if (msg.contains("method") && msg["method"] == "$/cancelRequest") {
        if (msg.contains("params") && msg["params"].is_object() && msg["params"].contains("id")) {
          std::lock_guard<std::mutex> l(mu_);
          cancelled_.insert(msg["params"]["id"].dump());
        }
        continue;
      }
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back(std::move(msg));
      cv_.notify_one();
    }
    std::lock_guard<std::mutex> l(mu_);
    input_done_ = true;
    cv_.notify_all();
  }

  // ------------------------------------------------------------ index

  // The index for a request. Until the index thread has looked at the
  // cache once (built the index, or found no snapshot), a request waits for
  // it, at most opt_.load_wait_ms: editors ask for lenses right after
  // opening a file, and many never ask again.
  std::shared_ptr<const CostIndex> Index(const char* method) {
    std::unique_lock<std::mutex> l(index_mu_);
    if (looked_) return index_;
    const auto bound = std::chrono::milliseconds(opt_.load_wait_ms);
    if (index_looked_cv_.wait_for(l, bound, [&] { return looked_; })) return index_;
    const std::string dir = opt_.cache_dir;
    std::shared_ptr<const CostIndex> ix = index_;
    l.unlock();
    Log(kLogWarning, std::string(method) + " answered without field data: the snapshot cache " +
                         dir + " was still loading after " + std::to_string(opt_.load_wait_ms) +
                         " ms");
    return ix;
  }

  // The index thread has looked at `dir`: requests stop waiting, unless
  // another cache was configured in the meantime.
  void Looked(const std::string& dir) {
    {
      std::lock_guard<std::mutex> l(index_mu_);
      if (dir != opt_.cache_dir) return;
      looked_ = true;
    }
    index_looked_cv_.notify_all();
  }

  void IndexLoop() {
    std::string last_sig = "\x01";  // never a real signature: the first look builds
    std::string last_problem;
    while (true) {
      std::string dir;
      {
        std::lock_guard<std::mutex> l(index_mu_);
        dir = opt_.cache_dir;
      }
      if (dir.empty() && initialized_.load()) Looked(dir);  // nowhere to look: nothing to wait for
      if (!dir.empty() && initialized_.load()) {
        const std::string sig = SnapshotIndex::CacheSignature(dir) + "|" + dir;
        if (sig != last_sig) {
          const auto t0 = std::chrono::steady_clock::now();
          bool rebuilt = false;
          StatusOr<CostIndex> built = CostIndex::Build(SnapshotCache(dir), &rebuilt);
          const double ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
          if (built.ok()) {
            auto ix = std::make_shared<const CostIndex>(std::move(*built));
            char line[256];
            std::snprintf(line, sizeof line,
                          "index of %s: %llu APIs, snapshot %llu of %s, %u of %u fragments, "
                          "%s in %.0f ms",
                          dir.c_str(), static_cast<unsigned long long>(ix->symbols()),
                          static_cast<unsigned long long>(ix->snapshot_version()),
                          DateOf(ix->created_unix_ms()).c_str(), ix->fragments_held(),
                          ix->fragment_count(), rebuilt ? "built" : "opened", ms);
            {
              std::lock_guard<std::mutex> l(index_mu_);
              index_ = std::move(ix);
            }
            Log(kLogInfo, line);
            last_problem.clear();
            AskClientToRefresh();
          } else {
            const std::string problem =
                built.status().code() == StatusCode::kNotFound
                    ? "no snapshot in " + dir +
                          " yet (the agent fetches it; fieldprof pull --all fetches it now)"
                    : "the snapshot cache " + dir +
                          " could not be read: " + built.status().ToString();
            if (problem != last_problem) Log(kLogWarning, problem);
            last_problem = problem;
          }
          last_sig = sig;
          Looked(dir);
        }
      }
      std::unique_lock<std::mutex> l(mu_);
      index_cv_.wait_for(l, std::chrono::milliseconds(opt_.refresh_ms),
                         [&] { return stopping_ || reindex_ || wake_; });
      if (stopping_) return;
      if (reindex_) last_sig = "\x01";
      reindex_ = wake_ = false;
    }
  }

  // Lenses and hints were computed without the new index: the client asks
  // again, if it can be asked (server-to-client requests; their answers are
  // ignored).
  void AskClientToRefresh() {
    if (lens_refresh_) {
      Write({{"jsonrpc", "2.0"},
             {"id", "fieldprof-refresh-" + std::to_string(++out_id_)},
             {"method", "workspace/codeLens/refresh"}});
    }
    if (hint_refresh_) {
      Write({{"jsonrpc", "2.0"},
             {"id", "fieldprof-refresh-" + std::to_string(++out_id_)},
             {"method", "workspace/inlayHint/refresh"}});
    }
  }

  // ------------------------------------------------------------ dispatch

  void Handle(const json& msg) {
    const bool is_request = msg.contains("id");
    if (!msg.contains("method")) return;  // a response to one of ours
    if (!msg["method"].is_string()) {
      if (is_request) Error(msg["id"], kInvalidRequest, "method must be a string");
      return;
    }
    const std::string method = msg["method"];
    const json id = is_request ? msg["id"] : json();
    const json params = msg.contains("params") ? msg["params"] : json::object();
    if (is_request) {
      std::lock_guard<std::mutex> l(mu_);
      if (cancelled_.erase(id.dump()) > 0) {
        Error(id, kRequestCancelled, "cancelled");
        return;
      }
    }
    if (!initialized_ && method != "initialize") {
      if (is_request) Error(id, kServerNotInitialized, "initialize first");
      return;
    }
    if (shutdown_ && is_request) {
      Error(id, kInvalidRequest, "the server is shut down");
      return;
    }
    try {
      if (method == "initialize") {
        if (!is_request) return;
        Initialize(id, params);
      } else if (method == "initialized") {
      } else if (method == "shutdown") {
        shutdown_ = true;
        Reply(id, nullptr);
      } else if (method == "textDocument/didOpen") {
        const json& d = params.at("textDocument");
        docs_[d.at("uri").get<std::string>()] = {d.at("text").get<std::string>(),
                                                 d.value("version", int64_t{0})};
      } else if (method == "textDocument/didChange") {
        DidChange(params);
      } else if (method == "textDocument/didClose") {
        docs_.erase(params.at("textDocument").at("uri").get<std::string>());
      } else if (method == "workspace/didChangeConfiguration") {
        if (params.contains("settings") && params["settings"].is_object() &&
            params["settings"].contains("fieldprof")) {
          Configure(params["settings"]["fieldprof"]);
        }
      } else if (method == "textDocument/hover") {
        Reply(id, Hover(params));
      } else if (method == "textDocument/codeLens") {
        Reply(id, CodeLenses(params));
      } else if (method == "textDocument/inlayHint") {
        Reply(id, InlayHints(params));
      } else if (is_request) {
        Error(id, kMethodNotFound, "method not found: " + method);
      }
      // Other notifications ($/setTrace, didSave, ...) need nothing.
    } catch (const json::exception& e) {
      if (is_request) Error(id, kInvalidParams, std::string("invalid params: ") + e.what());
      Log(kLogWarning, method + ": invalid params: " + e.what());
    } catch (const std::exception& e) {
      if (is_request) Error(id, kInternalError, e.what());
      Log(kLogError, method + ": " + e.what());
    }
  }

  void Configure(const json& o) {
    if (!o.is_object()) return;
    std::lock_guard<std::mutex> l(index_mu_);
    if (o.contains("cacheDir") && o["cacheDir"].is_string()) {
      opt_.cache_dir = o["cacheDir"].get<std::string>();
      looked_ = false;  // requests wait for the new cache's first look
      std::lock_guard<std::mutex> l2(mu_);
      reindex_ = true;
      index_cv_.notify_all();
    }
    auto number = [&](const char* key, auto* target) {
      // Numbers out of range (negative, or past 1e18) are ignored, not cast.
      if (o.contains(key) && o[key].is_number() && o[key].get<double>() >= 0 &&
          o[key].get<double>() <= 1e18) {
        *target = o[key].get<std::remove_pointer_t<decltype(target)>>();
      }
    };
    number("minCalls", &opt_.min_calls);
    number("minRuns", &opt_.min_runs);
    number("minP50Ns", &opt_.min_p50_ns);
    if (o.contains("codeLens") && o["codeLens"].is_boolean()) opt_.code_lens = o["codeLens"];
    if (o.contains("inlayHints") && o["inlayHints"].is_boolean())
      opt_.inlay_hints = o["inlayHints"];
  }

  void Initialize(const json& id, const json& params) {
    if (params.contains("initializationOptions")) Configure(params["initializationOptions"]);
    if (params.contains("capabilities") && params["capabilities"].is_object()) {
      const json& ws = params["capabilities"].value("workspace", json::object());
      lens_refresh_ = ws.is_object() && ws.contains("codeLens") && ws["codeLens"].is_object() &&
                      ws["codeLens"].value("refreshSupport", false);
      hint_refresh_ = ws.is_object() && ws.contains("inlayHint") && ws["inlayHint"].is_object() &&
                      ws["inlayHint"].value("refreshSupport", false);
    }
    initialized_ = true;
    {
      std::lock_guard<std::mutex> l(mu_);
      wake_ = true;  // the index thread builds now, not at its next look
    }
    index_cv_.notify_all();
    json caps = {
        {"positionEncoding", "utf-16"},
        {"textDocumentSync", {{"openClose", true}, {"change", 2}}},  // incremental
        {"hoverProvider", true},
        {"codeLensProvider", {{"resolveProvider", false}}},
        {"inlayHintProvider", {{"resolveProvider", false}}},
    };
    Reply(id,
          {{"capabilities", caps}, {"serverInfo", {{"name", "fieldprof"}, {"version", "0.1.0"}}}});
  }

  void DidChange(const json& params) {
    const std::string uri = params.at("textDocument").at("uri");
    auto it = docs_.find(uri);
    if (it == docs_.end()) {
      Log(kLogWarning, "didChange for a document never opened: " + uri);
      return;
    }
    Document& d = it->second;
    for (const json& c : params.at("contentChanges")) {
      if (!c.contains("range")) {
        d.text = c.at("text").get<std::string>();
        continue;
      }
      const json& r = c["range"];
      const size_t a = OffsetOf(d.text, r.at("start").at("line"), r.at("start").at("character"));
      const size_t b = OffsetOf(d.text, r.at("end").at("line"), r.at("end").at("character"));
      d.text.replace(std::min(a, b), (std::max(a, b) - std::min(a, b)),
                     c.at("text").get<std::string>());
    }
    d.version = params["textDocument"].value("version", d.version);
  }

  // ------------------------------------------------------------ features

  // The entries to show for a name in this document: those of the modules
  // its #includes name when they decide among several, else all.
  struct Choice {
    std::vector<const ApiCost*> shown;
    std::vector<const ApiCost*> others;
    bool decided = false;  // the includes chose among several modules
  };
  Choice Choose(const std::vector<ApiCost>& all, const std::vector<std::string>& includes) {
    Choice ch;
    if (all.size() > 1) {
      for (const ApiCost& c : all) {
        (ModuleMatchesIncludes(c.module, includes) ? ch.shown : ch.others).push_back(&c);
      }
      ch.decided = !ch.shown.empty() && !ch.others.empty();
      if (ch.shown.empty()) std::swap(ch.shown, ch.others);
    } else {
      for (const ApiCost& c : all) ch.shown.push_back(&c);
    }
    return ch;
  }

  json Hover(const json& params) {
    const std::string uri = params.at("textDocument").at("uri");
    auto it = docs_.find(uri);
    if (it == docs_.end()) return nullptr;
    const std::string& text = it->second.text;
    const size_t at =
        OffsetOf(text, params.at("position").at("line"), params.at("position").at("character"));
    for (const PointMark& m : PointMarks(text)) {
      if (m.begin <= at && at <= m.end) return PointHover(text, m);
    }
    const Word w = IdentifierAt(text, at);
    if (w.name.empty()) return nullptr;
    std::shared_ptr<const CostIndex> ix = Index("textDocument/hover");
    if (!ix) return nullptr;
    const std::shared_ptr<const std::vector<ApiCost>> found = ix->Find(w.name);
    const std::vector<ApiCost>& all = *found;
    if (all.empty()) return nullptr;
    const Choice ch = Choose(all, IncludedHeaders(text));
    std::string md = "### " + w.name + " — field cost\n\n";
    if (ch.shown.size() > 1) {
      md += "Found in " + std::to_string(ch.shown.size()) +
            " modules; this source's includes do not tell which one it calls.\n\n";
    }
    for (size_t i = 0; i < ch.shown.size(); ++i) {
      const ApiCost& c = *ch.shown[i];
      if (i > 0) md += "\n---\n\n";
      md += "`" + c.module + "`" + (ch.decided ? " (by this source's includes)" : "") + "\n\n";
      md += Figures(c);
      md += "\n" + Bars(c) + "\n";
    }
    if (!ch.others.empty()) {
      md += "\n---\n\nAlso in:";
      for (const ApiCost* c : ch.others) {
        md += " `" + c->module + "` (p50 " + Time(*c, c->time.p50) + ", " +
              FormatCount(c->time.count) + " calls)";
      }
      md += "\n";
    }
    md += "\n---\n\n" + SnapshotLine(*ix);
    json range = {{"start", PositionOf(text, w.begin)}, {"end", PositionOf(text, w.end)}};
    return {{"contents", {{"kind", "markdown"}, {"value", md}}}, {"range", range}};
  }

  // An instrumentation point's field durations (docs/points.md): the
  // segments that start or end at it and its scope, per module, then the
  // tag's other segments in brief.
  json PointHover(const std::string& text, const PointMark& m) {
    std::shared_ptr<const CostIndex> ix = Index("textDocument/hover");
    if (!ix) return nullptr;
    const std::shared_ptr<const std::vector<PointSeries>> found = ix->FindPoints(m.tag);
    std::string md = "### " + m.macro + " " + m.tag + " · " + m.name + " — field durations\n\n";
    auto touches = [&](const PointSeries& p) {
      return p.scope == m.name || p.from == m.name || p.to == m.name;
    };
    auto label = [](const PointSeries& p) {
      return p.scope.empty() ? p.from + " → " + p.to : p.scope + " (scope)";
    };
    auto time = [](const PointSeries& p, double ns) {
      return FormatMetricValue(wire::METRIC_POINT_NS, ns, p.resolution_ns);
    };
    std::vector<std::string> modules;
    for (const PointSeries& p : *found) {
      if (std::find(modules.begin(), modules.end(), p.module) == modules.end()) {
        modules.push_back(p.module);
      }
    }
    if (modules.empty()) {
      md += "No field durations for tag `" + m.tag +
            "` yet. Points are summed from volunteers' measured runs of a program that "
            "marks them.\n";
    }
    for (size_t mi = 0; mi < modules.size(); ++mi) {
      const std::string& module = modules[mi];
      if (mi > 0) md += "\n---\n\n";
      uint32_t builds = 0;
      uint64_t machines = 0;
      std::vector<const PointSeries*> near, far;
      for (const PointSeries& p : *found) {
        if (p.module != module) continue;
        builds = std::max(builds, p.builds);
        machines = std::max(machines, p.machines);
        (touches(p) ? near : far).push_back(&p);
      }
      md += "`" + module + "`";
      if (builds > 1) md += " (" + std::to_string(builds) + " builds)";
      md += "\n\n";
      if (near.empty()) {
        md += "No segment starts or ends at `" + m.name + "` here.\n\n";
      } else {
        md +=
            "| segment | p50 | p90 | p99 | mean | calls | runs |\n|---|---|---|---|---|---|---|\n";
        for (const PointSeries* p : near) {
          md += "| " + label(*p) + " | " + time(*p, p->time.p50) + " | " + time(*p, p->time.p90) +
                " | " + time(*p, p->time.p99) + " | " + time(*p, p->time.mean) + " | " +
                FormatCount(p->time.count) + " | " + FormatCount(p->runs) + " |\n";
        }
        md += "\n";
      }
      if (!far.empty()) {
        md += "Other segments of `" + m.tag + "`:";
        for (size_t i = 0; i < far.size() && i < 6; ++i) {
          md += std::string(i ? " ·" : "") + " " + label(*far[i]) + " p50 " +
                time(*far[i], far[i]->time.p50);
        }
        if (far.size() > 6) md += " · " + std::to_string(far.size() - 6) + " more";
        md += "\n\n";
      }
      if (machines > 0) md += "Seen on " + FormatCount(machines) + "+ machines.\n";
    }
    if (modules.size() > 0 && std::find(modules.begin(), modules.end(), "main") != modules.end()) {
      md += "\n`main` sums the points of every user's own program that uses this tag.\n";
    }
    md += "\n---\n\n" + SnapshotLine(*ix);
    json range = {{"start", PositionOf(text, m.begin)}, {"end", PositionOf(text, m.end)}};
    return {{"contents", {{"kind", "markdown"}, {"value", md}}}, {"range", range}};
  }

  static std::string SnapshotLine(const CostIndex& ix) {
    std::string s = "Field snapshot " + std::to_string(ix.snapshot_version()) + " of " +
                    DateOf(ix.created_unix_ms());
    if (ix.fragments_held() < ix.fragment_count()) {
      s += " (" + std::to_string(ix.fragments_held()) + " of " +
           std::to_string(ix.fragment_count()) + " fragments held)";
    }
    return s + "\n";
  }

  // Call sites whose API has solid data and costs at least the threshold.
  struct Site {
    CallSite call;
    const ApiCost* cost;  // in `entries`
    bool ambiguous;
    std::shared_ptr<const std::vector<ApiCost>> entries;
  };
  std::vector<Site> SolidSites(const std::string& text, const char* method) {
    std::vector<Site> out;
    std::shared_ptr<const CostIndex> ix = Index(method);
    if (!ix) return out;
    const std::vector<std::string> includes = IncludedHeaders(text);
    for (const CallSite& cs : CallSites(text)) {
      std::shared_ptr<const std::vector<ApiCost>> found = ix->Find(cs.name);
      if (found->empty()) continue;
      const Choice ch = Choose(*found, includes);
      const ApiCost* c = ch.shown.front();  // the most called of those shown
      if (c->time.count < opt_.min_calls || c->runs < opt_.min_runs ||
          c->time.p50 < opt_.min_p50_ns) {
        continue;
      }
      out.push_back({cs, c, ch.shown.size() > 1, std::move(found)});
    }
    return out;
  }

  // Instrumentation points whose field series has solid data above the
  // threshold: a scope's own duration (FP_SCOPE, FP_BEGIN, FP_END), or
  // for a point the most called segment that ends there.
  struct PointSite {
    PointMark mark;
    std::string label;  // "parse", "load → parsed"
    PointSeries series;
  };
  std::vector<PointSite> SolidPoints(const std::string& text, const char* method) {
    std::vector<PointSite> out;
    const std::vector<PointMark> marks = PointMarks(text);
    if (marks.empty()) return out;
    std::shared_ptr<const CostIndex> ix = Index(method);
    if (!ix) return out;
    for (const PointMark& m : marks) {
      const bool scope = m.macro.rfind("FP_POINT", 0) != 0;
      const PointSeries* best = nullptr;
      for (const PointSeries& p : *ix->FindPoints(m.tag)) {
        const bool fits = scope ? p.scope == m.name : p.to == m.name && p.scope.empty();
        if (fits && (best == nullptr || p.time.count > best->time.count)) best = &p;
      }
      if (best == nullptr || best->time.count < opt_.min_calls || best->runs < opt_.min_runs ||
          best->time.p50 < opt_.min_p50_ns) {
        continue;
      }
      out.push_back({m, scope ? best->scope : best->from + " → " + best->to, *best});
    }
    return out;
  }
  static std::string PointTime(const PointSeries& p, double ns) {
    return FormatMetricValue(wire::METRIC_POINT_NS, ns, p.resolution_ns);
  }

  // The text of the request's document; nullptr when it was never opened.
  const std::string* Text(const json& params) const {
    auto it = docs_.find(params.at("textDocument").at("uri").get<std::string>());
    return it == docs_.end() ? nullptr : &it->second.text;
  }

  json CodeLenses(const json& params) {
    json out = json::array();
    const std::string* doc = opt_.code_lens ? Text(params) : nullptr;
    if (doc == nullptr) return out;
    const std::string& text = *doc;
    const Positions pos(text);
    for (const Site& s : SolidSites(text, "textDocument/codeLens")) {
      std::string title = s.call.name + " ≈ " + Time(*s.cost, s.cost->time.p50) + " p50, p99 " +
                          Time(*s.cost, s.cost->time.p99) + " (field";
      title += s.ambiguous ? ", " + s.cost->module + " of several)" : ")";
      if (!s.cost->suspect.empty()) title += " ⚠ suspect";
      out.push_back({{"range", {{"start", pos.At(s.call.begin)}, {"end", pos.At(s.call.end)}}},
                     {"command", {{"title", title}, {"command", ""}}}});
    }
    for (const PointSite& p : SolidPoints(text, "textDocument/codeLens")) {
      const std::string title = p.mark.tag + ": " + p.label + " ≈ " +
                                PointTime(p.series, p.series.time.p50) + " p50, p99 " +
                                PointTime(p.series, p.series.time.p99) + " (field, " +
                                p.series.module + ")";
      out.push_back({{"range", {{"start", pos.At(p.mark.begin)}, {"end", pos.At(p.mark.end)}}},
                     {"command", {{"title", title}, {"command", ""}}}});
    }
    return out;
  }

  json InlayHints(const json& params) {
    json out = json::array();
    const std::string* doc = opt_.inlay_hints ? Text(params) : nullptr;
    if (doc == nullptr) return out;
    const std::string& text = *doc;
    size_t from = 0, to = text.size();
    if (params.contains("range")) {
      const json& r = params["range"];
      from = OffsetOf(text, r.at("start").at("line"), r.at("start").at("character"));
      to = OffsetOf(text, r.at("end").at("line"), r.at("end").at("character"));
    }
    const Positions pos(text);
    for (const Site& s : SolidSites(text, "textDocument/inlayHint")) {
      if (s.call.after < from || s.call.after > to) continue;
      out.push_back({{"position", pos.At(s.call.after)},
                     {"label", "≈ " + Time(*s.cost, s.cost->time.p50) + " p50" +
                                   (s.cost->suspect.empty() ? "" : " ⚠")},
                     {"paddingLeft", true},
                     {"tooltip", s.call.name + " in " + s.cost->module + ": " +
                                     FormatCount(s.cost->time.count) + " calls in " +
                                     FormatCount(s.cost->runs) + " runs (fieldprof)"}});
    }
    for (const PointSite& p : SolidPoints(text, "textDocument/inlayHint")) {
      // After the macro's parenthesis; a scope's hint reads as its
      // duration, a point's as the time since the segment's start.
      if (p.mark.after < from || p.mark.after > to) continue;
      const bool scope = !p.series.scope.empty();
      out.push_back({{"position", pos.At(p.mark.after)},
                     {"label", "≈ " + PointTime(p.series, p.series.time.p50) +
                                   (scope ? " p50" : " p50 since " + p.series.from)},
                     {"paddingLeft", true},
                     {"tooltip", p.mark.tag + ": " + p.label + " in " + p.series.module + ": " +
                                     FormatCount(p.series.time.count) + " in " +
                                     FormatCount(p.series.runs) + " runs (fieldprof)"}});
    }
    return out;
  }

  const int in_, out_;
  LspOptions opt_;  // cache_dir under index_mu_

  std::mutex mu_;  // queue_, cancelled_, input_done_, stopping_, reindex_, wake_
  std::condition_variable cv_, index_cv_;
  std::deque<json> queue_;
  std::set<std::string> cancelled_;
  bool input_done_ = false, stopping_ = false;
  bool reindex_ = false;  // the cache dir changed: build again
  bool wake_ = false;     // look now

  std::mutex out_mu_;
  std::mutex index_mu_;  // index_, looked_, opt_.cache_dir
  std::condition_variable index_looked_cv_;
  std::shared_ptr<const CostIndex> index_;
  bool looked_ = false;  // the cache as configured was looked at once
  std::atomic<bool> initialized_{false};
  std::atomic<uint64_t> out_id_{0};
  std::atomic<bool> lens_refresh_{false}, hint_refresh_{false};  // the client can be asked

  // The handler thread's own.
  bool shutdown_ = false;
  std::map<std::string, Document> docs_;
};

}  // namespace

int RunLspServer(int in_fd, int out_fd, LspOptions options) {
  Server s(in_fd, out_fd, std::move(options));
  return s.Run();
}

}  // namespace fieldprof::tools
