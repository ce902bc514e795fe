// The dashboard's static files (aggregator/ui/), built into the binary:
// the aggregator serves them at /ui/ with nothing fetched from elsewhere.
#ifndef FIELDPROF_AGGREGATOR_UI_UI_ASSETS_H_
#define FIELDPROF_AGGREGATOR_UI_UI_ASSETS_H_

#include <string_view>

namespace fieldprof::aggregator {

struct UiFile {
  std::string_view name;  // "index.html"
  std::string_view content_type;
  std::string_view body;
};

// The file named `name`, or nullptr.
const UiFile* FindUiFile(std::string_view name);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_UI_UI_ASSETS_H_
