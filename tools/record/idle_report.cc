#include "tools/record/idle_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <vector>

#include "tools/shared/format.h"

namespace fieldprof::tools {

namespace {

struct Weights {
  uint64_t to_idle = 0, from_idle = 0, off_ns = 0;
  uint64_t cpu_idle_after = 0, cpu_woke_into = 0, cpu_idle_ns = 0;  // CPU-wide only
};

struct Node {
  Weights total;
  std::map<uint32_t, Node> children;
};

void Add(Weights* into, const Weights& w) {
  into->to_idle += w.to_idle;
  into->from_idle += w.from_idle;
  into->off_ns += w.off_ns;
  into->cpu_idle_after += w.cpu_idle_after;
  into->cpu_woke_into += w.cpu_woke_into;
  into->cpu_idle_ns += w.cpu_idle_ns;
}

uint64_t& CountOf(Weights& w, IdleDirection d) {
  switch (d) {
    case IdleDirection::kToIdle:
      return w.to_idle;
    case IdleDirection::kFromIdle:
      return w.from_idle;
    case IdleDirection::kCpuIdleAfter:
      return w.cpu_idle_after;
    case IdleDirection::kCpuWokeInto:
      return w.cpu_woke_into;
  }
  return w.to_idle;
}

std::string Line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Line(const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// The off-CPU time at a node and not below it.
uint64_t SelfOff(const Node& n) {
  uint64_t below = 0;
  for (const auto& [f, c] : n.children) below += c.total.off_ns;
  return n.total.off_ns - std::min(below, n.total.off_ns);
}

uint64_t HottestSelfOff(const Node& n) {
  uint64_t most = SelfOff(n);
  for (const auto& [f, c] : n.children) most = std::max(most, HottestSelfOff(c));
  return most;
}

void Print(const Recording& r, const Node& node, uint64_t all, const IdleReportOptions& o,
           uint64_t hottest, const std::string& indent, std::string* out) {
  std::vector<std::pair<uint32_t, const Node*>> kids;
  for (const auto& [f, c] : node.children) kids.emplace_back(f, &c);
  std::sort(kids.begin(), kids.end(), [](const auto& a, const auto& b) {
    return a.second->total.to_idle != b.second->total.to_idle
               ? a.second->total.to_idle > b.second->total.to_idle
               : a.second->total.off_ns > b.second->total.off_ns;
  });
  for (const auto& [f, c] : kids) {
    const uint64_t waits = std::max(c->total.to_idle, c->total.from_idle);
    if (static_cast<double>(waits) < o.min_share * static_cast<double>(all)) continue;
    std::string line =
        Line("%8llu %9llu %11.3f  ", static_cast<unsigned long long>(c->total.to_idle),
             static_cast<unsigned long long>(c->total.from_idle),
             static_cast<double>(c->total.off_ns) / 1e6);
    if (r.cpu_wide) {
      line += Line("%8llu %8llu %11.3f  ", static_cast<unsigned long long>(c->total.cpu_idle_after),
                   static_cast<unsigned long long>(c->total.cpu_woke_into),
                   static_cast<double>(c->total.cpu_idle_ns) / 1e6);
    }
    line += indent + r.frames[f];
    *out += tools::HeatText(line, static_cast<double>(SelfOff(*c)) / static_cast<double>(hottest),
                            o.color, o.truecolor) +
            "\n";
    Print(r, *c, all, o, hottest, indent + "  ", out);
  }
}

// Per stack of the range (and of the thread, if one): counts from the
// tree, off-CPU and CPU-idle time from the range's waits; `all` sums them.
std::map<uint32_t, Weights> WeightsByStack(const Recording& r, const IdleReportOptions& o,
                                           Weights* all_out) {
  const RangeCounts c = r.idle_tree.Range(o.from_ns, o.to_ns, /*exact=*/true);
  auto wanted = [&](uint32_t type) {
    return o.tid == 0 || r.threads[r.idle_types[type].thread].tid == o.tid;
  };
  std::map<uint32_t, Weights> by_stack;
  Weights& all = *all_out;
  for (const auto& [type, count] : c.by_type) {
    if (!wanted(type)) continue;
    const IdleType& t = r.idle_types[type];
    Weights w;
    CountOf(w, t.direction) = count;
    Add(&by_stack[t.stack], w);
    Add(&all, w);
  }
  const std::vector<uint64_t>& times = r.idle_tree.times();
  const std::vector<uint32_t>& types = r.idle_tree.types();
  const size_t lo = std::lower_bound(times.begin(), times.end(), o.from_ns) - times.begin();
  const size_t hi = std::upper_bound(times.begin(), times.end(), o.to_ns) - times.begin();
  for (size_t i = lo; i < hi; ++i) {
    const IdleType& t = r.idle_types[types[i]];
    if (!wanted(types[i])) continue;
    if (t.direction == IdleDirection::kToIdle) {
      by_stack[t.stack].off_ns += r.idle_off_ns[i];
      all.off_ns += r.idle_off_ns[i];
    } else if (t.direction == IdleDirection::kCpuIdleAfter) {
      by_stack[t.stack].cpu_idle_ns += r.idle_off_ns[i];
      all.cpu_idle_ns += r.idle_off_ns[i];
    }
  }
  return by_stack;
}

// What the header says of the range and of the whole recording.
std::string IdleHeader(const Recording& r, const Weights& all) {
  std::string out;
  out += Line(
      "idle transitions: %llu to-idle (a thread began to wait), %llu from-idle (it woke), "
      "%.3f ms off CPU\n",
      static_cast<unsigned long long>(all.to_idle), static_cast<unsigned long long>(all.from_idle),
      static_cast<double>(all.off_ns) / 1e6);
  out += Line(
      "whole recording: %llu preemptions (switched out while runnable, not waits); %llu waits "
      "without their stack (in the program: outside a wrapped blocking call; from outside: lost "
      "to a full ring), shown as %s\n",
      static_cast<unsigned long long>(r.preemptions),
      static_cast<unsigned long long>(r.waits_unattributed), kUnattributedWait);
  if (r.switches_lost > 0 || r.threads_unwatched > 0) {
    out += Line("incomplete: %llu switch records lost, %llu threads not watched\n",
                static_cast<unsigned long long>(r.switches_lost),
                static_cast<unsigned long long>(r.threads_unwatched));
  }
  if (r.cpu_wide) {
    out += Line(
        "CPU-wide switch records: a CPU went idle %llu times as these threads began to wait "
        "(%.3f ms idle after them), and left idle %llu times to run them as they woke\n",
        static_cast<unsigned long long>(all.cpu_idle_after),
        static_cast<double>(all.cpu_idle_ns) / 1e6,
        static_cast<unsigned long long>(all.cpu_woke_into));
    if (r.cpu_switches_lost > 0 || r.cpu_idle_unmatched > 0) {
      out += Line("CPU-wide: %llu records lost, %llu with no wait of the thread near them\n",
                  static_cast<unsigned long long>(r.cpu_switches_lost),
                  static_cast<unsigned long long>(r.cpu_idle_unmatched));
    }
  } else {
    out +=
        "from this process's own threads' switch records: what ran on a CPU next is unknown in "
        "this mode (CPU-wide records, which know, need CAP_PERFMON, root or "
        "kernel.perf_event_paranoid <= 0)\n";
  }
  return out;
}

}  // namespace

std::string IdleReport(const Recording& r, const IdleReportOptions& o) {
  if (!r.idle) {
    return "this recording has no idle transitions (recorded with --idle=false, or before "
           "fieldprof recorded them)\n";
  }
  Weights all;
  const std::map<uint32_t, Weights> by_stack = WeightsByStack(r, o, &all);
  std::string out;
  if (o.collapsed) {  // off-CPU microseconds, as offcputime's folded output
    for (const auto& [stack, w] : by_stack) {
      if (w.to_idle == 0) continue;
      std::string line;
      for (uint32_t f : r.stacks[stack]) line += (line.empty() ? "" : ";") + r.frames[f];
      out += Line("%s %llu\n", line.c_str(), static_cast<unsigned long long>(w.off_ns / 1000));
    }
    return out;
  }
  out += IdleHeader(r, all);
  if (all.to_idle + all.from_idle == 0) return out + "no waits in this range\n";
  Node root;
  for (const auto& [stack, w] : by_stack) {
    Node* node = &root;
    for (uint32_t f : r.stacks[stack]) {
      node = &node->children[f];
      Add(&node->total, w);
    }
  }
  out += r.cpu_wide ? " to-idle from-idle  off-CPU ms  cpu-idle cpu-woke CPU idle ms  call tree "
                      "(where threads waited)\n"
                    : " to-idle from-idle  off-CPU ms  call tree (where threads waited)\n";
  Print(r, root, std::max(all.to_idle, all.from_idle), o,
        std::max<uint64_t>(1, HottestSelfOff(root)), "", &out);
  return out;
}

}  // namespace fieldprof::tools
