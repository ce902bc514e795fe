#include "agent/agent.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>

#include "common/batcher.h"
#include "common/crash_point.h"
#include "common/endpoint.h"
#include "common/https_client.h"
#include "common/platform.h"
#include "common/run_counters.h"
#include "common/runtime_settings.h"
#include "common/snapshot_cache.h"
#include "common/spool.h"
#include "common/tsc_rate.h"
#include "common/wire.h"

namespace fieldprof::agent {

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string RandomBatchId() {
  std::random_device rd;  // the OS entropy source
  std::string id(kBatchIdBytes, '\0');
  for (size_t i = 0; i < id.size(); i += 4) {
    const uint32_t v = rd();
    std::memcpy(&id[i], &v, std::min<size_t>(4, id.size() - i));
  }
  return id;
}

}  // namespace

Agent::Agent(AgentConfig config)
    : config_(std::move(config)),
      outbox_(config_.outbox_dir(), config_.quarantine_dir()),
      versions_(config_.dpkg_dir),
      platform_(DetectPlatform()),
      rng_(std::random_device{}()) {}

Agent::~Agent() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Status Agent::Init() {
  if (config_.spool_dir.empty() || config_.state_dir.empty()) {
    return InvalidArgument("no spool or state directory (set --spool and --state_dir, or HOME)");
  }
  FP_RETURN_IF_ERROR(MakeDirs(config_.state_dir));
  // One agent per state directory: two would batch the same spool files.
  const std::string lock = config_.state_dir + "/agent.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return IOError("cannot open " + lock + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Unavailable("another fieldprof-agent is running on " + config_.state_dir);
  }
  lock_fd_ = fd;  // held until the agent is destroyed
  FP_RETURN_IF_ERROR(outbox_.Init());
  if (!config_.dev.spool_dir.empty()) {
    if (config_.dev.token_file.empty()) {
      return InvalidArgument("developer mode (--dev_spool) needs --dev_token_file");
    }
    DevConfig d = config_.dev;
    d.outbox_dir = config_.state_dir + "/dev-outbox";
    d.quarantine_dir = config_.state_dir + "/dev-quarantine";
    dev_ = std::make_unique<DevUploader>(std::move(d));
    FP_RETURN_IF_ERROR(dev_->Init());
  }
  return ReloadState();
}

Status Agent::ReloadState() {
  StatusOr<AgentState> s = ReadAgentState(config_.status_path());
  if (s.ok()) {
    state_ = *s;
  } else if (s.status().code() == StatusCode::kInvalidArgument) {
    // A damaged state file holds nothing that cannot be rebuilt (times,
    // counts, the last settings): start afresh rather than never start
    // again, and say so where `fieldprof status` shows it.
    state_ = AgentState{};
    state_.last_upload_result = "state file was damaged and reset: " + s.status().message();
  } else {
    return s.status();
  }
  ApplyFleetThresholds();
  return Status::Ok();
}

void Agent::ApplyFleetThresholds() {
  if (!config_.batch_bytes_local && state_.fleet_batch_bytes > 0) {
    config_.batch_bytes = state_.fleet_batch_bytes;
  }
  if (!config_.max_age_local && state_.fleet_max_age_s > 0)
    config_.max_age_s = state_.fleet_max_age_s;
}

HttpsClient& Agent::Client() {
  if (client_ == nullptr) {
    HttpsClientOptions o;
    o.host = config_.server_host;
    o.port = static_cast<uint16_t>(config_.server_port);
    o.ca_file = config_.ca_file;
    o.loopback_ca_file = config_.loopback_ca_file;
    o.timeout = std::chrono::milliseconds(config_.timeout_ms);
    client_ = std::make_unique<HttpsClient>(o);
  }
  return *client_;
}

