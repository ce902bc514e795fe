#include "tools/record/record_tree.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fieldprof::tools {

CallTree CallTreeFromRecording(const Recording& r, uint64_t t1_ns, uint64_t t2_ns, uint32_t tid) {
  CallTree t;
  for (const auto& [type, total] : SampleTotalsByType(r, t1_ns, t2_ns)) {
    const auto [th, stack] = r.types[type];
    if (tid != 0 && r.threads[th].tid != tid) continue;
    uint32_t n = CallTree::kRoot;
    for (uint32_t f : r.stacks[stack]) n = t.Child(n, r.frames[f]);
    t.Add(n, Metric::kSamples, static_cast<int64_t>(total.samples));
    t.Add(n, Metric::kTimeNs, static_cast<int64_t>(total.ns));
  }
  t.set_metrics(Bit(Metric::kSamples) | Bit(Metric::kTimeNs));
  t.description = "recording of " + r.command;
  return t;
}

CallTree OffCpuTreeFromRecording(const Recording& r, uint64_t t1_ns, uint64_t t2_ns, uint32_t tid) {
  CallTree t;
  const std::vector<uint64_t>& times = r.idle_tree.times();
  const std::vector<uint32_t>& types = r.idle_tree.types();
  const size_t lo = std::lower_bound(times.begin(), times.end(), t1_ns) - times.begin();
  const size_t hi = std::upper_bound(times.begin(), times.end(), t2_ns) - times.begin();
  std::map<uint32_t, std::pair<int64_t, int64_t>> by_stack;  // waits, off-CPU ns
  for (size_t i = lo; i < hi; ++i) {
    const IdleType& type = r.idle_types[types[i]];
    if (type.direction != IdleDirection::kToIdle) continue;
    if (tid != 0 && r.threads[type.thread].tid != tid) continue;
    auto& w = by_stack[type.stack];
    w.first += 1;
    w.second += static_cast<int64_t>(r.idle_off_ns[i]);
  }
  for (const auto& [stack, w] : by_stack) {
    uint32_t n = CallTree::kRoot;
    for (uint32_t f : r.stacks[stack]) n = t.Child(n, r.frames[f]);
    t.Add(n, Metric::kCalls, w.first);
    t.Add(n, Metric::kTimeNs, w.second);
  }
  t.set_metrics(Bit(Metric::kCalls) | Bit(Metric::kTimeNs));
  t.description = "off-CPU waits of " + r.command;
  return t;
}

