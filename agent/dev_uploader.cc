#include "agent/dev_uploader.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include "common/dev_run.h"
#include "common/durable_file.h"
#include "common/options.h"
#include "common/points_file.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof::agent {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kKilledAfterMs = 10000;  // an unfinished run, unwritten this long

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Waiting {
  std::string name;  // in the spool
  int64_t written_ms = 0;
  uint64_t bytes = 0;
};

// The spool's run files, by when they were last written: those whose
// process finished them, or left them unwritten for 10 s.
std::vector<Waiting> WaitingRuns(const std::string& spool_dir, int64_t now_ms) {
  std::vector<Waiting> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(spool_dir, ec)) {
    if (e.path().extension() != ".fppoints") continue;
    struct stat st;
    if (stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const int64_t written =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (now_ms - written < kKilledAfterMs) {
      StatusOr<std::string> bytes = ReadWholeFile(e.path().string());
      StatusOr<local::PointsRun> run =
          bytes.ok() ? local::DecodePointsRun(*bytes) : StatusOr<local::PointsRun>(bytes.status());
      if (!run.ok() || !run->complete) continue;  // still being written
    }
    out.push_back({e.path().filename().string(), written, static_cast<uint64_t>(st.st_size)});
  }
  std::sort(out.begin(), out.end(), [](const Waiting& a, const Waiting& b) {
    return a.written_ms != b.written_ms ? a.written_ms < b.written_ms : a.name < b.name;
  });
  return out;
}

std::string RandomId() {
  std::string id(16, '\0');
  if (getrandom(id.data(), id.size(), 0) != static_cast<ssize_t>(id.size())) {
    const int64_t t = NowMs();
    id.replace(0, sizeof t, reinterpret_cast<const char*>(&t), sizeof t);
  }
  return id;
}

}  // namespace

int64_t DevSealDeadline(const std::string& spool_dir, int64_t max_age_ms) {
  if (spool_dir.empty()) return 0;
  const int64_t now = NowMs();
  int64_t next = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(spool_dir, ec)) {
    if (e.path().extension() != ".fppoints") continue;
    struct stat st;
    if (stat(e.path().c_str(), &st) != 0) continue;
    const int64_t written =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
    // Due at its max age; one still unfinished then is looked at again
    // when it would count as killed. Past both, it is due now.
    int64_t due = now;
    for (const int64_t at : {written + max_age_ms, written + kKilledAfterMs}) {
      if (at > now) due = due == now ? at : std::min(due, at);
    }
    if (next == 0 || due < next) next = due;
  }
  return next;
}

DevUploader::DevUploader(DevConfig config)
    : config_(std::move(config)), outbox_(config_.outbox_dir, config_.quarantine_dir) {}

Status DevUploader::Init() {
  FP_RETURN_IF_ERROR(MakeDirs(config_.spool_dir));
  FP_RETURN_IF_ERROR(outbox_.Init());
  return outbox_.Recover(config_.spool_dir);
}

StatusOr<DevPassResult> DevUploader::Pass(bool flush, bool upload, HttpsClient& client) {
  DevPassResult r;
  FP_RETURN_IF_ERROR(outbox_.Recover(config_.spool_dir));
  const int64_t now = NowMs();
  const std::vector<Waiting> waiting = WaitingRuns(config_.spool_dir, now);
  uint64_t total = 0;
  for (const Waiting& w : waiting) total += w.bytes;
  const bool due =
      !waiting.empty() && (flush || now - waiting.front().written_ms >= config_.max_age_ms ||
                           total >= static_cast<uint64_t>(config_.max_bytes));
  if (due) {
    wire::DevUpload up;
    up.set_schema_version(1);
    std::vector<std::string> consumed;
    auto seal = [&]() -> Status {
      if (up.runs_size() == 0) return Status::Ok();
      const std::string id = RandomId();
      FP_RETURN_IF_ERROR(outbox_.Seal(OutboxName(NowMs(), id), up.SerializeAsString(),
                                      config_.spool_dir, consumed));
      r.runs_sealed += up.runs_size();
      ++r.uploads_sealed;
      up.clear_runs();
      consumed.clear();
      return Status::Ok();
    };
    for (const Waiting& w : waiting) {
      StatusOr<wire::DevRun> run = DevRunOf(config_.spool_dir + "/" + w.name);
      if (!run.ok()) {  // no points, or damaged: set aside, never sent
        std::error_code ec;
        fs::rename(config_.spool_dir + "/" + w.name, config_.quarantine_dir + "/" + w.name, ec);
        continue;
      }
      if (up.runs_size() > 0 &&
          up.ByteSizeLong() + run->ByteSizeLong() + 8 > static_cast<size_t>(config_.max_bytes)) {
        FP_RETURN_IF_ERROR(seal());
      }
      *up.add_runs() = std::move(*run);
      consumed.push_back(w.name);
    }
    FP_RETURN_IF_ERROR(seal());
  }
  if (upload) r.upload_status = Send(client, &r);
  FP_ASSIGN_OR_RETURN(std::vector<OutboxEntry> left, outbox_.List());
  r.uploads_waiting = static_cast<int>(left.size());
  return r;
}

Status DevUploader::Send(HttpsClient& client, DevPassResult* r) {
  FP_ASSIGN_OR_RETURN(std::vector<OutboxEntry> entries, outbox_.List());
  if (entries.empty()) return Status::Ok();
  FP_ASSIGN_OR_RETURN(std::string token_line, ReadWholeFile(config_.token_file));
  const std::string token(TrimSpace(token_line.substr(0, token_line.find('\n'))));
  if (token.empty()) return InvalidArgument("no developer token in " + config_.token_file);
  const HttpHeaders auth = {{"Authorization", "Bearer " + token}};
  for (const OutboxEntry& e : entries) {
    FP_ASSIGN_OR_RETURN(std::string bytes, outbox_.Read(e));
    StatusOr<HttpReply> reply =
        client.Request("POST", "/v1/dev/runs", "application/x-protobuf", bytes, auth);
    if (!reply.ok()) return reply.status();
    const int code = reply->status;
    if (code >= 200 && code < 300) {
      FP_RETURN_IF_ERROR(outbox_.Remove(e));
      ++r->uploads_sent;
      continue;
    }
    if (code == 400 || code == 403 || code == 413) {
      FP_RETURN_IF_ERROR(
          outbox_.Quarantine(e, "HTTP " + std::to_string(code) + ": " + reply->body));
      ++r->uploads_quarantined;
      continue;
    }
    return Unavailable("developer runs: the aggregator answered HTTP " + std::to_string(code) +
                       (code == 401 ? " (is the developer token right?)" : ""));
  }
  return Status::Ok();
}

}  // namespace fieldprof::agent