void Agent::RefreshSettings(HttpsClient& client, bool force) {
  if (config_.runtime_settings.empty()) return;
  const int64_t now = NowMs();
  if (!force && now - state_.settings_checked_unix_ms < config_.settings_interval_s * 1000) return;
  state_.settings_checked_unix_ms = now;
  StatusOr<HttpReply> reply = client.Get("/v1/config");
  if (!reply.ok()) {
    state_.settings_result = "unreachable: " + reply.status().message();
    return;
  }
  if (reply->status != 200) {
    state_.settings_result = "HTTP " + std::to_string(reply->status);
    return;
  }
  // Anything wrong with the answer: keep the settings we have.
  StatusOr<FleetSettings> fleet = FleetSettingsFromJson(reply->body);
  if (!fleet.ok()) {
    state_.settings_result = "refused: " + fleet.status().message();
    return;
  }
  std::string version;
  Status s =
      UpdateRuntimeSettings(config_.runtime_settings,
                            [&](const std::optional<RuntimeSettings>& now, RuntimeSettings* next) {
                              next->fleet = *fleet;
                              next->version = version = fleet->Version();
                              return !now.has_value() || *next != *now;
                            });
  if (!s.ok()) {
    // A file that does not parse stays as someone edited it by hand (the
    // runtime is off until it is fixed).
    state_.settings_result =
        (s.code() == StatusCode::kInvalidArgument ? "not applied: " : "not written: ") +
        s.message();
    return;
  }
  state_.fleet_batch_bytes = fleet->batch_bytes;
  state_.fleet_max_age_s = fleet->max_age_s;
  ApplyFleetThresholds();
  state_.settings_version = version;
  state_.settings_result = "ok";
}

void Agent::RefreshClockRate() {
  if (config_.runtime_settings.empty() || !std::filesystem::exists(config_.runtime_settings)) {
    return;  // no file: nobody asked yet; the file is the user's to create
  }
  if (tsc_hz_ == 0) tsc_hz_ = MeasureTscHz().value_or(0);
  if (tsc_hz_ == 0) return;  // no invariant TSC (the runtime needs no rate), or too busy: later
  Status s = UpdateRuntimeSettings(
      config_.runtime_settings,
      [this](const std::optional<RuntimeSettings>& now, RuntimeSettings* next) {
        if (!now.has_value() || (now->tsc_hz != 0 && SameTscRate(now->tsc_hz, tsc_hz_)))
          return false;
        next->tsc_hz = tsc_hz_;
        return true;
      });
  // A file that does not parse is left as the user made it (not an error here).
  if (!s.ok() && s.code() != StatusCode::kInvalidArgument) {
    state_.settings_result = "not written: " + s.message();
  }
}

void Agent::RefreshSnapshotIfDue(bool force, PassResult* result) {
  if (config_.snapshot_key.empty() || config_.snapshot_cache.empty() ||
      config_.snapshot_per_day <= 0) {
    return;
  }
  const int64_t now = NowMs();
  if (!force && now < state_.snapshot_next_unix_ms) return;
  constexpr int64_t kDayMs = int64_t{24} * 3600 * 1000;
  auto jitter = [this](int64_t max_ms) {
    return std::uniform_int_distribution<int64_t>(0, max_ms)(rng_);
  };
  // The next refresh: a day on, spread over four hours so that clients do
  // not all come at once; an hour or so after a failure.
  auto schedule = [&](bool failed) {
    state_.snapshot_next_unix_ms =
        failed ? now + 3600 * 1000 + jitter(1800 * 1000) : now + kDayMs + jitter(4 * 3600 * 1000);
  };
  if (now - state_.snapshot_window_start_unix_ms >= kDayMs) {
    state_.snapshot_window_start_unix_ms = now;
    state_.snapshot_window_fetched = 0;
  }
  const int64_t allowance = config_.snapshot_per_day - state_.snapshot_window_fetched;
  std::ifstream key_in(config_.snapshot_key);
  std::stringstream key;
  key << key_in.rdbuf();
  if (!key_in || key.str().empty()) {
    state_.snapshot_checked_unix_ms = now;
    state_.snapshot_result = "cannot read the snapshot key " + config_.snapshot_key;
    schedule(true);
    return;
  }
  state_.snapshot_checked_unix_ms = now;
  SnapshotCache cache(config_.snapshot_cache);
  StatusOr<SnapshotRefreshResult> r =
      RefreshSnapshot(Client(), cache,
                      {.max_fragments = static_cast<int>(std::max<int64_t>(allowance, 0)),
                       .public_key_pem = key.str(),
                       .progress = {}});
  if (!r.ok()) {
    result->snapshot_fetched = 0;
    state_.snapshot_result = r.status().message();
    // A rejected manifest is not retried within the hour either.
    schedule(true);
  } else {
    result->snapshot_fetched = r->fetched;
    state_.snapshot_version = static_cast<int64_t>(r->snapshot_version);
    state_.snapshot_window_fetched += r->fetched + r->rejected;
    state_.snapshot_bytes_downloaded += static_cast<int64_t>(r->bytes_downloaded);
    state_.snapshot_result = r->problems.empty() ? "ok" : r->problems.front();
    if (r->problems.size() > 1) {
      state_.snapshot_result += " (and " + std::to_string(r->problems.size() - 1) + " more)";
    }
    schedule(false);
    // Never earlier than the end of the window when it is used up.
    if (state_.snapshot_window_fetched >= config_.snapshot_per_day) {
      state_.snapshot_next_unix_ms =
          std::max(state_.snapshot_next_unix_ms, state_.snapshot_window_start_unix_ms + kDayMs);
    }
  }
  for (char& c : state_.snapshot_result) {
    if (c == '\n' || c == '\r') c = ' ';
  }
}

