#include "tools/page/html_page.h"

#include <openssl/evp.h>

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "tools/cli/escape.h"
#include "tools/page/record_page_assets.h"

namespace fieldprof::local {
namespace {

using json = nlohmann::json;

// Little-endian arrays as base64: the page reads them into typed arrays.
template <typename T>
std::string Base64Of(const std::vector<T>& v) {
  static_assert(std::endian::native == std::endian::little);
  const auto* bytes = reinterpret_cast<const unsigned char*>(v.data());
  const size_t n = v.size() * sizeof(T);
  std::string out(4 * ((n + 2) / 3), '\0');
  auto* to = reinterpret_cast<unsigned char*>(out.data());
  constexpr size_t kChunk = 3 << 20;  // whole groups of three bytes, an int's worth
  for (size_t at = 0; at < n; at += kChunk) {
    const int len = static_cast<int>(std::min(kChunk, n - at));
    to += EVP_EncodeBlock(to, bytes + at, len);
  }
  return out;
}

// One time tree as the page answers ranges from it: the samples, the
// nodes (seven numbers each, see record.js) and the lists.
json TreeView(const TimeTree& tree, std::string name, std::string unit) {
  std::vector<double> times(tree.times().begin(), tree.times().end());
  std::vector<uint32_t> nodes;
  const std::vector<TimeTree::NodeView> views = tree.NodeViews();
  nodes.reserve(views.size() * 7);
  for (const TimeTree::NodeView& n : views) {
    nodes.insert(nodes.end(), {n.lo, n.hi, n.first_child, n.listed ? 1u : 0u, n.list_begin,
                               n.list_end, static_cast<uint32_t>(n.other)});
  }
  std::vector<uint32_t> lists;
  lists.reserve(tree.lists().size() * 2);
  for (const auto& [type, count] : tree.lists()) lists.insert(lists.end(), {type, count});
  return {{"name", std::move(name)},         {"unit", std::move(unit)},
          {"fanout", tree.options().fanout}, {"times", Base64Of(times)},
          {"types", Base64Of(tree.types())}, {"nodes", Base64Of(nodes)},
          {"lists", Base64Of(lists)}};
}

// The template with each {{NAME}} replaced, in one pass: what is put in
// is never searched again.
std::string Fill(std::string_view tmpl,
                 const std::vector<std::pair<std::string_view, std::string_view>>& with) {
  std::string out;
  while (!tmpl.empty()) {
    const size_t at = tmpl.find("{{");
    out += tmpl.substr(0, at);
    if (at == std::string_view::npos) break;
    tmpl.remove_prefix(at);
    const size_t end = tmpl.find("}}");
    const std::string_view name = tmpl.substr(2, end == std::string_view::npos ? 0 : end - 2);
    auto it =
        std::find_if(with.begin(), with.end(), [&](const auto& p) { return p.first == name; });
    if (it == with.end()) {
      out += "{{";
      tmpl.remove_prefix(2);
      continue;
    }
    out += it->second;
    tmpl.remove_prefix(end + 2);
  }
  return out;
}

// JSON to put inside <script>: there "</" could end the element early,
// and JSON lets it be written "<\/". Names are the program's, not ours to
// trust.
std::string ScriptJson(const json& data) {
  const std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string safe;
  safe.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    safe += text[i];
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') safe += '\\';
  }
  return safe;
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
  const json data = {
      {"command", r.command},
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
  const std::string safe = ScriptJson(data);
  const page::UiFile* html = page::FindUiFile("record.html");
  const page::UiFile* css = page::FindUiFile("record.css");
  const page::UiFile* js = page::FindUiFile("record.js");
  const std::string title = tools::HtmlEscape("fieldprof record: " + r.command);
  return Fill(html->body, {{"TITLE", title}, {"CSS", css->body}, {"JS", js->body}, {"DATA", safe}});
}

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
  const page::UiFile* html = page::FindUiFile("tree.html");
  const page::UiFile* css = page::FindUiFile("record.css");
  const page::UiFile* js = page::FindUiFile("tree.js");
  const std::string title = tools::HtmlEscape("fieldprof tree: " + t.description);
  return Fill(html->body,
              {{"TITLE", title}, {"CSS", css->body}, {"JS", js->body}, {"DATA", ScriptJson(data)}});
}

std::string PointsPage(const std::vector<PointsRun>& runs, const std::vector<TagReport>& tags) {
  const json data = json::parse(PointsJson(runs, tags));
  const page::UiFile* html = page::FindUiFile("points.html");
  const page::UiFile* css = page::FindUiFile("record.css");
  const page::UiFile* js = page::FindUiFile("points.js");
  const page::UiFile* common = page::FindUiFile("points_common.js");
  const std::string title = tools::HtmlEscape(
      "fieldprof points: " + (runs.empty() ? std::string("no runs") : runs[0].program));
  return Fill(html->body, {{"TITLE", title},
                           {"CSS", css->body},
                           {"COMMON", common->body},
                           {"JS", js->body},
                           {"DATA", ScriptJson(data)}});
}

namespace {

// A group as the comparison page names it: where from, its runs and
// programs, and per tag the runs removed as dirty.
json GroupJson(const PointsGroup& g) {
  json removed = json::object();
  for (const TagReport& t : g.tags) {
    if (!t.removed.empty()) removed[t.tag] = t.removed.size();
  }
  return {
      {"name", g.name}, {"runs", g.runs.size()}, {"programs", ProgramsOf(g)}, {"removed", removed}};
}

}  // namespace

std::string PointsComparePage(const PointsGroup& a, const PointsGroup& b,
                              const std::vector<SegmentChange>& rows, const CompareOptions& o) {
  json values = json::array();
  for (const SegmentChange& r : rows) values.push_back({{"a", r.values_a}, {"b", r.values_b}});
  const json data = {{"a", GroupJson(a)},
                     {"b", GroupJson(b)},
                     {"fdr", o.fdr},
                     {"min_effect", o.min_effect},
                     {"rows", json::parse(CompareJson(rows))},
                     {"values", values},
                     {"only_a", SegmentsOnlyIn(a.tags, b.tags)},
                     {"only_b", SegmentsOnlyIn(b.tags, a.tags)}};
  const page::UiFile* html = page::FindUiFile("points_compare.html");
  const page::UiFile* css = page::FindUiFile("record.css");
  const page::UiFile* js = page::FindUiFile("points_compare.js");
  const page::UiFile* common = page::FindUiFile("points_common.js");
  const std::string title =
      tools::HtmlEscape("fieldprof points compare: " + a.name + " vs " + b.name);
  return Fill(html->body, {{"TITLE", title},
                           {"CSS", css->body},
                           {"COMMON", common->body},
                           {"JS", js->body},
                           {"DATA", ScriptJson(data)}});
}

}  // namespace fieldprof::local
