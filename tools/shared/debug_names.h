// Names for the "+offset" frames of field stacks (docs/field-stacks.md)
// from a vendor's debug files, found by build id under DIR/.build-id (the
// layout of Debian's -dbgsym packages and of `eu-strip -f`): what
// `fieldprof stacks` and `fieldprof report` do with --debug_dir.
#ifndef FIELDPROF_TOOLS_SHARED_DEBUG_NAMES_H_
#define FIELDPROF_TOOLS_SHARED_DEBUG_NAMES_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/base/status.h"
#include "common/stacks/field_stacks.h"

namespace fieldprof::tools {
class Symbolizer;
}

namespace fieldprof::tools {

// Names "+offset" frames of builds by their debug files under `debug_dir`,
// each file read once.
class DebugNames {
 public:
  explicit DebugNames(std::string debug_dir);
  ~DebugNames();
  DebugNames(const DebugNames&) = delete;
  DebugNames& operator=(const DebugNames&) = delete;

  // The function `frame` ("+1a2b") of the build whose id begins with
  // `build_id` (16 hex digits or more) lies in; `frame` itself when it is
  // no offset or the debug file does not name it. NotFound when no debug
  // file of the build is under the directory.
  [[nodiscard]] StatusOr<std::string> Name(const std::string& build_id, std::string_view frame);

 private:
  std::string dir_;
  std::map<std::string, std::unique_ptr<tools::Symbolizer>> files_;  // by build id
};

// Names every "+offset" frame of `s` it can from the debug file of its
// one version's build. InvalidArgument when `s` holds several versions,
// NotFound when no debug file of the build is under `debug_dir`.
[[nodiscard]] Status NameOffsets(const std::string& debug_dir, FieldStacks* s);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_DEBUG_NAMES_H_
