#include "common/points/points_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "common/statistics/permutation_test.h"

namespace fieldprof {

namespace {

using json = nlohmann::json;

constexpr double kDirtyZ = 3.5;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct RunValue {
  double ns = 0;
  uint64_t count = 0;
};

// One run's segments of one tag, keyed "from\x1fto" (scopes "\x1escope\x1fname").
struct RunTag {
  std::map<std::string, RunValue> values;
  std::vector<std::string> order;  // keys as they first occur
  int64_t first = 0, last = 0;
  bool any = false;
};

std::string ScopeKey(const std::string& name) { return "\x1e" + name; }

// Walks one run's events in time order: on_event(tag, t_ns) for each, and
// on_segment(tag, key, ns, begin_tid, end) for each occurrence of a
// segment (key as in RunTag) as it ends, with the thread it began on and
// the event that ends it. `tag` is the tag's name, numbered from 0 in the run
// (tag.number); a key is the same string object at every occurrence of
// its segment in the walk, so callers may key caches by its address. Both
// are worked out once a site (a pair of sites for a segment), not once an
// event: a recording holds millions.
struct VisitTag {
  uint32_t number;
  const std::string& name;
};
template <typename OnEvent, typename OnSegment>
void VisitSegments(const PointsRun& run, OnEvent&& on_event, OnSegment&& on_segment) {
  // Per site: its tag's number (tags[]), and its scope's key.
  std::vector<std::string> tags;
  std::vector<uint32_t> tag_of(run.sites.size());
  std::vector<std::string> scope_key(run.sites.size());
  {
    std::map<std::string, uint32_t> number;
    for (size_t i = 0; i < run.sites.size(); ++i) {
      const auto [it, fresh] =
          number.try_emplace(run.sites[i].tag, static_cast<uint32_t>(tags.size()));
      if (fresh) tags.push_back(run.sites[i].tag);
      tag_of[i] = it->second;
      scope_key[i] = ScopeKey(run.sites[i].name);
    }
  }
  std::unordered_map<uint64_t, std::string> point_key;  // from site << 32 | to site
  std::vector<const PointEvent*> last_point(tags.size(), nullptr);
  // Open scopes per thread: site and begin time.
  std::unordered_map<uint32_t, std::vector<std::pair<uint32_t, int64_t>>> open;
  for (const PointEvent& e : run.events) {
    const uint32_t tag = tag_of[e.site];
    on_event(VisitTag{tag, tags[tag]}, e.t_ns);
    if (e.kind == PointKind::kPoint) {
      const PointEvent*& prev = last_point[tag];
      if (prev != nullptr) {
        auto [key, fresh] = point_key.try_emplace(uint64_t{prev->site} << 32 | e.site);
        if (fresh) key->second = run.sites[prev->site].name + "\x1f" + run.sites[e.site].name;
        on_segment(VisitTag{tag, tags[tag]}, key->second, e.t_ns - prev->t_ns, prev->tid, e);
      }
      prev = &e;
    } else if (e.kind == PointKind::kBegin) {
      open[e.tid].emplace_back(e.site, e.t_ns);
    } else {
      // The innermost open scope of this name on the thread.
      auto& stack = open[e.tid];
      for (size_t i = stack.size(); i-- > 0;) {
        const uint32_t b = stack[i].first;
        if (b == e.site || (tag_of[b] == tag && run.sites[b].name == run.sites[e.site].name)) {
          on_segment(VisitTag{tag, tags[tag]}, scope_key[e.site], e.t_ns - stack[i].second, e.tid,
                     e);
          stack.erase(stack.begin() + static_cast<long>(i));
          break;
        }
      }
    }
  }
}

std::map<std::string, RunTag> SegmentsOf(const PointsRun& run) {
  std::map<std::string, RunTag> by_tag;
  std::vector<RunTag*> numbered;                               // by tag number
  std::unordered_map<const std::string*, RunValue*> value_of;  // by key's address
  const auto tag_of = [&](const VisitTag& tag) -> RunTag& {
    if (tag.number >= numbered.size()) numbered.resize(tag.number + 1, nullptr);
    if (numbered[tag.number] == nullptr) numbered[tag.number] = &by_tag[tag.name];
    return *numbered[tag.number];
  };
  VisitSegments(
      run,
      [&](const VisitTag& tag, int64_t t_ns) {
        RunTag& t = tag_of(tag);
        if (!t.any) t.first = t_ns;
        t.any = true;
        t.last = t_ns;
      },
      [&](const VisitTag& tag, const std::string& key, int64_t ns, uint32_t, const PointEvent&) {
        RunValue*& v = value_of[&key];
        if (v == nullptr) {
          RunTag& t = tag_of(tag);
          auto [it, fresh] = t.values.try_emplace(key);
          if (fresh) t.order.push_back(key);
          v = &it->second;
        }
        v->ns += static_cast<double>(ns);
        ++v->count;
      });
  return by_tag;
}

// Each segment's single occurrences over its tag's kept runs, into its
// `each`: a second walk of those runs, since a histogram a segment a run
// until the dirty runs are known would cost 3 KB each (a developer's
// thousands of runs on the aggregator).
void RecordEachOccurrence(const std::vector<PointsRun>& runs, std::vector<TagReport>* tags) {
  std::map<std::string, std::map<std::string, Histogram*>> each_of;  // tag -> key -> its each
  std::vector<std::set<std::string>> kept_tags(runs.size());
  for (TagReport& t : *tags) {
    for (size_t run : t.runs) kept_tags[run].insert(t.tag);
    for (SegmentStats& s : t.segments) {
      each_of[t.tag][s.scope ? ScopeKey(s.from) : s.from + "\x1f" + s.to] = &s.each;
    }
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (kept_tags[i].empty()) continue;
    // By key's address: the segment's histogram, or nullptr where the run
    // is not kept for its tag.
    std::unordered_map<const std::string*, Histogram*> hist_of;
    VisitSegments(
        runs[i], [](const VisitTag&, int64_t) {},
        [&](const VisitTag& tag, const std::string& key, int64_t ns, uint32_t, const PointEvent&) {
          const auto [it, fresh] = hist_of.try_emplace(&key, nullptr);
          if (fresh && kept_tags[i].count(tag.name) != 0) {
            const auto each = each_of[tag.name].find(key);  // every key of a kept run is one
            if (each != each_of[tag.name].end()) it->second = each->second;
          }
          // Times are each thread's less its pauses, so a span can come
          // out a hair below 0: it is 0.
          if (it->second != nullptr) {
            it->second->Record(static_cast<uint64_t>(std::max<int64_t>(ns, 0)));
          }
        });
  }
}

}  // namespace

std::vector<SegmentOccurrence> OccurrencesOf(const PointsRun& run) {
  std::vector<SegmentOccurrence> out;
  std::unordered_map<const std::string*, std::string> name_of;  // by key's address
  VisitSegments(
      run, [](const VisitTag&, int64_t) {},
      [&](const VisitTag& tag, const std::string& key, int64_t ns, uint32_t begin_tid,
          const PointEvent& end) {
        std::string& name = name_of[&key];
        if (name.empty()) {
          SegmentStats s;
          s.scope = key[0] == '\x1e';
          const size_t sep = key.find('\x1f');
          s.from = s.scope ? key.substr(1) : key.substr(0, sep);
          if (!s.scope) s.to = key.substr(sep + 1);
          name = s.Name();
        }
        out.push_back(
            {tag.name, name, key[0] == '\x1e', begin_tid, end.tid, end.t_ns - ns, end.t_ns});
      });
  return out;
}

std::string SegmentStats::Name() const { return scope ? from + " (scope)" : from + " -> " + to; }

std::vector<double> ModifiedZ(const std::vector<double>& x) {
  std::vector<double> z(x.size(), 0);
  if (x.size() < 3) return z;
  const double med = Median(x);
  std::vector<double> dev;
  double mean_abs = 0;
  for (double v : x) {
    dev.push_back(std::fabs(v - med));
    mean_abs += std::fabs(v - med);
  }
  mean_abs /= static_cast<double>(x.size());
  const double mad = Median(dev);
  for (size_t i = 0; i < x.size(); ++i) {
    if (mad > 0) {
      z[i] = 0.6745 * (x[i] - med) / mad;
    } else if (mean_abs > 0) {
      z[i] = 0.7979 * (x[i] - med) / mean_abs;
    }
  }
  return z;
}

namespace {

// Dirty runs of a tag (points_analysis.h): the largest |M| of its spans
// first, at most 5% of the runs from 20, one below (if twice the median),
// none below 5; the rest are kept (t->runs, t->span_ns).
void KeepCleanRuns(const std::vector<size_t>& with, const std::vector<double>& spans,
                   bool remove_dirty, TagReport* t) {
  std::set<size_t> drop;
  if (remove_dirty) {
    const size_t n = with.size();
    const bool small = n < kDirtyCapRuns;
    const double median = Median(spans);
    const std::vector<double> z = ModifiedZ(spans);
    std::vector<size_t> by_z(n);
    for (size_t k = 0; k < by_z.size(); ++k) by_z[k] = k;
    std::sort(by_z.begin(), by_z.end(),
              [&](size_t a, size_t b) { return std::fabs(z[a]) > std::fabs(z[b]); });
    t->removable = n < kDirtyMinRuns ? 0 : small ? 1 : n / 20;
    for (size_t k : by_z) {
      if (std::fabs(z[k]) <= kDirtyZ) break;
      DirtyRun d{with[k], spans[k], z[k]};
      if (n < kDirtyMinRuns) {
        d.kept_why = "with fewer than 5 runs none is removed";
      } else if (t->removed.size() >= t->removable) {
        d.kept_why = small ? "below 20 runs at most one is removed" : "over the 5% cap";
      } else if (small && !(spans[k] >= kSmallSetRatio * median)) {
        d.kept_why = "below 20 runs only a span twice the median or more is removed";
      }
      if (d.kept_why[0] == 0) {
        t->removed.push_back(d);
        drop.insert(with[k]);
      } else {
        t->kept_outliers.push_back(d);
      }
    }
  }
  for (size_t k = 0; k < with.size(); ++k) {
    if (drop.count(with[k]) == 0) {
      t->runs.push_back(with[k]);
      t->span_ns.push_back(spans[k]);
    }
  }
}

// The tag's segments, in the order they first occur over the kept runs,
// with each kept run's value.
void CollectSegments(const std::vector<std::map<std::string, RunTag>>& per_run,
                     const std::string& tag, TagReport* t) {
  std::map<std::string, size_t> index;
  for (size_t k = 0; k < t->runs.size(); ++k) {
    const RunTag& rt = per_run[t->runs[k]].at(tag);
    for (const std::string& key : rt.order) {
      auto [it, fresh] = index.try_emplace(key, t->segments.size());
      if (fresh) {
        SegmentStats s;
        s.scope = key[0] == '\x1e';
        if (s.scope) {
          s.from = key.substr(1);
        } else {
          const size_t sep = key.find('\x1f');
          s.from = key.substr(0, sep);
          s.to = key.substr(sep + 1);
        }
        s.per_run.assign(t->runs.size(), std::nan(""));
        s.count.assign(t->runs.size(), 0);
        t->segments.push_back(std::move(s));
      }
      SegmentStats& s = t->segments[it->second];
      const RunValue& v = rt.values.at(key);
      s.per_run[k] = v.ns;
      s.count[k] = v.count;
    }
  }
}

// A segment's figures over the runs that have it; and its value in each
// removed run.
void Summarize(const std::vector<std::map<std::string, RunTag>>& per_run, const std::string& tag,
               const std::vector<DirtyRun>& removed, SegmentStats* s) {
  const std::string key = s->scope ? ScopeKey(s->from) : s->from + "\x1f" + s->to;
  for (const DirtyRun& d : removed) {
    const RunTag& rt = per_run[d.run].at(tag);
    const auto v = rt.values.find(key);
    s->removed_ns.push_back(v == rt.values.end() ? std::nan("") : v->second.ns);
  }
  std::vector<double> present;
  for (double v : s->per_run) {
    if (!std::isnan(v)) present.push_back(v);
  }
  s->runs = present.size();
  if (present.empty()) return;
  double sum = 0;
  for (double v : present) sum += v;
  s->mean = sum / static_cast<double>(present.size());
  s->median = Median(present);
  s->min = *std::min_element(present.begin(), present.end());
  s->max = *std::max_element(present.begin(), present.end());
  double total = 0, calls = 0;
  for (size_t k = 0; k < s->per_run.size(); ++k) {
    if (std::isnan(s->per_run[k])) continue;
    total += s->per_run[k];
    calls += static_cast<double>(s->count[k]);
  }
  s->per_call = calls > 0 ? total / calls : 0;
}

}  // namespace

std::vector<TagReport> AnalyzePoints(const std::vector<PointsRun>& runs, const PointsOptions& o) {
  std::vector<std::map<std::string, RunTag>> per_run;
  per_run.reserve(runs.size());
  std::vector<std::string> tag_order;
  std::set<std::string> tags_seen;
  for (const PointsRun& r : runs) {
    per_run.push_back(SegmentsOf(r));
    for (const PointEvent& e : r.events) {
      const std::string& tag = r.sites[e.site].tag;
      if ((o.tag.empty() || o.tag == tag) && tags_seen.insert(tag).second) tag_order.push_back(tag);
    }
  }
  std::vector<TagReport> out;
  for (const std::string& tag : tag_order) {
    TagReport t;
    t.tag = tag;
    std::vector<size_t> with;
    std::vector<double> spans;
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto it = per_run[i].find(tag);
      if (it == per_run[i].end() || !it->second.any) continue;
      with.push_back(i);
      spans.push_back(static_cast<double>(it->second.last - it->second.first));
      t.last_unix_ns = std::max(t.last_unix_ns, static_cast<int64_t>(runs[i].start_unix_ns));
    }
    KeepCleanRuns(with, spans, o.remove_dirty, &t);
    CollectSegments(per_run, tag, &t);
    for (SegmentStats& s : t.segments) Summarize(per_run, tag, t.removed, &s);
    out.push_back(std::move(t));
  }
  RecordEachOccurrence(runs, &out);
  return out;
}

