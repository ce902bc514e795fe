#include "common/settings/agent_state.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/settings/options.h"

namespace fieldprof {

namespace {

struct Field {
  const char* name;
  int64_t AgentState::*number;
  std::string AgentState::*text;
};

constexpr Field kFields[] = {
    {"last_upload_unix_ms", &AgentState::last_upload_unix_ms, nullptr},
    {"last_upload_result", nullptr, &AgentState::last_upload_result},
    {"last_success_unix_ms", &AgentState::last_success_unix_ms, nullptr},
    {"next_attempt_unix_ms", &AgentState::next_attempt_unix_ms, nullptr},
    {"failures", &AgentState::failures, nullptr},
    {"batches_uploaded", &AgentState::batches_uploaded, nullptr},
    {"batches_quarantined", &AgentState::batches_quarantined, nullptr},
    {"records_dropped", &AgentState::records_dropped, nullptr},
    {"records_quarantined", &AgentState::records_quarantined, nullptr},
    {"runs_refused_no_slot", &AgentState::runs_refused_no_slot, nullptr},
    {"runs_refused_load", &AgentState::runs_refused_load, nullptr},
    {"runs_refused_rate_cap", &AgentState::runs_refused_rate_cap, nullptr},
    {"runs_measured_nothing", &AgentState::runs_measured_nothing, nullptr},
    {"settings_version", nullptr, &AgentState::settings_version},
    {"settings_checked_unix_ms", &AgentState::settings_checked_unix_ms, nullptr},
    {"settings_result", nullptr, &AgentState::settings_result},
    {"system_code_result", nullptr, &AgentState::system_code_result},
    {"share_modules", nullptr, &AgentState::share_modules},
    {"counted_result", nullptr, &AgentState::counted_result},
    {"fleet_batch_bytes", &AgentState::fleet_batch_bytes, nullptr},
    {"fleet_max_age_s", &AgentState::fleet_max_age_s, nullptr},
    {"seal_deadline_unix_ms", &AgentState::seal_deadline_unix_ms, nullptr},
    {"snapshot_checked_unix_ms", &AgentState::snapshot_checked_unix_ms, nullptr},
    {"snapshot_result", nullptr, &AgentState::snapshot_result},
    {"snapshot_next_unix_ms", &AgentState::snapshot_next_unix_ms, nullptr},
    {"snapshot_version", &AgentState::snapshot_version, nullptr},
    {"snapshot_window_start_unix_ms", &AgentState::snapshot_window_start_unix_ms, nullptr},
    {"snapshot_window_fetched", &AgentState::snapshot_window_fetched, nullptr},
    {"snapshot_bytes_downloaded", &AgentState::snapshot_bytes_downloaded, nullptr},
    {"machine_key", nullptr, &AgentState::machine_key},
    {"machine_key_day", &AgentState::machine_key_day, nullptr},
    {"tokens_required", &AgentState::tokens_required, nullptr},
    {"token_epoch_s", &AgentState::token_epoch_s, nullptr},
    {"tokens_result", nullptr, &AgentState::tokens_result},
    {"server", nullptr, &AgentState::server},
    {"server_set_in", nullptr, &AgentState::server_set_in},
};

}  // namespace

std::string DefaultAgentStateDir() {
  const char* xdg = std::getenv("XDG_STATE_HOME");
  if (xdg != nullptr && *xdg) return std::string(xdg) + "/fieldprof";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home) return std::string(home) + "/.local/state/fieldprof";
  return "";
}

std::string FormatAgentState(const AgentState& s) {
  std::string out = "# fieldprof-agent state (written by the agent; read by `fieldprof status`)\n";
  for (const Field& f : kFields) {
    out += f.name;
    out += " = ";
    if (f.number != nullptr) {
      out += std::to_string(s.*f.number);
    } else {
      std::string v = s.*f.text;
      for (char& c : v) {
        if (c == '\n' || c == '\r') c = ' ';
      }
      out += v;
    }
    out += "\n";
  }
  return out;
}

StatusOr<AgentState> ParseAgentState(const std::string& text) {
  AgentState s;
  std::istringstream lines(text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    line = std::string(TrimSpace(line));
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("agent state line " + std::to_string(n) + ": no '='");
    }
    const std::string name(TrimSpace(std::string_view(line).substr(0, eq)));
    const std::string value(TrimSpace(std::string_view(line).substr(eq + 1)));
    for (const Field& f : kFields) {
      if (name != f.name) continue;
      if (f.number != nullptr) {
        int64_t v = 0;
        const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (ec != std::errc() || p != value.data() + value.size()) {
          return InvalidArgument("agent state line " + std::to_string(n) + ": " + name +
                                 " is not a number");
        }
        s.*f.number = v;
      } else {
        s.*f.text = value;
      }
    }
  }
  return s;
}

StatusOr<AgentState> ReadAgentState(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return AgentState{};
    return IOError(path + ": " + std::strerror(errno));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  StatusOr<AgentState> s = ParseAgentState(buf.str());
  if (!s.ok()) return InvalidArgument(path + ": " + s.status().message());
  return s;
}

}  // namespace fieldprof
