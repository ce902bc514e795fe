#include "aggregator/store/stack_others.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <utility>

#include "common/wire/key_rules.h"

namespace fieldprof::aggregator {
namespace {

// A withheld stack on its way up: the prefix it is to fold into now.
struct Pending {
  const ApiKey* key;
  uint32_t withheld;  // its value: StackOthers::withheld_[withheld]
  // Each proper prefix of the symbol, by its number of frames d at
  // [d - 1]: where it ends, and a hash of it (a fold looks a stack up at
  // each depth it tries, without reading its strings again).
  std::vector<std::pair<uint32_t, uint64_t>> prefixes;
  uint64_t rest_hash;  // of the key but the symbol
  size_t depth;        // of the prefix it is looked up by now (a group's rep)
  uint32_t next;       // the next stack of its group
  std::string_view Prefix() const {
    return std::string_view(key->symbol).substr(0, prefixes[depth - 1].first);
  }
  uint64_t Hash() const { return prefixes[depth - 1].second ^ rest_hash; }
};

// A folded series at one depth, named by a member (its key but the
// symbol) and the prefix they share; no string is built to find it, and
// strings are compared only where the hashes agree.
struct GroupId {
  const Pending* p;
  bool operator==(const GroupId& o) const {
    if (p->Hash() != o.p->Hash()) return false;
    const ApiKey& a = *p->key;
    const ApiKey& b = *o.p->key;
    return p->Prefix() == o.p->Prefix() && a.module == b.module &&
           a.module_version == b.module_version && a.metric == b.metric && a.platform == b.platform;
  }
};

// A folded series being decided: stacks that share a prefix, linked
// through Pending::next from `head` to `tail`, and their machines. One
// that does not reach k moves up a depth whole: its stacks share the
// shorter prefix too.
struct Group {
  Pending* rep;
  MachineSketch machines;
  uint32_t head, tail;
};

constexpr uint32_t kNoNext = ~uint32_t{0};

}  // namespace

void MergeAggregate(const ApiAggregate& from, ApiAggregate* to) {
  to->histogram.Merge(from.histogram);
  to->runs += from.runs;
  to->truncated = to->truncated || from.truncated;
  to->resolution_ns = std::max(to->resolution_ns, from.resolution_ns);
  to->machines.KeepLarger(from.machines);  // series of their own: no union (machine_sketch.h)
  to->day_machines.KeepLarger(from.day_machines);
}

void StackOthers::Add(const ApiAggregate& a) {
  Withheld& w = withheld_.emplace_back();
  w.key = a.key;
  for (int i = 0; i < kNumBuckets; ++i) {
    if (a.histogram.bucket(i).count != 0) w.buckets.emplace_back(i, a.histogram.bucket(i));
  }
  w.zero_count = a.histogram.zero_count();
  w.min = a.histogram.min();
  w.max = a.histogram.max();
  w.sum_sq_saturated = a.histogram.sum_sq_saturated();
  w.runs = a.runs;
  w.truncated = a.truncated;
  w.resolution_ns = a.resolution_ns;
  w.machines = a.machines;
}

std::vector<ApiAggregate> StackOthers::Fold(std::map<std::string, std::string>* into) const {
  std::vector<Pending> pending;
  pending.reserve(withheld_.size());
  std::vector<std::vector<uint32_t>> by_depth;  // the stacks with d + 1 frames at [d]
  for (uint32_t at = 0; at < withheld_.size(); ++at) {
    const Withheld& w = withheld_[at];
    Pending p{&w.key, at, {}, 0, 0, kNoNext};
    const std::string& symbol = w.key.symbol;
    uint64_t h = 14695981039346656037ull;  // FNV-1a, prefix by prefix
    for (size_t i = 0; i < symbol.size(); ++i) {
      if (symbol[i] == key_rules::kStackSeparator) {
        p.prefixes.emplace_back(static_cast<uint32_t>(i), h);
      }
      h = (h ^ static_cast<unsigned char>(symbol[i])) * 1099511628211ull;
    }
    if (p.prefixes.empty()) continue;  // one frame: no proper prefix to fold into
    std::hash<std::string_view> hash;
    p.rest_hash = hash(w.key.module) * 31 + hash(w.key.module_version);
    p.rest_hash = p.rest_hash * 31 + static_cast<uint64_t>(w.key.metric);
    p.depth = p.prefixes.size();
    if (by_depth.size() <= p.depth) by_depth.resize(p.depth + 1);
    by_depth[p.depth].push_back(static_cast<uint32_t>(pending.size()));
    pending.push_back(std::move(p));
  }
  // Decided on the machines alone, from the deepest prefixes up: the
  // stacks of a prefix fold into it when they reach k machines together,
  // else they try the next prefix up, with the stacks that are that short
  // and the other groups that did not reach k below it. Each folded series
  // then sums its stacks' values once.
  std::map<std::string, std::pair<ApiKey, uint32_t>> out;  // by EncodeApiKey: key, first stack
  std::vector<Group> below;     // groups that did not reach k at the depth below
  std::vector<Group> groups;    // this depth's
  std::vector<uint32_t> slots;  // open addressing into groups (index + 1; 0: free)
  for (size_t depth = by_depth.empty() ? 0 : by_depth.size() - 1; depth >= 1; --depth) {
    groups.clear();
    size_t size = 16;
    while (size < 2 * (by_depth[depth].size() + below.size())) size *= 2;
    slots.assign(size, 0);
    auto join = [&](Pending* rep, MachineSketch&& machines, uint32_t head, uint32_t tail) {
      rep->depth = depth;
      const GroupId id{rep};
      for (size_t at = rep->Hash() & (size - 1);; at = (at + 1) & (size - 1)) {
        if (slots[at] == 0) {
          slots[at] = static_cast<uint32_t>(groups.size()) + 1;
          groups.push_back(Group{rep, std::move(machines), head, tail});
          return;
        }
        Group& g = groups[slots[at] - 1];
        if (GroupId{g.rep} == id) {
          g.machines.KeepLarger(machines);
          pending[g.tail].next = head;
          g.tail = tail;
          return;
        }
      }
    };
    for (uint32_t i : by_depth[depth]) {
      join(&pending[i], MachineSketch(withheld_[pending[i].withheld].machines), i, i);
    }
    for (Group& g : below) join(g.rep, std::move(g.machines), g.head, g.tail);
    below.clear();
    for (Group& g : groups) {
      if (g.machines.Estimate() < static_cast<uint64_t>(k_)) {
        if (depth > 1) below.push_back(std::move(g));  // else withheld
        continue;
      }
      ApiKey key = *g.rep->key;
      key.symbol.assign(g.rep->Prefix());
      key.symbol += key_rules::kStackSeparator;
      key.symbol += kOtherFrame;
      std::string enc = EncodeApiKey(key);
      if (into != nullptr) {
        for (uint32_t i = g.head; i != kNoNext; i = pending[i].next) {
          (*into)[EncodeApiKey(*pending[i].key)] = enc;
        }
      }
      // Its machines are summed again from its stacks, with their values.
      out.emplace(std::move(enc), std::pair(std::move(key), g.head));
    }
  }
  std::vector<ApiAggregate> result;
  result.reserve(out.size());
  Histogram one;
  for (auto& [enc, folded] : out) {
    ApiAggregate& a = result.emplace_back();
    a.key = std::move(folded.first);
    for (uint32_t i = folded.second; i != kNoNext; i = pending[i].next) {
      const Withheld& w = withheld_[pending[i].withheld];
      one = Histogram();
      one.SetZeroCount(w.zero_count);
      for (const auto& [b, bucket] : w.buckets) one.SetBucket(b, bucket);
      one.SetMinMax(w.min, w.max);
      if (w.sum_sq_saturated) one.MarkSumSqSaturated();
      a.histogram.Merge(one);
      a.runs += w.runs;
      a.truncated = a.truncated || w.truncated;
      a.resolution_ns = std::max(a.resolution_ns, w.resolution_ns);
      a.machines.KeepLarger(w.machines);
    }
  }
  return result;
}

}  // namespace fieldprof::aggregator
