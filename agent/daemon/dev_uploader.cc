#include "agent/daemon/dev_uploader.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "agent/daemon/agent_internal.h"
#include "common/base/durable_file.h"
#include "common/crypto/signing.h"
#include "common/points/dev_run.h"
#include "common/points/points_file.h"
#include "common/points/points_format.h"
#include "common/proto/fieldprof.pb.h"
#include "common/settings/options.h"
#include "common/wire/wire.h"

namespace fieldprof::agent {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kKilledAfterMs = 10000;  // an unfinished run, unwritten this long

struct Waiting {
  std::string name;  // in the spool
  int64_t written_ms = 0;
  uint64_t bytes = 0;
};

// The spool's run files, by when they were last written: those whose
// process finished them (and whose stacks, if any, the command named:
// points_names.h), or left them unwritten for 10 s; in *open, those
// still being written. A recent file is read on from where `scans` last
// stopped in it, to see whether its end mark has come.
std::vector<Waiting> WaitingRuns(const std::string& spool_dir, int64_t now_ms,
                                 std::map<std::string, fieldprof::PointsScan>* scans,
                                 std::vector<Waiting>* open) {
  std::vector<Waiting> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(spool_dir, ec)) {
    if (e.path().extension() != ".fppoints") continue;
    struct stat st;
    if (stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const int64_t written =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (now_ms - written < kKilledAfterMs) {
      fieldprof::PointsScan& scan = (*scans)[e.path().filename().string()];
      if (!fieldprof::ScanPointsFile(e.path().string(), &scan).ok() || !scan.Finished()) {
        // still being written, or its stacks' names still to come
        open->push_back({e.path().filename().string(), written, static_cast<uint64_t>(st.st_size)});
        continue;
      }
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

// What has gone up of a run still being written, kept beside it in the
// spool ("NAME.sent": its id in hex, the bytes sealed, the bytes being
// sealed). The intent is written before a part is sealed and the sealed
// count after, so a crash between them seals the same bytes again under
// the same id, which the aggregator takes as a duplicate.
struct Sent {
  std::string id;  // 16 bytes; empty: nothing sealed yet
  uint64_t sealed = 0, intent = 0;
  int64_t written_ms = 0;  // when it was last written (0: absent)
};

std::string SentPath(const std::string& spool_dir, const std::string& name) {
  return spool_dir + "/" + name + ".sent";
}

Sent ReadSent(const std::string& spool_dir, const std::string& name) {
  Sent s;
  const std::string path = SentPath(spool_dir, name);
  StatusOr<std::string> text = ReadWholeFile(path);
  struct stat st;
  if (!text.ok() || stat(path.c_str(), &st) != 0) return s;
  char hex[33] = {};
  unsigned long long sealed = 0, intent = 0;
  std::string raw;
  if (std::sscanf(text->c_str(), "%32s %llu %llu", hex, &sealed, &intent) != 3 ||
      !HexDecode(hex, &raw) || raw.size() != 16) {
    return s;  // damaged: as if nothing went up (the run's next part starts it again)
  }
  s.id = raw;
  s.sealed = sealed;
  s.intent = intent;
  s.written_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  return s;
}

Status WriteSent(const std::string& spool_dir, const std::string& name, const Sent& s) {
  return WriteFileDurably(
      SentPath(spool_dir, name),
      HexEncode(s.id) + " " + std::to_string(s.sealed) + " " + std::to_string(s.intent) + "\n",
      FileAccess::kPrivate);
}

// The run's start (ms since the epoch) from its header, 0 when unread.
int64_t StartMs(const std::string& bytes) {
  constexpr size_t kAt = points::kMagicSize + 1 + 4;  // 'H', pid
  uint64_t ns = 0;
  if (bytes.size() < kAt + 8 || bytes[points::kMagicSize] != points::kHeader) return 0;
  std::memcpy(&ns, bytes.data() + kAt, 8);
  return static_cast<int64_t>(ns / 1000000);
}

// One part of a run, sealed in the outbox as an upload; `consumed` (in
// `spool`) goes with it. Sent in the outbox's (name) order: a part's name
// sorts after its run's earlier parts, also when sealed in the same
// millisecond.
Status SealUpload(Outbox* outbox, const std::string& spool, wire::DevRun part,
                  const std::vector<std::string>& consumed) {
  wire::DevUpload up;
  up.set_schema_version(1);
  *up.add_runs() = std::move(part);
  FP_ASSIGN_OR_RETURN(std::vector<OutboxEntry> sealed, outbox->List());
  int64_t ms = NowMs();
  if (!sealed.empty()) ms = std::max<int64_t>(ms, std::atoll(sealed.back().name.c_str()) + 1);
  return outbox->Seal(OutboxName(ms, RandomId()), up.SerializeAsString(), spool, consumed);
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
    // when it would count as killed. Past both, it is due now. One still
    // being written is due when its bytes not yet sent reach the max age:
    // counted from its last part, or from its start.
    int64_t due = now;
    for (const int64_t at : {written + max_age_ms, written + kKilledAfterMs}) {
      if (at > now) due = due == now ? at : std::min(due, at);
    }
    if (now - written < kKilledAfterMs) {
      const Sent sent = ReadSent(spool_dir, e.path().filename().string());
      int64_t since = sent.written_ms;
      if (since == 0) {
        char head[64];
        FILE* f = std::fopen(e.path().c_str(), "rb");
        const size_t n = f != nullptr ? std::fread(head, 1, sizeof head, f) : 0;
        if (f != nullptr) std::fclose(f);
        since = StartMs(std::string(head, n));
      }
      // Only with bytes not yet sent; looked at again in 200 ms when
      // they are due but hold no point yet (no spin).
      if (since > 0 && static_cast<uint64_t>(st.st_size) > sent.sealed) {
        due = std::min(due, std::max(now + 200, since + max_age_ms));
      }
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
  std::vector<Waiting> open;
  const std::vector<Waiting> waiting = WaitingRuns(config_.spool_dir, now, &scans_, &open);
  for (const Waiting& w : open) FP_RETURN_IF_ERROR(SealParts(w.name, now, flush, false, &r));
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
      // Its last part; or a run larger than an upload may be, in parts.
      if (ReadSent(config_.spool_dir, w.name).written_ms != 0 ||
          w.bytes > static_cast<uint64_t>(config_.max_bytes)) {
        FP_RETURN_IF_ERROR(seal());
        FP_RETURN_IF_ERROR(SealParts(w.name, now, true, true, &r));
        continue;
      }
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
  // Runs gone from the spool (sealed whole, or set aside) are forgotten.
  for (auto it = scans_.begin(); it != scans_.end();) {
    std::error_code ec;
    it = fs::exists(config_.spool_dir + "/" + it->first, ec) ? std::next(it) : scans_.erase(it);
  }
  if (upload) r.upload_status = Send(client, &r);
  FP_ASSIGN_OR_RETURN(std::vector<OutboxEntry> left, outbox_.List());
  r.uploads_waiting = static_cast<int>(left.size());
  return r;
}

Status DevUploader::SealParts(const std::string& name, int64_t now, bool flush, bool last,
                              DevPassResult* r) {
  const std::string& spool = config_.spool_dir;
  const std::string path = spool + "/" + name;
  Sent sent = ReadSent(spool, name);
  // Only what was not sealed yet is read (and the last byte sealed, which
  // a run with nothing left resends to close itself). The run's tags and
  // events, which each part carries (the aggregator keeps the largest),
  // come from reading on where the last pass stopped.
  const uint64_t base = sent.sealed > 0 ? sent.sealed - 1 : 0;
  FP_ASSIGN_OR_RETURN(const std::string tail, ReadFileFrom(path, base));
  const uint64_t size = base + tail.size();
  fieldprof::PointsScan& scan = scans_[name];
  const Status scanned = fieldprof::ScanPointsFile(path, &scan);
  StatusOr<wire::DevRun> as_read =
      scanned.ok() ? DevRunOfScan(scan, name) : StatusOr<wire::DevRun>(scanned);
  if (!as_read.ok()) {
    if (!last || !sent.id.empty()) return Status::Ok();  // no points yet
    // Ended with no points, or damaged, before anything went: set aside,
    // as a whole run like it would be.
    std::error_code ec;
    fs::rename(path, config_.quarantine_dir + "/" + name, ec);
    return Status::Ok();
  }
  // Seals bytes [sent.sealed, cut) as one part (its run's first when
  // nothing went up yet: its id the hash of those bytes); `close`: the
  // run's last, consuming the file.
  auto seal = [&](uint64_t cut, bool close) -> Status {
    wire::DevRun part = *as_read;
    if (sent.id.empty()) sent.id = Sha256(std::string_view(tail).substr(0, cut)).substr(0, 16);
    part.set_id(sent.id);
    part.set_offset(sent.sealed);
    part.set_file(tail.substr(sent.sealed - base, cut - sent.sealed));
    part.set_open(!close);
    sent.intent = cut;
    FP_RETURN_IF_ERROR(WriteSent(spool, name, sent));
    std::vector<std::string> consumed;
    if (close) consumed = {name, name + ".sent"};
    FP_RETURN_IF_ERROR(SealUpload(&outbox_, spool, std::move(part), consumed));
    ++r->uploads_sealed;
    ++r->runs_sealed;
    sent.sealed = cut;
    return close ? Status::Ok() : WriteSent(spool, name, sent);
  };
  if (sent.intent > sent.sealed && sent.intent <= size) {  // a seal a crash cut short
    FP_RETURN_IF_ERROR(seal(sent.intent, false));
  }
  const uint64_t max_bytes = static_cast<uint64_t>(config_.max_bytes);
  if (last) {
    // The rest, to the file's end, in parts of at most max_bytes, the last
    // closing the run; a run with nothing left resends its last byte to
    // close it.
    while (size - sent.sealed > max_bytes) {
      FP_RETURN_IF_ERROR(seal(sent.sealed + max_bytes, false));
    }
    if (sent.sealed == size && sent.sealed > 0) --sent.sealed;
    return seal(size, true);
  }
  // Bytes once written never change (the file only grows), so a part may
  // end anywhere, even inside a record: the next part goes on from there.
  if (size <= sent.sealed) return Status::Ok();
  const uint64_t unsent = size - sent.sealed;
  const int64_t since =
      sent.written_ms != 0 ? sent.written_ms : static_cast<int64_t>(scan.start_unix_ns / 1000000);
  if (!flush && now - since < config_.max_age_ms &&
      unsent < static_cast<uint64_t>(config_.max_bytes)) {
    return Status::Ok();
  }
  while (sent.sealed < size) {
    FP_RETURN_IF_ERROR(seal(std::min<uint64_t>(size, sent.sealed + max_bytes), false));
  }
  return Status::Ok();
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
