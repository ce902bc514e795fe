#include "tools/record/record_show.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/base/durable_file.h"
#include "common/settings/options.h"
#include "common/snapshot/snapshot_cache.h"
#include "tools/record/field_marks.h"
#include "tools/record/idle_report.h"
#include "tools/record/pprof_export.h"
#include "tools/record/record_page.h"
#include "tools/record/record_raw.h"
#include "tools/record/recording.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"

namespace fieldprof::tools {
namespace {

// A call-tree node: children by frame, samples in it and below.
struct TreeNode {
  uint64_t total = 0, self = 0;
  std::map<uint32_t, TreeNode> children;
};

// How lines are coloured: by self share of the hottest line.
struct Paint {
  bool color = false, truecolor = false;
  uint64_t hottest = 1;
  const std::map<uint32_t, tools::FieldMark>* marks = nullptr;  // --check
  const std::map<uint32_t, std::string>* field = nullptr;       // --field
  // A frame `check` found costing more than the field: its note after
  // the line, in red when coloured.
  std::string Mark(uint32_t frame) const {
    std::string out;
    if (field != nullptr) {
      if (auto it = field->find(frame); it != field->end()) {
        out = color ? "  \033[2m[" + it->second + "]\033[0m" : "  [" + it->second + "]";
      }
    }
    if (marks == nullptr) return out;
    auto it = marks->find(frame);
    if (it == marks->end()) return out;
    const std::string note = "  <-- " + it->second.note;
    return out + (color ? "\033[1;31m" + note + "\033[0m" : note);
  }
  std::string operator()(const std::string& line, uint64_t self) const {
    return HeatText(line, static_cast<double>(self) / static_cast<double>(hottest), color,
                    truecolor);
  }
};

uint64_t HottestSelf(const TreeNode& node) {
  uint64_t most = node.self;
  for (const auto& [f, c] : node.children) most = std::max(most, HottestSelf(c));
  return most;
}

void PrintTree(const Recording& r, const TreeNode& node, uint64_t all, double min_share,
               const std::string& indent, const Paint& paint) {
  std::vector<std::pair<uint32_t, const TreeNode*>> kids;
  for (const auto& [f, c] : node.children) kids.emplace_back(f, &c);
  std::sort(kids.begin(), kids.end(),
            [](const auto& a, const auto& b) { return a.second->total > b.second->total; });
  for (const auto& [f, c] : kids) {
    const double share = static_cast<double>(c->total) / static_cast<double>(all);
    if (share < min_share) continue;
    char cols[32];
    std::snprintf(cols, sizeof cols, "%6.2f%% %6.2f%% ", 100 * share,
                  100 * static_cast<double>(c->self) / static_cast<double>(all));
    std::printf("%s%s\n", paint(cols + indent + r.frames[f], c->self).c_str(),
                paint.Mark(f).c_str());
    PrintTree(r, *c, all, min_share, indent + "  ", paint);
  }
}

// The range's samples as Chrome trace events (Perfetto UI,
// chrome://tracing). Each sample of a thread stands for the time before
// it since the thread's previous one (its weight: CPU time, or wall time
// with --wall), so it covers [time - weight, time]. Per thread, a frame
// begins where the first sample whose stack holds it at that depth
// begins, and ends where the first that does not begins, or where the
// last one ends when the next begins later (the thread was not running):
// each frame's slices add up to the time its samples stand for.
std::string ChromeTrace(const Recording& r, uint64_t t1, uint64_t t2, int64_t thread) {
  const std::vector<uint64_t>& times = r.tree.times();
  const std::vector<uint32_t>& types = r.tree.types();
  const size_t lo = std::lower_bound(times.begin(), times.end(), t1) - times.begin();
  const size_t hi = std::upper_bound(times.begin(), times.end(), t2) - times.begin();
  struct Open {
    std::vector<uint32_t> frames;
    uint64_t end = 0;  // where the thread's last sample ended
  };
  std::map<uint32_t, Open> open;  // by thread index
  nlohmann::json events = nlohmann::json::array();
  auto event = [&](uint32_t th, uint32_t frame, const char* ph, uint64_t at) {
    events.push_back({{"name", r.frames[frame]},
                      {"ph", ph},
                      {"ts", static_cast<double>(at) / 1000},
                      {"pid", r.threads[th].pid},
                      {"tid", r.threads[th].tid}});
  };
  auto close = [&](uint32_t th, Open& o, size_t keep, uint64_t at) {
    for (; o.frames.size() > keep; o.frames.pop_back()) event(th, o.frames.back(), "E", at);
  };
  for (size_t i = lo; i < hi; ++i) {
    const auto [th, stack] = r.types[types[i]];
    if (thread != 0 && r.threads[th].tid != static_cast<uint32_t>(thread)) continue;
    Open& o = open[th];
    const uint64_t weight = tools::SampleNs(r, i);
    uint64_t begin = times[i] > weight ? times[i] - weight : 0;
    begin = std::max(begin, o.end);
    // Timers fire a little late or early: a gap under half the sample's
    // weight (or 50 us) is the same stretch of running.
    if (!o.frames.empty() && begin > o.end + std::max<uint64_t>(weight / 2, 50000)) {
      close(th, o, 0, o.end);
    } else if (!o.frames.empty()) {
      begin = o.end;
    }
    const std::vector<uint32_t>& now = r.stacks[stack];
    size_t same = 0;
    while (same < o.frames.size() && same < now.size() && o.frames[same] == now[same]) ++same;
    close(th, o, same, begin);
    for (size_t d = same; d < now.size(); ++d) {
      event(th, now[d], "B", begin);
      o.frames.push_back(now[d]);
    }
    o.end = std::max(times[i], begin);
  }
  for (auto& [th, o] : open) close(th, o, 0, o.end);
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

// The range as a pprof profile: samples (count, and CPU time at the
// period), or with `idle` the waits (to-idle count, off-CPU time).
int WritePprof(const Recording& r, uint64_t t1, uint64_t t2, uint32_t tid, bool idle,
               const std::map<uint32_t, tools::FieldMark>& marks, const std::string& path) {
  tools::PprofProfile p;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<int64_t>> by;  // (stack, tid)
  if (idle) {
    p.value_types = {{"waits", "count"}, {"off_cpu", "nanoseconds"}};
    p.period_type = {"waits", "count"};
    p.period = 1;
    const auto& times = r.idle_tree.times();
    const auto& types = r.idle_tree.types();
    const size_t lo = std::lower_bound(times.begin(), times.end(), t1) - times.begin();
    const size_t hi = std::upper_bound(times.begin(), times.end(), t2) - times.begin();
    for (size_t i = lo; i < hi; ++i) {
      const tools::IdleType& t = r.idle_types[types[i]];
      const uint32_t thread_tid = r.threads[t.thread].tid;
      if (t.direction != tools::IdleDirection::kToIdle || (tid != 0 && thread_tid != tid)) continue;
      auto& v = by[{t.stack, thread_tid}];
      v.resize(2);
      v[0] += 1;
      v[1] += static_cast<int64_t>(r.idle_off_ns[i]);
    }
  } else {
    const int64_t period = r.hz > 0 ? 1000000000 / r.hz : 0;
    p.value_types = {{"samples", "count"}, {r.wall ? "wall" : "cpu", "nanoseconds"}};
    p.period_type = {r.wall ? "wall" : "cpu", "nanoseconds"};
    p.period = period;
    for (const auto& [type, total] : tools::SampleTotalsByType(r, t1, t2)) {
      const auto [th, stack] = r.types[type];
      if (tid != 0 && r.threads[th].tid != tid) continue;
      auto& v = by[{stack, r.threads[th].tid}];
      v.resize(2);
      v[0] += static_cast<int64_t>(total.samples);
      v[1] += static_cast<int64_t>(total.ns);  // what each sample stood for
    }
  }
  for (auto& [key, values] : by) p.samples.push_back({key.first, key.second, std::move(values)});
  // Each stack through an API that costs more than the field: its label.
  if (!marks.empty()) {
    p.stack_labels.resize(r.stacks.size());
    for (size_t s = 0; s < r.stacks.size(); ++s) {
      for (uint32_t f : r.stacks[s]) {
        auto it = marks.find(f);
        if (it == marks.end()) continue;
        std::string& l = p.stack_labels[s];
        if (l.find(it->second.symbol) == std::string::npos) {
          l += (l.empty() ? "" : ",") + it->second.symbol;
        }
      }
    }
  }
  p.duration_ns =
      static_cast<int64_t>(std::min<uint64_t>(t2, r.duration_ns) - std::min(t1, r.duration_ns));
  p.comments.push_back("fieldprof record: " + r.command);
  StatusOr<std::string> bytes = tools::EncodePprof(r, p);
  Status w = bytes.ok() ? WriteFileDurably(path, *bytes, FileAccess::kShared) : bytes.status();
  if (!w.ok()) {
    std::cerr << "fieldprof record show: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "fieldprof record show: %s written: %zu stacks (go tool pprof -top %s)\n",
               path.c_str(), p.samples.size(), path.c_str());
  return 0;
}

int WritePage(const Recording& r, uint64_t t1, uint64_t t2, uint32_t tid,
              const std::map<uint32_t, tools::FieldMark>& marks,
              const std::map<uint32_t, std::string>& costs, const std::string& path) {
  tools::PageOptions o;
  o.from_ns = t1;
  o.to_ns = t2;
  o.tid = tid;
  for (const auto& [frame, m] : marks) o.marked[frame] = m.symbol + ": " + m.note;
  o.field = costs;
  const std::string page = tools::RecordingPage(r, o);
  if (Status w = WriteFileDurably(path, page, FileAccess::kShared); !w.ok()) {
    std::cerr << "fieldprof record show: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "fieldprof record show: %s written (%s): open it in a browser\n",
               path.c_str(), FormatBytes(static_cast<double>(page.size())).c_str());
  return 0;
}

// Samples per stack in the range counted in `c`, of `thread` (0: all);
// `all`: their sum.
std::map<uint32_t, uint64_t> SamplesByStack(const Recording& r, const RangeCounts& c,
                                            int64_t thread, uint64_t* all) {
  std::map<uint32_t, uint64_t> by_stack;
  *all = 0;
  for (const auto& [type, count] : c.by_type) {
    const auto [th, stack] = r.types[type];
    if (thread != 0 && r.threads[th].tid != static_cast<uint32_t>(thread)) continue;
    by_stack[stack] += count;
    *all += count;
  }
  return by_stack;
}

// "a;b;c COUNT", a line per stack (flamegraph.pl, speedscope).
void PrintCollapsed(const Recording& r, const std::map<uint32_t, uint64_t>& by_stack) {
  for (const auto& [stack, count] : by_stack) {
    std::string line;
    for (uint32_t f : r.stacks[stack]) line += (line.empty() ? "" : ";") + r.frames[f];
    std::printf("%s %llu\n", line.c_str(), static_cast<unsigned long long>(count));
  }
}

// The functions by self samples, with their total.
void PrintBottomUp(const Recording& r, const std::map<uint32_t, uint64_t>& by_stack, uint64_t all,
                   double min_share, const std::string& color,
                   const std::map<uint32_t, tools::FieldMark>* marks,
                   const std::map<uint32_t, std::string>* field) {
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> fn;  // frame -> (self, total)
  for (const auto& [stack, count] : by_stack) {
    const auto& frames = r.stacks[stack];
    if (frames.empty()) continue;
    fn[frames.back()].first += count;
    std::vector<uint32_t> seen(frames.begin(), frames.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (uint32_t f : seen) fn[f].second += count;
  }
  std::vector<std::pair<uint32_t, std::pair<uint64_t, uint64_t>>> rows(fn.begin(), fn.end());
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  if (rows.empty()) return;
  Paint paint{ColorWanted(color), TrueColor(), std::max<uint64_t>(1, rows.front().second.first),
              marks, field};
  std::printf("  self   total  function\n");
  for (const auto& [f, st] : rows) {
    if (static_cast<double>(st.second) / static_cast<double>(all) < min_share) continue;
    char cols[32];
    std::snprintf(cols, sizeof cols, "%6.2f%% %6.2f%% ", 100 * static_cast<double>(st.first) / all,
                  100 * static_cast<double>(st.second) / all);
    std::printf("%s%s\n", paint(cols + r.frames[f], st.first).c_str(), paint.Mark(f).c_str());
  }
}

// The call tree, top-down, with total and self shares.
// `other`: the range's samples in the time tree's "other", a line of their
// own under the tree, so that the top lines and it make 100%.
void PrintTopDown(const Recording& r, const std::map<uint32_t, uint64_t>& by_stack, uint64_t all,
                  uint64_t other, double min_share, const std::string& color,
                  const std::map<uint32_t, tools::FieldMark>* marks,
                  const std::map<uint32_t, std::string>* field) {
  TreeNode root;
  for (const auto& [stack, count] : by_stack) {
    TreeNode* node = &root;
    node->total += count;
    for (uint32_t f : r.stacks[stack]) {
      node = &node->children[f];
      node->total += count;
    }
    node->self += count;
  }
  std::printf(" total    self  call tree (top-down)\n");
  const Paint paint{ColorWanted(color), TrueColor(), std::max<uint64_t>(1, HottestSelf(root)),
                    marks, field};
  PrintTree(r, root, all, min_share, "", paint);
  if (other > 0) {
    const double share = 100 * static_cast<double>(other) / static_cast<double>(all);
    std::printf("%6.2f%% %6.2f%% [other: stacks not listed]\n", share, share);
  }
}

// The range's header and, when "other" holds samples, the bound: what the
// shares below leave out (`top`: the most frequent stacks asked for). `in_range` counts the samples
// the shares are over: every thread's, or `thread`'s alone (counted
// exactly: "other" cannot be told apart by thread).
void PrintRangeHeader(const std::string& file, const Recording& r, const RangeCounts& c,
                      uint64_t in_range, double from, double to, int64_t thread, uint32_t top) {
  const double end = to < 0 ? static_cast<double>(r.duration_ns) / 1e9 : to;
  const double duration = static_cast<double>(r.duration_ns) / 1e9;
  if (thread != 0) {
    std::printf(
        "%s: %s, %llu samples of thread %lld in [%.3f s, %.3f s] of %.3f s (%llu of every "
        "thread); counted exactly\n",
        file.c_str(), r.command.c_str(), static_cast<unsigned long long>(in_range),
        static_cast<long long>(thread), from, end, duration,
        static_cast<unsigned long long>(c.samples));
    return;
  }
  std::printf("%s: %s, %llu samples in [%.3f s, %.3f s] of %.3f s\n", file.c_str(),
              r.command.c_str(), static_cast<unsigned long long>(c.samples), from, end, duration);
  if (c.other > 0) {
    const double points =
        100 * static_cast<double>(c.other) / static_cast<double>(std::max<uint64_t>(1, c.samples));
    std::printf(
        "bound: %llu of these %llu samples (%.1f%%) are in \"other\", stacks left out by the\n"
        "       time tree's lists%s (none with more than %llu samples). Each share\n"
        "       below is exact or short of the true share by at most %.1f points; one\n"
        "       stack's count, by at most %llu samples (--exact counts every sample)\n",
        static_cast<unsigned long long>(c.other), static_cast<unsigned long long>(c.samples),
        points, top > 0 ? (" and --top " + std::to_string(top)).c_str() : "",
        static_cast<unsigned long long>(c.other_at_most), points,
        static_cast<unsigned long long>(c.bound));
  }
}

// Where threads waited, coloured as asked.
std::string IdleText(const Recording& r, tools::IdleReportOptions io, const std::string& color) {
  io.color = ColorWanted(color);
  io.truecolor = TrueColor();
  return tools::IdleReport(r, io);
}

// The points' segments and scopes with an occurrence beginning in [t1,
// t2] (of `thread`, 0: all): per tag and segment, how many, and their
// total, mean, least and most.
void PrintPoints(const std::string& file, const Recording& r, uint64_t t1, uint64_t t2,
                 int64_t thread, bool json) {
  struct Row {
    uint64_t count = 0, total = 0, least = UINT64_MAX, most = 0;
    std::set<uint32_t> tids;
  };
  std::map<uint32_t, Row> rows;  // by name
  for (const tools::RecordedSpan& sp : r.spans) {
    if (sp.begin_ns < t1 || sp.begin_ns > t2) continue;
    const uint32_t tid = r.threads[sp.thread].tid;
    if (thread != 0 && tid != static_cast<uint32_t>(thread)) continue;
    Row& row = rows[sp.name];
    const uint64_t ns = sp.end_ns - sp.begin_ns;
    ++row.count;
    row.total += ns;
    row.least = std::min(row.least, ns);
    row.most = std::max(row.most, ns);
    row.tids.insert(tid);
  }
  if (json) {  // every occurrence, to the nanosecond
    nlohmann::json out = nlohmann::json::array();
    std::map<uint32_t, size_t> at;
    for (const tools::RecordedSpan& sp : r.spans) {
      if (sp.begin_ns < t1 || sp.begin_ns > t2 || rows.count(sp.name) == 0) continue;
      const uint32_t tid = r.threads[sp.thread].tid;
      if (thread != 0 && tid != static_cast<uint32_t>(thread)) continue;
      auto [it, fresh] = at.try_emplace(sp.name, out.size());
      if (fresh) {
        const tools::SpanName& n = r.span_names[sp.name];
        out.push_back({{"tag", n.tag},
                       {"segment", n.segment},
                       {"scope", n.scope},
                       {"count", rows[sp.name].count},
                       {"total_ns", rows[sp.name].total},
                       {"occurrences", nlohmann::json::array()}});
      }
      out[it->second]["occurrences"].push_back({{"tid", tid},
                                                {"begin_tid", r.threads[sp.begin_thread].tid},
                                                {"begin_ns", sp.begin_ns},
                                                {"end_ns", sp.end_ns}});
    }
    std::cout << out.dump(1) << "\n";
    return;
  }
  std::printf(
      "%s: %s, %zu segments and scopes of the program's points%s\n", file.c_str(),
      r.command.c_str(), rows.size(),
      r.points_lost > 0 ? (" (" + std::to_string(r.points_lost) + " events lost)").c_str() : "");
  if (rows.empty()) {
    std::printf(r.span_names.empty()
                    ? "the program passed no points (<fieldprof/points.h>: FP_POINT, FP_SCOPE)\n"
                    : "none begins in this range\n");
    return;
  }
  std::printf("%-12s %-28s %7s %11s %11s %11s %11s  %s\n", "tag", "segment", "count", "total",
              "mean", "min", "max", "threads");
  for (const auto& [name, row] : rows) {
    const tools::SpanName& n = r.span_names[name];
    std::string tids;
    for (uint32_t tid : row.tids) tids += (tids.empty() ? "" : ",") + std::to_string(tid);
    std::printf(
        "%-12s %-28s %7llu %11s %11s %11s %11s  %s\n", n.tag.c_str(), n.segment.c_str(),
        static_cast<unsigned long long>(row.count),
        FormatNanos(static_cast<double>(row.total)).c_str(),
        FormatNanos(static_cast<double>(row.total) / static_cast<double>(row.count)).c_str(),
        FormatNanos(static_cast<double>(row.least)).c_str(),
        FormatNanos(static_cast<double>(row.most)).c_str(), tids.c_str());
  }
  std::printf("(record show --during TAG:SEGMENT: the samples inside one)\n");
}

// The span names `during` (TAG:SEGMENT, a scope also by its bare name)
// picks, or a usage error listing them.
StatusOr<std::vector<uint32_t>> SpansNamed(const Recording& r, const std::string& during) {
  const size_t colon = during.find(':');
  if (colon == std::string::npos) {
    return InvalidArgument(
        "--during takes TAG:SEGMENT (work:parse, \"work:begin -> end\"), not \"" + during + "\"");
  }
  const std::string tag = during.substr(0, colon), seg = during.substr(colon + 1);
  std::vector<uint32_t> out;
  std::string known;
  for (uint32_t i = 0; i < r.span_names.size(); ++i) {
    const tools::SpanName& n = r.span_names[i];
    if (n.tag == tag && (n.segment == seg || (n.scope && n.segment == seg + " (scope)"))) {
      out.push_back(i);
    }
    known += "\n  " + n.tag + ":" + n.segment;
  }
  if (out.empty()) {
    return NotFound("no segment or scope " + during + " in the recording" +
                    (known.empty() ? std::string(" (it has no points)") : "; it has:" + known));
  }
  return out;
}

// The samples inside every occurrence of `names`, as the call tree.
int PrintDuring(const std::string& file, const Recording& r, const std::vector<uint32_t>& names,
                const std::map<uint32_t, tools::FieldMark>* marks,
                const std::map<uint32_t, std::string>* field, bool collapsed, bool bottom_up,
                double min_share, const std::string& color) {
  std::map<uint32_t, uint64_t> by_stack;
  uint64_t all = 0, count = 0, ns = 0;
  for (uint32_t name : names) {
    for (const auto& [type, n] : tools::SamplesDuring(r, name)) {
      by_stack[r.types[type].second] += n;
      all += n;
    }
    for (const tools::RecordedSpan& sp : r.spans) {
      if (sp.name != name) continue;
      ++count;
      ns += sp.end_ns - sp.begin_ns;
    }
  }
  if (collapsed) {
    PrintCollapsed(r, by_stack);
    return 0;
  }
  const tools::SpanName& n = r.span_names[names.front()];
  std::printf("%s: %s, %llu samples during %s:%s: %llu occurrence%s, %s in all; counted exactly\n",
              file.c_str(), r.command.c_str(), static_cast<unsigned long long>(all), n.tag.c_str(),
              n.segment.c_str(), static_cast<unsigned long long>(count), count == 1 ? "" : "s",
              FormatNanos(static_cast<double>(ns)).c_str());
  if (all == 0) {
    std::printf("no samples inside it\n");
    return 0;
  }
  if (bottom_up) {
    PrintBottomUp(r, by_stack, all, min_share / 100, color, marks, field);
  } else {
    PrintTopDown(r, by_stack, all, 0, min_share / 100, color, marks, field);
  }
  return 0;
}

// What `record show` was asked.
struct ShowArgs {
  std::string file;
  double from = 0, to = -1, min_share = 0.5;
  std::string color = "auto";
  int64_t thread = 0, top = 1000;
  bool collapsed = false, exact = false, bottom_up = false, chrome = false, idle = false;
  bool points = false, json = false, field = false;
  std::string during, check, cache_dir = DefaultSnapshotCacheDir();
  std::string pprof_out, html_out;

  uint64_t t1() const { return static_cast<uint64_t>(std::llround(from * 1e9)); }
  uint64_t t2() const {
    return to < 0 ? UINT64_MAX : static_cast<uint64_t>(std::llround(to * 1e9));
  }
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseShowArgs(int argc, char** argv, ShowArgs* a) {
  OptionTable t("fieldprof record show",
                "A recording's samples in a time range as a call tree: total and self shares,\n"
                "top-down (or the functions by self time with --bottom_up), or as collapsed\n"
                "stacks for flamegraph.pl and speedscope. The range is answered from the time\n"
                "tree, its most frequent stacks listed (--top); what the tree's lists and the\n"
                "top left out is one \"other\" of exact size, stated as the bound (--exact counts\n"
                "every stack). Shares are over every sample of the range; with --thread, over\n"
                "that thread's, counted exactly.\n\n"
                "  fieldprof record show prog.fprec --from 2 --to 3.5 --thread 4242");
  t.AddDouble("from", &a->from, "from this many seconds after the start", 0, 1e9);
  t.AddDouble("to", &a->to, "to this many seconds after the start (default: the end)", -1, 1e9);
  t.AddInt("thread", &a->thread, "only this thread id (0: all)", 0, INT32_MAX);
  t.AddBool("collapsed", &a->collapsed, "collapsed stacks, one \"a;b;c COUNT\" line each (exact)");
  t.AddBool("chrome_trace", &a->chrome,
            "Chrome trace event JSON, a slice per frame (Perfetto UI, chrome://tracing)");
  t.AddString("pprof", &a->pprof_out,
              "write the range as a gzipped pprof profile to this file, for go tool pprof "
              "(with --idle: waits and off-CPU time)");
  t.AddString("html", &a->html_out,
              "write a self-contained page to this file: a timeline of samples per thread, and "
              "a flame graph of the range dragged on it, answered from the time tree (opens at "
              "--from/--to/--thread)");
  t.AddBool("exact", &a->exact, "every stack, counted exactly (--top is then not used)");
  t.AddInt("top", &a->top,
           "list the range's N most frequent stacks (a stack of each thread), the rest as "
           "\"other\" (0: every stack the tree's lists hold)",
           0, 1 << 24);
  t.AddBool("bottom_up", &a->bottom_up, "the functions by self samples, with their total");
  t.AddDouble("min_percent", &a->min_share, "hide call-tree nodes under this share (%)", 0, 100);
  t.AddString("color", &a->color,
              "the lab's heat colours, by self share (blue cold .. red hot): auto, always, never");
  t.AddBool("points", &a->points,
            "the program's points: per segment and scope, its occurrences and their times");
  t.AddBool("json", &a->json, "with --points: every occurrence as JSON, times in ns");
  t.AddBool("field", &a->field,
            "after each API frame, what the field says it costs (p50 and p99 a call, calls a "
            "run) from the snapshot cache; the page shows it in its tooltips whenever the cache "
            "has a snapshot");
  t.AddString("cache", &a->cache_dir, "the snapshot cache (fieldprof pull)");
  t.AddString("check", &a->check,
              "mark the APIs this report of `fieldprof check --json` found costing more than the "
              "field, where they sit in the stacks: in the tree, on the page (--html) and as the "
              "pprof label over_field (--pprof)");
  t.AddString("during", &a->during,
              "the samples taken inside every occurrence of a segment or scope, TAG:SEGMENT "
              "(work:parse, \"work:begin -> end\"): of its thread, or of its process's threads "
              "when it began on another; counted exactly");
  t.AddBool("idle", &a->idle,
            "where threads waited: to-idle and from-idle counts and off-CPU ms per call path "
            "(with --collapsed: off-CPU microseconds)");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && t.positional().size() != 1) s = InvalidArgument("give one recording file");
  if (s.ok() && a->to >= 0 && a->to < a->from) s = InvalidArgument("--to is before --from");
  if (s.ok() && a->color != "auto" && a->color != "always" && a->color != "never") {
    s = InvalidArgument("--color is auto, always or never, not \"" + a->color + "\"");
  }
  if (!s.ok()) return UsageError(t, s);
  a->file = t.positional()[0];
  return std::nullopt;
}

// The field on the profile: the APIs a check found costing more (--check),
// and each API frame's field cost (for the text with --field, for the page
// whenever the cache has a snapshot).
struct FieldOnProfile {
  std::map<uint32_t, tools::FieldMark> marks;
  std::map<uint32_t, std::string> costs;
  const std::map<uint32_t, tools::FieldMark>* marked = nullptr;  // null: no --check
  const std::map<uint32_t, std::string>* shown = nullptr;        // null: no --field
};

// The field's marks and costs for `r` as `a` asks; an error of --check's
// report (the field's costs are shown when they can be, and said otherwise).
Status LoadFieldOnProfile(const Recording& r, const ShowArgs& a, FieldOnProfile* f) {
  if (!a.check.empty()) {
    StatusOr<std::map<uint32_t, tools::FieldMark>> m = tools::FieldMarksFromCheck(r, a.check);
    if (!m.ok()) return m.status().WithContext("--check");
    f->marks = std::move(*m);
    f->marked = &f->marks;
    std::fprintf(stderr,
                 "fieldprof record show: %zu frame%s of APIs that cost more than the field%s\n",
                 f->marks.size(), f->marks.size() == 1 ? "" : "s",
                 f->marks.empty() ? " (none of the report's APIs is in the recording)" : "");
  }
  if (a.field || !a.html_out.empty()) {
    StatusOr<std::map<uint32_t, std::string>> c = tools::FieldCostsOfFrames(r, a.cache_dir);
    if (c.ok()) {
      f->costs = std::move(*c);
    } else if (a.field) {
      std::cerr << "fieldprof record show: --field: " << c.status().message() << "\n";
    }
  }
  if (a.field) f->shown = &f->costs;
  return Status::Ok();
}

// The range's samples as a call tree (or collapsed stacks).
int PrintRange(const Recording& r, const ShowArgs& a, const FieldOnProfile& f) {
  const uint64_t t1 = a.t1(), t2 = a.t2();
  // One thread's range is counted exactly: the tree's "other" has no
  // thread, so its bound could not be stated over the thread's samples.
  tools::RangeQuery query;
  query.exact = a.exact || a.collapsed || a.thread != 0;
  query.top = static_cast<uint32_t>(a.top);
  const RangeCounts c = r.tree.Range(t1, t2, query);
  uint64_t listed = 0;
  const std::map<uint32_t, uint64_t> by_stack = SamplesByStack(r, c, a.thread, &listed);
  if (a.collapsed) {
    PrintCollapsed(r, by_stack);
    return 0;
  }
  // Shares are over the range's samples (the thread's), "other" included.
  const uint64_t in_range = a.thread != 0 ? listed : c.samples;
  // --top named only when it left stacks out.
  const bool cut = !query.exact && query.top > 0 && c.by_type.size() >= query.top;
  PrintRangeHeader(a.file, r, c, in_range, a.from, a.to, a.thread, cut ? query.top : 0);
  if (in_range == 0) {
    std::printf("no samples in this range\n");
    return 0;
  }
  if (a.bottom_up) {
    PrintBottomUp(r, by_stack, in_range, a.min_share / 100, a.color, f.marked, f.shown);
  } else {
    PrintTopDown(r, by_stack, in_range, a.thread != 0 ? 0 : c.other, a.min_share / 100, a.color,
                 f.marked, f.shown);
  }
  return 0;
}

}  // namespace

int RecordShow(int argc, char** argv) {
  ShowArgs a;
  if (const ExitCode done = ParseShowArgs(argc, argv, &a)) return *done;
  StatusOr<Recording> r = LoadForShow(a.file);
  if (!r.ok()) {
    std::cerr << "fieldprof record show: " << a.file << ": " << r.status().message() << "\n";
    return 1;
  }
  // The report record --check left beside the recording, unless another
  // is named.
  if (const std::string beside = a.file + ".check.json";
      a.check.empty() && access(beside.c_str(), R_OK) == 0) {
    a.check = beside;
  }
  FieldOnProfile f;
  if (Status s = LoadFieldOnProfile(*r, a, &f); !s.ok()) {
    std::cerr << "fieldprof record show: " << s.message() << "\n";
    return 2;
  }
  const uint64_t t1 = a.t1(), t2 = a.t2();
  const uint32_t tid = static_cast<uint32_t>(a.thread);
  if (a.chrome) {
    std::cout << ChromeTrace(*r, t1, t2, a.thread);
    return 0;
  }
  if (a.points) {
    PrintPoints(a.file, *r, t1, t2, a.thread, a.json);
    return 0;
  }
  if (!a.during.empty()) {
    StatusOr<std::vector<uint32_t>> names = SpansNamed(*r, a.during);
    if (!names.ok()) {
      std::cerr << "fieldprof record show: " << names.status().message() << "\n";
      return 2;
    }
    return PrintDuring(a.file, *r, *names, f.marked, f.shown, a.collapsed, a.bottom_up, a.min_share,
                       a.color);
  }
  if (!a.html_out.empty()) return WritePage(*r, t1, t2, tid, f.marks, f.costs, a.html_out);
  if (!a.pprof_out.empty()) return WritePprof(*r, t1, t2, tid, a.idle, f.marks, a.pprof_out);
  if (a.idle) {
    tools::IdleReportOptions io;
    io.from_ns = t1;
    io.to_ns = t2;
    io.tid = tid;
    io.min_share = a.min_share / 100;
    io.collapsed = a.collapsed;
    std::cout << IdleText(*r, io, a.color);
    return 0;
  }
  return PrintRange(*r, a, f);
}

}  // namespace fieldprof::tools
