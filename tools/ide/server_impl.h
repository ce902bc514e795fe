// The language server's class, whose parts live in four files:
// server.cc (the loop, JSON-RPC framing, dispatch and configuration),
// server_index.cc (the thread that keeps the cost index from the snapshot
// cache), server_features.cc (hover, code lenses, inlay hints) and
// server_cxx.cc (C++ documents: the calls Clang resolves, their hover).
// Only those files include it.
#ifndef FIELDPROF_TOOLS_IDE_SERVER_IMPL_H_
#define FIELDPROF_TOOLS_IDE_SERVER_IMPL_H_

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

#include "common/snapshot/snapshot_cache.h"
#include "tools/ide/cost_index.h"
#include "tools/ide/cxx_calls.h"
#include "tools/ide/server.h"
#include "tools/ide/source.h"
#include "tools/shared/format.h"

namespace fieldprof::tools::lsp {

using json = nlohmann::json;

// JSON-RPC and LSP error codes.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
inline constexpr int kServerNotInitialized = -32002;
inline constexpr int kRequestCancelled = -32800;

// LSP MessageType.
inline constexpr int kLogError = 1, kLogWarning = 2, kLogInfo = 3;

inline std::string DateOf(int64_t unix_ms) {
  char out[32] = "?";
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  struct tm tm;
  if (gmtime_r(&secs, &tm) != nullptr) std::strftime(out, sizeof out, "%Y-%m-%d", &tm);
  return out;
}

// The file a `file://` URI names, %-escapes decoded (a host, if any,
// ignored); for another scheme (an unsaved buffer), a name that no file
// has, in the current folder.
std::string PathOfUri(const std::string& uri);

struct Document {
  std::string text;
  int64_t version = 0;
  std::string uri;
  uint64_t edits = 0;    // changes since opened: what a C++ parse is keyed by
  std::string language;  // the client's languageId: "c", "cpp", ...
  std::string path;      // the file's, from its URI
  std::string told;      // the last parse problem logged for it
};

class Server {
 public:
  Server(int in_fd, int out_fd, LspOptions o) : in_(in_fd), out_(out_fd), opt_(std::move(o)) {}

  int Run();

 private:
  // ------------------------------------------------------------ framing

  // One message's body; false at the end of the input.
  bool ReadFrame(std::string* body, bool* too_big);

  void Write(const json& msg);

  void Reply(const json& id, json result);
  void Error(const json& id, int code, const std::string& message);
  void Log(int type, const std::string& message);

  void ReadLoop();

  // ------------------------------------------------------------ index

  // The index for a request. Until the index thread has looked at the
  // cache once (built the index, or found no snapshot), a request waits for
  // it, at most opt_.load_wait_ms: editors ask for lenses right after
  // opening a file, and many never ask again.
  std::shared_ptr<const CostIndex> Index(const char* method);

  // The index thread has looked at `dir`: requests stop waiting, unless
  // another cache was configured in the meantime.
  void Looked(const std::string& dir);

  void IndexLoop();

  // Lenses and hints were computed without the new index: the client asks
  // again, if it can be asked (server-to-client requests; their answers are
  // ignored).
  void AskClientToRefresh();

  // ------------------------------------------------------------ dispatch

  void Handle(const json& msg);

  void Configure(const json& o);

  void Initialize(const json& id, const json& params);

  void DidChange(const json& params);

  // ------------------------------------------------------------ features

  // The entries to show for a name in this document: those of the modules
  // its #includes name when they decide among several, else all.
  struct Choice {
    std::vector<const ApiCost*> shown;
    std::vector<const ApiCost*> others;
    bool decided = false;  // the includes chose among several modules
  };
  Choice Choose(const std::vector<ApiCost>& all, const std::vector<std::string>& includes);

  json Hover(const json& params);

  // The figures of every module's entry for an API, as a hover shows them.
  std::string Cards(const std::vector<ApiCost>& all, const std::string& text);

  // ------------------------------------------------------------ C++

  // The document's calls as Clang resolves them (server_cxx.cc); null for
  // a C document, or when libclang is off or missing (logged once).
  const CxxUnit* CxxUnitOf(Document& d);

  // The hover of the calls at one place: each callee's exact API, its
  // field figures, or why there are none.
  json CxxHover(const std::string& text, const std::vector<const CxxCall*>& calls);

  // Call sites of a C++ document with their APIs' entries, for lenses and
  // hints, from Clang's calls (SolidSites adds, by name, those of a file
  // Clang could not read whole).
  struct Site;
  void CxxSites(const CxxUnit& u, const CostIndex& ix, std::vector<Site>* out);

  // An instrumentation point's field durations (docs/points.md): the
  // segments that start or end at it and its scope, per module, then the
  // tag's other segments in brief.
  json PointHover(const std::string& text, const PointMark& m);

  static std::string SnapshotLine(const CostIndex& ix);

  // Call sites whose API has solid data and costs at least the threshold.
  struct Site {
    CallSite call;
    const ApiCost* cost;  // in `entries`
    bool ambiguous;
    std::shared_ptr<const std::vector<ApiCost>> entries;
  };
  std::vector<Site> SolidSites(Document& d, const char* method);
  bool Solid(const ApiCost& c) const {
    return c.time.count >= opt_.min_calls && c.runs >= opt_.min_runs &&
           c.time.p50 >= opt_.min_p50_ns;
  }

  // Instrumentation points whose field series has solid data above the
  // threshold: a scope's own duration (FP_SCOPE, FP_BEGIN, FP_END), or
  // for a point the most called segment that ends there.
  struct PointSite {
    PointMark mark;
    std::string label;  // "parse", "load → parsed"
    PointSeries series;
  };
  std::vector<PointSite> SolidPoints(const std::string& text, const char* method);
  static std::string PointTime(const PointSeries& p, double ns);

  // The request's document; nullptr when it was never opened.
  Document* Doc(const json& params);

  json CodeLenses(const json& params);

  json InlayHints(const json& params);

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
  std::unique_ptr<CxxCalls> cxx_;
  bool cxx_tried_ = false;  // libclang was looked for
};

}  // namespace fieldprof::tools::lsp

#endif  // FIELDPROF_TOOLS_IDE_SERVER_IMPL_H_
