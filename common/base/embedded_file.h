// A file built into a binary by common/base/embed_files.cmake: the pages the
// aggregator serves and the command line writes carry their scripts and
// styles inside, with nothing fetched from elsewhere.
#ifndef FIELDPROF_COMMON_BASE_EMBEDDED_FILE_H_
#define FIELDPROF_COMMON_BASE_EMBEDDED_FILE_H_

#include <string_view>

namespace fieldprof {

struct EmbeddedFile {
  std::string_view name;  // "kit.js"
  std::string_view content_type;
  std::string_view body;
};

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_BASE_EMBEDDED_FILE_H_