namespace {

// One scope of one thread, nested.
struct Scope {
  const RecordedSpan* span;
  int parent;  // index into the thread's scopes, or -1
  uint32_t node = 0;
  std::vector<std::pair<uint32_t, uint64_t>> samples;  // its own: (stack, weight ns)
};

// The thread's scopes in time order, each a node under the innermost that
// holds it, with its traced duration; a parent's self time is less it.
void NestScopes(const Recording& r, std::vector<Scope>* scopes, CallTree* t) {
  std::stable_sort(scopes->begin(), scopes->end(), [](const Scope& a, const Scope& b) {
    return a.span->begin_ns != b.span->begin_ns ? a.span->begin_ns < b.span->begin_ns
                                                : a.span->end_ns > b.span->end_ns;
  });
  std::vector<int> open;
  for (size_t i = 0; i < scopes->size(); ++i) {
    Scope& sc = (*scopes)[i];
    while (!open.empty() && (*scopes)[open.back()].span->end_ns < sc.span->begin_ns) {
      open.pop_back();
    }
    sc.parent = open.empty() ? -1 : open.back();
    const RecordedSpan& sp = *sc.span;
    const SpanName& name = r.span_names[sp.name];
    const std::string segment = name.segment.substr(0, name.segment.rfind(" (scope)"));
    const uint32_t parent = sc.parent < 0 ? CallTree::kRoot : (*scopes)[sc.parent].node;
    sc.node = t->Child(parent, "[" + name.tag + ":" + segment + "]");
    const auto ns = static_cast<int64_t>(sp.end_ns - sp.begin_ns);
    t->Add(sc.node, Metric::kCalls, 1);
    t->Add(sc.node, Metric::kTimeNs, ns);
    if (sc.parent >= 0) t->Add(parent, Metric::kTimeNs, -ns);
    open.push_back(static_cast<int>(i));
  }
}

// Each sample of `thread` to the innermost of its (nested) scopes holding
// it; `in_scope` marks the samples so placed.
void PlaceSamples(const Recording& r, uint32_t thread, std::vector<Scope>* scopes,
                  std::vector<bool>* in_scope) {
  const std::vector<uint64_t>& times = r.tree.times();
  const std::vector<uint32_t>& types = r.tree.types();
  std::vector<int> open;
  size_t next = 0;
  const uint64_t lo_t = scopes->empty() ? 0 : scopes->front().span->begin_ns;
  for (size_t i = std::lower_bound(times.begin(), times.end(), lo_t) - times.begin();
       i < times.size(); ++i) {
    const auto [th, stack] = r.types[types[i]];
    if (th != thread) continue;
    while (next < scopes->size() && (*scopes)[next].span->begin_ns <= times[i]) {
      open.push_back(static_cast<int>(next++));
    }
    while (!open.empty() && (*scopes)[open.back()].span->end_ns < times[i]) open.pop_back();
    // A scope that ended before an inner one was popped: drop ended ones
    // anywhere below the top too.
    int inner = -1;
    for (size_t k = open.size(); k-- > 0;) {
      if ((*scopes)[open[k]].span->end_ns >= times[i]) {
        inner = open[k];
        break;
      }
    }
    if (inner < 0) {
      if (next >= scopes->size() && open.empty()) break;
      continue;
    }
    (*scopes)[inner].samples.emplace_back(stack, SampleNs(r, i));
    (*in_scope)[i] = true;
  }
}

// The scope's self time, shared out over its samples' paths by their
// weights, the remainders to the largest shares: the sum is exact.
void ShareSelfTime(const Recording& r, const Scope& s, CallTree* t) {
  if (s.samples.empty()) return;
  const int64_t self = t->self(s.node, Metric::kTimeNs);
  if (self <= 0) return;
  uint64_t weight = 0;
  for (const auto& [stack, w] : s.samples) weight += w;
  if (weight == 0) return;
  std::vector<std::pair<uint32_t, int64_t>> shares;  // node, ns
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (const auto& [stack, w] : s.samples) {
    uint32_t n = s.node;
    for (uint32_t f : r.stacks[stack]) n = t->Child(n, r.frames[f]);
    const double exact =
        static_cast<double>(self) * static_cast<double>(w) / static_cast<double>(weight);
    const auto whole = static_cast<int64_t>(exact);
    shares.emplace_back(n, whole);
    remainders.emplace_back(exact - static_cast<double>(whole), shares.size() - 1);
    given += whole;
    t->Add(n, Metric::kSamples, 1);
  }
  std::sort(remainders.begin(), remainders.end(), std::greater<>());
  for (size_t k = 0; given < self && k < remainders.size(); ++k, ++given) {
    ++shares[remainders[k].second].second;
  }
  t->Add(s.node, Metric::kTimeNs, -self);
  for (const auto& [n, ns] : shares) t->Add(n, Metric::kTimeNs, ns);
}

}  // namespace

CallTree MergedTreeFromRecording(const Recording& r, uint64_t t1_ns, uint64_t t2_ns, uint32_t tid) {
  CallTree t;
  // Per thread, its scopes in the range.
  std::map<uint32_t, std::vector<Scope>> by_thread;
  for (const RecordedSpan& sp : r.spans) {
    if (!r.span_names[sp.name].scope || sp.begin_thread != sp.thread) continue;
    if (sp.begin_ns < t1_ns || sp.end_ns > t2_ns) continue;
    if (tid != 0 && r.threads[sp.thread].tid != tid) continue;
    by_thread[sp.thread].push_back({&sp, -1, 0, {}});
  }
  const std::vector<uint64_t>& times = r.tree.times();
  const std::vector<uint32_t>& types = r.tree.types();
  std::vector<bool> in_scope(times.size(), false);
  for (auto& [thread, scopes] : by_thread) {
    NestScopes(r, &scopes, &t);
    PlaceSamples(r, thread, &scopes, &in_scope);
    for (const Scope& s : scopes) ShareSelfTime(r, s, &t);
  }
  // The samples outside every scope, with their own time.
  const size_t lo = std::lower_bound(times.begin(), times.end(), t1_ns) - times.begin();
  const size_t hi = std::upper_bound(times.begin(), times.end(), t2_ns) - times.begin();
  for (size_t i = lo; i < hi; ++i) {
    if (in_scope[i]) continue;
    const auto [th, stack] = r.types[types[i]];
    if (tid != 0 && r.threads[th].tid != tid) continue;
    uint32_t n = CallTree::kRoot;
    for (uint32_t f : r.stacks[stack]) n = t.Child(n, r.frames[f]);
    t.Add(n, Metric::kSamples, 1);
    t.Add(n, Metric::kTimeNs, static_cast<int64_t>(SampleNs(r, i)));
  }
  t.set_metrics(Bit(Metric::kSamples) | Bit(Metric::kTimeNs) | Bit(Metric::kCalls));
  t.description = "traced scopes and samples of " + r.command;
  return t;
}

