#include "tools/shared/output.h"

#include <iostream>

#include "common/base/durable_file.h"

namespace fieldprof::tools {

int EmitOutput(const std::string& command, const std::string& text, const std::string& output) {
  if (output.empty()) {
    std::cout << text;
    return 0;
  }
  if (Status w = WriteFileDurably(output, text, FileAccess::kShared); !w.ok()) {
    std::cerr << command << ": " << w.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace fieldprof::tools
