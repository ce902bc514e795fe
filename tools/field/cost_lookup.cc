#include "tools/field/cost_lookup.h"

#include <algorithm>
#include <cctype>

#include "common/wire/wire.h"

namespace fieldprof::tools {
namespace {

// Edit distance, case-insensitive.
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::pair<std::string, std::string> SplitApiName(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon != std::string::npos && colon > 0 && text.compare(colon, 2, "::") != 0) {
    return {text.substr(0, colon), text.substr(colon + 1)};
  }
  return {"", text};
}

size_t NameCloseness(const std::string& want, const std::string& name) {
  const std::string w = Lower(want), n = Lower(name);
  if (w == n) return 0;
  if (n.find(w) != std::string::npos || w.find(n) != std::string::npos) {
    return 1 + (n.size() > w.size() ? n.size() - w.size() : w.size() - n.size()) / 4;
  }
  if (w.size() > 64 || n.size() > 64) return 1000;
  return 2 + Distance(w, n);
}

double CostMatch::MeanOf(wire::Metric m) const {
  auto it = by_metric.find(m);
  return it == by_metric.end() || it->second.empty() ? 0 : it->second.Mean();
}

StatusOr<CostMatch> LookUpCost(const SnapshotIndex& index, const std::string& module,
                               const std::string& symbol, wire::Metric metric) {
  CostMatch m;
  FP_RETURN_IF_ERROR(index.ForEachRecordOf(symbol, [&](const wire::Record& r) {
    const wire::ApiKey& k = r.key();
    if (!module.empty() && k.module() != module) return true;
    Histogram h = HistogramFromWire(r.histogram());
    if (k.metric() == metric) {
      m.runs += r.runs();
      m.machines = std::max<uint64_t>(m.machines, r.machine_count());
      if (m.suspect.empty()) m.suspect = r.suspect();
      m.truncated = m.truncated || r.truncated();
      m.resolution_ns = std::max(m.resolution_ns, r.resolution_ns());
      m.module_calls[k.module()] += h.count();
      m.series.insert(k.module() + "\n" + k.module_version() + "\n" +
                      k.platform().SerializeAsString());
    }
    m.by_metric[k.metric()].Merge(h);
    return true;
  }));
  return m;
}

// Close symbols from the index, then their modules from their records.
std::vector<std::string> NearestApis(const SnapshotIndex& index, const std::string& module,
                                     const std::string& symbol, size_t limit) {
  std::vector<std::pair<size_t, std::string>> syms;
  index.ForEachSymbol([&](std::string_view name) {
    const size_t d = NameCloseness(symbol, std::string(name));
    if (d <= std::max<size_t>(3, symbol.size() / 3) || (!module.empty() && name == symbol)) {
      syms.emplace_back(d, std::string(name));
    }
  });
  std::sort(syms.begin(), syms.end());
  if (syms.size() > 24) syms.resize(24);
  std::map<std::string, size_t> near;
  for (const auto& [d, sym] : syms) {
    IgnoreError(index.ForEachRecordOf(sym, [&](const wire::Record& r) {
      if (r.key().metric() != wire::METRIC_WALL_TIME_NS) return true;
      const std::string name = r.key().module() + ":" + sym;
      const size_t dm = module.empty() ? size_t{1000} : NameCloseness(module + ":" + symbol, name);
      if (near.count(name) == 0) near[name] = std::min(d, dm);
      return true;
    }));
  }
  const std::string asked = module.empty() ? symbol : module + ":" + symbol;
  std::vector<std::pair<size_t, std::string>> best;
  for (const auto& [name, d] : near) {
    if (name != asked) best.emplace_back(d, name);
  }
  std::sort(best.begin(), best.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < std::min(best.size(), limit); ++i) out.push_back(best[i].second);
  return out;
}

}  // namespace fieldprof::tools