bool SegmentChange::CallsDiffer() const {
  return std::fabs(calls_b - calls_a) > 0.01 * std::max(calls_a, calls_b);
}

namespace {

// A segment's per-run values, and its runs' own means a call, over the
// runs it is in.
struct SegmentValues {
  std::vector<double> per_run, per_call;
  double calls = 0;  // the mean a run
};

SegmentValues ValuesOf(const SegmentStats& s) {
  SegmentValues v;
  double calls = 0;
  for (size_t k = 0; k < s.per_run.size(); ++k) {
    if (std::isnan(s.per_run[k])) continue;
    v.per_run.push_back(s.per_run[k]);
    if (s.count[k] > 0) v.per_call.push_back(s.per_run[k] / static_cast<double>(s.count[k]));
    calls += static_cast<double>(s.count[k]);
  }
  if (!v.per_run.empty()) v.calls = calls / static_cast<double>(v.per_run.size());
  return v;
}

bool Significant(double q, double a, double b, const CompareOptions& o) {
  return q <= o.fdr && a > 0 && std::fabs(b - a) >= o.min_effect * a;
}

}  // namespace

std::vector<SegmentChange> ComparePoints(const std::vector<TagReport>& a,
                                         const std::vector<TagReport>& b, const CompareOptions& o) {
  std::vector<SegmentChange> rows;
  std::vector<double> p, p_call;
  for (const TagReport& ta : a) {
    for (const TagReport& tb : b) {
      if (tb.tag != ta.tag) continue;
      for (const SegmentStats& sa : ta.segments) {
        for (const SegmentStats& sb : tb.segments) {
          if (sb.Name() != sa.Name()) continue;
          SegmentValues va = ValuesOf(sa), vb = ValuesOf(sb);
          SegmentChange c;
          c.tag = ta.tag;
          c.segment = sa.Name();
          c.mean_a = sa.mean;
          c.mean_b = sb.mean;
          c.p = TwoSampleMeanTest(va.per_run, vb.per_run, PermutationOptions{}).p_value;
          c.runs_a = va.per_run.size();
          c.runs_b = vb.per_run.size();
          c.calls_a = va.calls;
          c.calls_b = vb.calls;
          c.per_call_a = sa.per_call;
          c.per_call_b = sb.per_call;
          c.per_call_p = TwoSampleMeanTest(va.per_call, vb.per_call, PermutationOptions{}).p_value;
          c.values_a = std::move(va.per_run);
          c.values_b = std::move(vb.per_run);
          p.push_back(c.p);
          p_call.push_back(c.per_call_p);
          rows.push_back(std::move(c));
        }
      }
    }
  }
  const std::vector<double> q = BenjaminiHochberg(p), q_call = BenjaminiHochberg(p_call);
  for (size_t i = 0; i < rows.size(); ++i) {
    SegmentChange& r = rows[i];
    r.q = q[i];
    r.significant = Significant(r.q, r.mean_a, r.mean_b, o);
    r.per_call_q = q_call[i];
    r.per_call_significant = Significant(r.per_call_q, r.per_call_a, r.per_call_b, o);
  }
  return rows;
}

