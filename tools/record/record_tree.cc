#include "tools/record/record_tree.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace fieldprof::local {

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

}  // namespace fieldprof::local
