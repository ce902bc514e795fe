// Where a command's report goes: stdout, or the file -o names.
#ifndef FIELDPROF_TOOLS_SHARED_OUTPUT_H_
#define FIELDPROF_TOOLS_SHARED_OUTPUT_H_

#include <string>

namespace fieldprof::tools {

// Writes `text` to stdout when `output` is empty, else (durably) to the
// file `output`. The exit code: 0, or 1 after saying on stderr, as
// "COMMAND: why", that the file could not be written.
int EmitOutput(const std::string& command, const std::string& text, const std::string& output);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_OUTPUT_H_