std::string CompareJson(const std::vector<SegmentChange>& rows) {
  json j = json::array();
  for (const SegmentChange& r : rows) {
    j.push_back({{"tag", r.tag},
                 {"segment", r.segment},
                 {"mean_a_ns", r.mean_a},
                 {"mean_b_ns", r.mean_b},
                 {"runs_a", r.runs_a},
                 {"runs_b", r.runs_b},
                 {"p", r.p},
                 {"q", r.q},
                 {"significant", r.significant},
                 {"calls_a", r.calls_a},
                 {"calls_b", r.calls_b},
                 {"calls_differ", r.CallsDiffer()},
                 {"per_call_a_ns", r.per_call_a},
                 {"per_call_b_ns", r.per_call_b},
                 {"per_call_p", r.per_call_p},
                 {"per_call_q", r.per_call_q},
                 {"per_call_significant", r.per_call_significant}});
  }
  return j.dump(2) + "\n";
}

namespace {

// A segment's occurrences: the counts and quantiles the field gives its
// series, and the non-empty buckets as [index, count] (-1: the zero
// bucket), as the dashboard draws histograms.
json EachJson(const Histogram& h) {
  json buckets = json::array();
  if (h.zero_count() > 0) buckets.push_back({-1, h.zero_count()});
  for (int i = 0; i < kNumBuckets; ++i) {
    if (h.bucket(i).count > 0) buckets.push_back({i, h.bucket(i).count});
  }
  return {{"count", h.count()},         {"mean_ns", h.Mean()},
          {"p50_ns", h.Quantile(0.5)},  {"p90_ns", h.Quantile(0.9)},
          {"p99_ns", h.Quantile(0.99)}, {"min_ns", h.empty() ? 0 : h.min()},
          {"max_ns", h.max()},          {"buckets", buckets}};
}

}  // namespace

