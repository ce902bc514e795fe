#include "tools/points/points_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "common/points/points_format.h"
#include "common/statistics/permutation_test.h"
#include "tools/shared/format.h"
#include "tools/shared/run_record_text.h"
#include "tools/shared/symbolizer.h"

namespace fieldprof::tools {

using json = nlohmann::json;

namespace {

std::string RunLabel(const std::vector<PointsRun>& runs, size_t i) {
  return "run " + std::to_string(i + 1) + " (pid " + std::to_string(runs[i].pid) + ")";
}

std::string Dirty(const std::vector<PointsRun>& runs, const DirtyRun& d) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: span %s, modified Z %+.1f", RunLabel(runs, d.run).c_str(),
                tools::FormatNanos(d.span_ns).c_str(), d.z);
  return buf;
}

// The first lines: how many runs of what, and what was lost or cut.
std::string RunsHeader(const std::vector<PointsRun>& runs, const std::vector<TagReport>& tags) {
  std::string out;
  char buf[512];
  uint64_t lost = 0, waits = 0, wait_ns = 0;
  size_t cut = 0;
  bool stacks = false;
  for (const PointsRun& r : runs) {
    lost += r.lost;
    waits += r.waits;
    wait_ns += r.wait_ns;
    cut += !r.complete;
    stacks = stacks || !r.modules.empty();  // recorded with --stacks
  }
  std::snprintf(buf, sizeof buf, "%zu run%s of %s, %zu tag%s\n", runs.size(),
                runs.size() == 1 ? "" : "s", runs.empty() ? "-" : runs[0].program.c_str(),
                tags.size(), tags.size() == 1 ? "" : "s");
  out += buf;
  if (lost > 0) {
    out += "warning: " + std::to_string(lost) +
           " events were lost (a thread's buffer was full and the recorder did not empty it in "
           "100 ms: a disk held it up" +
           (stacks ? "; or a signal handler's point came while its thread took a stack" : "") +
           "; or a signal handler jumped out of a point, leaving its slot empty)\n";
  }
  if (waits > 0) {
    out += "note: threads found their buffer full " + std::to_string(waits) +
           " time(s) and waited " + tools::FormatNanos(static_cast<double>(wait_ns)) +
           " in all for the recorder to empty it (taken out of their times)\n";
  }
  if (cut > 0) {
    out += "note: " + std::to_string(cut) +
           " run(s) ended without closing their file (killed, or exec'd): read up to their last "
           "write\n";
  }
  return out;
}

// Each occurrence of each segment: the field's histogram and quantiles,
// so these read as `points field` and `fieldprof run --show` read the
// field's.
std::string EachOccurrence(const TagReport& t) {
  std::string out;
  char buf[512];
  out += "  each occurrence, over the runs kept:\n";
  for (const SegmentStats& s : t.segments) {
    const Histogram& h = s.each;
    std::snprintf(
        buf, sizeof buf, "  %-40s %12s  mean %s  p50 %s  p90 %s  p99 %s  min %s  max %s\n",
        s.Name().c_str(), tools::FormatCount(h.count()).c_str(),
        tools::FormatNanos(h.Mean()).c_str(), tools::FormatNanos(h.Quantile(0.5)).c_str(),
        tools::FormatNanos(h.Quantile(0.9)).c_str(), tools::FormatNanos(h.Quantile(0.99)).c_str(),
        tools::FormatNanos(h.empty() ? 0.0 : static_cast<double>(h.min())).c_str(),
        tools::FormatNanos(static_cast<double>(h.max())).c_str());
    out += buf;
    out += tools::HistogramBarsText(wire::METRIC_POINT_NS, h, 0);
  }
  return out;
}

}  // namespace

