#include "common/field_stacks.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/json_writer.h"
#include "common/key_rules.h"

namespace fieldprof {

std::vector<std::string> SplitStack(std::string_view symbol) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= symbol.size(); ++i) {
    if (i < symbol.size() && symbol[i] != key_rules::kStackSeparator) continue;
    out.emplace_back(symbol.substr(start, i - start));
    start = i + 1;
  }
  return out;
}

bool IsStackMark(std::string_view frame) {
  return frame.size() >= 3 && frame.front() == '[' && frame.back() == ']';
}

FieldStacks BuildFieldStacks(const std::string& module, const std::vector<SeriesSum>& series,
                             const ModelFilter& filter) {
  FieldStacks out;
  out.module = module;
  std::map<std::string, FieldStack> by_symbol;
  std::set<std::string> versions;
  for (const SeriesSum& s : series) {
    if (s.key.module() != module || s.key.metric() != wire::METRIC_STACK_CPU_NS) continue;
    if (!SeriesMatches(s, filter)) continue;
    FieldStack& st = by_symbol[s.key.symbol()];
    if (st.frames.empty()) st.frames = SplitStack(s.key.symbol());
    st.ns += static_cast<uint64_t>(s.histogram.sum());
    st.runs += s.runs;
    st.machines = std::max(st.machines, s.machines);
    st.per_run.Merge(s.histogram);
    versions.insert(s.key.module_version());
    out.machines = std::max(out.machines, s.machines);
  }
  out.versions.assign(versions.begin(), versions.end());
  out.stacks.reserve(by_symbol.size());
  for (auto& [symbol, st] : by_symbol) {
    out.total_ns += st.ns;
    out.stacks.push_back(std::move(st));
  }
  std::stable_sort(out.stacks.begin(), out.stacks.end(),
                   [](const FieldStack& a, const FieldStack& b) { return a.ns > b.ns; });
  return out;
}

std::string FieldStacksJson(const FieldStacks& s, size_t limit) {
  JsonWriter j;
  j.BeginObject();
  j.Key("module").String(s.module);
  j.Key("versions").BeginArray();
  for (const std::string& v : s.versions) j.String(v);
  j.EndArray();
  j.Key("total_ns").Uint(s.total_ns);
  j.Key("machines").Uint(s.machines);
  j.Key("stacks_total").Uint(s.stacks.size());
  j.Key("truncated").Bool(s.stacks.size() > limit);
  j.Key("stacks").BeginArray();
  for (size_t i = 0; i < s.stacks.size() && i < limit; ++i) {
    const FieldStack& st = s.stacks[i];
    j.BeginObject();
    j.Key("frames").BeginArray();
    for (const std::string& f : st.frames) j.String(f);
    j.EndArray();
    j.Key("ns").Uint(st.ns);
    j.Key("runs").Uint(st.runs);
    j.Key("machines").Uint(st.machines);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.Take();
}

std::string FieldStacksFolded(const FieldStacks& s) {
  std::string out;
  for (const FieldStack& st : s.stacks) {
    for (size_t i = 0; i < st.frames.size(); ++i) {
      if (i != 0) out += ';';
      out += st.frames[i];
    }
    out += ' ';
    out += std::to_string(st.ns);
    out += '\n';
  }
  return out;
}

}  // namespace fieldprof
