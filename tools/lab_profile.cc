#include "tools/lab_profile.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "common/durable_file.h"
#include "common/histogram.h"
#include "common/wire.h"

namespace fieldprof::tools {
namespace {

template <typename Message>
StatusOr<Message> ReadMagicFile(const std::string& path, const char* magic, const char* what) {
  StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  const size_t n = std::strlen(magic);
  if (bytes->size() < n || bytes->compare(0, n, magic) != 0) {
    return InvalidArgument(path + " is not " + what);
  }
  Message m;
  if (!m.ParseFromArray(bytes->data() + n, static_cast<int>(bytes->size() - n))) {
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

}  // namespace

StatusOr<wire::LabRunRecord> ReadLabRunRecord(const std::string& path) {
  return ReadMagicFile<wire::LabRunRecord>(path, kLabRunMagic, "a lab pass's record");
}

StatusOr<wire::LabProfile> ReadLabProfile(const std::string& path) {
  StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  return ParseLabProfile(*bytes, path);
}

Status WriteLabProfile(const std::string& path, const wire::LabProfile& p) {
  return WriteFileDurably(path, EncodeLabProfile(p));
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

TimingPlan PlanTiming(const LabGraph& g, const std::vector<uint32_t>& called,
                      uint32_t clique_hint) {
  TimingPlan plan;
  std::map<uint32_t, std::set<uint32_t>> adj;
  std::set<uint32_t> wanted(called.begin(), called.end());
  for (const auto& [pair, calls] : g.pairs()) {
    (void)calls;
    if (pair.first == pair.second) {
      plan.recursive.push_back(pair.first);
      continue;
    }
    if (!wanted.count(pair.first) || !wanted.count(pair.second)) continue;
    adj[pair.first].insert(pair.second);
    adj[pair.second].insert(pair.first);
  }
  std::sort(plan.recursive.begin(), plan.recursive.end());
  plan.recursive.erase(std::unique(plan.recursive.begin(), plan.recursive.end()),
                       plan.recursive.end());
  // DSatur: the uncoloured API whose neighbours use the most colours goes
  // next (ties: most neighbours, then the lowest index, for a stable plan),
  // into the lowest colour none of its neighbours has.
  std::map<uint32_t, int> colour;
  std::map<uint32_t, std::set<int>> seen;  // colours among each API's neighbours
  while (colour.size() < wanted.size()) {
    uint32_t best = 0;
    bool have = false;
    for (uint32_t a : wanted) {
      if (colour.count(a)) continue;
      if (!have) {
        best = a;
        have = true;
        continue;
      }
      const size_t sa = seen[a].size(), sb = seen[best].size();
      const size_t da = adj[a].size(), db = adj[best].size();
      if (sa > sb || (sa == sb && da > db)) best = a;
    }
    int c = 0;
    while (seen[best].count(c)) ++c;
    colour[best] = c;
    for (uint32_t n : adj[best]) seen[n].insert(c);
    if (static_cast<size_t>(c) >= plan.sets.size()) plan.sets.resize(c + 1);
    plan.sets[c].push_back(best);
  }
  for (auto& s : plan.sets) std::sort(s.begin(), s.end());
  // A lower bound: any pair on one stack needs two sets; the runtime's
  // deepest stack of distinct APIs is a group that needs as many.
  uint32_t bound = wanted.empty() ? 0 : 1;
  for (const auto& [a, n] : adj) {
    if (!n.empty()) bound = std::max<uint32_t>(bound, 2);
  }
  plan.lower_bound = std::max(bound, wanted.empty() ? 0 : clique_hint);
  plan.lower_bound = std::min<uint32_t>(plan.lower_bound, static_cast<uint32_t>(plan.sets.size()));
  return plan;
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

}  // namespace fieldprof::tools