std::string Agent::LiveDir() const {
  if (!config_.live_dir.empty()) return config_.live_dir;
  std::string setting;
  if (!config_.runtime_settings.empty()) {
    StatusOr<std::optional<RuntimeSettings>> s = ReadRuntimeSettings(config_.runtime_settings);
    if (s.ok() && s->has_value()) setting = (*s)->live_dir;
  }
  return DefaultLiveDir(setting);
}

void Agent::HarvestLiveRuns(PassResult* result) {
  LiveHarvestConfig c;
  c.live_dir = LiveDir();
  c.spool_dir = config_.spool_dir;
  c.state_dir = config_.state_dir;
  c.interval_s = config_.live_interval_s;
  c.tsc_hz = tsc_hz_;
  c.platform = platform_;
  StatusOr<LiveHarvestResult> r = HarvestLive(c, NowMs());
  if (r.ok()) result->live = *r;
}

bool Agent::Consented() const {
  if (config_.runtime_settings.empty()) return true;
  StatusOr<std::optional<RuntimeSettings>> s = ReadRuntimeSettings(config_.runtime_settings);
  return s.ok() && s->has_value() && (*s)->consent;
}

StatusOr<PassResult> Agent::Pass(bool flush, bool upload, bool force_snapshot) {
  PassResult r;
  FP_RETURN_IF_ERROR(outbox_.Recover(config_.spool_dir));
  if (dev_ != nullptr) {
    FP_ASSIGN_OR_RETURN(r.dev, dev_->Pass(flush, upload, Client()));
  }
  // Without consent nothing leaves, nothing is sealed, the server is not
  // even asked for settings (fieldprof optout; a volunteer who never opted
  // in). What the spool holds waits, under the runtime's spool cap.
  // (Not even the state file is written: fieldprof optout removes it.)
  if (!Consented()) {
    r.consent = false;
    return r;
  }
  state_.server = FormatHostPort(config_.server_host, static_cast<uint16_t>(config_.server_port));
  state_.server_set_in = config_.server_set_in;
  if (upload) RefreshSettings(Client(), /*force=*/false);
  if (upload) RefreshTokens(Client());
  RefreshClockRate();
  if (upload || force_snapshot) RefreshSnapshotIfDue(force_snapshot, &r);
  // Before sealing: a part written here is in the spool the seal reads.
  HarvestLiveRuns(&r);
  FP_RETURN_IF_ERROR(SealFromSpool(flush, &r));
  if (upload) r.upload_status = Upload(&r);
  FP_RETURN_IF_ERROR(EnforceCap(&r));
  FP_ASSIGN_OR_RETURN(std::vector<OutboxEntry> left, outbox_.List());
  r.batches_waiting = static_cast<int>(left.size());
  FP_RETURN_IF_ERROR(WriteFileDurably(config_.status_path(), FormatAgentState(state_)));
  return r;
}