std::string PointsJson(const std::vector<PointsRun>& runs, const std::vector<TagReport>& tags) {
  json j;
  j["runs"] = json::array();
  for (const PointsRun& r : runs) {
    j["runs"].push_back({{"file", r.file},
                         {"program", r.program},
                         {"pid", r.pid},
                         {"start_unix_ns", r.start_unix_ns},
                         {"events", r.events.size()},
                         {"lost", r.lost},
                         {"waits", r.waits},
                         {"wait_ns", r.wait_ns},
                         {"complete", r.complete}});
  }
  j["tags"] = json::array();
  for (const TagReport& t : tags) {
    json jt = {{"tag", t.tag}, {"runs", t.runs}, {"span_ns", t.span_ns}};
    for (const char* which : {"removed", "kept_outliers"}) {
      json& d = jt[which] = json::array();
      for (const DirtyRun& r : std::string(which) == "removed" ? t.removed : t.kept_outliers) {
        json run = {{"run", r.run}, {"span_ns", r.span_ns}, {"modified_z", r.z}};
        if (r.kept_why[0] != 0) run["kept_why"] = r.kept_why;
        d.push_back(std::move(run));
      }
    }
    jt["segments"] = json::array();
    for (const SegmentStats& s : t.segments) {
      json per_run = json::array(), removed = json::array();
      for (double v : s.per_run) per_run.push_back(std::isnan(v) ? json(nullptr) : json(v));
      for (double v : s.removed_ns) removed.push_back(std::isnan(v) ? json(nullptr) : json(v));
      jt["segments"].push_back({{"name", s.Name()},
                                {"from", s.from},
                                {"to", s.to},
                                {"scope", s.scope},
                                {"runs", s.runs},
                                {"mean_ns", s.mean},
                                {"median_ns", s.median},
                                {"min_ns", s.min},
                                {"max_ns", s.max},
                                {"per_call_ns", s.per_call},
                                {"per_run_ns", per_run},
                                {"removed_ns", removed},
                                {"count", s.count},
                                {"each", EachJson(s.each)}});
    }
    j["tags"].push_back(std::move(jt));
  }
  return j.dump(2) + "\n";
}

}  // namespace fieldprof