StatusOr<CallTree> FieldTreeFromRecording(const Recording& r, const std::string& module,
                                          uint64_t t1_ns, uint64_t t2_ns, uint32_t tid,
                                          const VersionOf& version_of,
                                          const FrameNamer& name_frame) {
  if (r.sample_fields.empty() && r.tree.samples() > 0) {
    return Unsupported(
        "recorded before recordings kept the field's view of their stacks: record it again");
  }
  std::vector<bool> wanted(r.field_stacks.size());
  std::set<std::string> modules, versions;
  std::map<std::pair<std::string, std::string>, std::string> version_by_build;
  for (size_t i = 0; i < r.field_stacks.size(); ++i) {
    const FieldStackName& f = r.field_stacks[i];
    auto [it, fresh] = version_by_build.try_emplace({f.module, f.build_id});
    if (fresh) it->second = version_of(f.module, f.build_id);
    if (it->second == f.build_id) continue;  // no package holds it: the field drops it
    modules.insert(f.module);
    wanted[i] = f.module == module;
    if (wanted[i]) versions.insert(it->second);
  }
  if (std::find(wanted.begin(), wanted.end(), true) == wanted.end()) {
    std::string have;
    for (const std::string& m : modules) have += (have.empty() ? "" : ", ") + m;
    return NotFound("no sample was in " + module + " (a module a package installed)" +
                    (have.empty() ? std::string("; none was in any")
                                  : "; the recording's packaged modules: " + have));
  }
  const std::vector<uint64_t>& times = r.tree.times();
  const std::vector<uint32_t>& types = r.tree.types();
  const size_t lo = std::lower_bound(times.begin(), times.end(), t1_ns) - times.begin();
  const size_t hi = std::upper_bound(times.begin(), times.end(), t2_ns) - times.begin();
  std::map<uint32_t, std::pair<int64_t, int64_t>> by_stack;  // samples, ns
  for (size_t i = lo; i < hi; ++i) {
    if (tid != 0 && r.threads[r.types[types[i]].first].tid != tid) continue;
    for (uint32_t id : r.field_sets[r.sample_fields[i]]) {
      if (!wanted[id]) continue;
      auto& [samples, ns] = by_stack[id];
      ++samples;
      ns += static_cast<int64_t>(SampleNs(r, i));
    }
  }
  CallTree t;
  for (const auto& [id, w] : by_stack) {
    uint32_t n = CallTree::kRoot;
    std::string_view rest = r.field_stacks[id].stack;
    while (!rest.empty()) {
      const size_t semi = rest.find(';');
      const std::string_view frame = rest.substr(0, semi);
      if (name_frame) {
        FP_ASSIGN_OR_RETURN(const std::string named,
                            name_frame(r.field_stacks[id].build_id, frame));
        n = t.Child(n, named);
      } else {
        n = t.Child(n, frame);
      }
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    }
    t.Add(n, Metric::kSamples, w.first);
    t.Add(n, Metric::kTimeNs, w.second);
  }
  t.set_metrics(Bit(Metric::kSamples) | Bit(Metric::kTimeNs));
  std::string version;
  for (const std::string& v : versions) version += (version.empty() ? "" : ", ") + v;
  t.description =
      module + " " + version + " as the field folds it, in the recording of " + r.command;
  return t;
}

}  // namespace fieldprof::tools
