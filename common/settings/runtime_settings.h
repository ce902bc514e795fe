// The runtime's settings file ("name = value" lines, '#' comments), read by
// the runtime at every program start (agent/preload/runtime/front/decide.cc) and written by
// the agent from the aggregator's GET /v1/config. The runtime treats an
// unknown name or a bad value as a corrupt file and measures nothing, so
// this parser applies exactly its rules, and the writer emits only names it
// knows (the settings version goes in a comment). Names and ranges are
// common/settings/settings_rules.h's, which the runtime reads too.
//
// Fleet settings (from the aggregator): k, slots, max_load_per_cpu,
// overhead_budget, sample_fraction, max_runs_per_minute, allow_modules,
// deny_modules (which can only narrow what is measured). Local ones (never
// taken from the network): consent, spool_dir, spool_cap_mib, slot_dir,
// system_code, share_modules, tsc_hz
// (this machine's TSC rate, measured by the agent: common/settings/tsc_rate.h), and
// the test knobs seed and force, and points (functions the runtime times as
// instrumentation points in every measured run: docs/points.md).
#ifndef FIELDPROF_COMMON_SETTINGS_RUNTIME_SETTINGS_H_
#define FIELDPROF_COMMON_SETTINGS_RUNTIME_SETTINGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/base/status.h"

namespace fieldprof {

struct FleetSettings {
  int64_t k = 2;
  int64_t slots = 6;
  double max_load_per_cpu = 1.5;
  double overhead_budget = 0.01;
  // The share of program runs measured at all (the runtime's first look,
  // agent/preload/runtime/front/first_look.h, decides with a coin), and the machine-wide
  // cap on measured runs a minute (0: none). Explicit runs (`fieldprof
  // run`) are exempt from both.
  double sample_fraction = 1.0 / 16;
  int64_t max_runs_per_minute = 120;
  // Stack samples a second of a measured run's CPU time, folded to the
  // frames of packaged libraries (docs/field-stacks.md); 0: none.
  int64_t stack_hz = 20;
  // Comma-separated names; empty: all. Narrows the choice only: a module
  // that is not the system's code is measured only when the volunteer
  // shares it (RuntimeSettings::share_modules).
  std::string allow_modules;
  std::string deny_modules;
  // For the agent itself.
  int64_t batch_bytes = 128 * 1024;
  int64_t max_age_s = 24 * 3600;

  bool operator==(const FleetSettings&) const = default;
  // A digest of the content: equal settings, equal version.
  std::string Version() const;
  // The same ranges the runtime and the agent accept.
  [[nodiscard]] Status Validate() const;
};

struct RuntimeSettings {
  FleetSettings fleet;
  bool consent = false;
  std::string spool_dir;  // empty: the default
  int64_t spool_cap_mib = 16;
  std::string slot_dir;     // empty: the default
  std::string live_dir;     // empty: the default (common/spool/spool.h DefaultLiveDir)
  int64_t tsc_hz = 0;       // 0: none (each run estimates the rate itself)
  std::string seed, force;  // test knobs, kept as found
  std::string points;       // "module:function", comma-separated; kept as found
  // The agent's list of the system's code (common/system/system_code.h); empty:
  // none yet, and measured runs choose nothing at random.
  std::string system_code;
  // Modules the volunteer shares by name (comma-separated): chosen and
  // sent although they are not the system's code.
  std::string share_modules;
  std::string version;  // "# settings_version: ..." comment; empty if none

  bool operator==(const RuntimeSettings&) const = default;
};

// $FIELDPROF_SETTINGS, else $XDG_CONFIG_HOME/fieldprof/runtime.conf, else
// ~/.config/fieldprof/runtime.conf; "" when none applies.
std::string DefaultRuntimeSettingsPath();

[[nodiscard]] StatusOr<RuntimeSettings> ParseRuntimeSettings(const std::string& text);
std::string FormatRuntimeSettings(const RuntimeSettings& s);
// A missing file: nullopt (no consent yet). A corrupt one: an error.
[[nodiscard]] StatusOr<std::optional<RuntimeSettings>> ReadRuntimeSettings(const std::string& path);

// Changes the settings file, holding an flock on <path>.lock that every
// writer takes (the agent's settings and clock rate, fieldprof optin and
// optout), so that no writer's change is lost to another's
// read-modify-write (an optout between the agent's read and its write
// would otherwise come back as consent = yes). `edit` gets the settings now
// (nullopt: no file) and `next`, a copy of them (or the defaults) to change,
// and returns whether to write `next`; the parent directory is made when
// needed. A file that does not parse is left alone: InvalidArgument. The
// runtime reads without the lock: every write is a rename.
using RuntimeSettingsEdit =
    std::function<bool(const std::optional<RuntimeSettings>& now, RuntimeSettings* next)>;
[[nodiscard]] Status UpdateRuntimeSettings(const std::string& path,
                                           const RuntimeSettingsEdit& edit);

// GET /v1/config's body (with "version": FleetSettings::Version()), and
// back: every field required and in range, and a "version" that does not
// match the content is refused (a damaged or tampered answer).
std::string FleetSettingsToJson(const FleetSettings& f, bool with_version = false);
[[nodiscard]] StatusOr<FleetSettings> FleetSettingsFromJson(const std::string& json);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SETTINGS_RUNTIME_SETTINGS_H_