// The runs the runtime counted instead of recording: kept in the state
// file (durably) before the spool's counts are zeroed, reported with the
// next sealed batch. An unusable counters file loses no record: the pass
// goes on, says so, and the counts stay in the file for a later pass.
void Agent::TakeCountedRuns(PassResult* result) {
  StatusOr<RunCounts> counted =
      TakeRunCounters(config_.spool_dir, [this](const RunCounts& c) -> Status {
        AgentState next = state_;
        next.runs_refused_no_slot += static_cast<int64_t>(c[kRunRefusedSlot]);
        next.runs_refused_load += static_cast<int64_t>(c[kRunRefusedLoad]);
        next.runs_refused_rate_cap += static_cast<int64_t>(c[kRunRefusedRate]);
        next.runs_measured_nothing += static_cast<int64_t>(c[kRunMeasuredNone]);
        FP_RETURN_IF_ERROR(WriteFileDurably(config_.status_path(), FormatAgentState(next)));
        state_ = std::move(next);
        return Status::Ok();
      });
  if (counted.ok()) {
    for (uint64_t v : *counted) result->runs_counted += static_cast<int64_t>(v);
  } else {
    result->counters_status = counted.status();
  }
}

// Not a valid record: kept aside for inspection, never sent.
Status Agent::Quarantine(const SpoolEntry& e, const Status& why) {
  ++state_.records_dropped;
  FP_RETURN_IF_ERROR(WriteFileDurably(config_.quarantine_dir() + "/spool-" + e.name + ".reason",
                                      why.ToString() + "\n"));
  if (std::rename(e.path.c_str(), (config_.quarantine_dir() + "/spool-" + e.name).c_str()) != 0) {
    return IOError("cannot move " + e.path + " to the quarantine: " + std::strerror(errno));
  }
  return Status::Ok();
}

namespace {

StatusOr<std::vector<UploadToken>> ReadTokens(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::vector<UploadToken>{};
  const std::string text(std::istreambuf_iterator<char>(in), {});
  return ParseTokens(text);
}

}  // namespace

void Agent::RefreshTokens(HttpsClient& client) {
  StatusOr<HttpReply> info = client.Get("/v1/tokens");
  if (!info.ok()) {
    state_.tokens_result = "unreachable: " + info.status().message();
    return;
  }
  if (info->status == 404) {
    state_.tokens_required = 0;
    state_.tokens_result = "not asked for";
    return;
  }
  if (info->status != 200) {
    state_.tokens_result = "HTTP " + std::to_string(info->status);
    return;
  }
  const nlohmann::json j = nlohmann::json::parse(info->body, nullptr, false);
  std::string public_key;
  // Any other shape, from whatever answers there, is refused, never thrown.
  if (!j.is_object() || !j.contains("epoch") || !j.contains("public_key") ||
      !j.contains("epoch_seconds") || !j.contains("max_per_request") ||
      !j["epoch"].is_number_integer() || !j["epoch_seconds"].is_number_integer() ||
      !j["max_per_request"].is_number_integer() || !j["public_key"].is_string() ||
      !HexDecode(j["public_key"].get<std::string>(), &public_key)) {
    state_.tokens_result = "refused: GET /v1/tokens answered no key";
    return;
  }
  const int64_t epoch = j["epoch"].get<int64_t>();
  // The signed snapshot, when this agent keeps one, says which key every
  // agent must see for this epoch.
  std::optional<wire::Manifest> manifest;
  if (!config_.snapshot_cache.empty()) {
    StatusOr<wire::Manifest> m = SnapshotCache(config_.snapshot_cache).Manifest();
    if (m.ok()) manifest = std::move(*m);
  }
  StatusOr<std::string> trusted =
      TokenKeyToTrust(manifest ? &*manifest : nullptr, epoch, public_key);
  if (!trusted.ok()) {
    state_.tokens_result = "refused: " + trusted.status().message();
    return;
  }
  const int want =
      static_cast<int>(std::clamp<int64_t>(j["max_per_request"].get<int64_t>(), 1, 4096));
  state_.tokens_required = 1;
  state_.token_epoch_s = std::max<int64_t>(60, j["epoch_seconds"].get<int64_t>());
  StatusOr<std::vector<UploadToken>> held = ReadTokens(TokensPath());
  std::vector<UploadToken> tokens = held.ok() ? *held : std::vector<UploadToken>{};
  std::erase_if(tokens, [&](const UploadToken& t) { return t.epoch < epoch - 1; });
  const size_t usable = tokens.size();
  if (usable * 4 >= static_cast<size_t>(want)) {
    if (!held.ok() || usable != held->size()) {
      IgnoreError(WriteFileDurably(TokensPath(), FormatTokens(tokens)));
    }
    state_.tokens_result = "ok: " + std::to_string(usable) + " tokens";
    return;
  }
  StatusOr<TokenRequestState> request = MakeTokenRequest(want);
  if (!request.ok()) {
    state_.tokens_result = "cannot blind: " + request.status().message();
    return;
  }
  StatusOr<HttpReply> reply = client.Post("/v1/tokens", std::string(kBatchContentType),
                                          request->request.SerializeAsString());
  if (!reply.ok() || reply->status != 200) {
    state_.tokens_result = !reply.ok() ? "unreachable: " + reply.status().message()
                                       : "HTTP " + std::to_string(reply->status);
    return;
  }
  wire::TokenResponse response;
  if (!response.ParseFromString(reply->body) || response.epoch() != epoch) {
    state_.tokens_result = "refused: the token answer is not for epoch " + std::to_string(epoch);
    return;
  }
  StatusOr<std::vector<UploadToken>> fresh = FinishTokenRequest(*request, response, public_key);
  if (!fresh.ok()) {
    // Another key than the published one, or a proof that does not hold:
    // tokens that could tell this agent apart. None is kept.
    state_.tokens_result = "refused: " + fresh.status().message();
    return;
  }
  tokens.insert(tokens.end(), fresh->begin(), fresh->end());
  if (Status w = WriteFileDurably(TokensPath(), FormatTokens(tokens)); !w.ok()) {
    state_.tokens_result = "not written: " + w.message();
    return;
  }
  state_.tokens_result = "ok: " + std::to_string(tokens.size()) + " tokens";
}

