// Where a module's series come from (issue #19): the local snapshot cache
// (all-time sums, offline) or an aggregator's GET /v1/module (any day range,
// a vendor's token for its modules). Both give common/module_model.h's
// SeriesSum, so every output is computed the same way whatever the source.
#ifndef FIELDPROF_TOOLS_MODULE_SOURCE_H_
#define FIELDPROF_TOOLS_MODULE_SOURCE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/https_client.h"
#include "common/module_model.h"
#include "common/status.h"

namespace fieldprof::tools {

// Every record of `module` in the cache (one scan of its fragments).
[[nodiscard]] StatusOr<std::vector<SeriesSum>> SeriesFromCache(const std::string& cache_dir,
                                                               const std::string& module);

struct ModuleQuery {
  std::string module, version, from, to;  // from/to: YYYY-MM-DD or ""
  std::string arch, vendor;               // names as the query API takes them, or ""
  int family = -1;
  std::string token;  // a vendor's bearer token, or ""
};
// GET /v1/module (every series of the module, with its histogram).
[[nodiscard]] StatusOr<std::vector<SeriesSum>> SeriesFromAggregator(HttpsClient& http,
                                                                    const ModuleQuery& q);

// The query API's histogram object (aggregator/router.cc WriteHistogram).
[[nodiscard]] StatusOr<Histogram> HistogramFromJson(const nlohmann::json& h);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_MODULE_SOURCE_H_