std::string PointsText(const std::vector<PointsRun>& runs, const std::vector<TagReport>& tags,
                       bool per_run, bool calls) {
  std::string out;
  char buf[512];
  out += RunsHeader(runs, tags);
  for (const TagReport& t : tags) {
    std::snprintf(buf, sizeof buf, "\ntag %s: %zu run%s", t.tag.c_str(), t.runs.size(),
                  t.runs.size() == 1 ? "" : "s");
    out += buf;
    if (!t.removed.empty()) out += ", " + std::to_string(t.removed.size()) + " removed as dirty";
    out += "\n";
    for (const DirtyRun& d : t.removed) {
      const size_t n = t.runs.size() + t.removed.size();
      out += "  removed " + Dirty(runs, d) +
             (n < kDirtyCapRuns ? " (|M| > 3.5, at least twice the median)\n" : " (|M| > 3.5)\n");
    }
    // Past 3.5 but kept: say why, rather than a rule the reader cannot see.
    for (const DirtyRun& d : t.kept_outliers) {
      out += std::string("  kept (") + d.kept_why + "): " + Dirty(runs, d) + "\n";
    }
    std::snprintf(buf, sizeof buf, "  %-40s %5s %8s %11s %11s %11s %11s %11s\n", "segment", "runs",
                  "per run", "mean", "median", "min", "max", "per call");
    out += buf;
    for (const SegmentStats& s : t.segments) {
      double calls = 0;
      for (uint64_t c : s.count) calls += static_cast<double>(c);
      std::snprintf(buf, sizeof buf, "  %-40s %5zu %8.1f %11s %11s %11s %11s %11s\n",
                    s.Name().c_str(), s.runs, s.runs ? calls / static_cast<double>(s.runs) : 0.0,
                    tools::FormatNanos(s.mean).c_str(), tools::FormatNanos(s.median).c_str(),
                    tools::FormatNanos(s.min).c_str(), tools::FormatNanos(s.max).c_str(),
                    tools::FormatNanos(s.per_call).c_str());
      out += buf;
    }
    if (calls) out += EachOccurrence(t);
    if (!per_run) continue;
    out += "  per run (ns):\n    run";
    for (size_t j = 0; j < t.segments.size(); ++j) out += "\t" + t.segments[j].Name();
    out += "\n";
    for (size_t k = 0; k < t.runs.size(); ++k) {
      out += "    " + std::to_string(t.runs[k] + 1);
      for (const SegmentStats& s : t.segments) {
        out += std::isnan(s.per_run[k]) ? "\t-" : "\t" + std::to_string(std::llround(s.per_run[k]));
      }
      out += "\n";
    }
  }
  return out;
}

std::string TagsText(const std::vector<TagReport>& tags) {
  std::vector<const TagReport*> order;
  for (const TagReport& t : tags) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TagReport* a, const TagReport* b) {
    return a->last_unix_ns > b->last_unix_ns;
  });
  std::string out = "tag                              runs  segments  newest run\n";
  char buf[256];
  for (const TagReport* t : order) {
    const time_t secs = static_cast<time_t>(t->last_unix_ns / 1000000000);
    tm tm_utc;
    gmtime_r(&secs, &tm_utc);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm_utc);
    std::snprintf(buf, sizeof buf, "%-32s %5zu %9zu  %s\n", t->tag.c_str(),
                  t->runs.size() + t->removed.size(), t->segments.size(), when);
    out += buf;
  }
  return out;
}

namespace {

// "A  dir: 20 runs of app; removed as dirty: 1 of startup".
std::string GroupLine(const char* label, const PointsGroup& g) {
  std::string out = std::string(label) + "  " + g.name + ": " + std::to_string(g.runs.size()) +
                    (g.runs.size() == 1 ? " run" : " runs");
  std::string names;
  for (const std::string& p : ProgramsOf(g)) names += (names.empty() ? "" : ", ") + p;
  if (!names.empty()) out += " of " + names;
  std::string dirty;
  for (const TagReport& t : g.tags) {
    if (t.removed.empty()) continue;
    dirty += (dirty.empty() ? "; removed as dirty: " : ", ") + std::to_string(t.removed.size()) +
             " of " + t.tag;
  }
  return out + dirty + "\n";
}

std::string Percent(double a, double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", a > 0 ? (b - a) / a * 100 : 0.0);
  return buf;
}

}  // namespace

std::vector<std::string> ProgramsOf(const PointsGroup& g) {
  std::set<std::string> programs;
  for (const PointsRun& r : g.runs) programs.insert(r.program);
  return {programs.begin(), programs.end()};
}

std::vector<std::string> SegmentsOnlyIn(const std::vector<TagReport>& of,
                                        const std::vector<TagReport>& in) {
  std::set<std::pair<std::string, std::string>> there;
  for (const TagReport& t : in) {
    for (const SegmentStats& s : t.segments) there.emplace(t.tag, s.Name());
  }
  std::vector<std::string> out;
  for (const TagReport& t : of) {
    for (const SegmentStats& s : t.segments) {
      if (there.count({t.tag, s.Name()}) == 0) out.push_back(t.tag + ": " + s.Name());
    }
  }
  return out;
}

