#include "tools/record/recording.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>
#include <unordered_map>

#include "common/durable_file.h"
#include "common/encoding.h"
#include "common/sampler_format.h"
#include "tools/cli/symbolizer.h"
#include "tools/record/cpu_switches.h"

namespace fieldprof::local {

namespace {

// Version 2 added idle transitions, version 3 CPU-wide idle; older files
// are read without them.
constexpr char kMagic[] = "FPRECORDING4\n";
constexpr char kMagic3[] = "FPRECORDING3\n";
constexpr char kMagic2[] = "FPRECORDING2\n";
constexpr char kMagic1[] = "FPRECORDING1\n";
constexpr size_t kMagicSize = sizeof kMagic - 1;

struct RawModule {
  raw::ModuleHeader h;
  std::string path;
};

struct RawSample {
  raw::SampleHeader h;
  std::vector<uint64_t> ips;
};

struct RawBlocked {
  raw::BlockedHeader h;
  std::vector<uint64_t> ips;
};

struct RawProcess {
  raw::FileHeader header{};
  std::vector<RawModule> modules;
  std::vector<RawSample> samples;
  std::vector<raw::Switch> switches;
  std::vector<RawBlocked> blocked;
  bool ended = false;
  raw::Trailer trailer{};
};

template <typename T>
bool Take(std::string_view* in, T* out) {
  if (in->size() < sizeof(T)) return false;
  in->copy(reinterpret_cast<char*>(out), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

StatusOr<RawProcess> ReadRaw(const std::string& path) {
  FP_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  std::string_view in = bytes;
  RawProcess p;
  if (!Take(&in, &p.header) || std::memcmp(p.header.magic, raw::kMagic, sizeof raw::kMagic) != 0) {
    return DataLoss(path + ": not a fieldprof record raw file");
  }
  while (!in.empty()) {
    const char tag = in.front();
    std::string_view rest = in.substr(1);
    if (tag == 'S') {
      RawSample s;
      if (!Take(&rest, &s.h) || s.h.depth > raw::kMaxFrames ||
          rest.size() < s.h.depth * sizeof(uint64_t)) {
        break;  // cut short
      }
      s.ips.resize(s.h.depth);
      std::memcpy(s.ips.data(), rest.data(), s.h.depth * sizeof(uint64_t));
      rest.remove_prefix(s.h.depth * sizeof(uint64_t));
      p.samples.push_back(std::move(s));
    } else if (tag == 'M') {
      RawModule m;
      if (!Take(&rest, &m.h) || rest.size() < m.h.path_len) break;
      m.path.assign(rest.data(), m.h.path_len);
      rest.remove_prefix(m.h.path_len);
      p.modules.push_back(std::move(m));
    } else if (tag == 'W') {
      raw::Switch w;
      if (!Take(&rest, &w)) break;
      p.switches.push_back(w);
    } else if (tag == 'B') {
      RawBlocked b;
      if (!Take(&rest, &b.h) || b.h.depth > raw::kMaxFrames ||
          rest.size() < b.h.depth * sizeof(uint64_t)) {
        break;
      }
      b.ips.resize(b.h.depth);
      std::memcpy(b.ips.data(), rest.data(), b.h.depth * sizeof(uint64_t));
      rest.remove_prefix(b.h.depth * sizeof(uint64_t));
      p.blocked.push_back(std::move(b));
    } else if (tag == 'E') {
      if (!Take(&rest, &p.trailer)) break;
      p.ended = true;
    } else {
      break;  // damage: what came before stands
    }
    in = rest;
  }
  return p;
}

// The modules as the symbolizer takes them.
std::vector<LoadedModule> Loaded(const std::vector<RawModule>& modules) {
  std::vector<LoadedModule> out;
  for (const RawModule& m : modules) out.push_back({m.path, m.h.bias, m.h.lo, m.h.hi});
  return out;
}

// Frames, stacks, threads and sample types, each interned once.
class Interner {
 public:
  explicit Interner(Recording* r) : r_(r) {}

  // `ips` innermost first; all of them return addresses, or all but the
  // innermost (an interrupted instruction).
  uint32_t Stack(Symbolizer& sym, const std::vector<uint64_t>& ips, bool all_returns) {
    std::vector<uint32_t> stack;
    stack.reserve(ips.size());
    for (size_t i = ips.size(); i-- > 0;) {  // outermost first
      // The sampler's frames are left out, but for a blocked call's
      // innermost: the wrapper, named as the call it wraps.
      // (Its thread-start wrapper is on every thread's stack.)
      if (!(all_returns && i == 0) && sym.InModuleNamed(ips[i], "libfieldprof-sampler.so")) {
        continue;
      }
      stack.push_back(Frame(sym.Name(ips[i], /*return_address=*/all_returns || i > 0)));
    }
    return Stack(stack);
  }
  uint32_t Stack(const std::vector<uint32_t>& frames) {
    auto [it, fresh] = stack_ids_.emplace(frames, static_cast<uint32_t>(r_->stacks.size()));
    if (fresh) r_->stacks.push_back(frames);
    return it->second;
  }
  uint32_t Frame(const std::string& name) {
    auto [it, fresh] = frame_ids_.emplace(name, static_cast<uint32_t>(r_->frames.size()));
    if (fresh) r_->frames.push_back(name);
    return it->second;
  }
  // The thread's index, if it was recorded.
  bool FindThread(uint32_t pid, uint32_t tid, uint32_t* thread) const {
    auto it = thread_ids_.find({pid, tid});
    if (it == thread_ids_.end()) return false;
    *thread = it->second;
    return true;
  }
  uint32_t Thread(uint32_t pid, uint32_t tid) {
    auto [it, fresh] =
        thread_ids_.emplace(std::make_pair(pid, tid), static_cast<uint32_t>(r_->threads.size()));
    if (fresh) r_->threads.push_back({pid, tid});
    return it->second;
  }
  uint32_t Type(uint32_t thread, uint32_t stack) {
    auto [it, fresh] =
        type_ids_.emplace(std::make_pair(thread, stack), static_cast<uint32_t>(r_->types.size()));
    if (fresh) r_->types.emplace_back(thread, stack);
    return it->second;
  }
  void Preempted() { ++r_->preemptions; }
  void Unattributed() { ++r_->waits_unattributed; }
  uint32_t IdleTypeOf(uint32_t thread, uint32_t stack, IdleDirection d) {
    auto [it, fresh] = idle_ids_.emplace(std::make_tuple(thread, stack, d),
                                         static_cast<uint32_t>(r_->idle_types.size()));
    if (fresh) r_->idle_types.push_back({thread, stack, d});
    return it->second;
  }

 private:
  Recording* r_;
  std::unordered_map<std::string, uint32_t> frame_ids_;
  std::map<std::vector<uint32_t>, uint32_t> stack_ids_;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> thread_ids_, type_ids_;
  std::map<std::tuple<uint32_t, uint32_t, IdleDirection>, uint32_t> idle_ids_;
};

struct IdleEvent {
  uint64_t time = 0;  // after the recording's start
  uint32_t type = 0;  // into idle_types
  uint64_t off_ns = 0;
};

// One process's waits: each ring's switch records in order; a switch out
// that was not a preemption begins a wait, the next switch in ends it.
// The wait's stack is that of the wrapped call whose ring positions hold
// the switch out.
void Waits(const RawProcess& p, uint64_t start_ns, Symbolizer& sym, Interner* in,
           std::vector<IdleEvent>* out) {
  std::map<uint32_t, std::vector<const raw::Switch*>> by_ring;
  for (const raw::Switch& w : p.switches) by_ring[w.ring].push_back(&w);
  std::map<uint32_t, std::map<uint64_t, const RawBlocked*>> calls;  // ring -> from -> call
  for (const RawBlocked& b : p.blocked) calls[b.h.ring][b.h.from] = &b;
  const uint32_t unattributed = in->Stack({in->Frame(kUnattributedWait)});
  auto rel = [&](uint64_t t) { return t >= start_ns ? t - start_ns : 0; };
  for (auto& [ring, sw] : by_ring) {
    std::sort(sw.begin(), sw.end(),
              [](const raw::Switch* a, const raw::Switch* b) { return a->pos < b->pos; });
    const auto& ring_calls = calls[ring];
    for (size_t i = 0; i < sw.size(); ++i) {
      const raw::Switch& w = *sw[i];
      if (w.out == 0) continue;
      if (w.preempt != 0) {
        in->Preempted();
        continue;
      }
      uint32_t stack = unattributed;
      auto call = ring_calls.upper_bound(w.pos);
      if (call != ring_calls.begin() && w.pos < std::prev(call)->second->h.to) {
        stack = in->Stack(sym, std::prev(call)->second->ips, /*all_returns=*/true);
      } else {
        in->Unattributed();
      }
      const uint32_t thread = in->Thread(p.header.pid, w.tid);
      const bool back = i + 1 < sw.size() && sw[i + 1]->out == 0;
      const uint64_t off =
          back && sw[i + 1]->time_ns > w.time_ns ? sw[i + 1]->time_ns - w.time_ns : 0;
      out->push_back({rel(w.time_ns), in->IdleTypeOf(thread, stack, IdleDirection::kToIdle), off});
      if (back) {
        out->push_back({rel(sw[i + 1]->time_ns),
                        in->IdleTypeOf(thread, stack, IdleDirection::kFromIdle), off});
      }
    }
  }
}

// CPU-wide idle records paired with the recorded threads' waits: a CPU
// that went idle as a thread switched out is charged to the stack that
// thread waited at, and a CPU that left idle to run a thread to the stack
// it woke at. The two records of one switch (the thread's own ring, the
// CPU's) are stamped apart by moments: the nearest within kNear is it.
void PairCpuIdle(const CpuIdleLog& log, uint64_t start_ns, Interner* in, Recording* r,
                 std::vector<IdleEvent>* idle) {
  constexpr uint64_t kNear = 200000;  // 200 us
  // Per (thread, direction): the waits' (time, stack), in order of time.
  std::map<std::pair<uint32_t, IdleDirection>, std::vector<std::pair<uint64_t, uint32_t>>> waits;
  for (const IdleEvent& e : *idle) {
    const IdleType& t = r->idle_types[e.type];
    waits[{t.thread, t.direction}].emplace_back(e.time, t.stack);
  }
  for (auto& [k, v] : waits) std::sort(v.begin(), v.end());
  const uint32_t unmatched = in->Stack({in->Frame("[no wait of the thread near it]")});
  for (const CpuIdleRecord& c : log.records) {
    uint32_t thread = 0;
    if (c.time_ns < start_ns || !in->FindThread(c.pid, c.tid, &thread)) continue;
    const uint64_t t = c.time_ns - start_ns;
    const auto& v =
        waits[{thread, c.went_idle ? IdleDirection::kToIdle : IdleDirection::kFromIdle}];
    uint32_t stack = unmatched;
    uint64_t best = kNear + 1;
    auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(t, uint32_t{0}));
    for (auto j : {it, it == v.begin() ? it : std::prev(it)}) {
      if (j == v.end()) continue;
      const uint64_t d = j->first > t ? j->first - t : t - j->first;
      if (d < best) best = d, stack = j->second;
    }
    if (stack == unmatched) ++r->cpu_idle_unmatched;
    idle->push_back(
        {t,
         in->IdleTypeOf(thread, stack,
                        c.went_idle ? IdleDirection::kCpuIdleAfter : IdleDirection::kCpuWokeInto),
         c.idle_ns});
  }
}

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

StatusOr<Recording> RecordingFromRawDir(const std::string& dir, const TimeTreeOptions& options) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".raw") files.push_back(e.path().string());
  }
  if (ec) return IOError("cannot read " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  Recording r;
  std::vector<RawProcess> procs;
  for (const std::string& f : files) {
    StatusOr<RawProcess> p = ReadRaw(f);
    if (!p.ok()) continue;  // a file the sampler never got to write its header into
    procs.push_back(std::move(*p));
  }
  if (procs.empty()) return NotFound("no process was recorded (no raw files in " + dir + ")");
  r.start_ns = UINT64_MAX;
  uint64_t end = 0;
  // A recording sampled from outside has two files for a process: the
  // samples (perf-*.raw) and, from the program, its idle transitions
  // (kNoSamples). Processes are counted once, from the files with samples.
  const bool outside = std::any_of(procs.begin(), procs.end(), [](const RawProcess& p) {
    return raw::IsPerfSource(p.header.source);
  });
  for (const RawProcess& p : procs) {
    r.start_ns = std::min(r.start_ns, p.header.start_ns);
    for (const auto& s : p.samples) end = std::max(end, s.h.time_ns);  // threads drain in turn
    for (const raw::Switch& w : p.switches) end = std::max(end, w.time_ns);
    if (p.ended) {
      end = std::max(end, p.trailer.end_ns);
      r.dropped += p.trailer.dropped;
      r.skipped += p.trailer.skipped;
      r.throttled += p.trailer.throttled;
      r.switches_lost += p.trailer.switches_lost;
      r.threads_unwatched += p.trailer.threads_unwatched;
      if (p.trailer.signal_taken != 0) ++r.signal_taken;
      if (p.trailer.seccomp_aside != 0) ++r.seccomp_aside;
    }
    if ((p.header.flags & raw::kSteppedAside) != 0) ++r.stepped_aside;
    if (outside && p.header.source == raw::kNoSamples) continue;
    r.hz = p.header.hz;
    r.wall = p.header.wall != 0;
    r.source = p.header.source;
    ++r.processes;
    if (!p.ended) ++r.processes_cut_short;
  }
  r.duration_ns = end > r.start_ns ? end - r.start_ns : 0;
  Interner in(&r);
  struct Sample {
    uint64_t time;
    uint32_t type;
    uint64_t weight_ns;
  };
  std::vector<Sample> samples;
  std::vector<IdleEvent> idle;
  for (const RawProcess& p : procs) {
    const uint32_t pid = p.header.pid;
    Symbolizer sym(Loaded(p.modules), pid);
    for (const RawSample& s : p.samples) {
      const uint32_t type = in.Type(in.Thread(pid, s.h.tid), in.Stack(sym, s.ips, false));
      const uint64_t period = p.header.hz > 0 ? 1000000000ull / p.header.hz : 0;
      samples.push_back({s.h.time_ns >= r.start_ns ? s.h.time_ns - r.start_ns : 0, type,
                         s.h.weight_ns != 0 ? s.h.weight_ns : period});
    }
    r.idle |= p.header.idle != 0;
    Waits(p, r.start_ns, sym, &in, &idle);
  }
  if (StatusOr<std::string> cpu = ReadWholeFile(dir + "/" + kCpuIdleFile); cpu.ok()) {
    FP_ASSIGN_OR_RETURN(CpuIdleLog log, DecodeCpuIdleLog(*cpu));
    r.cpu_wide = true;
    r.cpu_switches_lost = log.lost;
    PairCpuIdle(log, r.start_ns, &in, &r, &idle);
  }
  std::stable_sort(samples.begin(), samples.end(),
                   [](const Sample& a, const Sample& b) { return a.time < b.time; });
  std::vector<uint64_t> times(samples.size());
  std::vector<uint32_t> types(samples.size());
  r.sample_ns.resize(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    times[i] = samples[i].time;
    types[i] = samples[i].type;
    r.sample_ns[i] = samples[i].weight_ns;
  }
  FP_ASSIGN_OR_RETURN(r.tree, TimeTree::Build(std::move(times), std::move(types), options));
  std::stable_sort(idle.begin(), idle.end(),
                   [](const IdleEvent& a, const IdleEvent& b) { return a.time < b.time; });
  times.resize(idle.size());
  types.resize(idle.size());
  r.idle_off_ns.resize(idle.size());
  for (size_t i = 0; i < idle.size(); ++i) {
    times[i] = idle[i].time;
    types[i] = idle[i].type;
    r.idle_off_ns[i] = idle[i].off_ns;
  }
  FP_ASSIGN_OR_RETURN(r.idle_tree, TimeTree::Build(std::move(times), std::move(types), options));
  return r;
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

StatusOr<Recording> DecodeRecording(std::string_view in) {
  const std::string_view magic = in.substr(0, kMagicSize);
  const int version = magic == std::string_view(kMagic, kMagicSize)    ? 4
                      : magic == std::string_view(kMagic3, kMagicSize) ? 3
                      : magic == std::string_view(kMagic2, kMagicSize) ? 2
                      : magic == std::string_view(kMagic1, kMagicSize) ? 1
                                                                       : 0;
  if (version == 0) return DataLoss("not a fieldprof recording");
  in.remove_prefix(kMagicSize);
  Recording r;
  uint64_t hz = 0, wall = 0, procs = 0, cut = 0, n = 0;
  if (!GetString(&in, &r.command) || !GetVarint(&in, &hz) || !GetVarint(&in, &wall) ||
      !GetVarint(&in, &r.start_ns) || !GetVarint(&in, &r.duration_ns) ||
      !GetVarint(&in, &r.dropped) || !GetVarint(&in, &r.skipped) || !GetVarint(&in, &procs) ||
      !GetVarint(&in, &cut)) {
    return DataLoss("recording: truncated header");
  }
  r.hz = static_cast<uint32_t>(hz);
  r.wall = wall != 0;
  r.processes = static_cast<uint32_t>(procs);
  r.processes_cut_short = static_cast<uint32_t>(cut);
  auto bad = [](const char* what) { return DataLoss(std::string("recording: bad ") + what); };
  if (!GetVarint(&in, &n) || n > in.size()) return bad("frames");
  r.frames.resize(n);
  for (std::string& f : r.frames) {
    if (!GetString(&in, &f)) return bad("frames");
  }
  if (!GetVarint(&in, &n) || n > in.size()) return bad("stacks");
  r.stacks.resize(n);
  for (auto& s : r.stacks) {
    uint64_t depth = 0;
    if (!GetVarint(&in, &depth) || depth > in.size()) return bad("stacks");
    s.resize(depth);
    for (uint32_t& f : s) {
      uint64_t v = 0;
      if (!GetVarint(&in, &v) || v >= r.frames.size()) return bad("stacks");
      f = static_cast<uint32_t>(v);
    }
  }
  if (!GetVarint(&in, &n) || n > in.size()) return bad("threads");
  r.threads.resize(n);
  for (RecordedThread& t : r.threads) {
    uint64_t pid = 0, tid = 0;
    if (!GetVarint(&in, &pid) || !GetVarint(&in, &tid)) return bad("threads");
    t.pid = static_cast<uint32_t>(pid);
    t.tid = static_cast<uint32_t>(tid);
  }
  if (!GetVarint(&in, &n) || n > in.size()) return bad("types");
  r.types.resize(n);
  for (auto& [thread, stack] : r.types) {
    uint64_t a = 0, b = 0;
    if (!GetVarint(&in, &a) || !GetVarint(&in, &b) || a >= r.threads.size() ||
        b >= r.stacks.size()) {
      return bad("types");
    }
    thread = static_cast<uint32_t>(a);
    stack = static_cast<uint32_t>(b);
  }
  if (version >= 2) FP_RETURN_IF_ERROR(DecodeIdle(&in, &r, version));
  if (version >= 4) {
    if (!GetVarint(&in, &n) || n > in.size()) return bad("sample times");
    r.sample_ns.resize(n);
    for (uint64_t& ns : r.sample_ns) {
      if (!GetVarint(&in, &ns)) return bad("sample times");
    }
  }
  FP_ASSIGN_OR_RETURN(r.tree, TimeTree::Decode(in));
  for (uint32_t t : r.tree.types()) {
    if (t >= r.types.size()) return bad("samples");
  }
  if (!r.sample_ns.empty() && r.sample_ns.size() != r.tree.samples()) return bad("sample times");
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

uint64_t SampleNs(const Recording& r, size_t i) {
  if (i < r.sample_ns.size()) return r.sample_ns[i];
  return r.hz > 0 ? 1000000000ull / r.hz : 0;
}

}  // namespace fieldprof::local
