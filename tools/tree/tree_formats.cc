#include "tools/tree/tree_formats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fieldprof::tools {

StatusOr<CallTree> CallTreeFromCollapsed(std::string_view text, Metric m) {
  CallTree t;
  size_t line_no = 0;
  std::vector<std::string_view> frames;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    const std::string_view stack = space == std::string_view::npos ? "" : line.substr(0, space);
    const std::string_view count = space == std::string_view::npos ? "" : line.substr(space + 1);
    int64_t v = 0;
    bool ok = !count.empty() && !stack.empty() && count.size() <= 18;
    for (char ch : count) {
      if (ch < '0' || ch > '9') {
        ok = false;
        break;
      }
      v = v * 10 + (ch - '0');
    }
    if (!ok) {
      return InvalidArgument("line " + std::to_string(line_no) +
                             ": not \"frame;frame;... COUNT\" (collapsed stacks)");
    }
    frames.clear();
    for (size_t start = 0; start <= stack.size();) {
      const size_t semi = stack.find(';', start);
      const size_t end = semi == std::string_view::npos ? stack.size() : semi;
      if (end > start) frames.push_back(stack.substr(start, end - start));
      start = end + 1;
    }
    t.Add(t.AddPath(frames), m, v);
  }
  t.set_metrics(Bit(m));
  t.description = "collapsed stacks";
  return t;
}

namespace {

struct Span {
  int64_t begin = 0, end = 0;  // ns
  size_t order = 0;            // in the file, for ties
  std::string name;
};

int64_t Ns(const nlohmann::json& v) {
  return static_cast<int64_t>(std::llround(v.get<double>() * 1000.0));
}

// A trace's threads, by (pid, tid).
using Thread = std::pair<int64_t, int64_t>;
struct TraceThreads {
  std::map<Thread, std::vector<Span>> spans;   // from X events, and B/E pairs
  std::map<Thread, std::vector<Span>> begins;  // B and E, as points, to pair
  std::map<Thread, std::string> names;
  std::map<Thread, int64_t> last_ts;
};

// The events' spans (X), begins and ends (B, E) and thread names (M).
Status ReadEvents(const nlohmann::json& events, TraceThreads* tt) {
  size_t order = 0;
  for (const nlohmann::json& e : events) {
    ++order;
    if (!e.is_object())
      return InvalidArgument("event " + std::to_string(order) + ": not an object");
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string()) continue;
    auto num = [&](const char* key) -> int64_t {
      const auto it = e.find(key);
      return it != e.end() && it->is_number() ? it->get<int64_t>() : 0;
    };
    const Thread th{num("pid"), num("tid")};
    const std::string p = ph->get<std::string>();
    const auto name_it = e.find("name");
    const std::string name =
        name_it != e.end() && name_it->is_string() ? name_it->get<std::string>() : "";
    if (p == "M" && name == "thread_name") {
      const auto args = e.find("args");
      if (args != e.end() && args->is_object() && args->contains("name") &&
          (*args)["name"].is_string()) {
        tt->names[th] = (*args)["name"].get<std::string>();
      }
      continue;
    }
    if (p != "X" && p != "B" && p != "E") continue;
    const auto ts = e.find("ts");
    if (ts == e.end() || !ts->is_number()) {
      return InvalidArgument("event " + std::to_string(order) + " (\"" + p + "\"): no \"ts\"");
    }
    Span s;
    s.begin = Ns(*ts);
    s.order = order;
    s.name = name;
    if (p == "X") {
      const auto dur = e.find("dur");
      if (dur == e.end() || !dur->is_number() || dur->get<double>() < 0) {
        return InvalidArgument("event " + std::to_string(order) + " (\"X\"): no \"dur\"");
      }
      s.end = s.begin + Ns(*dur);
      tt->spans[th].push_back(s);
    } else {
      s.end = p == "B" ? -1 : -2;  // marks, paired below
      tt->begins[th].push_back(s);
    }
    int64_t& last = tt->last_ts[th];
    last = std::max(last, p == "X" ? s.end : s.begin);
  }
  return Status();
}

