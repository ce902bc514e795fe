#include "tools/record/field_marks.h"

#include <nlohmann/json.hpp>

#include "common/cxx_names.h"
#include "common/durable_file.h"
#include "tools/cli/format.h"

namespace fieldprof::local {

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

}  // namespace fieldprof::local
