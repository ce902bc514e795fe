#include "tools/tree/tree_report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "common/statistics/permutation_test.h"
#include "tools/shared/format.h"

namespace fieldprof::tools {

namespace {

constexpr Metric kShownOrder[] = {Metric::kTimeNs,     Metric::kSamples,    Metric::kCalls,
                                  Metric::kAllocBytes, Metric::kFreedBytes, Metric::kAllocs};

std::string Printf(const char* fmt, double v, const char* unit) {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, v, unit);
  return buf;
}

// Whether any ancestor of `n` is named as `n` is (a recursive call).
bool Nested(const CallTree& t, uint32_t n) {
  for (uint32_t p = t.parent(n); p != CallTree::kRoot; p = t.parent(p)) {
    if (t.name_id(p) == t.name_id(n)) return true;
  }
  return false;
}

std::string JoinPath(const CallTree& t, uint32_t n) {
  std::string s;
  for (const std::string& f : t.Path(n)) s += (s.empty() ? "" : ";") + f;
  return s;
}

void SortRows(std::vector<TopRow>* rows, bool by_total) {
  std::sort(rows->begin(), rows->end(), [&](const TopRow& a, const TopRow& b) {
    const int64_t x = by_total ? a.total : a.self, y = by_total ? b.total : b.self;
    if (x != y) return std::llabs(x) > std::llabs(y);
    return a.name < b.name;
  });
}

}  // namespace

std::string FormatMetric(Metric m, int64_t v, bool sign) {
  const char* s = v < 0 ? "-" : sign && v > 0 ? "+" : "";
  const double a = std::fabs(static_cast<double>(v));
  std::string body;
  if (m == Metric::kTimeNs) {
    body = a >= 1e9   ? Printf("%.2f %s", a / 1e9, "s")
           : a >= 1e6 ? Printf("%.2f %s", a / 1e6, "ms")
           : a >= 1e3 ? Printf("%.1f %s", a / 1e3, "us")
                      : Printf("%.0f %s", a, "ns");
  } else if (m == Metric::kAllocBytes || m == Metric::kFreedBytes) {
    body = a >= 1 << 30   ? Printf("%.1f %s", a / (1 << 30), "GiB")
           : a >= 1 << 20 ? Printf("%.1f %s", a / (1 << 20), "MiB")
           : a >= 1 << 10 ? Printf("%.1f %s", a / (1 << 10), "KiB")
                          : Printf("%.0f %s", a, "B");
  } else {
    body = tools::FormatCount(static_cast<uint64_t>(std::llabs(v)));
  }
  return s + body;
}

std::vector<TopRow> TopFunctions(const CallTree& t, Metric m, bool by_total) {
  const std::vector<int64_t> total = t.Totals(m);
  std::map<uint32_t, TopRow> by_name;
  for (uint32_t n = 1; n < t.size(); ++n) {
    TopRow& r = by_name[t.name_id(n)];
    r.self += t.self(n, m);
    if (!Nested(t, n)) r.total += total[n];
  }
  std::vector<TopRow> rows;
  for (auto& [id, r] : by_name) {
    r.name = t.names()[id];
    rows.push_back(std::move(r));
  }
  SortRows(&rows, by_total);
  return rows;
}

std::vector<TopRow> TopNodes(const CallTree& t, Metric m, bool by_total, size_t limit) {
  const std::vector<int64_t> total = t.Totals(m);
  // Ranked by value first; paths spelled out only for the rows returned.
  std::vector<uint32_t> order(t.size() - 1);
  std::iota(order.begin(), order.end(), 1u);
  auto value = [&](uint32_t n) { return std::llabs(by_total ? total[n] : t.self(n, m)); };
  const size_t keep = limit == 0 ? order.size() : std::min(limit, order.size());
  std::partial_sort(
      order.begin(), order.begin() + static_cast<ptrdiff_t>(keep), order.end(),
      [&](uint32_t a, uint32_t b) { return value(a) != value(b) ? value(a) > value(b) : a < b; });
  std::vector<TopRow> rows;
  for (size_t i = 0; i < keep; ++i) {
    const uint32_t n = order[i];
    rows.push_back({JoinPath(t, n), t.self(n, m), total[n]});
  }
  return rows;
}

