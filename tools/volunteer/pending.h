// fieldprof status --pending: exactly what the agent would send next, before
// anything is sent. The outbox's sealed batches as they will go, then what
// the spool's runs would become at the agent's next pass, summed by the
// agent's own batch builder (common/spool/batcher.h). Reads local files only.
#ifndef FIELDPROF_TOOLS_VOLUNTEER_PENDING_H_
#define FIELDPROF_TOOLS_VOLUNTEER_PENDING_H_

#include <string>

namespace fieldprof::tools {

// Prints the pending batches (text, or JSON with every field of every
// record); returns the command's exit code.
int PrintPending(const std::string& spool_dir, const std::string& state_dir,
                 const std::string& settings_path, bool json);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_VOLUNTEER_PENDING_H_
