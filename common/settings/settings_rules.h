// The names and ranges of the runtime's settings file ("name = value"
// lines, '#' comments; common/settings/runtime_settings.h describes each setting).
// Two parsers read that file: the runtime's at every program start
// (agent/preload/runtime/front/decide.cc, no C++ library), and common/settings/runtime_settings.cc
// for the agent and the command line. Both look each name up here, so a
// name or a range can only change in one place, and the runtime never
// refuses a file the agent wrote (it would measure nothing).
//
// Header only and without the C++ library, as key_rules.h.
#ifndef FIELDPROF_COMMON_SETTINGS_SETTINGS_RULES_H_
#define FIELDPROF_COMMON_SETTINGS_SETTINGS_RULES_H_

#include <stddef.h>
#include <stdint.h>

#include "common/settings/tsc_rate.h"

namespace fieldprof::settings_rules {

// APIs a run may measure at most (FP_MAX_APIS in agent/preload/runtime/runtime.h).
inline constexpr int64_t kMaxApis = 8;

enum class Setting : uint8_t {
  kConsent,
  kK,
  kSlots,
  kMaxLoadPerCpu,
  kOverheadBudget,
  kSampleFraction,
  kMaxRunsPerMinute,
  kSpoolDir,
  kSpoolCapMib,
  kAllowModules,
  kDenyModules,
  kSlotDir,
  kForce,
  kTscHz,
  kSeed,
  kPoints,
  kLiveDir,
  kStackHz,
  kSystemCode,
  kShareModules,
};

enum class Kind : uint8_t {
  kYesNo,   // "yes" or "no"
  kInt,     // a decimal integer in [lo, hi]
  kDouble,  // a decimal number in [dlo, dhi]
  kU64,     // any decimal unsigned 64-bit integer
  kText,    // the rest of the line, at most hi bytes (the runtime's buffer
            // less its NUL)
};

struct Rule {
  char name[24];  // in place, not a pointer: the table needs no relocation
  Setting setting;
  Kind kind;
  int64_t lo, hi;   // kInt; kText: hi is the most bytes
  double dlo, dhi;  // kDouble
};

inline constexpr Rule kRules[] = {
    {"consent", Setting::kConsent, Kind::kYesNo, 0, 0, 0, 0},
    {"k", Setting::kK, Kind::kInt, 1, kMaxApis, 0, 0},
    {"slots", Setting::kSlots, Kind::kInt, 1, 1024, 0, 0},
    {"max_load_per_cpu", Setting::kMaxLoadPerCpu, Kind::kDouble, 0, 0, 0, 1e6},
    // A fraction of run time; above 1 the cap is off (tests, benchmarks).
    {"overhead_budget", Setting::kOverheadBudget, Kind::kDouble, 0, 0, 0, 1000},
    {"sample_fraction", Setting::kSampleFraction, Kind::kDouble, 0, 0, 0, 1},
    {"max_runs_per_minute", Setting::kMaxRunsPerMinute, Kind::kInt, 0, 1000000, 0, 0},
    {"spool_dir", Setting::kSpoolDir, Kind::kText, 0, 511, 0, 0},
    {"spool_cap_mib", Setting::kSpoolCapMib, Kind::kInt, 0, 1 << 20, 0, 0},
    {"allow_modules", Setting::kAllowModules, Kind::kText, 0, 1023, 0, 0},
    {"deny_modules", Setting::kDenyModules, Kind::kText, 0, 1023, 0, 0},
    {"slot_dir", Setting::kSlotDir, Kind::kText, 0, 511, 0, 0},
    {"force", Setting::kForce, Kind::kText, 0, 1023, 0, 0},
    {"tsc_hz", Setting::kTscHz, Kind::kInt, FP_MIN_TSC_HZ, FP_MAX_TSC_HZ, 0, 0},
    {"seed", Setting::kSeed, Kind::kU64, 0, 0, 0, 0},
    // Points placed by configuration: "module:function", comma-separated.
    {"points", Setting::kPoints, Kind::kText, 0, 1023, 0, 0},
    // Where measured runs keep their counts while they run (live files,
    // agent/preload/runtime/records/live_layout.h); empty: /dev/shm/fieldprof-<uid>; "off":
    // none (a killed run's counts are then lost).
    {"live_dir", Setting::kLiveDir, Kind::kText, 0, 511, 0, 0},
    // Stack samples a second of a measured run's threads' CPU time
    // (agent/preload/runtime/stacks/stack_samples.h); 0: none.
    {"stack_hz", Setting::kStackHz, Kind::kInt, 0, 1000, 0, 0},
    // The list of the system's code (common/system/system_code_list.h) the agent
    // keeps: measured runs choose APIs only among the modules it names;
    // without it, none at random.
    {"system_code", Setting::kSystemCode, Kind::kText, 0, 511, 0, 0},
    // Modules the volunteer shares although they are not the system's code
    // (comma-separated names): chosen and sent as the system's are. Never
    // taken from the network.
    {"share_modules", Setting::kShareModules, Kind::kText, 0, 1023, 0, 0},
};

// The rule of setting `name` (NUL-terminated), or nullptr for a name no
// parser accepts.
constexpr const Rule* FindRule(const char* name) {
  for (const Rule& r : kRules) {
    size_t i = 0;
    while (r.name[i] != 0 && r.name[i] == name[i]) ++i;
    if (r.name[i] == 0 && name[i] == 0) return &r;
  }
  return nullptr;
}

// The rule of `setting` (every setting has one).
constexpr const Rule& RuleOf(Setting setting) {
  for (const Rule& r : kRules) {
    if (r.setting == setting) return r;
  }
  return kRules[0];  // unreachable: the table lists every Setting
}

constexpr bool InRange(const Rule& r, int64_t v) { return v >= r.lo && v <= r.hi; }
constexpr bool InRange(const Rule& r, double v) { return v >= r.dlo && v <= r.dhi; }
constexpr bool TextFits(const Rule& r, size_t bytes) { return static_cast<int64_t>(bytes) <= r.hi; }

}  // namespace fieldprof::settings_rules

#endif  // FIELDPROF_COMMON_SETTINGS_SETTINGS_RULES_H_
