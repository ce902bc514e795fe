#include "tools/shared/runtime_env.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "common/settings/runtime_settings.h"
#include "common/settings/tsc_rate.h"

namespace fieldprof::tools {
namespace {

// The runtime and the front that loads it, side by side.
bool HasRuntime(const std::string& dir) {
  return !dir.empty() && access((dir + "/" + kRuntimeLib).c_str(), R_OK) == 0 &&
         access((dir + "/" + kFrontLib).c_str(), R_OK) == 0;
}

const std::string kBoth = std::string(kRuntimeLib) + " and " + kFrontLib;

}  // namespace

StatusOr<std::string> FindRuntime(const std::string& flag) {
  if (!flag.empty()) {
    if (HasRuntime(flag)) return std::filesystem::absolute(flag).string();
    return NotFound("--lib_dir " + flag + " has not " + kBoth);
  }
  const char* env = std::getenv("FIELDPROF_LIB_DIR");
  if (env != nullptr && *env) {
    if (HasRuntime(env)) return std::filesystem::absolute(env).string();
    return NotFound(std::string("FIELDPROF_LIB_DIR=") + env + " has not " + kBoth);
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path dir = exe.parent_path();
    for (const auto& candidate : {dir / "../lib/fieldprof", dir}) {
      const std::string c = std::filesystem::weakly_canonical(candidate, ec).string();
      if (!ec && HasRuntime(c)) return c;
    }
  }
  return NotFound("cannot find " + kBoth + " (build it with deploy/build.sh, or pass --lib_dir)");
}

// The machine's TSC rate, so durations are right from the command's first
// call (agent/preload/runtime/hotpath/clock.h): the settings file's, where the agent keeps
// it, else measured here (20 ms).
void SetTscRate() {
  if (std::getenv("FIELDPROF_TSC_HZ") != nullptr) return;
  const std::string path = DefaultRuntimeSettingsPath();
  if (!path.empty()) {
    StatusOr<std::optional<RuntimeSettings>> local = ReadRuntimeSettings(path);
    if (local.ok() && local->has_value() && (*local)->tsc_hz != 0) return;
  }
  if (std::optional<int64_t> hz = MeasureTscHz(); hz.has_value()) {
    setenv("FIELDPROF_TSC_HZ", std::to_string(*hz).c_str(), 1);
  }
}

void SetLabPassEnvironment(const std::string& work) {
  setenv("FIELDPROF_RUN", "1", 1);
  setenv("FIELDPROF_SLOT_DIR", (work + "/slots").c_str(), 1);
  setenv("FIELDPROF_SLOTS", "1000", 1);
  setenv("FIELDPROF_MAX_LOAD", "1000000", 1);
  setenv("FIELDPROF_BUDGET", "1000", 1);
  setenv("FIELDPROF_SPOOL", (work + "/spool").c_str(), 1);
  SetTscRate();
}

void PrependEnv(const char* var, const std::string& value) {
  const char* old = std::getenv(var);
  std::string v = value;
  if (old != nullptr && *old) v += std::string(":") + old;
  setenv(var, v.c_str(), 1);
}

}  // namespace fieldprof::tools