// Each thread's B and E paired in time order into spans; a B never ended
// ends at the thread's last time. Returns how many were never ended.
uint64_t PairBeginsAndEnds(TraceThreads* tt) {
  uint64_t open_at_end = 0;
  for (auto& [th, points] : tt->begins) {
    std::stable_sort(points.begin(), points.end(),
                     [](const Span& a, const Span& b) { return a.begin < b.begin; });
    std::vector<Span> open;
    for (Span& s : points) {
      if (s.end == -1) {
        open.push_back(s);
      } else if (!open.empty()) {  // an E ends the latest B of its thread
        Span b = std::move(open.back());
        open.pop_back();
        b.end = s.begin;
        tt->spans[th].push_back(std::move(b));
      }
    }
    for (Span& b : open) {
      b.end = tt->last_ts[th];
      tt->spans[th].push_back(std::move(b));
      ++open_at_end;
    }
  }
  return open_at_end;
}

// One thread's spans into `t`, nested by time; with o.threads under a
// node of the thread's own.
void AddThread(const ChromeTraceOptions& o, const Thread& th, const TraceThreads& tt,
               std::vector<Span>* spans, CallTree* t) {
  std::vector<Span>& list = *spans;
  // Outer first: by start, then the longer, then file order.
  std::sort(list.begin(), list.end(), [](const Span& a, const Span& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end > b.end;
    return a.order < b.order;
  });
  uint32_t base = CallTree::kRoot;
  if (o.threads) {
    const auto n = tt.names.find(th);
    base = t->Child(CallTree::kRoot, n != tt.names.end() ? "thread " + n->second
                                                         : "tid " + std::to_string(th.second));
  }
  struct Open {
    uint32_t node;
    int64_t end;
  };
  std::vector<Open> stack;
  for (const Span& s : list) {
    while (!stack.empty() && stack.back().end <= s.begin) stack.pop_back();
    // A span that outlives its enclosing one (badly nested) is cut to it.
    const int64_t end = stack.empty() ? s.end : std::min(s.end, stack.back().end);
    const uint32_t parent = stack.empty() ? base : stack.back().node;
    const uint32_t node = t->Child(parent, s.name);
    const int64_t dur = std::max<int64_t>(0, end - s.begin);
    t->Add(node, Metric::kCalls, 1);
    t->Add(node, Metric::kTimeNs, dur);
    if (parent != CallTree::kRoot && !(o.threads && parent == base)) {
      t->Add(parent, Metric::kTimeNs, -dur);  // the parent's self excludes it
    }
    stack.push_back({node, end});
  }
}

}  // namespace

StatusOr<CallTree> CallTreeFromChromeTrace(std::string_view json, const ChromeTraceOptions& o,
                                           uint64_t* unended) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("not valid JSON");
  const nlohmann::json* events = &doc;
  if (doc.is_object()) {
    const auto it = doc.find("traceEvents");
    if (it == doc.end() || !it->is_array()) {
      return InvalidArgument("a trace is an array of events or {\"traceEvents\": [...]}");
    }
    events = &*it;
  }
  if (!events->is_array()) return InvalidArgument("a trace is an array of events");
  TraceThreads tt;
  FP_RETURN_IF_ERROR(ReadEvents(*events, &tt));
  const uint64_t open_at_end = PairBeginsAndEnds(&tt);
  if (unended != nullptr) *unended = open_at_end;
  CallTree t;
  for (auto& [th, list] : tt.spans) AddThread(o, th, tt, &list, &t);
  t.set_metrics(Bit(Metric::kCalls) | Bit(Metric::kTimeNs));
  t.description = "Chrome trace";
  return t;
}

}  // namespace fieldprof::tools
