#include "common/wire/module_version.h"

#include <algorithm>

#include "common/wire/key_rules.h"

namespace fieldprof {

namespace {

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

}  // namespace

bool IsBuildId(std::string_view s) { return s.size() >= 32 && s.size() % 2 == 0 && IsHex(s); }

ModuleVersionParts SplitModuleVersion(std::string_view v) {
  if (IsBuildId(v)) return {{}, v};
  const size_t us = v.rfind('_');
  if (us != std::string_view::npos && us > 0 && v.size() - us - 1 == kKeyBuildIdDigits &&
      IsHex(v.substr(us + 1))) {
    return {v.substr(0, us), v.substr(us + 1)};
  }
  return {v, {}};
}

std::string JoinModuleVersion(std::string_view package_version, std::string_view build_id) {
  if (package_version.empty() || build_id.size() < kKeyBuildIdDigits || !IsHex(build_id) ||
      package_version.find('_') != std::string_view::npos) {
    return {};
  }
  std::string out(package_version);
  out += '_';
  out += build_id.substr(0, kKeyBuildIdDigits);
  if (!key_rules::ModuleVersionOk(out.data(), out.size())) return {};
  return out;
}

std::string ReadableModuleVersion(std::string_view v) {
  const ModuleVersionParts p = SplitModuleVersion(v);
  if (p.version.empty() || p.build_id.empty()) return std::string(v);
  return std::string(p.version) + " (" + std::string(p.build_id.substr(0, 8)) + ")";
}

bool ModuleVersionMatches(std::string_view key_version, std::string_view wanted) {
  if (wanted.empty()) return true;
  if (key_version == wanted) return true;
  const ModuleVersionParts p = SplitModuleVersion(key_version);
  if (!p.version.empty() && p.version == wanted) return true;
  if (!p.build_id.empty() && wanted.size() >= 8 && IsHex(wanted)) {
    // The key keeps 16 digits: a longer id asked for matches on those.
    const size_t n = std::min(wanted.size(), p.build_id.size());
    return p.build_id.substr(0, n) == wanted.substr(0, n);
  }
  return false;
}

}  // namespace fieldprof
