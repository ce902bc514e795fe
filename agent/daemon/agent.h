// fieldprof-agent: carries the runtime's run records from the spool to the
// aggregator. One pass:
//   1. finish or undo an interrupted seal (Outbox::Recover);
//   2. sum spool records into batches (BatchBuilder) and seal every batch
//      that is full (batch_bytes), plus the rest when its oldest record has
//      waited max_age (or when flushing);
//   3. upload sealed batches, oldest first, over one keep-alive HTTPS
//      connection: 2xx deletes; a 400 for the batch's upload token (none,
//      expired, not taken) gets the batch a fresh token and new id and
//      sends it again; other 400s, 413 and 415 quarantine (the content is
//      refused); anything else (5xx, 429, 503, network) waits for the next
//      attempt with jittered exponential backoff, at least Retry-After.
// The daemon repeats passes when the spool changes (inotify) or a timer is due.
#ifndef FIELDPROF_AGENT_DAEMON_AGENT_H_
#define FIELDPROF_AGENT_DAEMON_AGENT_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "agent/daemon/dev_uploader.h"
#include "agent/daemon/live_harvest.h"
#include "common/base/status.h"
#include "common/crypto/upload_tokens.h"
#include "common/net/https_client.h"
#include "common/settings/agent_state.h"
#include "common/spool/batcher.h"
#include "common/spool/counted_series.h"
#include "common/spool/outbox.h"
#include "common/spool/spool.h"
#include "common/spool/spool_sealer.h"
#include "common/system/system_code.h"
#include "common/wire/api_key.h"

namespace fieldprof::agent {

struct AgentConfig {
  std::string server_host = "127.0.0.1";
  int64_t server_port = 8443;
  // The file the server was set in (--config), shown by `fieldprof
  // status`; empty: a flag or the default.
  std::string server_set_in;
  std::string ca_file;  // empty: the system store
  // Also trusted when ca_file is empty and the server is on loopback, if
  // present: the aggregator package's self-signed certificate
  // (HttpsClientOptions::loopback_ca_file). Empty: never.
  std::string loopback_ca_file = kPackagedAggregatorCert;
  std::string spool_dir;
  std::string state_dir;  // outbox/, quarantine/, status
  int64_t batch_bytes = 128 * 1024;
  int64_t max_age_s = 24 * 3600;
  int64_t timeout_ms = 30000;
  // Spool plus outbox stay under this; past it the oldest data goes (and
  // is counted as dropped in the next batch). 0: no cap.
  int64_t cap_bytes = int64_t{64} << 20;
  int64_t backoff_initial_ms = 1000;
  int64_t backoff_max_ms = 3600 * 1000;
  // Fleet settings: fetched from GET /v1/config at most this often, written
  // into the runtime's settings file (consent and local paths kept). The
  // batch_bytes and max_age_s they carry apply unless set locally.
  std::string runtime_settings;  // path; empty: no settings download
  int64_t settings_interval_s = 3600;
  bool batch_bytes_local = false, max_age_local = false;
  // Snapshot refresh: the publisher's public key (PEM file; empty: off),
  // the cache every tool reads, and at most this many fragments a day.
  std::string snapshot_key;
  std::string snapshot_cache;
  int64_t snapshot_per_day = 4;
  // What may leave the machine (common/system/system_code.h, docs/privacy.md): a
  // module's records leave only when it is the system's code, judged from
  // dpkg's database (empty: none; nothing is then the system's), the
  // archives whose packages count (apt's Origin), apt's package indexes
  // (empty: apt's own list), with the facts kept in system_code_dir
  // (empty: common/system/system_code.h DefaultSystemCodeDir). Kept records are
  // named by their package's version.
  std::string dpkg_dir = "/var/lib/dpkg";
  std::vector<std::string> archives = {"Debian"};
  std::string apt_indexes;
  std::string system_code_dir;
  // Modules the volunteer shares by name although they are not the
  // system's code (comma-separated), besides the settings file's
  // `share_modules`.
  std::string share_modules;
  // Developer mode (dev_uploader.h): spool_dir empty is off; its outbox
  // and quarantine are made under state_dir.
  DevConfig dev;
  // Live files of measured runs (live_harvest.h): where they are (empty:
  // the runtime settings' live_dir, else common/spool/spool.h DefaultLiveDir),
  // and how often a run that goes on is reported in a part.
  std::string live_dir;
  int64_t live_interval_s = 300;

