#include "common/runtime_settings.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/durable_file.h"
#include "common/json_writer.h"
#include "common/options.h"
#include "common/tsc_rate.h"

namespace fieldprof {

namespace {

constexpr int kMaxApis = 8;              // FP_MAX_APIS in agent/runtime/runtime.h
constexpr size_t kMaxModuleList = 1023;  // the runtime's buffers hold 1024 bytes

bool ParseInt(const std::string& v, int64_t lo, int64_t hi, int64_t* out) {
  int64_t x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi) return false;
  *out = x;
  return true;
}

bool ParseDouble(const std::string& v, double lo, double hi, double* out) {
  if (v.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (end != v.c_str() + v.size() || errno != 0 || !(x >= lo && x <= hi)) return false;
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
  if (k < 1 || k > kMaxApis) return InvalidArgument("k must be 1.." + std::to_string(kMaxApis));
  if (slots < 1 || slots > 1024) return InvalidArgument("slots must be 1..1024");
  if (!(max_load_per_cpu >= 0 && max_load_per_cpu <= 1e6)) {
    return InvalidArgument("max_load_per_cpu must be 0..1e6");
  }
  if (!(overhead_budget >= 0 && overhead_budget <= 1000)) {
    return InvalidArgument("overhead_budget must be 0..1000");
  }
  if (!(sample_fraction >= 0 && sample_fraction <= 1)) {
    return InvalidArgument("sample_fraction must be 0..1");
  }
  if (max_runs_per_minute < 0 || max_runs_per_minute > 1000000) {
    return InvalidArgument("max_runs_per_minute must be 0..1000000 (0: no cap)");
  }
  if (!CleanText(allow_modules, kMaxModuleList) || !CleanText(deny_modules, kMaxModuleList)) {
    return InvalidArgument("allow_modules/deny_modules: at most 1023 bytes, one line, no '#'");
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
    FleetSettings& f = s.fleet;
    bool ok = true;
    if (name == "consent") {
      ok = v == "yes" || v == "no";
      s.consent = v == "yes";
    } else if (name == "k") {
      ok = ParseInt(v, 1, kMaxApis, &f.k);
    } else if (name == "slots") {
      ok = ParseInt(v, 1, 1024, &f.slots);
    } else if (name == "max_load_per_cpu") {
      ok = ParseDouble(v, 0, 1e6, &f.max_load_per_cpu);
    } else if (name == "overhead_budget") {
      ok = ParseDouble(v, 0, 1000, &f.overhead_budget);
    } else if (name == "sample_fraction") {
      ok = ParseDouble(v, 0, 1, &f.sample_fraction);
    } else if (name == "max_runs_per_minute") {
      ok = ParseInt(v, 0, 1000000, &f.max_runs_per_minute);
    } else if (name == "spool_dir") {
      s.spool_dir = v;
    } else if (name == "spool_cap_mib") {
      ok = ParseInt(v, 0, 1 << 20, &s.spool_cap_mib);
    } else if (name == "allow_modules") {
      f.allow_modules = v;
    } else if (name == "deny_modules") {
      f.deny_modules = v;
    } else if (name == "slot_dir") {
      s.slot_dir = v;
    } else if (name == "force") {
      s.force = v;
    } else if (name == "tsc_hz") {
      ok = ParseInt(v, FP_MIN_TSC_HZ, FP_MAX_TSC_HZ, &s.tsc_hz);
    } else if (name == "seed") {
      uint64_t seed = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), seed);
      ok = ec == std::errc() && p == v.data() + v.size();
      s.seed = v;
    } else {
      return InvalidArgument(where + "unknown setting '" + name + "'");
    }
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
  if (!f.allow_modules.empty()) out += "allow_modules = " + f.allow_modules + "\n";
  if (!f.deny_modules.empty()) out += "deny_modules = " + f.deny_modules + "\n";
  if (!s.spool_dir.empty()) out += "spool_dir = " + s.spool_dir + "\n";
  out += "spool_cap_mib = " + std::to_string(s.spool_cap_mib) + "\n";
  if (!s.slot_dir.empty()) out += "slot_dir = " + s.slot_dir + "\n";
  if (s.tsc_hz != 0) out += "tsc_hz = " + std::to_string(s.tsc_hz) + "\n";
  if (!s.seed.empty()) out += "seed = " + s.seed + "\n";
  if (!s.force.empty()) out += "force = " + s.force + "\n";
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
  StatusOr<std::optional<RuntimeSettings>> now = ReadRuntimeSettings(path);
  if (!now.ok()) return now.status();
  RuntimeSettings next = now->value_or(RuntimeSettings{});
  if (!edit(*now, &next)) return Status::Ok();
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
  j.Key("allow_modules").String(f.allow_modules);
  j.Key("deny_modules").String(f.deny_modules);
  j.Key("batch_bytes").Int(f.batch_bytes);
  j.Key("max_age_s").Int(f.max_age_s);
  j.EndObject();
  return j.Take();
}

StatusOr<FleetSettings> FleetSettingsFromJson(const std::string& json) {
  boost::property_tree::ptree pt;
  try {
    std::istringstream in(json);
    boost::property_tree::read_json(in, pt);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("settings are not JSON: ") + e.what());
  }
  FleetSettings f;
  try {
    f.k = pt.get<int64_t>("k");
    f.slots = pt.get<int64_t>("slots");
    f.max_load_per_cpu = pt.get<double>("max_load_per_cpu");
    f.overhead_budget = pt.get<double>("overhead_budget");
    f.sample_fraction = pt.get<double>("sample_fraction");
    f.max_runs_per_minute = pt.get<int64_t>("max_runs_per_minute");
    f.allow_modules = pt.get<std::string>("allow_modules", "");
    f.deny_modules = pt.get<std::string>("deny_modules", "");
    f.batch_bytes = pt.get<int64_t>("batch_bytes");
    f.max_age_s = pt.get<int64_t>("max_age_s");
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("settings: ") + e.what());
  }
  FP_RETURN_IF_ERROR(f.Validate());
  if (const auto v = pt.get_optional<std::string>("version"); v && *v != f.Version()) {
    return InvalidArgument("settings: version " + *v + " does not match their content");
  }
  return f;
}

}  // namespace fieldprof
