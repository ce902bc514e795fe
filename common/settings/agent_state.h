// What fieldprof-agent remembers between passes and shows through
// `fieldprof status`: a small "name = value" file in the agent's state
// directory, written atomically after every pass that changes it.
#ifndef FIELDPROF_COMMON_SETTINGS_AGENT_STATE_H_
#define FIELDPROF_COMMON_SETTINGS_AGENT_STATE_H_

#include <cstdint>
#include <string>

#include "common/base/status.h"

namespace fieldprof {

struct AgentState {
  int64_t last_upload_unix_ms = 0;   // last upload attempt
  std::string last_upload_result;    // "ok", "http 503", "unreachable: ...", ...
  int64_t last_success_unix_ms = 0;  // last batch the aggregator acknowledged
  int64_t next_attempt_unix_ms = 0;  // 0: whenever there is something to send
  int64_t failures = 0;              // consecutive failed attempts (backoff exponent)
  int64_t batches_uploaded = 0;      // since the state was created
  int64_t batches_quarantined = 0;
  // Reported in the next sealed batch's counters, then zeroed.
  int64_t records_dropped = 0;
  int64_t records_quarantined = 0;
  // Runs the runtime counted instead of recording (common/spool/run_counters.h),
  // taken from the spool's .counters, waiting for the next sealed batch.
  int64_t runs_refused_no_slot = 0;
  int64_t runs_refused_load = 0;
  int64_t runs_refused_rate_cap = 0;
  int64_t runs_measured_nothing = 0;
  std::string settings_version;          // of the fleet settings last applied
  int64_t settings_checked_unix_ms = 0;  // last GET /v1/config attempt
  std::string settings_result;           // "ok", "unreachable: ...", "refused: ..."
  // The system's code (common/system/system_code.h) as of the last pass: "ok: N
  // packaged modules may be named", or why it could not be judged.
  std::string system_code_result;
  // The modules shared by name at the last pass (the agent's flag and the
  // settings file's share_modules), for `fieldprof status --pending`.
  std::string share_modules;
  // Why the series this machine was counted in were started afresh
  // (common/spool/counted_series.h): it may be counted again in those it sent
  // before. Empty when they read.
  std::string counted_result;
  // The agent's own thresholds from the last settings applied (0: none yet).
  int64_t fleet_batch_bytes = 0;
  int64_t fleet_max_age_s = 0;
  // When the spool's oldest unsealed record is due (0: nothing waits).
  int64_t seal_deadline_unix_ms = 0;
  // Snapshot refresh (common/snapshot/snapshot_cache.h).
  int64_t snapshot_checked_unix_ms = 0;  // last refresh attempt
  std::string snapshot_result;           // "ok", "manifest rejected, cache kept: ...", ...
  int64_t snapshot_next_unix_ms = 0;     // next refresh (0: at the next pass)
  int64_t snapshot_version = 0;          // of the last manifest accepted
  // At most snapshot_per_day fragments in any window of 24 h from its start.
  int64_t snapshot_window_start_unix_ms = 0;
  int64_t snapshot_window_fetched = 0;
  int64_t snapshot_bytes_downloaded = 0;  // since the state was created
  // Today's machine key (hex), sent with every batch sealed on that UTC
  // day (wire::Batch.machine_key); a new random one each day, the old one
  // forgotten. machine_key_day: its day, days since 1970-01-01.
  std::string machine_key;
  int64_t machine_key_day = 0;
  // Anonymous upload tokens (common/crypto/upload_tokens.h): whether the
  // aggregator asks for them (GET /v1/tokens), its key length, and how the
  // last refresh went. The tokens themselves are in the file "tokens".
  int64_t tokens_required = 0;
  int64_t token_epoch_s = 0;
  std::string tokens_result;
  // The aggregator the agent uploads to (HOST:PORT) and the file that set
  // it ("" when a flag or the default did), as of its last pass.
  std::string server;
  std::string server_set_in;

  bool operator==(const AgentState&) const = default;
};

// The agent's directory: $XDG_STATE_HOME/fieldprof, else
// ~/.local/state/fieldprof; "" when neither variable is set. Inside it:
// outbox/ (sealed batches, *.batch), quarantine/, held/, the state file "status".
std::string DefaultAgentStateDir();
inline std::string OutboxDirOf(const std::string& state_dir) { return state_dir + "/outbox"; }
inline std::string QuarantineDirOf(const std::string& state_dir) {
  return state_dir + "/quarantine";
}
// Stack records held back for the day's batch (common/spool/spool_sealer.h).
inline std::string HeldDirOf(const std::string& state_dir) { return state_dir + "/held"; }
inline std::string StatusPathOf(const std::string& state_dir) { return state_dir + "/status"; }
// The series this machine was counted in (common/spool/counted_series.h).
inline std::string CountedPathOf(const std::string& state_dir) { return state_dir + "/counted"; }

std::string FormatAgentState(const AgentState& s);
// Unknown names are skipped (a newer agent may write more); malformed
// numbers are errors.
[[nodiscard]] StatusOr<AgentState> ParseAgentState(const std::string& text);
// A missing file is a fresh state.
[[nodiscard]] StatusOr<AgentState> ReadAgentState(const std::string& path);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SETTINGS_AGENT_STATE_H_
