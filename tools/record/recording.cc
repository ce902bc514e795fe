#include "tools/record/recording.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/base/encoding.h"
#include "common/stacks/sampler_format.h"

namespace fieldprof::tools {

namespace {

// Version 2 added idle transitions, version 3 CPU-wide idle, version 4
// each sample's time, version 5 the program's points, version 6 the
// field's view; older files are read without them.
constexpr char kMagic[] = "FPRECORDING6\n";
constexpr char kMagic5[] = "FPRECORDING5\n";
constexpr char kMagic4[] = "FPRECORDING4\n";
constexpr char kMagic3[] = "FPRECORDING3\n";
constexpr char kMagic2[] = "FPRECORDING2\n";
constexpr char kMagic1[] = "FPRECORDING1\n";
constexpr size_t kMagicSize = sizeof kMagic - 1;

}  // namespace

const char* SampleSourceName(uint32_t source) {
  switch (source) {
    case raw::kTaskClock:
      return "CPU time, perf task-clock";
    case raw::kTaskClockUser:
      return "user CPU time, perf task-clock";
    case raw::kWallTimers:
      return "wall clock";
    case raw::kPerfOutside:
      return "CPU time, perf task-clock from outside";
    case raw::kPerfOutsideUser:
      return "user CPU time, perf task-clock from outside";
    case raw::kNoSamples:
      return "no samples";
    default:
      return "CPU time, timers: at most one sample per kernel tick";
  }
}

std::string EncodeRecording(const Recording& r) {
  std::string out(kMagic, kMagicSize);
  PutString(&out, r.command);
  PutVarint(&out, r.hz);
  PutVarint(&out, r.wall ? 1 : 0);
  PutVarint(&out, r.start_ns);
  PutVarint(&out, r.duration_ns);
  PutVarint(&out, r.dropped);
  PutVarint(&out, r.skipped);
  PutVarint(&out, r.processes);
  PutVarint(&out, r.processes_cut_short);
  PutVarint(&out, r.frames.size());
  for (const std::string& f : r.frames) PutString(&out, f);
  PutVarint(&out, r.stacks.size());
  for (const auto& s : r.stacks) {
    PutVarint(&out, s.size());
    for (uint32_t f : s) PutVarint(&out, f);
  }
  PutVarint(&out, r.threads.size());
  for (const RecordedThread& t : r.threads) {
    PutVarint(&out, t.pid);
    PutVarint(&out, t.tid);
  }
  PutVarint(&out, r.types.size());
  for (const auto& [thread, stack] : r.types) {
    PutVarint(&out, thread);
    PutVarint(&out, stack);
  }
  PutVarint(&out, r.source);
  PutVarint(&out, r.idle ? 1 : 0);
  PutVarint(&out, r.switches_lost);
  PutVarint(&out, r.threads_unwatched);
  PutVarint(&out, r.preemptions);
  PutVarint(&out, r.waits_unattributed);
  PutVarint(&out, r.cpu_wide ? 1 : 0);
  PutVarint(&out, r.cpu_switches_lost);
  PutVarint(&out, r.cpu_idle_unmatched);
  PutVarint(&out, r.idle_types.size());
  for (const IdleType& t : r.idle_types) {
    PutVarint(&out, t.thread);
    PutVarint(&out, t.stack);
    PutVarint(&out, static_cast<uint64_t>(t.direction));
  }
  PutVarint(&out, r.idle_off_ns.size());
  for (uint64_t off : r.idle_off_ns) PutVarint(&out, off);
  PutString(&out, r.idle_tree.Encode());
  PutVarint(&out, r.sample_ns.size());
  for (uint64_t ns : r.sample_ns) PutVarint(&out, ns);
  PutVarint(&out, r.points_lost);
  PutVarint(&out, r.span_names.size());
  for (const SpanName& n : r.span_names) {
    PutString(&out, n.tag);
    PutString(&out, n.segment);
    PutVarint(&out, n.scope ? 1 : 0);
  }
  PutVarint(&out, r.spans.size());
  uint64_t prev = 0;
  for (const RecordedSpan& sp : r.spans) {  // by begin: begins as deltas
    PutVarint(&out, sp.name);
    PutVarint(&out, sp.begin_thread);
    PutVarint(&out, sp.thread);
    PutVarint(&out, sp.begin_ns - prev);
    PutVarint(&out, sp.end_ns - sp.begin_ns);
    prev = sp.begin_ns;
  }
  PutVarint(&out, r.field_stacks.size());
  for (const FieldStackName& f : r.field_stacks) {
    PutString(&out, f.module);
    PutString(&out, f.build_id);
    PutString(&out, f.stack);
  }
  PutVarint(&out, r.field_sets.size());
  for (const std::vector<uint32_t>& set : r.field_sets) {
    PutVarint(&out, set.size());
    for (uint32_t id : set) PutVarint(&out, id);
  }
  PutVarint(&out, r.sample_fields.size());
  for (uint32_t set : r.sample_fields) PutVarint(&out, set);
  out += r.tree.Encode();
  return out;
}

namespace {

// The idle transitions' part of a version 2 or 3 recording.
Status DecodeIdle(std::string_view* in, Recording* r, int version) {
  auto bad = [](const char* what) { return DataLoss(std::string("recording: bad ") + what); };
  uint64_t source = 0, idle = 0, n = 0;
  if (!GetVarint(in, &source) || !GetVarint(in, &idle) || !GetVarint(in, &r->switches_lost) ||
      !GetVarint(in, &r->threads_unwatched) || !GetVarint(in, &r->preemptions) ||
      !GetVarint(in, &r->waits_unattributed)) {
    return bad("idle header");
  }
  r->source = static_cast<uint32_t>(source);
  r->idle = idle != 0;
  if (version >= 3) {
    uint64_t cpu_wide = 0;
    if (!GetVarint(in, &cpu_wide) || !GetVarint(in, &r->cpu_switches_lost) ||
        !GetVarint(in, &r->cpu_idle_unmatched)) {
      return bad("idle header");
    }
    r->cpu_wide = cpu_wide != 0;
  }
  const uint64_t max_direction = version >= 3 ? 3 : 1;
  if (!GetVarint(in, &n) || n > in->size()) return bad("idle types");
  r->idle_types.resize(n);
  for (IdleType& t : r->idle_types) {
    uint64_t thread = 0, stack = 0, dir = 0;
    if (!GetVarint(in, &thread) || !GetVarint(in, &stack) || !GetVarint(in, &dir) ||
        thread >= r->threads.size() || stack >= r->stacks.size() || dir > max_direction) {
      return bad("idle types");
    }
    t = {static_cast<uint32_t>(thread), static_cast<uint32_t>(stack),
         static_cast<IdleDirection>(dir)};
  }
  if (!GetVarint(in, &n) || n > in->size()) return bad("idle lengths");
  r->idle_off_ns.resize(n);
  for (uint64_t& off : r->idle_off_ns) {
    if (!GetVarint(in, &off)) return bad("idle lengths");
  }
  std::string tree;
  if (!GetString(in, &tree)) return bad("idle tree");
  FP_ASSIGN_OR_RETURN(r->idle_tree, TimeTree::Decode(tree));
  if (r->idle_tree.samples() != n) return bad("idle tree");
  for (uint32_t t : r->idle_tree.types()) {
    if (t >= r->idle_types.size()) return bad("idle events");
  }
  return Status::Ok();
}

}  // namespace

namespace {

Status Bad(const char* what) { return DataLoss(std::string("recording: bad ") + what); }

// The command, the clock and the counts of what was dropped.
Status DecodeHeader(std::string_view* in, Recording* r) {
  uint64_t hz = 0, wall = 0, procs = 0, cut = 0;
  if (!GetString(in, &r->command) || !GetVarint(in, &hz) || !GetVarint(in, &wall) ||
      !GetVarint(in, &r->start_ns) || !GetVarint(in, &r->duration_ns) ||
      !GetVarint(in, &r->dropped) || !GetVarint(in, &r->skipped) || !GetVarint(in, &procs) ||
      !GetVarint(in, &cut)) {
    return DataLoss("recording: truncated header");
  }
  r->hz = static_cast<uint32_t>(hz);
  r->wall = wall != 0;
  r->processes = static_cast<uint32_t>(procs);
  r->processes_cut_short = static_cast<uint32_t>(cut);
  return Status();
}

// The frames, the stacks of them, the threads and the sample types.
Status DecodeStacks(std::string_view* in, Recording* r) {
  uint64_t n = 0;
  if (!GetVarint(in, &n) || n > in->size()) return Bad("frames");
  r->frames.resize(n);
  for (std::string& f : r->frames) {
    if (!GetString(in, &f)) return Bad("frames");
  }
  if (!GetVarint(in, &n) || n > in->size()) return Bad("stacks");
  r->stacks.resize(n);
  for (auto& s : r->stacks) {
    uint64_t depth = 0;
    if (!GetVarint(in, &depth) || depth > in->size()) return Bad("stacks");
    s.resize(depth);
    for (uint32_t& f : s) {
      uint64_t v = 0;
      if (!GetVarint(in, &v) || v >= r->frames.size()) return Bad("stacks");
      f = static_cast<uint32_t>(v);
    }
  }
  if (!GetVarint(in, &n) || n > in->size()) return Bad("threads");
  r->threads.resize(n);
  for (RecordedThread& t : r->threads) {
    uint64_t pid = 0, tid = 0;
    if (!GetVarint(in, &pid) || !GetVarint(in, &tid)) return Bad("threads");
    t.pid = static_cast<uint32_t>(pid);
    t.tid = static_cast<uint32_t>(tid);
  }
  if (!GetVarint(in, &n) || n > in->size()) return Bad("types");
  r->types.resize(n);
  for (auto& [thread, stack] : r->types) {
    uint64_t a = 0, b = 0;
    if (!GetVarint(in, &a) || !GetVarint(in, &b) || a >= r->threads.size() ||
        b >= r->stacks.size()) {
      return Bad("types");
    }
    thread = static_cast<uint32_t>(a);
    stack = static_cast<uint32_t>(b);
  }
  return Status();
}

// The program's points: the span names and the spans (version 5).
Status DecodeSpans(std::string_view* in, Recording* r) {
  uint64_t n = 0;
  if (!GetVarint(in, &r->points_lost) || !GetVarint(in, &n) || n > in->size()) {
    return Bad("points");
  }
  r->span_names.resize(n);
  for (SpanName& name : r->span_names) {
    uint64_t scope = 0;
    if (!GetString(in, &name.tag) || !GetString(in, &name.segment) || !GetVarint(in, &scope)) {
      return Bad("points");
    }
    name.scope = scope != 0;
  }
  if (!GetVarint(in, &n) || n > in->size()) return Bad("spans");
  r->spans.resize(n);
  uint64_t at = 0;
  for (RecordedSpan& sp : r->spans) {
    uint64_t name = 0, begin_thread = 0, thread = 0, begin = 0, length = 0;
    if (!GetVarint(in, &name) || !GetVarint(in, &begin_thread) || !GetVarint(in, &thread) ||
        !GetVarint(in, &begin) || !GetVarint(in, &length) || name >= r->span_names.size() ||
        begin_thread >= r->threads.size() || thread >= r->threads.size() || at + begin < at ||
        at + begin + length < at + begin) {
      return Bad("spans");
    }
    at += begin;
    sp = {static_cast<uint32_t>(name), static_cast<uint32_t>(begin_thread),
          static_cast<uint32_t>(thread), at, at + length};
  }
  return Status();
}

}  // namespace

namespace {

// The field's view of a version 6 recording.
Status DecodeFieldView(std::string_view* in, Recording* r) {
  uint64_t n = 0;
  if (!GetVarint(in, &n) || n > in->size()) return Bad("field stacks");
  r->field_stacks.resize(n);
  for (FieldStackName& f : r->field_stacks) {
    if (!GetString(in, &f.module) || !GetString(in, &f.build_id) || !GetString(in, &f.stack)) {
      return Bad("field stacks");
    }
  }
  if (!GetVarint(in, &n) || n > in->size()) return Bad("field sets");
  r->field_sets.resize(n);
  for (std::vector<uint32_t>& set : r->field_sets) {
    uint64_t size = 0;
    if (!GetVarint(in, &size) || size > in->size()) return Bad("field sets");
    set.resize(size);
    for (uint32_t& id : set) {
      uint64_t v = 0;
      if (!GetVarint(in, &v) || v >= r->field_stacks.size()) return Bad("field sets");
      id = static_cast<uint32_t>(v);
    }
  }
  if (!GetVarint(in, &n) || n > in->size()) return Bad("field view");
  r->sample_fields.resize(n);
  for (uint32_t& set : r->sample_fields) {
    uint64_t v = 0;
    if (!GetVarint(in, &v) || v >= r->field_sets.size()) return Bad("field view");
    set = static_cast<uint32_t>(v);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Recording> DecodeRecording(std::string_view in) {
  const std::string_view magic = in.substr(0, kMagicSize);
  const int version = magic == std::string_view(kMagic, kMagicSize)    ? 6
                      : magic == std::string_view(kMagic5, kMagicSize) ? 5
                      : magic == std::string_view(kMagic4, kMagicSize) ? 4
                      : magic == std::string_view(kMagic3, kMagicSize) ? 3
                      : magic == std::string_view(kMagic2, kMagicSize) ? 2
                      : magic == std::string_view(kMagic1, kMagicSize) ? 1
                                                                       : 0;
  if (version == 0) return DataLoss("not a fieldprof recording");
  in.remove_prefix(kMagicSize);
  Recording r;
  FP_RETURN_IF_ERROR(DecodeHeader(&in, &r));
  FP_RETURN_IF_ERROR(DecodeStacks(&in, &r));
  if (version >= 2) FP_RETURN_IF_ERROR(DecodeIdle(&in, &r, version));
  if (version >= 4) {
    uint64_t n = 0;
    if (!GetVarint(&in, &n) || n > in.size()) return Bad("sample times");
    r.sample_ns.resize(n);
    for (uint64_t& ns : r.sample_ns) {
      if (!GetVarint(&in, &ns)) return Bad("sample times");
    }
  }
  if (version >= 5) FP_RETURN_IF_ERROR(DecodeSpans(&in, &r));
  if (version >= 6) FP_RETURN_IF_ERROR(DecodeFieldView(&in, &r));
  FP_ASSIGN_OR_RETURN(r.tree, TimeTree::Decode(in));
  for (uint32_t t : r.tree.types()) {
    if (t >= r.types.size()) return Bad("samples");
  }
  if (!r.sample_ns.empty() && r.sample_ns.size() != r.tree.samples()) return Bad("sample times");
  if (!r.sample_fields.empty() && r.sample_fields.size() != r.tree.samples()) {
    return Bad("field view");
  }
  return r;
}

std::map<uint32_t, SampleTotals> SampleTotalsByType(const Recording& r, uint64_t t1_ns,
                                                    uint64_t t2_ns) {
  const std::vector<uint64_t>& times = r.tree.times();
  const std::vector<uint32_t>& types = r.tree.types();
  const size_t lo = std::lower_bound(times.begin(), times.end(), t1_ns) - times.begin();
  const size_t hi = std::upper_bound(times.begin(), times.end(), t2_ns) - times.begin();
  std::map<uint32_t, SampleTotals> by;
  for (size_t i = lo; i < hi; ++i) {
    SampleTotals& t = by[types[i]];
    ++t.samples;
    t.ns += SampleNs(r, i);
  }
  return by;
}

std::map<uint32_t, uint64_t> SamplesDuring(const Recording& r, uint32_t name) {
  // Per thread, the spans' intervals merged: a sample is counted once.
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> on;
  for (const RecordedSpan& sp : r.spans) {
    if (sp.name != name) continue;
    if (sp.begin_thread == sp.thread) {
      on[sp.thread].emplace_back(sp.begin_ns, sp.end_ns);
      continue;
    }
    const uint32_t pid = r.threads[sp.thread].pid;
    for (uint32_t t = 0; t < r.threads.size(); ++t) {
      if (r.threads[t].pid == pid) on[t].emplace_back(sp.begin_ns, sp.end_ns);
    }
  }
  for (auto& [thread, v] : on) {
    std::sort(v.begin(), v.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& iv : v) {
      if (!merged.empty() && iv.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, iv.second);
      } else {
        merged.push_back(iv);
      }
    }
    v = std::move(merged);
  }
  std::map<uint32_t, uint64_t> by;
  const std::vector<uint64_t>& times = r.tree.times();
  const std::vector<uint32_t>& types = r.tree.types();
  for (const auto& [thread, v] : on) {
    for (const auto& [b, e] : v) {
      const size_t lo = std::lower_bound(times.begin(), times.end(), b) - times.begin();
      const size_t hi = std::upper_bound(times.begin(), times.end(), e) - times.begin();
      for (size_t i = lo; i < hi; ++i) {
        if (r.types[types[i]].first == thread) ++by[types[i]];
      }
    }
  }
  return by;
}

uint64_t SampleNs(const Recording& r, size_t i) {
  if (i < r.sample_ns.size()) return r.sample_ns[i];
  return r.hz > 0 ? 1000000000ull / r.hz : 0;
}

}  // namespace fieldprof::tools