StatusOr<std::optional<UploadToken>> Agent::TakeToken() {
  if (state_.tokens_required == 0) return std::optional<UploadToken>();
  StatusOr<std::vector<UploadToken>> held = ReadTokens(TokensPath());
  if (!held.ok()) {
    // Tokens can be got again; a damaged file must not stop every pass.
    std::remove(TokensPath().c_str());
    state_.tokens_result = "the token file was damaged and removed: " + held.status().message();
    return Unavailable(state_.tokens_result + "; the records wait in the spool");
  }
  std::vector<UploadToken> tokens = std::move(*held);
  const int64_t current = NowMs() / 1000 / std::max<int64_t>(60, state_.token_epoch_s);
  std::erase_if(tokens, [&](const UploadToken& t) { return t.epoch < current - 1; });
  if (tokens.empty()) {
    return Unavailable("no upload token left (the aggregator asks one per batch; " +
                       state_.tokens_result + "): the records wait in the spool");
  }
  UploadToken t = tokens.front();
  tokens.erase(tokens.begin());
  // Out of the file before it is spent: a crash after this wastes a token
  // rather than spending it twice.
  FP_RETURN_IF_ERROR(WriteFileDurably(TokensPath(), FormatTokens(tokens)));
  return std::optional<UploadToken>(std::move(t));
}

std::string Agent::MachineKeyFor(int64_t now_ms) {
  const int64_t day = now_ms / 86400000;
  std::string key;
  if (state_.machine_key_day != day || !HexDecode(state_.machine_key, &key) ||
      key.size() != kMachineKeyBytes) {
    key = RandomBatchId();  // 16 bytes from the OS entropy source, as an id
    state_.machine_key = HexEncode(key);
    state_.machine_key_day = day;
  }
  return key;
}

