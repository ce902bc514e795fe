// The JSON of a module's model and of a diff: one writer for
// `fieldprof report --format json`, `fieldprof diff --format json` and the
// aggregator's /v1/report and /v1/diff, which the dashboard reads, so every
// output carries the same numbers.
#ifndef FIELDPROF_COMMON_MODEL_MODEL_JSON_H_
#define FIELDPROF_COMMON_MODEL_MODEL_JSON_H_

#include <string>

#include "common/model/module_diff.h"
#include "common/model/module_model.h"

namespace fieldprof {

std::string ModuleModelJson(const ModuleModel& m, const std::string& source,
                            const std::string& range, const std::string& filters);

// `all`: every API compared, not only those that changed.
std::string ModuleDiffJson(const ModuleDiff& d, const std::string& module,
                           const std::string& before, const std::string& after,
                           const std::string& metric, const std::string& statistic,
                           const DiffOptions& o, bool all);
const char* DiffVerdictName(int verdict);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_MODEL_MODEL_JSON_H_
