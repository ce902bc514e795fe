#include "common/points/points_stacks.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

namespace fieldprof {

using json = nlohmann::json;

NamedStacks NameStacksAsRecorded(const PointsRun& r) {
  NamedStacks out;
  auto name = [&r](uint64_t ip) -> std::string {
    if (const auto it = r.frame_names.find(ip); it != r.frame_names.end()) return it->second;
    const uint64_t at = ip - 1;  // a return address: its call lies just before it
    char off[40];
    for (const PointsModule& m : r.modules) {
      if (at >= m.lo && at < m.hi) {
        std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(at - m.bias));
        return m.path.substr(m.path.rfind('/') + 1) + off;
      }
    }
    std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(at));
    return off;
  };
  for (const auto& [key, ips] : r.stacks) {
    std::vector<std::string>& names = out[key];
    for (size_t k = ips.size(); k-- > 0;) names.push_back(name(ips[k]));
  }
  return out;
}

std::vector<StackedSite> StackedSites(const std::vector<PointsRun>& runs, const std::string& tag,
                                      const std::vector<NamedStacks>& named, size_t* with_stacks) {
  struct ByStack {
    uint64_t events = 0, ended = 0;
    double ns = 0;
    std::set<size_t> runs;
  };
  struct Tally {
    uint64_t events = 0, without = 0;
    std::map<std::vector<std::string>, ByStack> stacks;
  };
  std::map<std::tuple<std::string, std::string, bool>, Tally> sites;
  *with_stacks = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const PointsRun& r = runs[i];
    *with_stacks += !r.stacks.empty();
    // Open scopes per thread, as the analysis matches them: site, begin
    // time, and the begin's stack (null: none).
    std::map<uint32_t, std::vector<std::tuple<uint32_t, int64_t, ByStack*>>> open;
    for (const PointEvent& e : r.events) {
      const PointSite& s = r.sites[e.site];
      if (!tag.empty() && s.tag != tag) continue;
      if (e.kind == PointKind::kEnd) {
        auto& on_thread = open[e.tid];
        for (size_t k = on_thread.size(); k-- > 0;) {
          const auto [site, t0, by] = on_thread[k];
          if (r.sites[site].tag != s.tag || r.sites[site].name != s.name) continue;
          if (by != nullptr) {
            ++by->ended;
            by->ns += static_cast<double>(e.t_ns - t0);
          }
          on_thread.erase(on_thread.begin() + static_cast<long>(k));
          break;
        }
        continue;
      }
      Tally& t = sites[{s.tag, s.name, e.kind == PointKind::kBegin}];
      ++t.events;
      const auto st = named[i].find(e.stack);
      ByStack* by = nullptr;
      if (e.stack == 0 || st == named[i].end()) {
        ++t.without;
      } else {
        by = &t.stacks[st->second];
        ++by->events;
        by->runs.insert(i);
      }
      if (e.kind == PointKind::kBegin) open[e.tid].emplace_back(e.site, e.t_ns, by);
    }
  }
  std::vector<StackedSite> out;
  for (auto& [key, t] : sites) {
    StackedSite site;
    std::tie(site.tag, site.name, site.scope) = key;
    site.events = t.events;
    site.without = t.without;
    for (auto& [frames, by] : t.stacks) {
      site.stacks.push_back({frames, by.events, by.runs.size(), by.ended, by.ns});
    }
    std::stable_sort(site.stacks.begin(), site.stacks.end(),
                     [](const auto& x, const auto& y) { return x.events > y.events; });
    out.push_back(std::move(site));
  }
  return out;
}

std::string StackedSitesJson(const std::vector<PointsRun>& runs, const std::string& tag,
                             const std::vector<NamedStacks>& named) {
  size_t with_stacks = 0;
  json sites = json::array();
  for (const StackedSite& site : StackedSites(runs, tag, named, &with_stacks)) {
    json stacks = json::array();
    for (const StackedSite::Stack& st : site.stacks) {
      json one = {{"events", st.events}, {"runs", st.runs}, {"frames", st.frames}};
      if (st.ended > 0) {  // a scope's: how many ended, and their mean duration
        one["ended"] = st.ended;
        one["mean_ns"] = st.ns / static_cast<double>(st.ended);
      }
      stacks.push_back(std::move(one));
    }
    sites.push_back({{"tag", site.tag},
                     {"name", site.name},
                     {"scope", site.scope},
                     {"events", site.events},
                     {"without_stack", site.without},
                     {"stacks", std::move(stacks)}});
  }
  uint64_t stackless = 0;
  size_t runs_named = 0;
  for (const PointsRun& r : runs) {
    stackless += r.stackless;
    runs_named += !r.frame_names.empty();
  }
  return json{{"runs", runs.size()},
              {"runs_with_stacks", with_stacks},
              {"runs_named", runs_named},
              {"stackless", stackless},
              {"sites", std::move(sites)}}
             .dump(1) +
         "\n";
}

}  // namespace fieldprof