std::string PointsCompareText(const PointsGroup& a, const PointsGroup& b,
                              const std::vector<SegmentChange>& rows, const CompareOptions& o,
                              bool as_json) {
  if (as_json) return CompareJson(rows);
  std::string out = GroupLine("A", a) + GroupLine("B", b) + "\n";
  char buf[512];
  if (rows.empty()) {
    out += "No segment is in both groups: nothing to compare.\n";
  } else {
    std::snprintf(buf, sizeof buf, "%-12s %-36s %11s %11s %8s %8s %8s\n", "tag", "segment",
                  "A mean", "B mean", "change", "p", "q");
    out += buf;
  }
  bool calls_differ = false;
  for (const SegmentChange& r : rows) {
    std::snprintf(buf, sizeof buf, "%-12s %-36s %11s %11s %8s %8.4f %8.4f%s\n", r.tag.c_str(),
                  r.segment.c_str(), tools::FormatNanos(r.mean_a).c_str(),
                  tools::FormatNanos(r.mean_b).c_str(), Percent(r.mean_a, r.mean_b).c_str(), r.p,
                  r.q, r.significant ? "  *" : "");
    out += buf;
    if (!r.CallsDiffer()) continue;
    // The runs call it more or less often: what a call costs, apart.
    calls_differ = true;
    std::snprintf(buf, sizeof buf, "%-12s %-36s %11s %11s %8s %8.4f %8.4f%s\n", "", "  a call",
                  tools::FormatNanos(r.per_call_a).c_str(),
                  tools::FormatNanos(r.per_call_b).c_str(),
                  Percent(r.per_call_a, r.per_call_b).c_str(), r.per_call_p, r.per_call_q,
                  r.per_call_significant ? "  *" : "");
    out += buf;
    std::snprintf(buf, sizeof buf, "%-12s %-36s %11.1f %11.1f %8s\n", "", "  calls a run",
                  r.calls_a, r.calls_b, Percent(r.calls_a, r.calls_b).c_str());
    out += buf;
  }
  for (const auto& [label, list] : {std::pair{"A", SegmentsOnlyIn(a.tags, b.tags)},
                                    std::pair{"B", SegmentsOnlyIn(b.tags, a.tags)}}) {
    if (list.empty()) continue;
    out += std::string("only in ") + label + ":";
    for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : " ") + list[i];
    out += "\n";
  }
  std::snprintf(buf, sizeof buf,
                "* B differs from A: q <= %.3g (permutation test over the runs, "
                "Benjamini-Hochberg) and a change of at least %.0f%%\n",
                o.fdr, o.min_effect * 100);
  if (!rows.empty()) out += buf;
  if (calls_differ) {
    out +=
        "  a call: the segment's time over its calls, tested over the runs' own means a call;\n"
        "  shown where the calls a run differ by more than 1%\n";
  }
  return out;
}

std::vector<NamedStacks> NamePointsStacks(const std::vector<PointsRun>& runs) {
  std::vector<NamedStacks> out(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const PointsRun& r = runs[i];
    if (r.stacks.empty()) continue;
    if (!r.frame_names.empty()) {  // named when it ended: its modules may be gone since
      out[i] = NameStacksAsRecorded(r);
      continue;
    }
    std::vector<LoadedModule> modules;
    for (const PointsModule& m : r.modules) modules.push_back({m.path, m.bias, m.lo, m.hi});
    Symbolizer sym(modules);
    for (const auto& [key, ips] : r.stacks) {
      std::vector<std::string>& names = out[i][key];
      for (size_t k = ips.size(); k-- > 0;) names.push_back(sym.Name(ips[k], true));
    }
  }
  return out;
}

std::string PointsStacksJson(const std::vector<PointsRun>& runs, const std::string& tag) {
  return StackedSitesJson(runs, tag, NamePointsStacks(runs));
}

