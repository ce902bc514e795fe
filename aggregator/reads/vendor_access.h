// Vendor pages: a vendor names its modules by glob patterns
// and gets a bearer token; a module a vendor claims is served by the
// module endpoints (/v1/module, /v1/report, /v1/diff) only with that
// vendor's token, and listed by /v1/modules as closed without it.
//
// The vendors file (--vendors_file) has one vendor a line,
//   NAME TOKEN PATTERN[,PATTERN...]      e.g.  acme s3cret-s3cret-1 libacme*.so*
// '#' starts a comment line. Only the tokens' SHA-256 digests are kept, and
// they are compared in constant time; a token is 16 characters or more.
#ifndef FIELDPROF_AGGREGATOR_READS_VENDOR_ACCESS_H_
#define FIELDPROF_AGGREGATOR_READS_VENDOR_ACCESS_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"

namespace fieldprof::aggregator {

struct Vendor {
  std::string name;
  std::string token_sha256;           // of the token
  std::vector<std::string> patterns;  // module globs ('*' any run of characters)
};

// The vendors of a vendors file; InvalidArgument names the line that is
// wrong, IOError a file that cannot be read.
[[nodiscard]] StatusOr<std::vector<Vendor>> ReadVendorsFile(const std::string& path);
// The same for any file of token holders in that form (the developers
// file: NAME TOKEN PROGRAM[,PROGRAM...]); `what` names it in errors.
[[nodiscard]] StatusOr<std::vector<Vendor>> ReadTokenHolders(const std::string& path,
                                                             std::string_view what);

// The SHA-256 of the token in an Authorization header "Bearer <token>";
// empty for any other header.
std::string BearerDigest(std::string_view authorization);
// Two digests compared in constant time (for equal lengths).
bool DigestsEqual(std::string_view given, std::string_view expected);

// '*' matches any run of characters (none too); every other character
// matches itself.
bool GlobMatch(std::string_view pattern, std::string_view s);

// Immutable after construction; safe to share between threads.
class VendorAccess {
 public:
  explicit VendorAccess(std::vector<Vendor> vendors) : vendors_(std::move(vendors)) {}

  // Whether `module` may be served to a request with `authorization` (its
  // Authorization header): claimed by no vendor, or the header is
  // "Bearer <token>" of a vendor that claims it. *claimed (may be null)
  // tells whether any vendor claims it.
  bool Allows(std::string_view module, std::string_view authorization,
              bool* claimed = nullptr) const;
  size_t size() const { return vendors_.size(); }

 private:
  std::vector<Vendor> vendors_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_READS_VENDOR_ACCESS_H_
