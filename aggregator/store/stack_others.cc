#include "aggregator/store/stack_others.h"

#include <algorithm>
#include <utility>

#include "common/field_stacks.h"
#include "common/key_rules.h"

namespace fieldprof::aggregator {
namespace {

std::string Prefix(const std::vector<std::string>& frames, size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) {
    if (i != 0) s += key_rules::kStackSeparator;
    s += frames[i];
  }
  return s;
}

struct Pending {
  const ApiAggregate* stack;
  std::vector<std::string> frames;
  size_t depth;  // the prefix it is to fold into now
};

}  // namespace

void MergeAggregate(const ApiAggregate& from, ApiAggregate* to) {
  to->histogram.Merge(from.histogram);
  to->runs += from.runs;
  to->truncated = to->truncated || from.truncated;
  to->resolution_ns = std::max(to->resolution_ns, from.resolution_ns);
  to->machines.Merge(from.machines);
}

void StackOthers::Add(const ApiAggregate& a) { withheld_.push_back(a); }

std::vector<ApiAggregate> StackOthers::Fold(std::map<std::string, std::string>* into) const {
  std::vector<Pending> pending;
  size_t deepest = 0;
  for (const ApiAggregate& a : withheld_) {
    std::vector<std::string> frames = SplitStack(a.key.symbol);
    if (frames.size() < 2) continue;  // no proper prefix to fold into
    const size_t depth = frames.size() - 1;
    deepest = std::max(deepest, depth);
    pending.push_back({&a, std::move(frames), depth});
  }
  std::map<std::string, ApiAggregate> out;  // by EncodeApiKey
  // From the deepest prefixes up: what does not reach k at one depth tries
  // the next one up, together with the stacks that are that short.
  for (size_t depth = deepest; depth >= 1 && !pending.empty(); --depth) {
    std::map<std::string, std::pair<ApiAggregate, std::vector<Pending*>>> groups;
    for (Pending& p : pending) {
      if (p.depth != depth) continue;
      ApiKey key = p.stack->key;
      key.symbol = Prefix(p.frames, depth) + key_rules::kStackSeparator + kOtherFrame;
      const std::string enc = EncodeApiKey(key);
      auto [it, fresh] = groups.try_emplace(enc);
      if (fresh) it->second.first.key = std::move(key);
      MergeAggregate(*p.stack, &it->second.first);
      it->second.second.push_back(&p);
    }
    for (auto& [enc, group] : groups) {
      const bool published = group.first.machines.Estimate() >= static_cast<uint64_t>(k_);
      for (Pending* p : group.second) {
        if (!published) {
          --p->depth;  // 0: withheld
          continue;
        }
        if (into != nullptr) (*into)[EncodeApiKey(p->stack->key)] = enc;
        p->depth = ~size_t{0};  // done
      }
      if (published) out.emplace(enc, std::move(group.first));
    }
  }
  std::vector<ApiAggregate> result;
  result.reserve(out.size());
  for (auto& [enc, a] : out) result.push_back(std::move(a));
  return result;
}

}  // namespace fieldprof::aggregator
