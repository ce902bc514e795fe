#include "common/resolution.h"

namespace fieldprof {

std::vector<std::string_view> FiguresBelowResolution(const HistogramStats& s,
                                                     uint64_t resolution_ns) {
  std::vector<std::string_view> out;
  const std::pair<std::string_view, double> figures[] = {{"mean", s.mean},
                                                         {"p50", s.p50},
                                                         {"p90", s.p90},
                                                         {"p99", s.p99},
                                                         {"min", static_cast<double>(s.min)}};
  for (const auto& [name, v] : figures) {
    if (s.count != 0 && BelowResolution(v, resolution_ns)) out.push_back(name);
  }
  return out;
}

}  // namespace fieldprof
