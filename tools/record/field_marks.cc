#include "tools/record/field_marks.h"

#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>

#include "common/base/durable_file.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/snapshot/snapshot_index.h"
#include "common/stacks/cxx_names.h"
#include "tools/field/cost_lookup.h"
#include "tools/shared/format.h"

namespace fieldprof::tools {

StatusOr<std::map<uint32_t, FieldMark>> FieldMarksFromCheck(const Recording& r,
                                                            const std::string& check_json_path) {
  StatusOr<std::string> text = ReadWholeFile(check_json_path);
  if (!text.ok()) return text.status();
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("findings") || !j["findings"].is_array()) {
    return InvalidArgument(check_json_path +
                           " is not what `fieldprof check --json` writes (no \"findings\")");
  }
  // By name: the API's symbol, and the name a C++ symbol demangles to.
  std::map<std::string, FieldMark> by_name;
  for (const nlohmann::json& f : j["findings"]) {
    if (!f.is_object() || !f.value("evidence", false)) continue;
    FieldMark m;
    m.module = f.value("module", "");
    m.symbol = f.value("symbol", "");
    if (m.symbol.empty()) continue;
    const auto p50 = [&](const char* side) {
      return f.contains(side) && f[side].is_object() ? f[side].value("p50", 0.0) : 0.0;
    };
    char q[32];
    std::snprintf(q, sizeof q, "%.2g", f.value("adjusted_p", 1.0));
    m.note = "costs more than the field: p50 " + tools::FormatNanos(p50("local")) + " here, " +
             tools::FormatNanos(p50("field")) + " in the field (adjusted p " + q + ")";
    by_name[m.symbol] = m;
    const std::string plain = Demangle(m.symbol);
    if (!plain.empty() && plain != m.symbol) by_name[plain] = m;
  }
  std::map<uint32_t, FieldMark> marks;
  for (uint32_t i = 0; i < r.frames.size(); ++i) {
    auto it = by_name.find(r.frames[i]);
    if (it != by_name.end()) marks[i] = it->second;
  }
  return marks;
}

StatusOr<std::map<uint32_t, FieldCostOfName>> FieldCostsOfNames(
    const std::vector<std::string>& names, const std::string& cache_dir) {
  const SnapshotCache cache(cache_dir);
  if (!cache.Manifest().ok() || cache.Fragments().empty()) {
    return NotFound("no snapshot in " + cache_dir + " (fieldprof pull --all)");
  }
  FP_ASSIGN_OR_RETURN(SnapshotIndex index, SnapshotIndex::Open(cache));
  // The field keys C++ APIs by their mangled symbols; frames are named
  // demangled. Each mangled symbol of the snapshot by its demangled name,
  // made only when a name looks like C++.
  std::unordered_map<std::string, std::string> mangled_of;
  bool demangled = false;
  std::map<uint32_t, FieldCostOfName> out;
  for (uint32_t i = 0; i < names.size(); ++i) {
    std::string name = names[i];
    // No name to look up: an offset in a module, an address, a bracket.
    if (name.empty() || name[0] == '[' || name.rfind("0x", 0) == 0 ||
        name.find("+0x") != std::string::npos) {
      continue;
    }
    if (name.find_first_of("(: <") != std::string::npos) {
      if (!demangled) {
        index.ForEachSymbol([&](std::string_view sym) {
          if (sym.rfind("_Z", 0) != 0) return;
          const std::string mangled(sym);
          std::string plain = Demangle(mangled);
          if (plain != mangled) mangled_of.emplace(std::move(plain), mangled);
        });
        demangled = true;
      }
      const auto it = mangled_of.find(name);
      if (it == mangled_of.end()) continue;
      name = it->second;
    }
    StatusOr<tools::CostMatch> m = tools::LookUpCost(index, "", name, wire::METRIC_WALL_TIME_NS);
    if (!m.ok()) continue;
    auto h = m->by_metric.find(wire::METRIC_WALL_TIME_NS);
    if (h == m->by_metric.end() || h->second.empty()) continue;
    const HistogramStats st = h->second.Stats();
    FieldCostOfName c;
    c.p50_ns = st.p50;
    c.p99_ns = st.p99;
    c.runs = m->runs;
    c.calls_a_run = m->runs > 0 ? static_cast<double>(st.count) / static_cast<double>(m->runs) : 0;
    out[i] = c;
  }
  return out;
}

StatusOr<std::map<uint32_t, std::string>> FieldCostsOfFrames(const Recording& r,
                                                             const std::string& cache_dir) {
  FP_ASSIGN_OR_RETURN(auto costs, FieldCostsOfNames(r.frames, cache_dir));
  std::map<uint32_t, std::string> out;
  for (const auto& [i, c] : costs) out[i] = FieldCostText(c);
  return out;
}

}  // namespace fieldprof::tools
