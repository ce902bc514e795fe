#include "common/model/module_model.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/wire/module_version.h"

namespace fieldprof {

const char* ModelMetricName(int m) {
  static const char* const kNames[kModelMetrics] = {
      "wall_time_ns", "alloc_bytes_inclusive", "alloc_bytes_exclusive",
      "alloc_count",  "file_io_bytes",         "socket_io_bytes"};
  return m >= 0 && m < kModelMetrics ? kNames[m] : "unknown";
}

bool SeriesMatches(const SeriesSum& s, const ModelFilter& f) {
  if (!ModuleVersionMatches(s.key.module_version(), f.module_version)) return false;
  const wire::Platform& p = s.key.platform();
  if (f.arch >= 0 && static_cast<int>(p.arch()) != f.arch) return false;
  if (f.cpu_vendor >= 0 && static_cast<int>(p.cpu_vendor()) != f.cpu_vendor) return false;
  if (f.cpu_family >= 0 && static_cast<int>(p.cpu_family()) != f.cpu_family) return false;
  return true;
}

namespace {

// Each scope (namespace, class) of the model's APIs: its APIs' calls and
// totals summed, by wall time.
std::vector<ScopeCost> ScopeCosts(const ModuleModel& m) {
  std::vector<ScopeCost> out;
  std::map<std::string, ScopeCost> scopes;
  for (const ApiCost& a : m.apis) {
    for (size_t d = 1; d <= a.name.scopes.size(); ++d) {
      const std::string prefix = ScopePrefix(a.name, d);
      ScopeCost& s = scopes[prefix];
      s.scope = prefix;
      s.depth = static_cast<int>(d);
      ++s.apis;
      s.calls += a.calls();
      for (int i = 0; i < kModelMetrics; ++i) s.total[i] += a.Total(i);
    }
  }
  for (auto& [k, s] : scopes) {
    for (int i = 0; i < kModelMetrics; ++i)
      s.share[i] = m.total[i] > 0 ? s.total[i] / m.total[i] : 0;
    out.push_back(s);
  }
  std::stable_sort(out.begin(), out.end(), [](const ScopeCost& x, const ScopeCost& y) {
    return x.total[0] != y.total[0] ? x.total[0] > y.total[0] : x.scope < y.scope;
  });
  return out;
}

}  // namespace

ModuleModel BuildModuleModel(const std::string& module, const std::vector<SeriesSum>& series,
                             const ModelFilter& filter) {
  ModuleModel m;
  m.module = module;
  std::map<std::string, ApiCost> by_symbol;
  std::map<std::string, PointCost> points;
  std::set<std::string> versions;
  for (const SeriesSum& s : series) {
    if (s.key.module() != module || !SeriesMatches(s, filter)) continue;
    if (s.key.metric() == wire::METRIC_POINT_NS) {
      PointCost& p = points[s.key.symbol()];
      if (p.symbol.empty()) {
        p.symbol = s.key.symbol();
        std::tie(p.tag, p.segment) = SplitPointSymbol(p.symbol);
      }
      p.h.Merge(s.histogram);
      p.runs += s.runs;
      m.machines = std::max(m.machines, s.machines);
      ++m.series;
      continue;
    }
    const int mi = static_cast<int>(s.key.metric()) - 1;
    if (mi < 0 || mi >= kModelMetrics) continue;
    ApiCost& a = by_symbol[s.key.symbol()];
    if (a.symbol.empty()) {
      a.symbol = s.key.symbol();
      a.demangled = Demangle(a.symbol);
      a.name = SplitScopes(a.demangled);
    }
    a.metric[mi].Merge(s.histogram);
    if (mi == 0) {
      a.runs += s.runs;
      a.resolution_ns = std::max(a.resolution_ns, s.resolution_ns);
    }
    if (std::find(a.versions.begin(), a.versions.end(), s.key.module_version()) ==
        a.versions.end()) {
      a.versions.push_back(s.key.module_version());
    }
    versions.insert(s.key.module_version());
    m.machines = std::max(m.machines, s.machines);
    ++m.series;
  }
  for (auto& [sym, a] : by_symbol) {
    if (!filter.scope.empty()) {
      // The scope filter matches whole components: "std" takes std::vector
      // but not stdx.
      const std::string full = ScopePrefix(a.name, a.name.scopes.size());
      if (full != filter.scope && full.rfind(filter.scope + "::", 0) != 0) continue;
    }
    std::sort(a.versions.begin(), a.versions.end());
    m.apis.push_back(std::move(a));
  }
  for (const ApiCost& a : m.apis) {
    for (int i = 0; i < kModelMetrics; ++i) m.total[i] += a.Total(i);
    m.calls += a.calls();
  }
  for (ApiCost& a : m.apis) {
    for (int i = 0; i < kModelMetrics; ++i)
      a.share[i] = m.total[i] > 0 ? a.Total(i) / m.total[i] : 0;
  }
  std::stable_sort(m.apis.begin(), m.apis.end(), [](const ApiCost& x, const ApiCost& y) {
    return x.Total(0) != y.Total(0) ? x.Total(0) > y.Total(0) : x.symbol < y.symbol;
  });
  m.scopes = ScopeCosts(m);
  m.versions.assign(versions.begin(), versions.end());
  for (auto& [symbol, p] : points) m.points.push_back(std::move(p));
  return m;
}

std::pair<std::string, std::string> SplitPointSymbol(const std::string& symbol) {
  const size_t a = symbol.find('$');
  const size_t b = a == std::string::npos ? a : symbol.find('$', a + 1);
  if (a == std::string::npos) return {symbol, ""};
  if (b == std::string::npos) return {symbol.substr(0, a), symbol.substr(a + 1) + " (scope)"};
  return {symbol.substr(0, a), symbol.substr(a + 1, b - a - 1) + " -> " + symbol.substr(b + 1)};
}

}  // namespace fieldprof