StatusOr<Butterfly> ButterflyOf(const CallTree& t, const std::string& fn, Metric m) {
  const std::vector<int64_t> total = t.Totals(m);
  Butterfly b;
  std::map<std::string, int64_t> callers, callees;
  bool found = false;
  for (uint32_t n = 1; n < t.size(); ++n) {
    if (t.name(n) != fn) continue;
    found = true;
    b.self += t.self(n, m);
    if (!Nested(t, n)) b.total += total[n];
    const uint32_t p = t.parent(n);
    callers[p == CallTree::kRoot ? "[root]" : t.name(p)] += total[n];
  }
  if (!found) return NotFound("no call path holds \"" + fn + "\"");
  for (uint32_t n = 1; n < t.size(); ++n) {
    if (t.parent(n) != CallTree::kRoot && t.name(t.parent(n)) == fn) callees[t.name(n)] += total[n];
  }
  for (const auto& [name, v] : callers) b.callers.push_back({name, 0, v});
  for (const auto& [name, v] : callees) b.callees.push_back({name, 0, v});
  SortRows(&b.callers, true);
  SortRows(&b.callees, true);
  return b;
}

std::vector<TopRow> PathsTo(const CallTree& t, const std::string& fn, Metric m) {
  const std::vector<int64_t> total = t.Totals(m);
  std::vector<TopRow> rows;
  for (uint32_t n = 1; n < t.size(); ++n) {
    if (t.name(n) == fn && !Nested(t, n)) rows.push_back({JoinPath(t, n), t.self(n, m), total[n]});
  }
  SortRows(&rows, true);
  return rows;
}

StatusOr<CallTree> Subtree(const CallTree& t, const std::string& what) {
  std::vector<uint32_t> tops;
  if (what.find(';') != std::string::npos) {
    uint32_t n = CallTree::kRoot;
    for (size_t start = 0; start <= what.size() && n != CallTree::kNone;) {
      const size_t semi = std::min(what.find(';', start), what.size());
      n = t.Find(n, what.substr(start, semi - start));
      start = semi + 1;
    }
    if (n != CallTree::kNone) tops.push_back(n);
  } else {
    for (uint32_t n = 1; n < t.size(); ++n) {
      if (t.name(n) == what && !Nested(t, n)) tops.push_back(n);
    }
  }
  if (tops.empty()) return NotFound("no call path is \"" + what + "\"");
  CallTree out;
  std::vector<uint32_t> to(t.size(), CallTree::kNone);
  for (uint32_t top : tops) to[top] = out.Child(CallTree::kRoot, t.name(top));
  for (uint32_t n = 1; n < t.size(); ++n) {
    if (to[n] == CallTree::kNone && to[t.parent(n)] != CallTree::kNone) {
      to[n] = out.Child(to[t.parent(n)], t.name(n));
    }
    if (to[n] == CallTree::kNone) continue;
    for (int m = 0; m < kMetricCount; ++m) {
      const int64_t v = t.self(n, static_cast<Metric>(m));
      if (v != 0) out.Add(to[n], static_cast<Metric>(m), v);
    }
  }
  out.set_metrics(t.metrics());
  out.runs = t.runs;
  out.per_run = t.per_run;
  out.description = "subtree " + what + " of " + t.description;
  return out;
}

std::vector<LeakRow> AllocatedNotFreed(const CallTree& t) {
  std::map<uint32_t, LeakRow> by_name;
  for (uint32_t n = 1; n < t.size(); ++n) {
    LeakRow& r = by_name[t.name_id(n)];
    r.allocated += t.self(n, Metric::kAllocBytes);
    r.freed += t.self(n, Metric::kFreedBytes);
    r.allocs += t.self(n, Metric::kAllocs);
  }
  std::vector<LeakRow> rows;
  for (auto& [id, r] : by_name) {
    if (r.allocated == 0 && r.freed == 0) continue;
    r.name = t.names()[id];
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const LeakRow& a, const LeakRow& b) {
    if (a.allocated - a.freed != b.allocated - b.freed) {
      return a.allocated - a.freed > b.allocated - b.freed;
    }
    return a.name < b.name;
  });
  return rows;
}

