#include "tools/lab/lab_tree.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/stacks/cxx_names.h"

namespace fieldprof::tools {

namespace {

std::string Key(const wire::ApiKey& k) { return k.module() + ":" + k.symbol(); }

// Whether path `k`'s parents are all earlier paths of known APIs: the
// runtime writes them so; anything else is a damaged record.
bool Sound(const wire::LabRunRecord& r, int k) {
  const wire::LabPath& p = r.paths(k);
  return p.parent() <= static_cast<uint32_t>(k) && p.api() < static_cast<uint32_t>(r.apis_size());
}

// Whether path `k`'s API is also on a path beneath it (recursion): its
// time is then inside that outer call's already.
bool Nested(const wire::LabRunRecord& r, int k) {
  const uint32_t api = r.paths(k).api();
  int at = k;
  // Each step goes to an earlier path, even in a damaged record.
  for (uint32_t p = r.paths(k).parent(); p != 0 && p <= static_cast<uint32_t>(at);) {
    at = static_cast<int>(p) - 1;
    if (r.paths(at).api() == api) return true;
    p = r.paths(at).parent();
  }
  return false;
}

}  // namespace

tools::CallTree LabCallTree(const std::vector<wire::LabRunRecord>& runs,
                            const std::map<std::string, double>& mean_ns, uint64_t* lost) {
  // Each API's census calls and census time (its outermost calls'), for
  // the share of the timing passes' time each of its paths gets.
  std::map<std::string, std::pair<double, double>> census;  // calls, time
  std::map<std::string, std::set<std::string>> modules_of;
  for (const wire::LabRunRecord& r : runs) {
    for (const wire::ApiKey& k : r.apis()) modules_of[Demangle(k.symbol())].insert(k.module());
    for (int k = 0; k < r.paths_size(); ++k) {
      if (!Sound(r, k)) continue;
      const wire::LabPath& p = r.paths(k);
      auto& c = census[Key(r.apis(static_cast<int>(p.api())))];
      c.first += static_cast<double>(p.calls());
      if (!Nested(r, k)) c.second += static_cast<double>(p.time_ns());
    }
  }
  std::map<std::string, double> scale;
  for (const auto& [key, c] : census) {
    const auto m = mean_ns.find(key);
    scale[key] = m != mean_ns.end() && c.second > 0 ? c.first * m->second / c.second : 1.0;
  }
  const auto name_of = [&](const wire::ApiKey& k) {
    std::string n = Demangle(k.symbol());
    if (modules_of[n].size() > 1) n += " (" + k.module() + ")";
    return n;
  };
  CallTree t;
  *lost = 0;
  for (const wire::LabRunRecord& r : runs) {
    *lost += r.paths_lost();
    const int n = r.paths_size();
    // Positions plus one, as the paths' parents count them; 0 the root.
    std::vector<uint32_t> node(n + 1, CallTree::kNone);
    std::vector<int64_t> self_time(n + 1, 0);
    node[0] = CallTree::kRoot;
    for (int k = 0; k < n; ++k) {
      if (!Sound(r, k)) continue;
      const wire::LabPath& p = r.paths(k);
      if (node[p.parent()] == CallTree::kNone) continue;
      const wire::ApiKey& api = r.apis(static_cast<int>(p.api()));
      const uint32_t at = t.Child(node[p.parent()], name_of(api));
      node[k + 1] = at;
      const auto total =
          static_cast<int64_t>(std::llround(static_cast<double>(p.time_ns()) * scale[Key(api)]));
      self_time[k + 1] += total;
      if (p.parent() != 0) self_time[p.parent()] -= total;
      t.Add(at, Metric::kCalls, static_cast<int64_t>(p.calls()));
      t.Add(at, Metric::kAllocBytes, static_cast<int64_t>(p.alloc_bytes()));
      t.Add(at, Metric::kAllocs, static_cast<int64_t>(p.allocs()));
      t.Add(at, Metric::kFreedBytes, static_cast<int64_t>(p.freed_bytes()));
    }
    for (int k = 1; k <= n; ++k) {
      if (node[k] != CallTree::kNone) {
        t.Add(node[k], Metric::kTimeNs, std::max<int64_t>(0, self_time[k]));
      }
    }
  }
  t.set_metrics(tools::Bit(Metric::kTimeNs) | tools::Bit(Metric::kCalls) |
                tools::Bit(Metric::kAllocBytes) | tools::Bit(Metric::kFreedBytes) |
                tools::Bit(Metric::kAllocs));
  return t;
}

}  // namespace fieldprof::tools
