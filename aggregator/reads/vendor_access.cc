#include "aggregator/reads/vendor_access.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/crypto/signing.h"

namespace fieldprof::aggregator {
namespace {

// One line's vendor: NAME TOKEN PATTERN[,PATTERN...].
StatusOr<Vendor> ParseVendorLine(const std::string& line) {
  std::istringstream words(line);
  std::string name, token, patterns;
  if (!(words >> name >> token >> patterns) || token.size() < 16) {
    return InvalidArgument(
        "want NAME TOKEN PATTERN[,PATTERN...] with a token of 16 characters or more");
  }
  Vendor v{name, Sha256(token), {}};
  for (size_t at = 0; at <= patterns.size();) {
    const size_t comma = patterns.find(',', at);
    v.patterns.push_back(patterns.substr(at, comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return v;
}

}  // namespace

StatusOr<std::vector<Vendor>> ReadVendorsFile(const std::string& path) {
  return ReadTokenHolders(path, "vendors");
}

StatusOr<std::vector<Vendor>> ReadTokenHolders(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) {
    return IOError("cannot read the " + std::string(what) + " file " + path + ": " +
                   std::strerror(errno));
  }
  std::vector<Vendor> vendors;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    StatusOr<Vendor> v = ParseVendorLine(line);
    if (!v.ok()) return v.status().WithContext(path + ":" + std::to_string(line_no));
    vendors.push_back(std::move(*v));
  }
  return vendors;
}

bool GlobMatch(std::string_view pattern, std::string_view s) {
  size_t p = 0, i = 0, star = std::string_view::npos, mark = 0;
  while (i < s.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = i;
    } else if (p < pattern.size() && pattern[p] == s[i]) {
      ++p;
      ++i;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string BearerDigest(std::string_view authorization) {
  return authorization.starts_with("Bearer ") ? Sha256(authorization.substr(7)) : std::string();
}

bool DigestsEqual(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size() && i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  return diff == 0;
}

// Compared as digests, in constant time, so neither the time nor the
// token's length says anything.
bool VendorAccess::Allows(std::string_view module, std::string_view authorization,
                          bool* claimed_out) const {
  bool claimed = false, allowed = false;
  const std::string given = BearerDigest(authorization);
  for (const Vendor& v : vendors_) {
    bool match = false;
    for (const std::string& pat : v.patterns) match = match || GlobMatch(pat, module);
    if (!match) continue;
    claimed = true;
    allowed = allowed || DigestsEqual(given, v.token_sha256);
  }
  if (claimed_out != nullptr) *claimed_out = claimed;
  return !claimed || allowed;
}

}  // namespace fieldprof::aggregator
