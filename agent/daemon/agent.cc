#include "agent/daemon/agent.h"

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

#include "agent/daemon/agent_internal.h"
#include "common/base/crash_point.h"
#include "common/net/endpoint.h"
#include "common/net/https_client.h"
#include "common/settings/runtime_settings.h"
#include "common/settings/tsc_rate.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/spool/batcher.h"
#include "common/spool/run_counters.h"
#include "common/spool/spool.h"
#include "common/spool/spool_sealer.h"
#include "common/system/field_door.h"
#include "common/wire/platform.h"
#include "common/wire/wire.h"

namespace fieldprof::agent {

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

Agent::Agent(AgentConfig config)
    : config_(std::move(config)),
      outbox_(config_.outbox_dir(), config_.quarantine_dir(), config_.held_dir()),
      system_code_(SystemCodeOptions{.dpkg_dir = config_.dpkg_dir,
                                     .archives = config_.archives,
                                     .indexes = config_.apt_indexes,
                                     .cache_dir = config_.system_code_dir}),
      counted_(config_.counted_path()),
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
  // The series counted so far: a pass in a child process counted more.
  FP_RETURN_IF_ERROR(counted_.Load());
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
  if (!counted_.reset().empty()) state_.counted_result = counted_.reset();
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

void Agent::RefreshSystemCode() {
  Status s = system_code_.Refresh();
  system_code_ok_ = s.ok();
  if (!s.ok()) {
    // Nothing is the system's code until it succeeds: records are kept
    // back (they wait in the spool), never sent unjudged.
    state_.system_code_result = "not refreshed: " + s.message();
    return;
  }
  state_.system_code_result =
      "ok: " + std::to_string(system_code_.stats().shared) + " packaged modules may be named";
  if (config_.runtime_settings.empty() || !std::filesystem::exists(config_.runtime_settings)) {
    return;  // the file is the user's to create
  }
  const std::string list = system_code_.BuildIdListPath();
  Status w = UpdateRuntimeSettings(
      config_.runtime_settings,
      [&list](const std::optional<RuntimeSettings>& now, RuntimeSettings* next) {
        if (!now.has_value() || now->system_code == list) return false;
        next->system_code = list;
        return true;
      });
  if (!w.ok() && w.code() != StatusCode::kInvalidArgument) {
    state_.settings_result = "not written: " + w.message();
  }
}

std::string Agent::ShareModules() const {
  std::string share = config_.share_modules;
  if (!config_.runtime_settings.empty()) {
    StatusOr<std::optional<RuntimeSettings>> s = ReadRuntimeSettings(config_.runtime_settings);
    if (s.ok() && s->has_value() && !(*s)->share_modules.empty()) {
      share += (share.empty() ? "" : ",") + (*s)->share_modules;
    }
  }
  return share;
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
  RefreshSystemCode();
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

Status Agent::QuarantineHeld(const std::string& name, const Status& why) {
  ++state_.records_dropped;
  const std::string to = config_.quarantine_dir() + "/" + name;
  FP_RETURN_IF_ERROR(WriteFileDurably(to + ".reason", why.ToString() + "\n"));
  const std::string from = config_.held_dir() + "/" + name;
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    return IOError("cannot move " + from + " to the quarantine: " + std::strerror(errno));
  }
  return Status::Ok();
}

Status Agent::Seal(SealStep& step, PassResult* result) {
  FP_ASSIGN_OR_RETURN(std::optional<UploadToken> token, TakeToken());
  const wire::AgentCounters counters = BatchCounters(*step.runs, state_);
  // With a token, the batch id is the token's input (upload_tokens.h).
  const std::string id = token ? token->input : RandomBatchId();
  const int64_t now = NowMs();
  wire::Batch batch = step.batch->Seal(id, now, counters, MachineKeyFor(now));
  if (token) {
    batch.set_token(token->output);
    batch.set_token_epoch(token->epoch);
  }
  // The series this machine sends for the first time: counted in them once
  // (counted_series.h). Remembered before the batch is sealed: a crash in
  // between can only leave a series uncounted, never counted twice.
  std::vector<uint64_t> fresh;
  for (wire::Record& r : *batch.mutable_records()) {
    if (counted_.MarkFirst(SeriesHash(r.key(), platform_), &fresh)) r.set_first_from_machine(true);
  }
  FP_RETURN_IF_ERROR(counted_.Commit(fresh));
  FP_RETURN_IF_ERROR(outbox_.Seal(OutboxName(now, id), batch.SerializeAsString(), config_.spool_dir,
                                  *step.consumed, step.held));
  // Reported in this batch. (A crash before the state is saved reports
  // them again in the next one: counters only, never records.)
  state_.records_dropped = 0;
  state_.records_quarantined = 0;
  state_.runs_refused_no_slot = 0;
  state_.runs_refused_load = 0;
  state_.runs_refused_rate_cap = 0;
  state_.runs_measured_nothing = 0;
  FP_RETURN_IF_ERROR(WriteFileDurably(config_.status_path(), FormatAgentState(state_)));
  ++result->batches_sealed;
  return Status::Ok();
}

Status Agent::SealFromSpool(bool flush, PassResult* result) {
  result->stale_temporaries_removed = RemoveStaleTemporaries(config_.spool_dir);
  TakeCountedRuns(result);
  SpoolSealer sealer(static_cast<size_t>(config_.batch_bytes), platform_,
                     [this, result](SealStep& step) { return Seal(step, result); });
  // No token: the rest waits (nothing of the step was written).
  auto stopped = [&](const Status& s) {
    if (s.code() != StatusCode::kUnavailable) return s;
    result->seal_status = s;
    return Status::Ok();
  };
  // Without the system's code judged, nothing is sealed: the records wait.
  if (!system_code_ok_) return stopped(Unavailable(state_.system_code_result));
  state_.share_modules = ShareModules();
  FieldDoor door(&system_code_, state_.share_modules);
  // The stack records held so far (through the door again: held by an
  // older agent, or before a module's package changed), then the spool.
  FP_ASSIGN_OR_RETURN(const std::vector<std::string> held, ListHeld(config_.held_dir()));
  for (const std::string& name : held) {
    StatusOr<wire::Batch> h = ReadHeld(config_.held_dir() + "/" + name);
    if (!h.ok()) {
      if (h.status().code() == StatusCode::kNotFound) continue;
      FP_RETURN_IF_ERROR(QuarantineHeld(name, h.status()));
      continue;
    }
    result->records_kept_home += static_cast<int64_t>(door.Apply(&*h));
    if (Status s = sealer.AddHeld(name, *h); !s.ok()) return stopped(s);
  }
  FP_ASSIGN_OR_RETURN(const std::vector<SpoolEntry> files, ListSpool(config_.spool_dir));
  for (const SpoolEntry& e : files) {
    StatusOr<wire::RunRecord> run = ReadRunRecord(e.path);
    if (!run.ok()) {
      if (run.status().code() == StatusCode::kNotFound) continue;  // gone meanwhile
      ++result->runs_bad;
      FP_RETURN_IF_ERROR(Quarantine(e, run.status()));
      continue;
    }
    ++result->runs_read;
    result->records_kept_home += static_cast<int64_t>(door.Apply(&*run));
    if (Status s = sealer.Add(e.name, *run); !s.ok()) return stopped(s);
  }
  // The rest waits for more unless flushing or its oldest record is due.
  if (Status s = sealer.Finish(flush, NowMs(), config_.max_age_s * 1000); !s.ok()) {
    state_.seal_deadline_unix_ms = 0;
    return stopped(s);
  }
  state_.seal_deadline_unix_ms = sealer.deadline_unix_ms();
  result->stacks_held = sealer.held_records();
  return Status::Ok();
}

Status Agent::EnforceCap(PassResult* result) {
  if (config_.cap_bytes <= 0) return Status::Ok();
  FP_ASSIGN_OR_RETURN(std::vector<OutboxEntry> batches, outbox_.List());
  FP_ASSIGN_OR_RETURN(std::vector<SpoolEntry> runs, ListSpool(config_.spool_dir));
  FP_ASSIGN_OR_RETURN(std::vector<std::string> held, ListHeld(config_.held_dir()));
  std::vector<std::pair<std::string, uint64_t>> held_sizes;
  uint64_t total = 0;
  for (const OutboxEntry& e : batches) total += e.bytes;
  for (const SpoolEntry& e : runs) total += e.bytes;
  for (const std::string& name : held) {
    std::error_code ec;
    const uint64_t n = std::filesystem::file_size(config_.held_dir() + "/" + name, ec);
    held_sizes.emplace_back(name, ec ? 0 : n);
    total += ec ? 0 : n;
  }
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
  // Then the held stack records (their oldest run is older than the spool's).
  for (const auto& [name, bytes] : held_sizes) {
    if (total <= cap) break;
    const std::string path = config_.held_dir() + "/" + name;
    StatusOr<wire::Batch> h = ReadHeld(path);
    if (std::remove(path.c_str()) != 0 && errno != ENOENT) {
      return IOError("cannot remove " + path + ": " + std::strerror(errno));
    }
    total -= bytes;
    result->records_dropped += h.ok() ? h->records_size() : 1;
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

}  // namespace fieldprof::agent
