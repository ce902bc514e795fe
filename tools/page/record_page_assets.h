// The local toolkit's page files (tools/page/), built into the
// binary: `record show --html` and `tree ... --html` write one
// self-contained page from them.
#ifndef FIELDPROF_TOOLS_LOCAL_PAGE_RECORD_PAGE_ASSETS_H_
#define FIELDPROF_TOOLS_LOCAL_PAGE_RECORD_PAGE_ASSETS_H_

#include <string_view>

namespace fieldprof::local::page {

struct UiFile {
  std::string_view name;  // "record.js"
  std::string_view content_type;
  std::string_view body;
};

// The file named `name`, or nullptr.
const UiFile* FindUiFile(std::string_view name);

}  // namespace fieldprof::local::page

#endif  // FIELDPROF_TOOLS_LOCAL_PAGE_RECORD_PAGE_ASSETS_H_
