// fieldprof cost's lookup in the snapshot cache's index: what the field
// holds for one API (every metric, summed over its versions and
// platforms), and, when it holds nothing, the names closest to the one
// asked for.
#ifndef FIELDPROF_TOOLS_FIELD_COST_LOOKUP_H_
#define FIELDPROF_TOOLS_FIELD_COST_LOOKUP_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "common/snapshot/snapshot_index.h"
#include "common/statistics/histogram.h"

namespace fieldprof::tools {

// "SYMBOL" or "MODULE:SYMBOL" -> (module or "", symbol). A C++ name's "::"
// is never the separator ("ns::f" is a symbol).
std::pair<std::string, std::string> SplitApiName(const std::string& text);

// How close `name` is to `want`, for suggestions: 0 for a case-insensitive
// match, then names that hold one another (by their length difference),
// then edit distance. Lower is closer.
size_t NameCloseness(const std::string& want, const std::string& name);

// Everything the cache holds for the API asked about.
struct CostMatch {
  std::map<wire::Metric, Histogram> by_metric;
  uint64_t runs = 0;  // of the chosen metric's series
  // The most machines any one of them was seen on: a lower bound for the
  // API's (series overlap; the snapshot's estimates).
  uint64_t machines = 0;
  // Why a series of it is suspect (wire::Record.suspect), when one is.
  std::string suspect;
  bool truncated = false;
  uint64_t resolution_ns = 0;                    // the coarsest (wall time)
  std::set<std::string> series;                  // module, version, platform
  std::map<std::string, uint64_t> module_calls;  // module -> calls (chosen metric)

  // The metric's mean per call (0 when there is no data of it).
  double MeanOf(wire::Metric m) const;
};

// The records of `symbol` (of `module`, unless "") in the index.
[[nodiscard]] StatusOr<CostMatch> LookUpCost(const SnapshotIndex& index, const std::string& module,
                                             const std::string& symbol, wire::Metric metric);

// Up to `limit` "module:symbol" names the index holds closest to
// module:symbol (wall-time series), closest first, the name itself left
// out.
std::vector<std::string> NearestApis(const SnapshotIndex& index, const std::string& module,
                                     const std::string& symbol, size_t limit);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_FIELD_COST_LOOKUP_H_