Status Agent::Seal(OpenBatch* b, PassResult* result) {
  FP_ASSIGN_OR_RETURN(std::optional<UploadToken> token, TakeToken());
  const wire::AgentCounters counters = BatchCounters(b->runs, state_);
  // With a token, the batch id is the token's input (upload_tokens.h).
  const std::string id = token ? token->input : RandomBatchId();
  const int64_t now = NowMs();
  wire::Batch batch = b->builder.Seal(id, now, counters, MachineKeyFor(now));
  if (token) {
    batch.set_token(token->output);
    batch.set_token_epoch(token->epoch);
  }
  FP_RETURN_IF_ERROR(
      outbox_.Seal(OutboxName(now, id), batch.SerializeAsString(), config_.spool_dir, b->consumed));
  // Reported in this batch. (A crash before the state is saved reports
  // them again in the next one: counters only, never records.)
  state_.records_dropped = 0;
  state_.records_quarantined = 0;
  state_.runs_refused_no_slot = 0;
  state_.runs_refused_load = 0;
  state_.runs_refused_rate_cap = 0;
  state_.runs_measured_nothing = 0;
  FP_RETURN_IF_ERROR(WriteFileDurably(config_.status_path(), FormatAgentState(state_)));
  b->consumed.clear();
  b->runs.Clear();
  b->has_records = false;
  ++result->batches_sealed;
  return Status::Ok();
}

Status Agent::SealFromSpool(bool flush, PassResult* result) {
  result->stale_temporaries_removed = RemoveStaleTemporaries(config_.spool_dir);
  TakeCountedRuns(result);
  FP_ASSIGN_OR_RETURN(const std::vector<SpoolEntry> files, ListSpool(config_.spool_dir));
  OpenBatch b{BatchBuilder(static_cast<size_t>(config_.batch_bytes), platform_), {}, {}, false};
  for (const SpoolEntry& e : files) {
    StatusOr<wire::RunRecord> run = ReadRunRecord(e.path);
    if (!run.ok()) {
      if (run.status().code() == StatusCode::kNotFound) continue;  // gone meanwhile
      ++result->runs_bad;
      FP_RETURN_IF_ERROR(Quarantine(e, run.status()));
      continue;
    }
    ++result->runs_read;
    if (!config_.dpkg_dir.empty()) versions_.Apply(&*run);
    if (!b.builder.TryAdd(*run)) {
      if (Status sealed = Seal(&b, result); !sealed.ok()) {
        if (sealed.code() != StatusCode::kUnavailable) return sealed;
        result->seal_status = sealed;  // no token: the rest waits
        return Status::Ok();
      }
      b.builder.TryAdd(*run);  // an empty builder takes any run
    }
    b.consumed.push_back(e.name);
    CountRunInBatch(*run, &b.runs);
    b.has_records = b.has_records || run->records_size() > 0;
  }
  // The rest waits for more unless flushing or its oldest record is due. A
  // batch needs records: runs that left counters only wait for some.
  const int64_t max_age_ms = config_.max_age_s * 1000;
  state_.seal_deadline_unix_ms = 0;
  if (b.has_records) {
    if (flush || NowMs() - b.builder.oldest_unix_ms() >= max_age_ms) {
      if (Status sealed = Seal(&b, result); !sealed.ok()) {
        if (sealed.code() != StatusCode::kUnavailable) return sealed;
        result->seal_status = sealed;
      }
    } else {
      state_.seal_deadline_unix_ms = b.builder.oldest_unix_ms() + max_age_ms;
    }
  }
  return Status::Ok();
}

Status Agent::EnforceCap(PassResult* result) {
  if (config_.cap_bytes <= 0) return Status::Ok();
  FP_ASSIGN_OR_RETURN(std::vector<OutboxEntry> batches, outbox_.List());
  FP_ASSIGN_OR_RETURN(std::vector<SpoolEntry> runs, ListSpool(config_.spool_dir));
  uint64_t total = 0;
  for (const OutboxEntry& e : batches) total += e.bytes;
  for (const SpoolEntry& e : runs) total += e.bytes;
  const uint64_t cap = static_cast<uint64_t>(config_.cap_bytes);
  // Oldest first: sealed batches are older than anything still in the spool.
  for (const OutboxEntry& e : batches) {
    if (total <= cap) break;
    StatusOr<std::string> bytes = outbox_.Read(e);
    wire::Batch b;
    const bool parsed = bytes.ok() && b.ParseFromString(*bytes);
    const int64_t n = parsed ? b.records_size() : 1;
    FP_RETURN_IF_ERROR(outbox_.Remove(e));
    total -= e.bytes;
    result->records_dropped += n;
    // The counts this batch was to report are not lost with it.
    if (parsed) {
      state_.records_dropped += static_cast<int64_t>(b.counters().records_dropped());
      state_.records_quarantined += static_cast<int64_t>(b.counters().records_quarantined());
      // A batch's refused runs were taken from either counter; they go back
      // as load refusals (the wire does not tell them apart).
      state_.runs_refused_load += static_cast<int64_t>(b.counters().runs_refused_load_cap());
      state_.runs_refused_rate_cap += static_cast<int64_t>(b.counters().runs_refused_rate_cap());
      state_.runs_measured_nothing += static_cast<int64_t>(b.counters().runs_measured_nothing());
    }
  }
  for (const SpoolEntry& e : runs) {
    if (total <= cap) break;
    StatusOr<wire::RunRecord> run = ReadRunRecord(e.path);
    const int64_t n = run.ok() ? run->records_size() : 1;
    if (std::remove(e.path.c_str()) != 0 && errno != ENOENT) {
      return IOError("cannot remove " + e.path + ": " + std::strerror(errno));
    }
    total -= e.bytes;
    result->records_dropped += n;
  }
  if (result->records_dropped > 0) {
    state_.records_dropped += result->records_dropped;
    FP_RETURN_IF_ERROR(WriteFileDurably(config_.status_path(), FormatAgentState(state_)));
  }
  return Status::Ok();
}

