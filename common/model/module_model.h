// One module's field cost, as reports, diffs, docs snippets and the
// dashboard show it: every output renders this model and none
// computes its own numbers.
//
//   std::vector<SeriesSum> series = ...;   // the cache's records of the
//                                          // module, or the aggregator's
//   ModuleModel m = BuildModuleModel("libsqlite3.so.0", series, {});
//   m.apis[0].symbol, m.apis[0].Share(kWallTime), m.scopes ...
//
// Weights. Every histogram sums calls, so its percentiles and mean are over
// calls: a heavy user's calls count as many as they are. A cost share is
// calls x mean over the module's calls x means (call-weighted). Beside
// them each API carries the runs that called it and calls per run, so a
// figure backed by few heavy runs can be told from one backed by many.
#ifndef FIELDPROF_COMMON_MODEL_MODULE_MODEL_H_
#define FIELDPROF_COMMON_MODEL_MODULE_MODEL_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/proto/fieldprof.pb.h"
#include "common/stacks/cxx_names.h"
#include "common/statistics/histogram.h"

namespace fieldprof {

inline constexpr int kModelMetrics = 6;  // wire::Metric 1..6, index = metric - 1

// One series summed: the unit both sources give.
struct SeriesSum {
  wire::ApiKey key;  // with its platform
  Histogram histogram;
  uint64_t runs = 0;
  uint64_t resolution_ns = 0;
  uint64_t machines = 0;  // distinct machines behind it (estimate; 0: unknown)
};

struct ModelFilter {
  std::string module_version;  // exact; "" any
  std::string scope;           // C++ scope prefix, e.g. "std::vector"; "" any
  // Platform: unset fields match any.
  int arch = -1, cpu_vendor = -1, cpu_family = -1;
};

// One API (a symbol, summed over the versions and platforms the filter
// lets through).
struct ApiCost {
  std::string symbol;
  std::string demangled;
  CxxName name;
  std::array<Histogram, kModelMetrics> metric;
  uint64_t runs = 0;  // runs behind its wall time
  uint64_t resolution_ns = 0;
  std::vector<std::string> versions;          // module versions seen
  std::array<double, kModelMetrics> share{};  // of the module's total, per metric

  uint64_t calls() const { return metric[0].count(); }
  // calls x mean: the API's total of metric index m.
  double Total(int m) const { return metric[m].Mean() * static_cast<double>(metric[m].count()); }
  double CallsPerRun() const {
    return runs == 0 ? 0 : static_cast<double>(calls()) / static_cast<double>(runs);
  }
};

// A C++ scope (namespace or class) and what its APIs cost in all.
struct ScopeCost {
  std::string scope;  // "std", "std::vector", "(anonymous namespace)::Parser"
  int depth = 0;      // 1: outermost
  size_t apis = 0;
  uint64_t calls = 0;
  std::array<double, kModelMetrics> total{};
  std::array<double, kModelMetrics> share{};
};

// One series of the module's instrumentation points (metric point_ns,
// docs/points.md): the time from one point of a tag to the next
// ("tag$from$to"), or of a scope ("tag$name"), summed over runs.
struct PointCost {
  std::string symbol;   // as keyed
  std::string tag;      // "startup"
  std::string segment;  // "load -> parsed", "parse (scope)"
  Histogram h;
  uint64_t runs = 0;
};

// A point series' symbol as its tag and segment:
// "tag$from$to" -> ("tag", "from -> to"); "tag$name" -> ("tag", "name (scope)").
std::pair<std::string, std::string> SplitPointSymbol(const std::string& symbol);

struct ModuleModel {
  std::string module;
  std::vector<ApiCost> apis;  // by wall-time share, largest first
  std::array<double, kModelMetrics> total{};
  uint64_t calls = 0;
  std::vector<ScopeCost> scopes;  // every prefix of every API's scopes, by wall-time total
  std::vector<PointCost> points;  // by tag, then segment (the filter's scope aside)
  std::vector<std::string> versions;
  size_t series = 0;  // series summed
  // The most machines behind any one series: a lower bound for the
  // module's (series overlap). 0: unknown.
  uint64_t machines = 0;
};

// Whether a series passes the filter (module aside).
bool SeriesMatches(const SeriesSum& s, const ModelFilter& f);

// The model of `module` from its series (others are ignored).
ModuleModel BuildModuleModel(const std::string& module, const std::vector<SeriesSum>& series,
                             const ModelFilter& filter);

// Metric index <-> name ("wall_time_ns", ...).
const char* ModelMetricName(int m);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_MODEL_MODULE_MODEL_H_
