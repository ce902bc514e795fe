// What a key's module_version says, and how people read and ask for it.
//
// The runtime keys a module by its GNU build id (40 hex digits). Where the
// agent can tell which Debian package the module came from
// (common/system/system_code.h), the key carries that package's version
// instead, with the build id's first 16 hex digits after '_' so one build
// stays one key:
//
//   5221b80bd99650e3e55370b0e24f4b4dbe81264f   a build id
//   3.40.1-2_5221b80bd99650e3                  package 3.40.1-2, that build
//
// Debian versions never hold '_', so the split is unambiguous. Shown to
// people as "3.40.1-2 (5221b80b)"; asked for as "3.40.1-2", as the whole
// token, or by a build id's first 8 or more hex digits.
#ifndef FIELDPROF_COMMON_WIRE_MODULE_VERSION_H_
#define FIELDPROF_COMMON_WIRE_MODULE_VERSION_H_

#include <string>
#include <string_view>

namespace fieldprof {

inline constexpr size_t kKeyBuildIdDigits = 16;

struct ModuleVersionParts {
  std::string_view version;   // the package's, or empty
  std::string_view build_id;  // hex, whole or the key's first 16 digits; or empty
};

// A whole GNU build id as the runtime writes it: 32 or more hex digits,
// an even number (SHA-1's 40 is the usual).
bool IsBuildId(std::string_view s);

// Splits a key's module_version; a token that is neither form is all
// `version` (a vendor's own token: "1.3").
ModuleVersionParts SplitModuleVersion(std::string_view v);

// The key token for a package version and a build id; empty when it would
// not keep the key rules (too long, or a character keys do not hold).
std::string JoinModuleVersion(std::string_view package_version, std::string_view build_id);

// "3.40.1-2 (5221b80b)", "5221b80bd99650e3…" stays whole, "1.3" stays.
std::string ReadableModuleVersion(std::string_view v);

// Whether a key's module_version is what `wanted` asks for: the same
// token, its package version, or (8 or more hex digits) a prefix of its
// build id.
bool ModuleVersionMatches(std::string_view key_version, std::string_view wanted);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_WIRE_MODULE_VERSION_H_
