#include "tools/shared/lab_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>

#include "common/base/durable_file.h"
#include "common/stacks/cxx_names.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"

namespace fieldprof::tools {
namespace {

template <typename Message>
StatusOr<Message> ReadMagicFile(const std::string& path, const char* magic, const char* what) {
  FP_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  const size_t n = std::strlen(magic);
  if (bytes.size() < n || bytes.compare(0, n, magic) != 0) {
    return InvalidArgument(path + " is not " + what);
  }
  Message m;
  if (!m.ParseFromArray(bytes.data() + n, static_cast<int>(bytes.size() - n))) {
    return DataLoss(path + ": " + what + " that does not parse (damaged or cut short)");
  }
  if (m.schema_version() != 1) {
    return InvalidArgument(path + ": " + what + " of schema version " +
                           std::to_string(m.schema_version()) + " (this fieldprof reads 1)");
  }
  return m;
}

std::string IdentityOf(const wire::ApiKey& k) {
  return k.module() + '\t' + k.module_version() + '\t' + k.symbol();
}

void MergeRecord(const wire::Record& r, wire::Record* into) {
  if (!into->has_key()) {
    *into = r;
    return;
  }
  Histogram h = HistogramFromWire(into->histogram());
  h.Merge(HistogramFromWire(r.histogram()));
  HistogramToWire(h, into->mutable_histogram());
  into->set_runs(into->runs() + r.runs());
  into->set_truncated(into->truncated() || r.truncated());
  into->set_resolution_ns(std::max(into->resolution_ns(), r.resolution_ns()));
}

// The call stacks that lead to API `target` through the graph's direct
// pairs, outermost first: at most `limit`, the busiest first.
std::vector<std::vector<uint32_t>> StacksTo(const LabGraph& g, uint32_t target, size_t limit) {
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint32_t>>> callers;
  for (const auto& [pair, calls] : g.pairs()) {
    if (calls > 0 && pair.first != pair.second) callers[pair.second].push_back({calls, pair.first});
  }
  for (auto& [k, v] : callers) std::sort(v.rbegin(), v.rend());
  std::vector<std::vector<uint32_t>> out;
  std::vector<uint32_t> path = {target};
  std::function<void()> walk = [&] {
    if (out.size() >= limit) return;
    auto it = callers.find(path.back());
    if (it == callers.end() || path.size() >= 12) {
      out.emplace_back(path.rbegin(), path.rend());
      return;
    }
    bool any = false;
    for (const auto& [calls, c] : it->second) {
      if (std::find(path.begin(), path.end(), c) != path.end()) continue;
      any = true;
      path.push_back(c);
      walk();
      path.pop_back();
      if (out.size() >= limit) return;
    }
    if (!any) out.emplace_back(path.rbegin(), path.rend());
  };
  walk();
  return out;
}

}  // namespace

StatusOr<wire::LabRunRecord> ReadLabRunRecord(const std::string& path) {
  return ReadMagicFile<wire::LabRunRecord>(path, kLabRunMagic, "a lab pass's record");
}

StatusOr<wire::LabProfile> ReadLabProfile(const std::string& path) {
  FP_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  return ParseLabProfile(bytes, path);
}

Status WriteLabProfile(const std::string& path, const wire::LabProfile& p) {
  return WriteFileDurably(path, EncodeLabProfile(p), FileAccess::kShared);
}

bool IsLabProfileFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[sizeof kLabProfileMagic - 1];
  return in.read(head, sizeof head) && std::memcmp(head, kLabProfileMagic, sizeof head) == 0;
}

std::string LabApiName(const wire::ApiKey& k) { return k.module() + ":" + k.symbol(); }

uint32_t LabGraph::Add(const wire::ApiKey& k) {
  const std::string id = IdentityOf(k);
  auto [it, fresh] = index_.emplace(id, static_cast<uint32_t>(apis_.size()));
  if (fresh) {
    wire::ApiKey bare;
    bare.set_module(k.module());
    bare.set_module_version(k.module_version());
    bare.set_symbol(k.symbol());
    apis_.push_back(std::move(bare));
  }
  return it->second;
}

void LabGraph::AddPair(uint32_t outer, uint32_t inner, uint64_t direct_calls) {
  pairs_[{outer, inner}] += direct_calls;
}

