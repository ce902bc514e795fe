#include "common/settings/runtime_settings.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/base/decimal.h"
#include "common/base/durable_file.h"
#include "common/base/json_writer.h"
#include "common/settings/options.h"
#include "common/settings/settings_rules.h"
#include "common/settings/tsc_rate.h"

namespace fieldprof {

namespace {

using settings_rules::Kind;
using settings_rules::RuleOf;
using settings_rules::Setting;

bool ParseInt(const std::string& v, int64_t lo, int64_t hi, int64_t* out) {
  int64_t x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi) return false;
  *out = x;
  return true;
}

// Shortest text that reads back as the same double.
std::string FormatDouble(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

bool CleanText(const std::string& v, size_t max) {
  return v.size() <= max && v.find_first_of("\n\r#") == std::string::npos && TrimSpace(v) == v;
}

// "k must be 1..8" when `v` is out of the setting's range.
Status CheckRange(Setting setting, int64_t v, const char* note = "") {
  const settings_rules::Rule& r = RuleOf(setting);
  if (settings_rules::InRange(r, v)) return Status::Ok();
  return InvalidArgument(std::string(r.name) + " must be " + std::to_string(r.lo) + ".." +
                         std::to_string(r.hi) + note);
}
Status CheckRange(Setting setting, double v) {
  const settings_rules::Rule& r = RuleOf(setting);
  if (settings_rules::InRange(r, v)) return Status::Ok();
  return InvalidArgument(std::string(r.name) + " must be " + FormatDouble(r.dlo) + ".." +
                         FormatDouble(r.dhi));
}

// Whether `v` parses by the rule and is in its range; the number into
// `n` (integers) or `d` (decimals).
bool ValueFits(const settings_rules::Rule& r, const std::string& v, int64_t* n, double* d) {
  switch (r.kind) {
    case Kind::kYesNo:
      if (v != "yes" && v != "no") return false;
      break;
    case Kind::kInt:
      if (!ParseInt(v, r.lo, r.hi, n)) return false;
      break;
    case Kind::kDouble: {
      const std::optional<double> x = ParseDecimalIn(v, r.dlo, r.dhi);
      if (!x) return false;
      *d = *x;
      break;
    }
    case Kind::kU64: {
      uint64_t seed = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), seed);
      if (ec != std::errc() || p != v.data() + v.size()) return false;
      break;
    }
    case Kind::kText:
      if (!settings_rules::TextFits(r, v.size())) return false;
      break;
  }
  return true;
}

// A value that fits its rule (`v` as text, `n` or `d` as parsed) into `s`.
void Store(Setting setting, const std::string& v, int64_t n, double d, RuntimeSettings* s) {
  FleetSettings& f = s->fleet;
  switch (setting) {
    case Setting::kConsent:
      s->consent = v == "yes";
      break;
    case Setting::kK:
      f.k = n;
      break;
    case Setting::kSlots:
      f.slots = n;
      break;
    case Setting::kMaxLoadPerCpu:
      f.max_load_per_cpu = d;
      break;
    case Setting::kOverheadBudget:
      f.overhead_budget = d;
      break;
    case Setting::kSampleFraction:
      f.sample_fraction = d;
      break;
    case Setting::kMaxRunsPerMinute:
      f.max_runs_per_minute = n;
      break;
    case Setting::kSpoolDir:
      s->spool_dir = v;
      break;
    case Setting::kSpoolCapMib:
      s->spool_cap_mib = n;
      break;
    case Setting::kAllowModules:
      f.allow_modules = v;
      break;
    case Setting::kDenyModules:
      f.deny_modules = v;
      break;
    case Setting::kSlotDir:
      s->slot_dir = v;
      break;
    case Setting::kLiveDir:
      s->live_dir = v;
      break;
    case Setting::kForce:
      s->force = v;
      break;
    case Setting::kTscHz:
      s->tsc_hz = n;
      break;
    case Setting::kSeed:
      s->seed = v;  // kept as found
      break;
    case Setting::kPoints:
      s->points = v;
      break;
    case Setting::kStackHz:
      f.stack_hz = n;
      break;
    case Setting::kSystemCode:
      s->system_code = v;
      break;
    case Setting::kShareModules:
      s->share_modules = v;
      break;
  }
}

