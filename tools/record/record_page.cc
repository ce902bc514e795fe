#include "tools/record/record_page.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "tools/page/page_kit.h"

namespace fieldprof::tools {
namespace {

using json = nlohmann::json;

// One time tree as the page answers ranges from it: the samples, the
// nodes (eight numbers each, see record.js) and the lists.
json TreeView(const TimeTree& tree, std::string name, std::string unit) {
  std::vector<double> times(tree.times().begin(), tree.times().end());
  std::vector<uint32_t> nodes;
  const std::vector<TimeTree::NodeView> views = tree.NodeViews();
  nodes.reserve(views.size() * 8);
  for (const TimeTree::NodeView& n : views) {
    nodes.insert(nodes.end(), {n.lo, n.hi, n.first_child, n.children, n.listed ? 1u : 0u,
                               n.list_begin, n.list_end, static_cast<uint32_t>(n.other)});
  }
  std::vector<uint32_t> lists;
  lists.reserve(tree.lists().size() * 2);
  for (const auto& [type, count] : tree.lists()) lists.insert(lists.end(), {type, count});
  return {{"name", std::move(name)},        {"unit", std::move(unit)},
          {"times", page::Base64Of(times)}, {"types", page::Base64Of(tree.types())},
          {"nodes", page::Base64Of(nodes)}, {"lists", page::Base64Of(lists)}};
}

}  // namespace

std::string RecordingPage(const Recording& r, const PageOptions& o) {
  json threads = json::array();
  for (const RecordedThread& t : r.threads) threads.push_back({{"pid", t.pid}, {"tid", t.tid}});
  json views = json::array();
  {
    json v = TreeView(r.tree, r.wall ? "wall-clock samples" : "CPU samples", "samples");
    std::vector<uint32_t> th, st;
    for (const auto& [thread, stack] : r.types) th.push_back(thread), st.push_back(stack);
    v["type_thread"] = th;
    v["type_stack"] = st;
    v["type_shown"] = std::vector<uint8_t>(r.types.size(), 1);
    v["rate"] = r.hz;
    views.push_back(std::move(v));
  }
  if (r.idle) {
    // Every direction shares the idle tree; each view shows one.
    std::vector<uint32_t> th, st;
    for (const IdleType& t : r.idle_types) th.push_back(t.thread), st.push_back(t.stack);
    const json base = TreeView(r.idle_tree, "", "");
    auto add = [&](IdleDirection d, const char* name, const char* unit) {
      json v = base;
      v["name"] = name;
      v["unit"] = unit;
      v["type_thread"] = th;
      v["type_stack"] = st;
      std::vector<uint8_t> shown;
      for (const IdleType& t : r.idle_types) shown.push_back(t.direction == d);
      v["type_shown"] = std::move(shown);
      views.push_back(std::move(v));
    };
    add(IdleDirection::kToIdle, "waits (to-idle: where threads left the CPU)", "waits");
    add(IdleDirection::kFromIdle, "wake-ups (from-idle: where threads came back)", "wake-ups");
    if (r.cpu_wide) {
      add(IdleDirection::kCpuIdleAfter, "a CPU went idle after (CPU-wide)", "CPU idles");
      add(IdleDirection::kCpuWokeInto, "a CPU left idle for (CPU-wide)", "CPU wake-ups");
    }
  }
  // The points' spans: [name, begin thread, thread, begin ns, end ns].
  json span_names = json::array(), spans = json::array();
  for (const SpanName& n : r.span_names) span_names.push_back({n.tag, n.segment, n.scope});
  for (const RecordedSpan& sp : r.spans) {
    spans.push_back({sp.name, sp.begin_thread, sp.thread, sp.begin_ns, sp.end_ns});
  }
  json marked = json::array();
  for (const auto& [frame, why] : o.marked) marked.push_back({frame, why});
  json field = json::array();
  for (const auto& [frame, cost] : o.field) field.push_back({frame, cost});
  const json data = {
      {"command", r.command},
      {"marked", std::move(marked)},
      {"field", std::move(field)},
      {"span_names", std::move(span_names)},
      {"spans", std::move(spans)},
      {"duration_ns", r.duration_ns},
      {"hz", r.hz},
      {"source", SampleSourceName(r.source)},
      {"processes", r.processes},
      {"threads", std::move(threads)},
      {"frames", r.frames},
      {"stacks", r.stacks},
      {"views", std::move(views)},
      {"initial",
       {{"from_ns", std::min(o.from_ns, r.duration_ns)},
        {"to_ns", std::min(o.to_ns, r.duration_ns)},
        {"tid", o.tid}}},
  };
  // An API that costs more than the field, marked where it sits.
  static constexpr char kCss[] =
      "#flame g.over-field rect { stroke: #c00; stroke-width: 2.5px; }\n"
      "#flame g.over-field text { font-weight: bold; }\n"
      "#functions tr.over-field td.name { color: #b00; font-weight: bold; }\n";
  return page::RenderPage("fieldprof record", "fieldprof record: " + r.command,
                          RecordPageFile("record.html")->body, kCss,
                          RecordPageFile("record.js")->body, data);
}

}  // namespace fieldprof::tools
