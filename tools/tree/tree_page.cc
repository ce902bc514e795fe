#include "tools/tree/tree_page.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "tools/page/page_kit.h"

namespace fieldprof::tools {

using json = nlohmann::json;

std::string CallTreePage(const CallTree& t, Metric m, const std::vector<NodeChange>* changes) {
  std::vector<uint32_t> parent(t.size(), 0), name(t.size(), 0);
  std::vector<double> self(t.size()), base_self, p, q;
  std::vector<uint8_t> tested, significant;
  for (uint32_t n = 0; n < t.size(); ++n) {
    if (n != CallTree::kRoot) parent[n] = t.parent(n), name[n] = t.name_id(n);
    self[n] = changes != nullptr ? (*changes)[n].new_mean : static_cast<double>(t.self(n, m));
    if (changes != nullptr) {
      const NodeChange& c = (*changes)[n];
      base_self.push_back(c.base_mean);
      tested.push_back(c.tested ? 1 : 0);
      significant.push_back(c.significant ? 1 : 0);
      p.push_back(c.p);
      q.push_back(c.q);
    }
  }
  json data = {{"description", t.description},
               {"runs", t.runs},
               {"per_run", t.per_run},
               {"metric", MetricName(m)},
               {"unit", m == Metric::kTimeNs                                   ? "ns"
                        : m == Metric::kAllocBytes || m == Metric::kFreedBytes ? "bytes"
                                                                               : "count"},
               {"names", t.names()},
               {"parent", parent},
               {"name", name},
               {"self", self}};
  if (changes != nullptr) {
    data["base_self"] = base_self;
    data["tested"] = tested;
    data["significant"] = significant;
    data["p"] = p;
    data["q"] = q;
  }
  return page::RenderPage("fieldprof tree", "fieldprof tree: " + t.description,
                          TreePageFile("tree.html")->body, TreePageFile("tree.css")->body,
                          TreePageFile("tree.js")->body, data);
}

}  // namespace fieldprof::tools