// One `name = value` line's value into `s` by the setting's rule (the
// runtime applies the same, agent/preload/runtime/front/decide.cc); false when it does
// not parse or is out of range.
bool ApplySetting(const settings_rules::Rule& r, const std::string& v, RuntimeSettings* s) {
  int64_t n = 0;
  double d = 0;
  if (!ValueFits(r, v, &n, &d)) return false;
  Store(r.setting, v, n, d, s);
  return true;
}

}  // namespace

std::string FleetSettings::Version() const {
  const std::string text = FleetSettingsToJson(*this);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Status FleetSettings::Validate() const {
  FP_RETURN_IF_ERROR(CheckRange(Setting::kK, k));
  FP_RETURN_IF_ERROR(CheckRange(Setting::kSlots, slots));
  FP_RETURN_IF_ERROR(CheckRange(Setting::kMaxLoadPerCpu, max_load_per_cpu));
  FP_RETURN_IF_ERROR(CheckRange(Setting::kOverheadBudget, overhead_budget));
  FP_RETURN_IF_ERROR(CheckRange(Setting::kSampleFraction, sample_fraction));
  FP_RETURN_IF_ERROR(CheckRange(Setting::kMaxRunsPerMinute, max_runs_per_minute, " (0: no cap)"));
  FP_RETURN_IF_ERROR(CheckRange(Setting::kStackHz, stack_hz, " (0: none)"));
  const size_t list_max = static_cast<size_t>(RuleOf(Setting::kAllowModules).hi);
  if (!CleanText(allow_modules, list_max) || !CleanText(deny_modules, list_max)) {
    return InvalidArgument("allow_modules/deny_modules: at most " + std::to_string(list_max) +
                           " bytes, one line, no '#'");
  }
  if (batch_bytes < 4096 || batch_bytes > (1 << 20)) {
    return InvalidArgument("batch_bytes must be 4096..1048576");
  }
  if (max_age_s < 1 || max_age_s > int64_t{365} * 86400) {
    return InvalidArgument("max_age_s must be 1 s .. 365 days");
  }
  return Status::Ok();
}

std::string DefaultRuntimeSettingsPath() {
  if (const char* p = std::getenv("FIELDPROF_SETTINGS"); p != nullptr) return p;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x != nullptr && *x) {
    return std::string(x) + "/fieldprof/runtime.conf";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr) {
    return std::string(h) + "/.config/fieldprof/runtime.conf";
  }
  return "";
}

StatusOr<RuntimeSettings> ParseRuntimeSettings(const std::string& text) {
  RuntimeSettings s;
  std::istringstream lines(text);
  std::string raw;
  int n = 0;
  while (std::getline(lines, raw)) {
    ++n;
    const std::string line(TrimSpace(raw));
    const std::string where = "line " + std::to_string(n) + ": ";
    if (line.rfind("# settings_version:", 0) == 0) {
      s.version = std::string(TrimSpace(std::string_view(line).substr(19)));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return InvalidArgument(where + "no '='");
    const std::string name(TrimSpace(std::string_view(line).substr(0, eq)));
    const std::string v(TrimSpace(std::string_view(line).substr(eq + 1)));
    const settings_rules::Rule* rule = settings_rules::FindRule(name.c_str());
    if (rule == nullptr) return InvalidArgument(where + "unknown setting '" + name + "'");
    const bool ok = ApplySetting(*rule, v, &s);
    if (!ok) return InvalidArgument(where + "bad value for " + name + ": '" + v + "'");
  }
  return s;
}

std::string FormatRuntimeSettings(const RuntimeSettings& s) {
  const FleetSettings& f = s.fleet;
  std::string out =
      "# fieldprof runtime settings: read by every measured program at start.\n"
      "# Written by fieldprof-agent; consent and the local paths are yours to edit.\n";
  if (!s.version.empty()) out += "# settings_version: " + s.version + "\n";
  out += std::string("consent = ") + (s.consent ? "yes" : "no") + "\n";
  out += "k = " + std::to_string(f.k) + "\n";
  out += "slots = " + std::to_string(f.slots) + "\n";
  out += "max_load_per_cpu = " + FormatDouble(f.max_load_per_cpu) + "\n";
  out += "overhead_budget = " + FormatDouble(f.overhead_budget) + "\n";
  out += "sample_fraction = " + FormatDouble(f.sample_fraction) + "\n";
  out += "max_runs_per_minute = " + std::to_string(f.max_runs_per_minute) + "\n";
  out += "stack_hz = " + std::to_string(f.stack_hz) + "\n";
  if (!f.allow_modules.empty()) out += "allow_modules = " + f.allow_modules + "\n";
  if (!f.deny_modules.empty()) out += "deny_modules = " + f.deny_modules + "\n";
  if (!s.spool_dir.empty()) out += "spool_dir = " + s.spool_dir + "\n";
  out += "spool_cap_mib = " + std::to_string(s.spool_cap_mib) + "\n";
  if (!s.slot_dir.empty()) out += "slot_dir = " + s.slot_dir + "\n";
  if (!s.live_dir.empty()) out += "live_dir = " + s.live_dir + "\n";
  if (s.tsc_hz != 0) out += "tsc_hz = " + std::to_string(s.tsc_hz) + "\n";
  if (!s.seed.empty()) out += "seed = " + s.seed + "\n";
  if (!s.force.empty()) out += "force = " + s.force + "\n";
  if (!s.points.empty()) out += "points = " + s.points + "\n";
  if (!s.system_code.empty()) out += "system_code = " + s.system_code + "\n";
  if (!s.share_modules.empty()) out += "share_modules = " + s.share_modules + "\n";
  return out;
}

Status UpdateRuntimeSettings(const std::string& path, const RuntimeSettingsEdit& edit) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (!dir.empty()) FP_RETURN_IF_ERROR(MakeDirs(dir));
  const int fd = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return IOError(path + ".lock: " + std::strerror(errno));
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // releases the flock
  } unlock{fd};
  if (::flock(fd, LOCK_EX) != 0) return IOError(path + ".lock: " + std::strerror(errno));
  FP_ASSIGN_OR_RETURN(std::optional<RuntimeSettings> now, ReadRuntimeSettings(path));
  RuntimeSettings next = now.value_or(RuntimeSettings{});
  if (!edit(now, &next)) return Status::Ok();
  return WriteFileDurably(path, FormatRuntimeSettings(next));
}