void LabGraph::AddRun(const wire::LabRunRecord& r) {
  std::vector<uint32_t> map;
  map.reserve(r.apis_size());
  for (const wire::ApiKey& k : r.apis()) map.push_back(Add(k));
  for (const wire::LabEdge& e : r.edges()) {
    if (e.outer() < map.size() && e.inner() < map.size()) {
      AddPair(map[e.outer()], map[e.inner()], e.calls());
    }
  }
}

void LabGraph::AddProfile(const wire::LabProfile& p) {
  std::vector<uint32_t> map;
  for (const wire::ApiKey& k : p.apis()) map.push_back(Add(k));
  for (const wire::LabEdge& e : p.edges()) {
    if (e.outer() < map.size() && e.inner() < map.size()) {
      AddPair(map[e.outer()], map[e.inner()], e.calls());
    }
  }
}

void LabGraph::ToProfile(wire::LabProfile* p) const {
  p->clear_apis();
  p->clear_edges();
  for (const wire::ApiKey& k : apis_) *p->add_apis() = k;
  for (const auto& [pair, calls] : pairs_) {
    wire::LabEdge* e = p->add_edges();
    e->set_outer(pair.first);
    e->set_inner(pair.second);
    e->set_calls(calls);
  }
}

int64_t LabGraph::Find(const std::string& module, const std::string& symbol) const {
  for (size_t i = 0; i < apis_.size(); ++i) {
    if (apis_[i].module() == module && apis_[i].symbol() == symbol) return static_cast<int64_t>(i);
  }
  return -1;
}

void SumRecords(const std::vector<wire::LabRunRecord>& runs, int m_lo, int m_hi,
                std::map<std::string, wire::Record>* out) {
  for (const wire::LabRunRecord& run : runs) {
    for (const wire::Record& r : run.records()) {
      const int m = static_cast<int>(r.key().metric());
      if (m < m_lo || m > m_hi) continue;
      MergeRecord(r, &(*out)[r.key().SerializeAsString()]);
    }
  }
}

wire::LabProfile MergeProfiles(const std::vector<wire::LabProfile>& in) {
  wire::LabProfile out;
  out.set_schema_version(1);
  LabGraph graph;
  std::map<std::string, wire::Record> records;
  uint32_t min_sets = 0, repeat = 0;
  for (const wire::LabProfile& p : in) {
    for (const std::string& s : p.scenarios()) out.add_scenarios(s);
    for (const wire::Record& r : p.records()) MergeRecord(r, &records[r.key().SerializeAsString()]);
    graph.AddProfile(p);
    for (const wire::LabPass& pass : p.passes()) *out.add_passes() = pass;
    out.set_timing_sets(out.timing_sets() + p.timing_sets());
    min_sets += p.min_sets();
    repeat = std::max(repeat, p.repeat());
    out.set_apis_untimed(out.apis_untimed() + p.apis_untimed());
  }
  out.set_min_sets(min_sets);
  out.set_repeat(repeat);
  for (auto& [key, r] : records) *out.add_records() = std::move(r);
  graph.ToProfile(&out);
  return out;
}

std::vector<std::vector<std::string>> LabStacks(const wire::LabProfile& p,
                                                const std::string& module,
                                                const std::string& symbol) {
  LabGraph g;
  g.AddProfile(p);
  std::vector<std::vector<std::string>> out;
  const int64_t target = g.Find(module, symbol);
  if (target < 0) return out;
  for (const auto& stack : StacksTo(g, static_cast<uint32_t>(target), 3)) {
    std::vector<std::string> names;
    for (uint32_t a : stack) names.push_back(LabApiName(g.api(a)));
    out.push_back(std::move(names));
  }
  return out;
}

void PrintLabStacks(std::FILE* out, const wire::LabProfile& p, const std::string& module,
                    const std::string& symbol, const std::string& indent) {
  for (const auto& stack : LabStacks(p, module, symbol)) {
    std::string line = indent + "the program";
    for (const std::string& a : stack) line += " \u2192 " + Demangle(a.substr(a.find(':') + 1));
    std::fprintf(out, "%s\n", line.c_str());
  }
}

}  // namespace fieldprof::tools
