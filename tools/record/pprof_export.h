// `fieldprof record show --pprof`: a recording's range as a gzipped pprof
// profile.proto, which `go tool pprof` (and speedscope, and Perfetto)
// read. One location per frame name (the recording keeps names, not
// addresses), the thread as a numeric label on each sample.
#ifndef FIELDPROF_TOOLS_RECORD_PPROF_EXPORT_H_
#define FIELDPROF_TOOLS_RECORD_PPROF_EXPORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "tools/record/recording.h"
#include "tools/tree/call_tree.h"

namespace fieldprof::tools {

struct PprofSample {
  uint32_t stack = 0;  // into Recording::stacks
  uint32_t tid = 0;
  std::vector<int64_t> values;  // one per value type
};

struct PprofProfile {
  std::vector<std::pair<std::string, std::string>> value_types;  // (type, unit)
  std::vector<PprofSample> samples;
  std::pair<std::string, std::string> period_type;
  int64_t period = 0;
  int64_t duration_ns = 0;
  std::vector<std::string> comments;
  // Per stack (by index; empty or missing: none): the APIs on it that cost
  // more than the field, as the samples' string label "over_field".
  std::vector<std::string> stack_labels;
};

// The profile, serialised and gzipped.
[[nodiscard]] StatusOr<std::string> EncodePprof(const Recording& r, const PprofProfile& p);

// A call tree (call_tree.h) as a gzipped profile: one sample type per
// metric it has, a sample per node with a self value (negative in a
// difference, as pprof's -diff_base makes them).
[[nodiscard]] StatusOr<std::string> EncodePprofTree(const CallTree& t);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_PPROF_EXPORT_H_