StatusOr<std::optional<RuntimeSettings>> ReadRuntimeSettings(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<RuntimeSettings>();
    return IOError(path + ": " + std::strerror(errno));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  StatusOr<RuntimeSettings> s = ParseRuntimeSettings(buf.str());
  if (!s.ok()) return InvalidArgument(path + ": " + s.status().message());
  return std::optional<RuntimeSettings>(*s);
}

std::string FleetSettingsToJson(const FleetSettings& f, bool with_version) {
  JsonWriter j;
  j.BeginObject();
  if (with_version) j.Key("version").String(f.Version());
  j.Key("k").Int(f.k);
  j.Key("slots").Int(f.slots);
  j.Key("max_load_per_cpu").Double(f.max_load_per_cpu);
  j.Key("overhead_budget").Double(f.overhead_budget);
  j.Key("sample_fraction").Double(f.sample_fraction);
  j.Key("max_runs_per_minute").Int(f.max_runs_per_minute);
  j.Key("stack_hz").Int(f.stack_hz);
  j.Key("allow_modules").String(f.allow_modules);
  j.Key("deny_modules").String(f.deny_modules);
  j.Key("batch_bytes").Int(f.batch_bytes);
  j.Key("max_age_s").Int(f.max_age_s);
  j.EndObject();
  return j.Take();
}

StatusOr<FleetSettings> FleetSettingsFromJson(const std::string& json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("settings are not a JSON object");
  FleetSettings f;
  try {
    f.k = j.at("k").get<int64_t>();
    f.slots = j.at("slots").get<int64_t>();
    f.max_load_per_cpu = j.at("max_load_per_cpu").get<double>();
    f.overhead_budget = j.at("overhead_budget").get<double>();
    f.sample_fraction = j.at("sample_fraction").get<double>();
    f.max_runs_per_minute = j.at("max_runs_per_minute").get<int64_t>();
    f.stack_hz = j.value("stack_hz", int64_t{20});  // an aggregator before stack samples
    f.allow_modules = j.value("allow_modules", "");
    f.deny_modules = j.value("deny_modules", "");
    f.batch_bytes = j.at("batch_bytes").get<int64_t>();
    f.max_age_s = j.at("max_age_s").get<int64_t>();
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("settings: ") + e.what());
  }
  FP_RETURN_IF_ERROR(f.Validate());
  if (const auto v = j.find("version"); v != j.end()) {
    if (!v->is_string() || v->get<std::string>() != f.Version()) {
      return InvalidArgument("settings: version " + v->dump() + " does not match their content");
    }
  }
  return f;
}

}  // namespace fieldprof
