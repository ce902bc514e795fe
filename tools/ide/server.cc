// The language server (server_impl.h): the loop, JSON-RPC framing over
// stdin and stdout, dispatch and configuration.
#include "tools/ide/server.h"

#include <filesystem>

#include "tools/ide/server_impl.h"

namespace fieldprof::tools {
namespace lsp {

int Server::Run() {
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
  if (input_done_ || opt_.join_reader) {
    reader.join();
  } else {
    reader.detach();
  }
  return code;
}

bool Server::ReadFrame(std::string* body, bool* too_big) {
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

void Server::Write(const json& msg) {
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

void Server::Reply(const json& id, json result) {
  Write({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
}

void Server::Error(const json& id, int code, const std::string& message) {
  Write({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
}

void Server::Log(int type, const std::string& message) {
  Write({{"jsonrpc", "2.0"},
         {"method", "window/logMessage"},
         {"params", {{"type", type}, {"message", "fieldprof: " + message}}}});
}

void Server::ReadLoop() {
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

void Server::Handle(const json& msg) {
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
      const std::string uri = d.at("uri").get<std::string>();
      Document& doc = docs_[uri];
      if (cxx_) cxx_->Close(uri);  // opened again: parsed anew
      doc = Document();
      doc.uri = uri;
      doc.text = d.at("text").get<std::string>();
      doc.version = d.value("version", int64_t{0});
      doc.language = d.value("languageId", "");
      doc.path = PathOfUri(uri);
    } else if (method == "textDocument/didChange") {
      DidChange(params);
    } else if (method == "textDocument/didClose") {
      auto it = docs_.find(params.at("textDocument").at("uri").get<std::string>());
      if (it != docs_.end()) {
        if (cxx_) cxx_->Close(it->first);
        docs_.erase(it);
      }
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

void Server::Configure(const json& o) {
  if (!o.is_object()) return;
  std::lock_guard<std::mutex> l(index_mu_);
  if (o.contains("cacheDir") && o["cacheDir"].is_string()) {
    // Absolute: nothing the server runs may make it name another folder.
    std::error_code ec;
    const std::filesystem::path dir =
        std::filesystem::absolute(o["cacheDir"].get<std::string>(), ec);
    opt_.cache_dir = ec ? o["cacheDir"].get<std::string>() : dir.lexically_normal().string();
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
  if (o.contains("inlayHints") && o["inlayHints"].is_boolean()) opt_.inlay_hints = o["inlayHints"];
  if (o.contains("cxx") && o["cxx"].is_boolean()) {
    opt_.cxx = o["cxx"];
    if (!opt_.cxx) {  // the parsed units' memory back (Configure runs on the handler thread)
      cxx_.reset();
      cxx_tried_ = false;
    }
  }
}

void Server::Initialize(const json& id, const json& params) {
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

void Server::DidChange(const json& params) {
  const std::string uri = params.at("textDocument").at("uri");
  auto it = docs_.find(uri);
  if (it == docs_.end()) {
    Log(kLogWarning, "didChange for a document never opened: " + uri);
    return;
  }
  Document& d = it->second;
  ++d.edits;  // before the text changes: a change that fails half-way still counts
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

}  // namespace lsp

int RunLspServer(int in_fd, int out_fd, LspOptions options) {
  lsp::Server s(in_fd, out_fd, std::move(options));
  return s.Run();
}

}  // namespace fieldprof::tools
