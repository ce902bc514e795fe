// The field on the profile: the APIs that
// `fieldprof check --json` found costing this user more than the field,
// found among a recording's frames, so that `record show` can mark them
// where they sit in the call stacks: in the tree's text, on the page's
// flame graph and functions table, and as a pprof label.
#ifndef FIELDPROF_TOOLS_RECORD_FIELD_MARKS_H_
#define FIELDPROF_TOOLS_RECORD_FIELD_MARKS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "tools/record/recording.h"
#include "tools/tree/tree_report.h"

namespace fieldprof::tools {

struct FieldMark {
  std::string module, symbol;
  std::string note;  // "costs more than the field: p50 3.1 us here, 1.4 us in the field (q 0.0001)"
};

// Frames by index: those named as an API with evidence in the report (its
// symbol, or the symbol demangled), each with its finding in words.
// Errors for a file that is not such a report.
[[nodiscard]] StatusOr<std::map<uint32_t, FieldMark>> FieldMarksFromCheck(
    const Recording& r, const std::string& check_json_path);

// What the field says an API frame costs, from the snapshot cache in
// `cache_dir`: per frame whose name is an API the cache holds (wall time
// a call, summed over its versions and platforms), "field: p50 1.46 us,
// p99 2.10 us a call; 2,000 calls a run". Frames that are no symbol
// ("libz.so.1+0x1a2b", "[...]") are not looked up. NotFound when the
// cache holds no snapshot.
[[nodiscard]] StatusOr<std::map<uint32_t, std::string>> FieldCostsOfFrames(
    const Recording& r, const std::string& cache_dir);

// The same for any names (a tree's nodes), by index, as numbers. A C++
// name, demangled as frames are, is matched to the mangled symbol the
// field keys it by.
[[nodiscard]] StatusOr<std::map<uint32_t, FieldCostOfName>> FieldCostsOfNames(
    const std::vector<std::string>& names, const std::string& cache_dir);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_FIELD_MARKS_H_