int64_t Agent::Backoff(int retry_after_seconds) {
  const int shift = static_cast<int>(std::min<int64_t>(state_.failures, 30));
  const double base = std::min<double>(
      static_cast<double>(config_.backoff_max_ms),
      static_cast<double>(config_.backoff_initial_ms) * static_cast<double>(int64_t{1} << shift));
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  int64_t delay = static_cast<int64_t>(base * jitter(rng_));
  delay = std::min(delay, config_.backoff_max_ms);
  if (retry_after_seconds > 0)
    delay = std::max<int64_t>(delay, int64_t{retry_after_seconds} * 1000);
  return delay;
}

namespace {

// The rule an aggregator's 400 answer names ({"rule": ...}), empty if none.
std::string RefusalRule(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("rule") || !j["rule"].is_string()) return "";
  return j["rule"].get<std::string>();
}

// A refusal of the batch's upload token, not of its content: a condition
// the agent mends itself (a fresh token, then the batch again).
bool IsTokenRule(const std::string& rule) {
  return rule == "token_missing" || rule == "token_epoch" || rule == "token_invalid";
}

}  // namespace

std::string DescribeRefusal(int http_status, const std::string& host, const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string what = body;
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    what = j["message"].get<std::string>();
    if (j.contains("rule") && j["rule"].is_string()) {
      what += " (rule " + j["rule"].get<std::string>() + ")";
    }
  }
  // One line a volunteer's terminal shows as text: whatever answered may
  // send any bytes.
  for (char& c : what) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = u == '\n' || u == '\r' || u == '\t' ? ' ' : '?';
  }
  if (what.size() > 300) what = what.substr(0, 300) + "...";
  const std::string code = "HTTP " + std::to_string(http_status) + " from " + host;
  switch (http_status) {
    case 413:
      return code + ": the batch is larger than the aggregator takes: " + what;
    case 415:
      return code + ": the aggregator does not read this agent's format: " + what;
    default:
      return code + ": the aggregator refused what the batch holds: " + what;
  }
}

StatusOr<OutboxEntry> Agent::Restamp(const OutboxEntry& e, const std::string& bytes,
                                     const std::string& rule, HttpsClient& client) {
  wire::Batch batch;
  if (!batch.ParseFromString(bytes)) return DataLoss(e.path + " is not a batch");
  // The aggregator asks for tokens, whatever the agent believed when it
  // sealed this batch (unreachable then, or another setting).
  state_.tokens_required = 1;
  // A token its key does not take: the ones held were most likely made
  // with the same key (the operator changed the secret). Fresh ones.
  if (rule == "token_invalid" && std::remove(TokensPath().c_str()) != 0 && errno != ENOENT) {
    return IOError("cannot remove " + TokensPath() + ": " + std::strerror(errno));
  }
  StatusOr<std::optional<UploadToken>> token = TakeToken();
  if (!token.ok() || !token->has_value()) {
    RefreshTokens(client);
    token = TakeToken();
  }
  if (!token.ok()) return token.status();
  if (!token->has_value()) {
    return Unavailable("the aggregator refused the batch for its upload token (" + rule +
                       ") but issues none (" + state_.tokens_result + "); the batch waits");
  }
  const UploadToken& t = **token;
  batch.set_batch_id(t.input);
  batch.set_token(t.output);
  batch.set_token_epoch(t.epoch);
  const std::string created = e.name.substr(0, e.name.find('-'));
  return outbox_.Rewrite(e, created + "-" + HexEncode(t.input), batch.SerializeAsString());
}

