// Where a module's series come from: the local snapshot cache
// (all-time sums, offline) or an aggregator's GET /v1/module (any day range,
// a vendor's token for its modules). Both give common/model/module_model.h's
// SeriesSum, so every output is computed the same way whatever the source.
#ifndef FIELDPROF_TOOLS_SHARED_MODULE_SOURCE_H_
#define FIELDPROF_TOOLS_SHARED_MODULE_SOURCE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/model/module_model.h"
#include "common/net/https_client.h"
#include "tools/shared/client_flags.h"

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
// "x86_64[/amd[/25]]" (--platform) -> the model filter's fields and the
// query's names.
[[nodiscard]] Status ParsePlatform(const std::string& spec, ModelFilter* f, ModuleQuery* q);

// `format` if given, else by the output file's extension (html, csv, json,
// md), else "text".
std::string OutputFormat(const std::string& format, const std::string& output);

// The flags of a command that reads a module's series (report, diff,
// docs): --cache, or --host (--port, --ca, ...) with --token.
struct ModuleSource {
  std::string cache_dir;
  ClientFlags client;
  std::string token;

  ModuleSource();
  void Register(OptionTable& t);
  bool remote() const { return !client.options.host.empty(); }
  // "snapshot cache" or "aggregator HOST:PORT", for reports.
  std::string Name() const;
  // The module's series: the cache's all-time sums, or the aggregator's
  // answer to `q` (its module, version, range, platform; the token added).
  [[nodiscard]] StatusOr<std::vector<SeriesSum>> Load(ModuleQuery q) const;
};

// GET /v1/module (every series of the module, with its histogram).
[[nodiscard]] StatusOr<std::vector<SeriesSum>> SeriesFromAggregator(HttpsClient& http,
                                                                    const ModuleQuery& q);

// The query API's histogram object (aggregator/reads/series_json.cc).
[[nodiscard]] StatusOr<Histogram> HistogramFromJson(const nlohmann::json& h);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_MODULE_SOURCE_H_