std::vector<NodeChange> Significance(const CallTree& diff, const std::vector<const CallTree*>& now,
                                     const std::vector<const CallTree*>& base,
                                     const SignificanceOptions& o) {
  std::vector<NodeChange> out(diff.size());
  // First the means per run, each input weighing the runs it holds; then
  // the per-run values of the nodes over the floors only (a few, where a
  // whole table would be inputs x nodes). The test permutes the inputs:
  // each is one observation, its per-run value.
  auto add_means = [&](const std::vector<const CallTree*>& trees, bool is_new) {
    double runs = 0;
    for (const CallTree* t : trees) runs += std::max<uint32_t>(1, t->runs);
    for (const CallTree* t : trees) {
      const std::vector<uint32_t> at = MapNodes(diff, *t, o.match);
      for (uint32_t n = 0; n < diff.size(); ++n) {
        if (at[n] == CallTree::kNone) continue;
        const double v = static_cast<double>(t->OverRuns(at[n], o.metric)) / runs;
        (is_new ? out[n].new_mean : out[n].base_mean) += v;
      }
    }
  };
  add_means(base, false);
  add_means(now, true);
  if (base.size() < 2 || now.size() < 2) return out;  // one run a side: no test
  double base_root = 0, base_runs = 0;
  for (const CallTree* t : base) {
    base_root += static_cast<double>(t->Totals(o.metric)[0]) * (t->per_run ? t->runs : 1);
    base_runs += std::max<uint32_t>(1, t->runs);
  }
  base_root /= base_runs;
  std::vector<uint32_t> tested;
  std::vector<int32_t> slot(diff.size(), -1);
  for (uint32_t n = 0; n < diff.size(); ++n) {
    const NodeChange& c = out[n];
    const double change = std::fabs(c.new_mean - c.base_mean);
    if (change == 0 ||
        change < o.min_effect * std::max(std::fabs(c.base_mean), std::fabs(c.new_mean)) ||
        change < o.min_share * base_root) {
      continue;
    }
    slot[n] = static_cast<int32_t>(tested.size());
    tested.push_back(n);
  }
  auto values = [&](const std::vector<const CallTree*>& runs) {
    std::vector<std::vector<double>> v(tested.size(), std::vector<double>(runs.size(), 0.0));
    for (size_t r = 0; r < runs.size(); ++r) {
      const std::vector<uint32_t> at = MapNodes(diff, *runs[r], o.match);
      for (size_t i = 0; i < tested.size(); ++i) {
        const uint32_t n = tested[i];
        if (at[n] != CallTree::kNone) v[i][r] = runs[r]->PerRun(at[n], o.metric);
      }
    }
    return v;
  };
  const auto a = values(base), b = values(now);
  PermutationOptions po;
  po.resamples = 9999;
  std::vector<double> p, least;
  for (size_t i = 0; i < tested.size(); ++i) {
    NodeChange& c = out[tested[i]];
    c.tested = true;
    c.p = TwoSampleMeanTest(b[i], a[i], po).p_value;
    p.push_back(c.p);
    least.push_back(LeastAchievableP(b[i], a[i], po));
  }
  // A node seen in one or two runs could not be significant whatever the
  // labels: left out of the count, so the noise of a process's startup
  // does not hide the one function that changed.
  std::vector<bool> counted;
  const std::vector<double> q = BenjaminiHochbergDiscrete(p, least, o.fdr, &counted);
  for (size_t i = 0; i < tested.size(); ++i) {
    out[tested[i]].q = q[i];
    out[tested[i]].counted = counted[i];
    out[tested[i]].significant = q[i] <= o.fdr;
  }
  return out;
}

