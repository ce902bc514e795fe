#include "common/statistics/resolution.h"

#include <string_view>
#include <utility>

namespace fieldprof {

void WriteResolution(JsonWriter& j, const HistogramStats& s, uint64_t resolution_ns) {
  if (resolution_ns == 0) return;
  j.Key("resolution_ns").Uint(resolution_ns);
  j.Key("below_resolution").BeginArray();
  const std::pair<std::string_view, double> figures[] = {{"mean", s.mean},
                                                         {"p50", s.p50},
                                                         {"p90", s.p90},
                                                         {"p99", s.p99},
                                                         {"min", static_cast<double>(s.min)}};
  for (const auto& [name, v] : figures) {
    if (s.count != 0 && BelowResolution(v, resolution_ns)) j.String(name);
  }
  j.EndArray();
}

}  // namespace fieldprof