Status Agent::Upload(PassResult* result) {
  FP_ASSIGN_OR_RETURN(std::vector<OutboxEntry> entries, outbox_.List());
  if (entries.empty()) return Status::Ok();
  HttpsClient& client = Client();  // one connection, kept alive across the batches
  auto fail = [&](const std::string& why, int retry_after) {
    state_.last_upload_result = why;
    ++state_.failures;
    state_.next_attempt_unix_ms = NowMs() + Backoff(retry_after);
  };
  for (OutboxEntry e : entries) {
    FP_ASSIGN_OR_RETURN(std::string bytes, outbox_.Read(e));
    // Sent once, and once more after a fresh token at most: a second
    // refusal of a token just issued is the aggregator's problem, not this
    // batch's.
    for (bool restamped = false;; restamped = true) {
      state_.last_upload_unix_ms = NowMs();
      CrashPoint("upload-sending");
      StatusOr<HttpReply> reply = client.Post("/v1/batches", std::string(kBatchContentType), bytes);
      if (!reply.ok()) {
        fail("unreachable: " + reply.status().message(), -1);
        return reply.status();
      }
      const int code = reply->status;
      if (code >= 200 && code < 300) {
        CrashPoint("upload-acked");
        FP_RETURN_IF_ERROR(outbox_.Remove(e));
        ++result->batches_uploaded;
        ++state_.batches_uploaded;
        state_.last_upload_result = "ok";
        state_.last_success_unix_ms = state_.last_upload_unix_ms;
        state_.failures = 0;
        state_.next_attempt_unix_ms = 0;
        break;
      }
      const std::string rule = code == 400 ? RefusalRule(reply->body) : "";
      if (IsTokenRule(rule)) {
        // Refused for its token alone (none: sealed while the aggregator
        // was out of reach; expired: it waited too long; not taken: a new
        // key). The aggregator applied nothing of it: it answers an id it
        // already holds as a duplicate before it looks at the token. So the
        // batch takes a fresh token and, with it, a new id, and goes again.
        StatusOr<OutboxEntry> moved =
            restamped ? StatusOr<OutboxEntry>(
                            Unavailable("the aggregator refused a fresh upload token too: " +
                                        DescribeRefusal(code, config_.server_host, reply->body)))
                      : Restamp(e, bytes, rule, client);
        if (!moved.ok()) {
          if (moved.status().code() != StatusCode::kUnavailable) return moved.status();
          fail("waiting for an upload token: " + moved.status().message(), -1);
          return moved.status();
        }
        e = std::move(*moved);
        FP_ASSIGN_OR_RETURN(bytes, outbox_.Read(e));
        ++result->batches_restamped;
        continue;
      }
      if (code == 400 || code == 413 || code == 415) {
        // The aggregator will never take this batch: keep it aside, say why.
        wire::Batch b;
        const uint64_t records = b.ParseFromString(bytes) ? b.records_size() : 0;
        const std::string why = DescribeRefusal(code, config_.server_host, reply->body);
        FP_RETURN_IF_ERROR(outbox_.Quarantine(e, why));
        ++result->batches_quarantined;
        ++state_.batches_quarantined;
        state_.records_quarantined += static_cast<int64_t>(records);
        state_.last_upload_result = "set aside: " + why;
        break;
      }
      fail("HTTP " + std::to_string(code), reply->retry_after_seconds);
      return Unavailable(
          "the aggregator answered HTTP " + std::to_string(code) +
          (reply->retry_after_seconds > 0
               ? " (Retry-After " + std::to_string(reply->retry_after_seconds) + " s)"
               : ""));
    }
  }
  return Status::Ok();
}

}  // namespace fieldprof::agent