namespace {

// A node's columns in TreeText: each shown metric's total and self, then
// the change's p and q when there are changes.
std::string NodeColumns(const CallTree& t, const std::vector<Metric>& shown,
                        const std::vector<std::vector<int64_t>>& totals, bool signed_values,
                        const std::vector<NodeChange>* changes, uint32_t n) {
  std::string line;
  for (size_t i = 0; i < shown.size(); ++i) {
    char col[64];
    std::snprintf(col, sizeof col, "%12s %12s  ",
                  FormatMetric(shown[i], totals[i][n], signed_values).c_str(),
                  FormatMetric(shown[i], t.self(n, shown[i]), signed_values).c_str());
    line += col;
  }
  if (changes != nullptr) {
    const NodeChange& c = (*changes)[n];
    char col[32];
    if (c.tested) {
      std::snprintf(col, sizeof col, "%6.4f %6.4f%s ", c.p, c.q, c.significant ? "*" : " ");
    } else {
      std::snprintf(col, sizeof col, "%6s %6s  ", "-", "-");
    }
    line += col;
  }
  return line;
}

// The line under a tree of changes: how many nodes were tested, found
// significant, and left out of the count.
std::string ChangesSummary(const std::vector<NodeChange>& changes) {
  size_t tested = 0, significant = 0, hopeless = 0;
  for (const NodeChange& c : changes) {
    tested += c.tested, significant += c.significant;
    hopeless += c.tested && !c.counted;
  }
  char tail[240];
  std::snprintf(tail, sizeof tail,
                "%zu nodes tested (over the effect floors), %zu significant (* : q <= FDR); "
                "%zu seen in too few runs to be significant, not counted\n",
                tested, significant, hopeless);
  return tail;
}

}  // namespace

std::string TreeText(const CallTree& t, const TreeTextOptions& o) {
  std::vector<Metric> shown;
  for (Metric m : kShownOrder) {
    if (t.has(m)) shown.push_back(m);
  }
  std::vector<std::vector<int64_t>> totals;
  for (Metric m : shown) totals.push_back(t.Totals(m));
  const std::vector<int64_t> key = t.Totals(o.sort_by);
  bool signed_values = false;
  double scale = 0;  // the sum of |self| of the sort metric: what shares are of
  int64_t hottest = 1;
  for (uint32_t n = 0; n < t.size(); ++n) {
    const int64_t s = t.self(n, o.sort_by);
    scale += std::fabs(static_cast<double>(s));
    hottest = std::max<int64_t>(hottest, std::llabs(s));
    for (Metric m : shown) signed_values |= t.self(n, m) < 0;
  }
  std::string out;
  if (t.runs > 1) {
    out += t.description + (t.per_run ? " (per run, of " : " (the sum of ") +
           std::to_string(t.runs) + " runs)\n";
  } else {
    out += t.description + "\n";
  }
  std::string header;
  for (Metric m : shown) {
    char col[64];
    std::snprintf(col, sizeof col, "%12s %12s  ", (std::string(MetricName(m)) + " total").c_str(),
                  "self");
    header += col;
  }
  if (o.changes != nullptr) header += "     p      q  ";
  out += header + "call tree\n";
  const auto kids = t.Children();
  // Depth-first, children by |total| of the sort metric.
  std::vector<std::pair<uint32_t, int>> pending;  // (node, depth), the next on top
  auto push_children = [&](uint32_t n, int depth) {
    std::vector<uint32_t> c = kids[n];
    std::sort(c.begin(), c.end(), [&](uint32_t x, uint32_t y) {
      if (std::llabs(key[x]) != std::llabs(key[y])) return std::llabs(key[x]) > std::llabs(key[y]);
      return t.name(x) < t.name(y);
    });
    for (size_t i = c.size(); i-- > 0;) pending.emplace_back(c[i], depth);
  };
  push_children(CallTree::kRoot, 0);
  while (!pending.empty()) {
    const auto [n, depth] = pending.back();
    pending.pop_back();
    if (scale > 0 && std::fabs(static_cast<double>(key[n])) < o.min_share * scale &&
        !(o.changes != nullptr && (*o.changes)[n].significant)) {
      continue;
    }
    std::string line = NodeColumns(t, shown, totals, signed_values, o.changes, n);
    line += std::string(2 * static_cast<size_t>(depth), ' ') + t.name(n);
    if (o.field != nullptr) {
      if (const auto f = o.field->find(n); f != o.field->end()) {
        line += "  [" + FieldCostText(f->second) + "]";
      }
    }
    const int64_t self = t.self(n, o.sort_by);
    // Heat: by self share of the hottest; a difference from blue (shrank)
    // through to red (grew).
    const double position =
        signed_values ? 0.5 + 0.5 * static_cast<double>(self) / static_cast<double>(hottest)
                      : static_cast<double>(self) / static_cast<double>(hottest);
    out += tools::HeatText(line, position, o.color, o.truecolor) + "\n";
    push_children(n, depth + 1);
  }
  if (o.changes != nullptr) out += ChangesSummary(*o.changes);
  return out;
}