  std::string outbox_dir() const { return OutboxDirOf(state_dir); }
  std::string quarantine_dir() const { return QuarantineDirOf(state_dir); }
  std::string held_dir() const { return HeldDirOf(state_dir); }
  std::string counted_path() const { return CountedPathOf(state_dir); }
  std::string status_path() const { return StatusPathOf(state_dir); }
};

struct PassResult {
  int runs_read = 0;
  int64_t runs_counted = 0;           // runs taken from the spool's run counters
  int runs_bad = 0;                   // spool files that were not valid records (quarantined)
  int stale_temporaries_removed = 0;  // unfinished record writes, over an hour old
  int batches_sealed = 0;
  size_t stacks_held = 0;  // stack records held for a later batch (spool_sealer.h)
  int batches_uploaded = 0;
  int batches_quarantined = 0;
  int batches_restamped = 0;    // refused for their token, sent again with a fresh one
  int batches_waiting = 0;      // still in the outbox after the pass
  int64_t records_dropped = 0;  // to stay under the cap (cap_bytes)
  // Records of modules that are not the system's code (common/system/field_door.h):
  // they never leave the machine.
  int64_t records_kept_home = 0;
  Status upload_status;       // why uploading stopped early, if it did
  Status counters_status;     // why the spool's run counters were not taken
  Status seal_status;         // why sealing stopped early (no upload token), if it did
  int snapshot_fetched = -1;  // fragments stored by a snapshot refresh (-1: none ran)
  // False when the user's settings file does not say `consent = yes`: the
  // pass then sealed, sent and fetched nothing (Agent::Consented).
  bool consent = true;
  DevPassResult dev;       // developer mode's part, which needs no field consent
  LiveHarvestResult live;  // runs reported from their live files
};

// Why the aggregator refused a batch for good, in words for `fieldprof
// status`: the HTTP status, the host, and the message and rule of the
// aggregator's JSON error `body` (or the body itself). One line.
std::string DescribeRefusal(int http_status, const std::string& host, const std::string& body);

class Agent {
 public:
  explicit Agent(AgentConfig config);
  ~Agent();  // releases the state directory
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  [[nodiscard]] Status Init();
  // Re-reads the state file (the daemon runs each pass in a child process).
  [[nodiscard]] Status ReloadState();
  // One pass. `flush`: seal what the spool holds even if young and small.
  // `upload`: false skips step 3 and the settings download (tests, and a
  // daemon waiting out a backoff).
  [[nodiscard]] StatusOr<PassResult> Pass(bool flush, bool upload = true,
                                          bool force_snapshot = false);

  // When the next upload may be tried (ms since the epoch; 0: now).
  int64_t next_attempt_unix_ms() const { return state_.next_attempt_unix_ms; }
  // When the spool's oldest unsealed record reaches max_age (0: nothing waits).
  int64_t seal_deadline_unix_ms() const { return state_.seal_deadline_unix_ms; }
  // When the next snapshot refresh is due (0: off or at the next pass).
  int64_t snapshot_next_unix_ms() const {
    return config_.snapshot_key.empty() ? 0 : state_.snapshot_next_unix_ms;
  }
  const AgentState& state() const { return state_; }
  // Where measured runs keep their live files (AgentConfig::live_dir).
  std::string LiveDir() const;
  const AgentConfig& config() const { return config_; }

