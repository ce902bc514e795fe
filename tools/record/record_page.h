// The page of a recording (fieldprof record show --html): one
// self-contained HTML file, with nothing fetched from elsewhere. It holds
// the samples and the time tree's lists, and answers any range chosen on
// its timeline in the browser as `record show --from --to` does: from the
// tree, with the same bound (record.js, over the page kit).
#ifndef FIELDPROF_TOOLS_RECORD_RECORD_PAGE_H_
#define FIELDPROF_TOOLS_RECORD_RECORD_PAGE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/base/embedded_file.h"
#include "tools/record/recording.h"

namespace fieldprof::tools {

struct PageOptions {
  // The range and thread selected when the page opens.
  uint64_t from_ns = 0, to_ns = UINT64_MAX;
  uint32_t tid = 0;
  // Frames to mark as APIs that cost more than the field, with why.
  std::map<uint32_t, std::string> marked;
  // Frames of APIs the field knows: what it says they cost.
  std::map<uint32_t, std::string> field;
};

std::string RecordingPage(const Recording& r, const PageOptions& o);

// record.html and record.js, built in.
const EmbeddedFile* RecordPageFile(std::string_view name);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_RECORD_PAGE_H_
