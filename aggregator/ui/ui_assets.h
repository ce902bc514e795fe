// The dashboard's static files (aggregator/ui/ and the page kit's
// tools/page/kit.js and kit.css), built into the binary: the aggregator
// serves them at /ui/ with nothing fetched from elsewhere.
#ifndef FIELDPROF_AGGREGATOR_UI_UI_ASSETS_H_
#define FIELDPROF_AGGREGATOR_UI_UI_ASSETS_H_

#include <string_view>

#include "common/base/embedded_file.h"

namespace fieldprof::aggregator {

// The file named `name` ("index.html"), or nullptr.
const EmbeddedFile* FindUiFile(std::string_view name);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_UI_UI_ASSETS_H_