 private:
  // The spool into sealed batches in the outbox (SealFromSpool's parts:
  // the runs counted instead of recorded, a record that does not read set
  // aside, one batch sealed and the counts it reports cleared).
  Status SealFromSpool(bool flush, PassResult* result);
  void TakeCountedRuns(PassResult* result);
  Status Quarantine(const SpoolEntry& e, const Status& why);
  // One step of the spool sealer (common/spool/spool_sealer.h): a token, the
  // batch, the outbox's seal, the counts it reports cleared.
  Status Seal(SealStep& step, PassResult* result);
  // A held file that does not read: set aside, never sent.
  Status QuarantineHeld(const std::string& name, const Status& why);
  // GET /v1/config when due; failures are recorded in the state, not returned.
  void RefreshSettings(HttpsClient& client, bool force);
  // The machine's TSC rate into an existing runtime settings file (tsc_hz,
  // agent/preload/runtime/hotpath/clock.h), where it is missing or differs; measured once
  // per agent process (20 ms). The file is the user's: never created here.
  void RefreshClockRate();
  // Whether this user consents: the runtime settings file says `consent =
  // yes`. A missing or unreadable file is no consent. Without a settings
  // file to manage (runtime_settings empty: a lab or test setup) the agent
  // sends what the spool holds, as it is told.
  bool Consented() const;
  HttpsClient& Client();
  // The live files' runs into the spool (live_harvest.h); failures are
  // said in the result, never stop the pass.
  void HarvestLiveRuns(PassResult* result);
  // The system's code brought up to date with dpkg and apt, and its list
  // named in an existing runtime settings file (`system_code`), so that
  // measured runs choose among it. Failures go into the state.
  void RefreshSystemCode();
  // The modules the volunteer shares by name: the config's and the
  // settings file's.
  std::string ShareModules() const;
  Status Upload(PassResult* result);
  // A sealed batch `e` (its `bytes`) that the aggregator refused for its
  // upload token (`rule`: token_missing, token_epoch, token_invalid) gets a
  // fresh token, fetched first when none is held, and the token's input as
  // its id; rewritten in the outbox, it is returned under its new name.
  // Unavailable when no token can be had now (the batch waits).
  StatusOr<OutboxEntry> Restamp(const OutboxEntry& e, const std::string& bytes,
                                const std::string& rule, HttpsClient& client);
  Status EnforceCap(PassResult* result);
  // Fetches up to snapshot_per_day fragments when the jittered daily
  // schedule says so (`force`: now, within the daily allowance). Results go
  // into the state; nothing here fails the pass.
  void RefreshSnapshotIfDue(bool force, PassResult* result);
  void ApplyFleetThresholds();
  // Anonymous upload tokens (common/crypto/upload_tokens.h): asks the aggregator
  // whether it wants them and, when it does and fewer than a quarter of a
  // request's worth are left, gets a request's worth (proof checked).
  void RefreshTokens(HttpsClient& client);
  // The next usable token, taken out of the token file (durably, before
  // it is spent); nullopt when none is asked for; Unavailable when one is
  // and none is left.
  StatusOr<std::optional<UploadToken>> TakeToken();
  std::string TokensPath() const { return config_.state_dir + "/tokens"; }
  // Today's machine key (wire::Batch.machine_key): the one in the state
  // while its day lasts, else a new random one, kept in the state.
  std::string MachineKeyFor(int64_t now_ms);
  int64_t Backoff(int retry_after_seconds);

  AgentConfig config_;
  Outbox outbox_;
  SystemCode system_code_;
  CountedSeries counted_;        // the series this machine was counted in (counted_series.h)
  bool system_code_ok_ = false;  // the last refresh succeeded
  Platform platform_;
  AgentState state_;
  std::mt19937_64 rng_;
  std::unique_ptr<HttpsClient> client_;
  std::unique_ptr<DevUploader> dev_;  // null: developer mode off
  int lock_fd_ = -1;                  // kept across passes (keep-alive, TLS resumption)
  int64_t tsc_hz_ = 0;  // measured (RefreshClockRate); 0: not yet, or no invariant TSC
};

}  // namespace fieldprof::agent

#endif  // FIELDPROF_AGENT_DAEMON_AGENT_H_
