// Names for the "+offset" frames of field stacks (docs/field-stacks.md)
// from a vendor's debug files, found by build id under DIR/.build-id (the
// layout of Debian's -dbgsym packages and of `eu-strip -f`): what
// `fieldprof stacks` and `fieldprof report` do with --debug_dir.
#ifndef FIELDPROF_TOOLS_CLI_DEBUG_NAMES_H_
#define FIELDPROF_TOOLS_CLI_DEBUG_NAMES_H_

#include <string>

#include "common/field_stacks.h"
#include "common/status.h"

namespace fieldprof::tools {

// Names every "+offset" frame of `s` it can from the debug file of its
// one version's build. InvalidArgument when `s` holds several versions,
// NotFound when no debug file of the build is under `debug_dir`.
[[nodiscard]] Status NameOffsets(const std::string& debug_dir, FieldStacks* s);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_CLI_DEBUG_NAMES_H_