std::string FieldCostText(const FieldCostOfName& c) {
  return "field: p50 " + tools::FormatNanos(c.p50_ns) + ", p99 " + tools::FormatNanos(c.p99_ns) +
         " a call; " + tools::FormatCount(static_cast<uint64_t>(c.calls_a_run + 0.5)) +
         " calls a run (" + tools::FormatCount(c.runs) + " runs)";
}

std::string TreeJson(const CallTree& t, const std::vector<NodeChange>* changes,
                     const std::map<uint32_t, FieldCostOfName>* field) {
  std::vector<std::vector<int64_t>> totals(kMetricCount);
  for (int m = 0; m < kMetricCount; ++m) {
    if (t.has(static_cast<Metric>(m))) totals[m] = t.Totals(static_cast<Metric>(m));
  }
  const auto kids = t.Children();
  std::vector<nlohmann::ordered_json> node(t.size());
  for (uint32_t n = static_cast<uint32_t>(t.size()); n-- > 0;) {
    nlohmann::ordered_json& j = node[n];
    j["name"] = n == CallTree::kRoot ? "[root]" : t.name(n);
    nlohmann::ordered_json self = nlohmann::ordered_json::object(),
                           total = nlohmann::ordered_json::object();
    for (int m = 0; m < kMetricCount; ++m) {
      if (!t.has(static_cast<Metric>(m))) continue;
      self[MetricName(static_cast<Metric>(m))] = t.self(n, static_cast<Metric>(m));
      total[MetricName(static_cast<Metric>(m))] = totals[m][n];
    }
    j["self"] = std::move(self);
    j["total"] = std::move(total);
    if (changes != nullptr && (*changes)[n].tested) {
      const NodeChange& c = (*changes)[n];
      j["change"] = {
          {"base_mean", c.base_mean},     {"new_mean", c.new_mean}, {"p", c.p}, {"q", c.q},
          {"significant", c.significant}, {"counted", c.counted}};
    }
    if (field != nullptr) {
      if (const auto f = field->find(n); f != field->end()) {
        j["field"] = {{"p50_ns", f->second.p50_ns},
                      {"p99_ns", f->second.p99_ns},
                      {"calls_a_run", f->second.calls_a_run},
                      {"runs", f->second.runs}};
      }
    }
    nlohmann::ordered_json children = nlohmann::ordered_json::array();
    for (uint32_t c : kids[n]) children.push_back(std::move(node[c]));
    j["children"] = std::move(children);
  }
  nlohmann::ordered_json doc;
  doc["description"] = t.description;
  doc["runs"] = t.runs;
  doc["per_run"] = t.per_run;
  nlohmann::ordered_json metrics = nlohmann::ordered_json::array();
  for (int m = 0; m < kMetricCount; ++m) {
    if (t.has(static_cast<Metric>(m))) metrics.push_back(MetricName(static_cast<Metric>(m)));
  }
  doc["metrics"] = std::move(metrics);
  doc["root"] = std::move(node[CallTree::kRoot]);
  return doc.dump(1) + "\n";
}

std::string TreeCollapsed(const CallTree& t, Metric m) {
  std::string out;
  for (uint32_t n = 1; n < t.size(); ++n) {
    const int64_t v = t.self(n, m);
    if (v != 0) out += JoinPath(t, n) + " " + std::to_string(v) + "\n";
  }
  return out;
}

std::string TreeCollapsedDiff(const CallTree& base, const CallTree& now, Metric m, Match rule) {
  std::map<std::string, std::pair<int64_t, int64_t>> rows;
  auto add = [&](const CallTree& t, bool second) {
    for (uint32_t n = 1; n < t.size(); ++n) {
      const int64_t v = t.self(n, m);
      if (v == 0) continue;
      std::string path;
      for (const std::string& f : t.Path(n)) path += (path.empty() ? "" : ";") + MatchKey(f, rule);
      auto& r = rows[path];
      (second ? r.second : r.first) += v;
    }
  };
  add(base, false);
  add(now, true);
  std::string out;
  for (const auto& [path, v] : rows) {
    out += path + " " + std::to_string(v.first) + " " + std::to_string(v.second) + "\n";
  }
  return out;
}

}  // namespace fieldprof::tools
