// The language server (server_impl.h): the cost index, kept by its own
// thread from the snapshot cache, and the client asked to refresh when it
// changes.
#include "tools/ide/server_impl.h"

namespace fieldprof::tools::lsp {

std::shared_ptr<const CostIndex> Server::Index(const char* method) {
  std::unique_lock<std::mutex> l(index_mu_);
  if (looked_) return index_;
  const auto bound = std::chrono::milliseconds(opt_.load_wait_ms);
  if (index_looked_cv_.wait_for(l, bound, [&] { return looked_; })) return index_;
  const std::string dir = opt_.cache_dir;
  std::shared_ptr<const CostIndex> ix = index_;
  l.unlock();
  Log(kLogWarning, std::string(method) + " answered without field data: the snapshot cache " + dir +
                       " was still loading after " + std::to_string(opt_.load_wait_ms) + " ms");
  return ix;
}

void Server::Looked(const std::string& dir) {
  {
    std::lock_guard<std::mutex> l(index_mu_);
    if (dir != opt_.cache_dir) return;
    looked_ = true;
  }
  index_looked_cv_.notify_all();
}

void Server::IndexLoop() {
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

void Server::AskClientToRefresh() {
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

}  // namespace fieldprof::tools::lsp
