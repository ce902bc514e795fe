#include "tools/record/raw_dir_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>
#include <unordered_map>

#include "common/base/durable_file.h"
#include "common/points/points_analysis.h"
#include "common/points/points_file.h"
#include "common/stacks/sampler_format.h"
#include "tools/record/cpu_switches.h"
#include "tools/record/field_view.h"
#include "tools/shared/symbolizer.h"

namespace fieldprof::tools {

namespace {

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

// Parses the whole records at the front of `in` into `p` (samples into
// `samples`), and returns the bytes they took; a record cut short is left
// for when the rest is written. Sets `damaged` on a record no writer
// makes: what came before it stands, and nothing after it is read.
size_t ParseRecords(std::string_view in, RawProcess* p, std::vector<RawSample>* samples,
                    bool* damaged) {
  const size_t size = in.size();
  while (!in.empty()) {
    const char tag = in.front();
    std::string_view rest = in.substr(1);
    if (tag == 'S') {
      RawSample s;
      if (!Take(&rest, &s.h)) break;
      if (s.h.depth > raw::kMaxFrames) {
        *damaged = true;
        break;
      }
      if (rest.size() < s.h.depth * sizeof(uint64_t)) break;  // cut short
      s.ips.resize(s.h.depth);
      std::memcpy(s.ips.data(), rest.data(), s.h.depth * sizeof(uint64_t));
      rest.remove_prefix(s.h.depth * sizeof(uint64_t));
      samples->push_back(std::move(s));
    } else if (tag == 'M') {
      RawModule m;
      if (!Take(&rest, &m.h) || rest.size() < m.h.path_len) break;
      m.path.assign(rest.data(), m.h.path_len);
      rest.remove_prefix(m.h.path_len);
      p->modules.push_back(std::move(m));
    } else if (tag == 'W') {
      raw::Switch w;
      if (!Take(&rest, &w)) break;
      p->switches.push_back(w);
    } else if (tag == 'B') {
      RawBlocked b;
      if (!Take(&rest, &b.h)) break;
      if (b.h.depth > raw::kMaxFrames) {
        *damaged = true;
        break;
      }
      if (rest.size() < b.h.depth * sizeof(uint64_t)) break;
      b.ips.resize(b.h.depth);
      std::memcpy(b.ips.data(), rest.data(), b.h.depth * sizeof(uint64_t));
      rest.remove_prefix(b.h.depth * sizeof(uint64_t));
      p->blocked.push_back(std::move(b));
    } else if (tag == 'E') {
      if (!Take(&rest, &p->trailer)) break;
      p->ended = true;
    } else {
      *damaged = true;
      break;
    }
    in = rest;
  }
  return size - in.size();
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
  // A sample's field stacks, as the set of their ids.
  uint32_t FieldSet(const std::vector<FieldStackName>& stacks) {
    std::vector<uint32_t> ids;
    ids.reserve(stacks.size());
    for (const FieldStackName& f : stacks) {
      auto [it, fresh] = field_ids_.emplace(f, static_cast<uint32_t>(r_->field_stacks.size()));
      if (fresh) r_->field_stacks.push_back(f);
      ids.push_back(it->second);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    auto [it, fresh] = field_set_ids_.emplace(ids, static_cast<uint32_t>(r_->field_sets.size()));
    if (fresh) r_->field_sets.push_back(std::move(ids));
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
  std::map<FieldStackName, uint32_t> field_ids_;
  std::map<std::vector<uint32_t>, uint32_t> field_set_ids_;
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

// One raw file: what was read of it, and its process as far as read (its
// samples are interned as they are read, not kept).
struct RawDirReader::File {
  std::string path;
  uint64_t offset = 0;  // read up to here: whole records
  bool header = false;  // its header is read
  bool done = false;    // damaged or not ours: nothing more is read
  RawProcess p;
  uint64_t last_time = 0;   // its latest sample's or switch's
  bool unresolved = false;  // a sample had an address outside the modules known then
  size_t sym_modules = 0;   // the modules `sym` was made with
  std::unique_ptr<Symbolizer> sym;
  // The field view's: the modules as loaded, and what the folder knows of them.
  std::vector<LoadedModule> loaded;
  std::vector<const FieldFolder::Module*> field_info;

  bool Covered(const std::vector<uint64_t>& ips) const {
    for (uint64_t ip : ips) {
      bool in = false;
      for (const RawModule& m : p.modules) in |= ip >= m.h.lo && ip < m.h.hi;
      if (!in) return false;
    }
    return true;
  }
};

struct RawDirReader::Interned : Interner {
  using Interner::Interner;
};

RawDirReader::RawDirReader(std::string dir, const TimeTreeOptions& options)
    : dir_(std::move(dir)),
      options_(options),
      builder_(options),
      folder_(std::make_unique<FieldFolder>()),
      in_(std::make_unique<Interned>(&r_)) {}

RawDirReader::~RawDirReader() = default;

Symbolizer& RawDirReader::SymOf(File& f) {
  if (f.sym != nullptr && f.sym_modules == f.p.modules.size()) {
    symbolized_.remove(&f);
    symbolized_.push_front(&f);
    return *f.sym;
  }
  // A symbolizer holds every module of its process open: a few are kept,
  // the least recently used let go (Chromium under --clock task has a
  // hundred processes of a hundred modules).
  symbolized_.remove(&f);
  while (symbolized_.size() >= kSymbolizersKept) {
    symbolized_.back()->sym.reset();
    symbolized_.pop_back();
  }
  f.sym = std::make_unique<Symbolizer>(Loaded(f.p.modules), f.p.header.pid);
  f.sym_modules = f.p.modules.size();
  symbolized_.push_front(&f);
  return *f.sym;
}

Status RawDirReader::ReadMore(File& f) {
  const int fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Ok();  // gone: what was read stands
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = pread(fd, buf, sizeof buf, static_cast<off_t>(f.offset + bytes.size()));
    if (n <= 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  std::string_view in = bytes;
  if (!f.header) {
    if (in.size() < sizeof f.p.header) return Status::Ok();  // not yet written
    std::memcpy(&f.p.header, in.data(), sizeof f.p.header);
    if (std::memcmp(f.p.header.magic, raw::kMagic, sizeof raw::kMagic) != 0) {
      f.done = true;  // not a fieldprof record raw file
      return Status::Ok();
    }
    f.header = true;
    in.remove_prefix(sizeof f.p.header);
    f.offset += sizeof f.p.header;
  }
  std::vector<RawSample> samples;
  bool damaged = false;
  const size_t modules_before = f.p.modules.size();
  f.offset += ParseRecords(in, &f.p, &samples, &damaged);
  f.done |= damaged;
  for (size_t i = modules_before; i < f.p.modules.size(); ++i) {
    if (module_files_seen_.insert(f.p.modules[i].path).second) {
      r_.module_files.push_back(f.p.modules[i].path);
    }
  }
  for (const raw::Switch& w : f.p.switches) f.last_time = std::max(f.last_time, w.time_ns);
  // A sample read before the modules that name it: the tree is made again
  // at the end, from the whole files.
  if (f.unresolved && f.p.modules.size() != modules_before) stale_ = true;
  // The chunk's samples are named with every module the chunk listed.
  const uint64_t period = f.p.header.hz > 0 ? 1000000000ull / f.p.header.hz : 0;
  if (f.loaded.size() != f.p.modules.size()) {
    f.loaded = Loaded(f.p.modules);
    folder_->Describe(f.loaded, &f.field_info);
  }
  for (const RawSample& s : samples) {
    f.unresolved |= !f.Covered(s.ips);
    const uint32_t type =
        in_->Type(in_->Thread(f.p.header.pid, s.h.tid), in_->Stack(SymOf(f), s.ips, false));
    const uint32_t field = in_->FieldSet(FieldFolder::Fold(f.loaded, f.field_info, s.ips));
    pending_.push_back({s.h.time_ns, type, s.h.weight_ns != 0 ? s.h.weight_ns : period, field});
    f.last_time = std::max(f.last_time, s.h.time_ns);
  }
  return Status::Ok();
}

Status RawDirReader::Poll(uint64_t watermark_ns) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    if (e.path().extension() == ".raw") found.push_back(e.path().string());
  }
  if (ec) return IOError("cannot read " + dir_ + ": " + ec.message());
  std::sort(found.begin(), found.end());
  // files_ stays in path order: a file already known is found by halves,
  // a new one goes in at its place.
  for (const std::string& path : found) {
    const auto it = std::lower_bound(
        files_.begin(), files_.end(), path,
        [](const std::unique_ptr<File>& f, const std::string& p) { return f->path < p; });
    if (it != files_.end() && (*it)->path == path) continue;
    auto f = std::make_unique<File>();
    f->path = path;
    files_.insert(it, std::move(f));
  }
  for (auto& f : files_) {
    if (!f->done) FP_RETURN_IF_ERROR(ReadMore(*f));
  }
  // The samples taken up to the watermark join the tree, in order of time.
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const Sample& a, const Sample& b) { return a.time < b.time; });
  size_t joined = 0;
  for (; joined < pending_.size() && pending_[joined].time <= watermark_ns; ++joined) {
    const Sample& s = pending_[joined];
    if (builder_.samples() > 0 && s.time < builder_.last_time()) {
      late_.push_back(s);  // its writer fell behind the watermark
      continue;
    }
    FP_RETURN_IF_ERROR(builder_.Append(s.time, s.type));
    sample_ns_.push_back(s.weight);
    sample_fields_.push_back(s.field);
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(joined));
  return Status::Ok();
}

void RawDirReader::Points(Recording* r) {
  r->span_names.clear();
  r->spans.clear();
  r->points_lost = 0;
  StatusOr<std::vector<std::string>> files = PointsFiles({dir_});
  if (!files.ok()) return;
  std::map<std::tuple<std::string, std::string, bool>, uint32_t> name_ids;
  const auto rel = [&](uint64_t t) { return t >= r->start_ns ? t - r->start_ns : 0; };
  for (const std::string& file : *files) {
    // A file cut before its second clock reading, or damaged: its points
    // are left out; the samples stand.
    StatusOr<PointsRun> run = ReadPointsRun(file);
    if (!run.ok()) continue;
    r->points_lost += run->lost;
    for (const SegmentOccurrence& o : OccurrencesOf(*run)) {
      const auto [it, fresh] = name_ids.try_emplace(std::make_tuple(o.tag, o.segment, o.scope),
                                                    static_cast<uint32_t>(r->span_names.size()));
      if (fresh) r->span_names.push_back({o.tag, o.segment, o.scope});
      RecordedSpan sp;
      sp.name = it->second;
      sp.begin_thread = in_->Thread(run->pid, o.begin_tid);
      sp.thread = in_->Thread(run->pid, o.end_tid);
      sp.begin_ns =
          rel(run->start_mono_ns + static_cast<uint64_t>(std::max<int64_t>(0, o.begin_ns)));
      sp.end_ns = std::max(sp.begin_ns, rel(run->start_mono_ns +
                                            static_cast<uint64_t>(std::max<int64_t>(0, o.end_ns))));
      r->spans.push_back(sp);
    }
  }
  std::stable_sort(
      r->spans.begin(), r->spans.end(),
      [](const RecordedSpan& a, const RecordedSpan& b) { return a.begin_ns < b.begin_ns; });
}

uint64_t RawDirReader::CountProcesses(const std::vector<File*>& procs) {
  Recording& r = r_;
  uint64_t end = 0;
  // A recording sampled from outside has two files for a process: the
  // samples (perf-*.raw) and, from the program, its idle transitions
  // (kNoSamples). Processes are counted once, from the files with samples.
  const bool outside = std::any_of(procs.begin(), procs.end(), [](const File* f) {
    return raw::IsPerfSource(f->p.header.source);
  });
  for (const File* f : procs) {
    const RawProcess& p = f->p;
    r.start_ns = std::min(r.start_ns, p.header.start_ns);
    end = std::max(end, f->last_time);  // threads drain in turn
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
  return end;
}

StatusOr<TimeTree> RawDirReader::SamplesTree(bool with_waiting, std::vector<uint64_t>* sample_ns,
                                             std::vector<uint32_t>* sample_fields) {
  if (late_.empty() && (!with_waiting || pending_.empty())) {
    FP_ASSIGN_OR_RETURN(TimeTree tree, builder_.Tree());
    tree.MakeTimesRelative(r_.start_ns);
    *sample_ns = sample_ns_;
    *sample_fields = sample_fields_;
    return tree;
  }
  if (late_.empty()) {
    TimeTreeBuilder grown = builder_;  // pending_ is in order, and after it
    *sample_ns = sample_ns_;
    *sample_fields = sample_fields_;
    for (const Sample& s : pending_) {
      FP_RETURN_IF_ERROR(grown.Append(s.time, s.type));
      sample_ns->push_back(s.weight);
      sample_fields->push_back(s.field);
    }
    FP_ASSIGN_OR_RETURN(TimeTree tree, grown.Tree());
    tree.MakeTimesRelative(r_.start_ns);
    return tree;
  }
  std::vector<Sample> all = late_;
  if (with_waiting) all.insert(all.end(), pending_.begin(), pending_.end());
  const std::vector<uint64_t>& times = builder_.times();
  const std::vector<uint32_t>& types = builder_.types();
  for (size_t i = 0; i < times.size(); ++i) {
    all.push_back({times[i], types[i], sample_ns_[i], sample_fields_[i]});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Sample& a, const Sample& b) { return a.time < b.time; });
  std::vector<uint64_t> t(all.size());
  std::vector<uint32_t> y(all.size());
  sample_ns->resize(all.size());
  sample_fields->resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    t[i] = all[i].time >= r_.start_ns ? all[i].time - r_.start_ns : 0;
    y[i] = all[i].type;
    (*sample_ns)[i] = all[i].weight;
    (*sample_fields)[i] = all[i].field;
  }
  return TimeTree::Build(std::move(t), std::move(y), options_);
}

StatusOr<Recording> RawDirReader::Snapshot(bool with_waiting) {
  std::vector<File*> procs;
  for (auto& f : files_) {
    if (f->header) procs.push_back(f.get());
  }
  if (procs.empty()) return NotFound("no process was recorded (no raw files in " + dir_ + ")");
  // What the files say so far; counted afresh at each snapshot.
  Recording& r = r_;
  r.start_ns = UINT64_MAX;
  r.dropped = r.skipped = r.throttled = r.switches_lost = r.threads_unwatched = 0;
  r.signal_taken = r.seccomp_aside = r.stepped_aside = r.processes = r.processes_cut_short = 0;
  r.preemptions = r.waits_unattributed = r.cpu_idle_unmatched = r.cpu_switches_lost = 0;
  r.idle = r.cpu_wide = false;
  const uint64_t end = CountProcesses(procs);
  r.duration_ns = end > r.start_ns ? end - r.start_ns : 0;
  std::vector<IdleEvent> idle;
  for (File* f : procs) {
    r.idle |= f->p.header.idle != 0;
    Waits(f->p, r.start_ns, SymOf(*f), in_.get(), &idle);
  }
  if (StatusOr<std::string> cpu = ReadWholeFile(dir_ + "/" + kCpuIdleFile); cpu.ok()) {
    FP_ASSIGN_OR_RETURN(CpuIdleLog log, DecodeCpuIdleLog(*cpu));
    r.cpu_wide = true;
    r.cpu_switches_lost = log.lost;
    PairCpuIdle(log, r.start_ns, in_.get(), &r, &idle);
  }
  Points(&r);
  Recording out = r;
  FP_ASSIGN_OR_RETURN(out.tree, SamplesTree(with_waiting, &out.sample_ns, &out.sample_fields));
  std::stable_sort(idle.begin(), idle.end(),
                   [](const IdleEvent& a, const IdleEvent& b) { return a.time < b.time; });
  std::vector<uint64_t> times(idle.size());
  std::vector<uint32_t> types(idle.size());
  out.idle_off_ns.resize(idle.size());
  for (size_t i = 0; i < idle.size(); ++i) {
    times[i] = idle[i].time;
    types[i] = idle[i].type;
    out.idle_off_ns[i] = idle[i].off_ns;
  }
  FP_ASSIGN_OR_RETURN(out.idle_tree, TimeTree::Build(std::move(times), std::move(types), options_));
  return out;
}

StatusOr<Recording> RecordingFromRawDir(const std::string& dir, const TimeTreeOptions& options) {
  FP_RETURN_IF_ERROR(CheckTimeTreeOptions(options));
  RawDirReader reader(dir, options);
  FP_RETURN_IF_ERROR(reader.Poll(UINT64_MAX));
  return reader.Snapshot();
}

}  // namespace fieldprof::tools