std::string PointsStacksText(const std::vector<PointsRun>& runs, const std::string& tag) {
  size_t with_stacks = 0;
  const std::vector<StackedSite> sites =
      StackedSites(runs, tag, NamePointsStacks(runs), &with_stacks);
  constexpr size_t kStacksShown = 5, kFramesShown = 16;
  uint64_t stack_ns = 0, stacks_taken = 0, stackless = 0;
  for (const PointsRun& r : runs) {
    stack_ns += r.stack_ns;
    stackless += r.stackless;
    for (const PointEvent& e : r.events) stacks_taken += e.stack != 0;
  }
  const std::string why_stackless =
      " events went without their stack: taking stacks would have taken more than 1/" +
      std::to_string(points::kStackShare) + " of their thread's time (after its first " +
      std::to_string(points::kStackBurstMs) +
      " ms of them), or they came while their thread was inside the dynamic linker "
      "(dlopen, dlclose, libc's own loading of NSS modules or iconv converters), whose "
      "lock the unwinder takes, or in a process forked while another thread held that lock\n";
  if (with_stacks == 0) {
    if (stackless > 0) return "no stacks: " + std::to_string(stackless) + why_stackless;
    return "no stacks: these runs were recorded without --stacks "
           "(fieldprof points record --stacks -- CMD)\n";
  }
  std::string out = "where each point was passed: its stacks, innermost frame first (" +
                    std::to_string(with_stacks) + " of " + std::to_string(runs.size()) +
                    " runs recorded with stacks";
  if (stacks_taken > 0) {
    out += "; taking one took " +
           tools::FormatNanos(static_cast<double>(stack_ns) / static_cast<double>(stacks_taken)) +
           ", taken out of its thread's times";
  }
  out += ")\n";
  if (stackless > 0) out += "note: " + std::to_string(stackless) + why_stackless;
  std::string last_tag;
  char buf[256];
  for (const StackedSite& site : sites) {
    if (site.tag != last_tag) out += "\ntag " + site.tag + "\n";
    last_tag = site.tag;
    out += "  " + site.name + (site.scope ? " (scope)" : "");
    std::snprintf(buf, sizeof buf, ": %llu event%s", static_cast<unsigned long long>(site.events),
                  site.events == 1 ? "" : "s");
    out += buf;
    if (site.without > 0) {
      std::snprintf(buf, sizeof buf, ", %llu without a stack",
                    static_cast<unsigned long long>(site.without));
      out += buf;
    }
    out += "\n";
    for (size_t k = 0; k < site.stacks.size() && k < kStacksShown; ++k) {
      const StackedSite::Stack& st = site.stacks[k];
      std::snprintf(buf, sizeof buf, "    %5.1f%% %9llu events in %zu run%s",
                    100.0 * static_cast<double>(st.events) / static_cast<double>(site.events),
                    static_cast<unsigned long long>(st.events), st.runs, st.runs == 1 ? "" : "s");
      out += buf;
      if (st.ended > 0) {
        out += ", mean " + tools::FormatNanos(st.ns / static_cast<double>(st.ended));
      }
      out += "\n";
      const size_t depth = st.frames.size();
      for (size_t f = 0; f < depth && f < kFramesShown; ++f) {
        out += "        " + st.frames[depth - 1 - f] + "\n";
      }
      if (depth > kFramesShown) {
        out += "        ... " + std::to_string(depth - kFramesShown) + " more\n";
      }
    }
    if (site.stacks.size() > kStacksShown) {
      out += "    ... " + std::to_string(site.stacks.size() - kStacksShown) + " more stacks\n";
    }
  }
  return out;
}

std::string PointsChromeTrace(const std::vector<PointsRun>& runs) {
  const std::vector<NamedStacks> named = NamePointsStacks(runs);
  json events = json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    const PointsRun& r = runs[i];
    const int pid = static_cast<int>(i + 1);
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", pid},
                      {"args", {{"name", "run " + std::to_string(i + 1) + ": " + r.program}}}});
    for (const PointEvent& e : r.events) {
      const PointSite& s = r.sites[e.site];
      json ev = {{"name", s.name},
                 {"cat", s.tag},
                 {"pid", pid},
                 {"tid", e.tid},
                 {"ts", static_cast<double>(e.t_ns) / 1000.0}};
      if (e.kind == PointKind::kPoint) {
        ev["ph"] = "i";
        ev["s"] = "t";
      } else {
        ev["ph"] = e.kind == PointKind::kBegin ? "B" : "E";
      }
      if (e.value != 0) ev["args"]["value"] = e.value;
      if (const auto st = named[i].find(e.stack); e.stack != 0 && st != named[i].end()) {
        ev["args"]["stack"] = st->second;
      }
      events.push_back(std::move(ev));
    }
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump() + "\n";
}

CallTree PointsCallTree(const std::vector<PointsRun>& runs) {
  CallTree t;
  const std::vector<NamedStacks> named = NamePointsStacks(runs);
  bool stacked = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const PointsRun& r = runs[i];
    CallTreeBuilder b(&t);
    int64_t end = 0;
    std::vector<std::string_view> path;
    for (const PointEvent& e : r.events) {
      const PointSite& s = r.sites[e.site];
      if (e.kind == PointKind::kBegin) {
        const std::string label = s.tag + ":" + s.name;
        const auto frames = e.stack != 0 ? named[i].find(e.stack) : named[i].end();
        if (frames == named[i].end()) {
          b.Enter(e.tid, label, e.t_ns);
        } else {
          path.assign(frames->second.begin(), frames->second.end());
          path.push_back(label);
          b.EnterAt(e.tid, t.AddPath(path), e.t_ns);
          stacked = true;
        }
      }
      if (e.kind == PointKind::kEnd) b.Exit(e.tid, e.t_ns);
      end = e.t_ns;
    }
    b.Finish(end);
  }
  t.set_metrics(Bit(Metric::kCalls) | Bit(Metric::kTimeNs));
  t.runs = static_cast<uint32_t>(runs.size());
  t.description = "points of " + std::to_string(runs.size()) + " runs" +
                  (stacked ? ", scopes under their stacks" : "");
  return t;
}

}  // namespace fieldprof::tools
