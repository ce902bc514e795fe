// Lab profile files: the magic that starts them, parsing, and
// the checks a profile passes before an aggregator keeps it. Lab data is
// never field data: the magic makes a profile unreadable as any other
// message of the schema, and the aggregator keeps uploaded profiles apart
// from the field sums.
#ifndef FIELDPROF_COMMON_MODEL_LAB_FORMAT_H_
#define FIELDPROF_COMMON_MODEL_LAB_FORMAT_H_

#include <string>
#include <string_view>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof {

inline constexpr char kLabRunMagic[] = "FPLABRUN1\n";  // agent/preload/runtime/lab/lab.h
inline constexpr char kLabProfileMagic[] = "FPLABPROFILE1\n";

// The profile in `bytes` (magic, then a wire.LabProfile); `what` names it
// in errors.
[[nodiscard]] StatusOr<wire::LabProfile> ParseLabProfile(std::string_view bytes,
                                                         const std::string& what);
std::string EncodeLabProfile(const wire::LabProfile& p);

// What an aggregator checks before it keeps a profile: every record as a
// batch's records are checked (key rules, histograms), graph APIs by the
// key rules, edges within the graph, scenario names short and printable.
[[nodiscard]] Status ValidateLabProfile(const wire::LabProfile& p);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_MODEL_LAB_FORMAT_H_
