#include "common/points/points_file.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <new>
#include <stdexcept>

#include "common/base/durable_file.h"
#include "common/points/points_format.h"
#include "common/stacks/cxx_names.h"

namespace fieldprof {

namespace {

namespace pf = points;

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool done() const { return at_ >= b_.size(); }
  size_t at() const { return at_; }
  void Skip(size_t n) { at_ += n; }
  template <typename T>
  bool Get(T* v) {
    if (b_.size() - at_ < sizeof(T)) return false;
    std::memcpy(v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && at_ < b_.size(); shift += 7) {
      const auto byte = static_cast<uint8_t>(b_[at_++]);
      *v |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  // `n` bytes (0-8), little-endian.
  bool Little(uint32_t n, uint64_t* v) {
    if (b_.size() - at_ < n) return false;
    *v = 0;
    std::memcpy(v, b_.data() + at_, n);
    at_ += n;
    return true;
  }
  // A packed event (points_format.h): its control byte and three fields.
  bool Packed(uint64_t* delta, uint64_t* site_kind, uint64_t* zigzag) {
    uint8_t c = 0;
    if (!Get(&c)) return false;
    const pf::PackedLengths l = pf::UnpackControl(c);
    return Little(l.tsc, delta) && Little(l.site, site_kind) && Little(l.value, zigzag);
  }
  bool Str(std::string* s) {
    uint16_t n;
    if (!Get(&n) || b_.size() - at_ < n) return false;
    s->assign(b_.data() + at_, n);
    at_ += n;
    return true;
  }

 private:
  std::string_view b_;
  size_t at_ = 0;
};

struct RawEvent {
  uint64_t tsc, site;
  int64_t value;
  uint32_t tid;
  uint8_t kind;
  uint32_t stack = 0;
};

// The records after the header, each handed whole to `sink` (OnRate,
// OnClock, OnSite, OnEvent, OnStack, OnModule, OnLost, OnStackless, OnEnd,
// OnNames); stops after the end mark and the names after it, or at a
// record cut short or damaged, keeping those before. The events of a
// batch cut short that read whole come too, marked so. Returns where the
// last whole record ended, from the start of `r`'s bytes.
template <typename Sink>
size_t ReadRecords(Reader& r, Sink& sink) {
  size_t whole = r.at();
  char type = 0;
  bool ended = false;
  std::vector<RawEvent> batch;
  while (!r.done()) {
    if (!r.Get(&type) || (ended && type != pf::kNames)) break;
    bool ok = true;
    if (type == pf::kRate) {
      uint64_t tsc_hz = 0;
      ok = r.Get(&tsc_hz);
      if (ok) sink.OnRate(tsc_hz);
    } else if (type == pf::kClock) {
      uint64_t tsc = 0, ns = 0;
      ok = r.Get(&tsc) && r.Get(&ns);
      if (ok) sink.OnClock(tsc, ns);
    } else if (type == pf::kSite) {
      uint32_t id = 0;
      PointSite site;
      ok = r.Get(&id) && r.Str(&site.tag) && r.Str(&site.name);
      if (ok) sink.OnSite(id, std::move(site));
    } else if (type == pf::kPackedBatch || type == pf::kBatch) {
      uint32_t tid = 0, n = 0;
      uint64_t tsc = 0;
      ok = r.Get(&tid) && r.Get(&n) && n <= pf::kMaxBatch && r.Get(&tsc);
      // Its events are kept aside until the last one reads.
      batch.clear();
      for (uint32_t i = 0; ok && i < n; ++i) {
        uint64_t delta = 0, site_kind = 0, zigzag = 0;
        ok = type == pf::kPackedBatch
                 ? r.Packed(&delta, &site_kind, &zigzag)
                 : r.Varint(&delta) && r.Varint(&site_kind) && r.Varint(&zigzag);
        tsc += delta;
        const auto value = static_cast<int64_t>((zigzag >> 1) ^ (~(zigzag & 1) + 1));
        if (ok)
          batch.push_back({tsc, site_kind >> 2, value, tid, static_cast<uint8_t>(site_kind & 3)});
      }
      for (const RawEvent& e : batch) sink.OnEvent(e, ok);
    } else if (type == pf::kStack) {
      uint32_t id = 0;
      uint16_t depth = 0;
      ok = r.Get(&id) && r.Get(&depth) && depth <= pf::kMaxStackDepth;
      std::vector<uint64_t> ips(ok ? depth : 0);
      for (uint64_t& ip : ips) ok = ok && r.Get(&ip);
      if (ok) sink.OnStack(id, std::move(ips));
    } else if (type == pf::kModule) {
      PointsModule m;
      ok = r.Get(&m.bias) && r.Get(&m.lo) && r.Get(&m.hi) && r.Str(&m.path);
      if (ok) sink.OnModule(std::move(m));
    } else if (type == pf::kLost || type == pf::kStackless) {
      uint32_t tid = 0;
      uint64_t n = 0;
      ok = r.Get(&tid) && r.Get(&n);
      if (ok && type == pf::kLost) sink.OnLost(n);
      if (ok && type == pf::kStackless) sink.OnStackless(n);
    } else if (type == pf::kEnd) {
      sink.OnEnd();
      ended = true;
    } else if (type == pf::kNames) {
      uint32_t n = 0;
      ok = r.Get(&n);
      std::map<uint64_t, std::string> names;
      for (uint32_t i = 0; ok && i < n; ++i) {
        uint64_t ip = 0;
        std::string name;
        ok = r.Get(&ip) && r.Str(&name);
        if (ok) names.emplace(ip, std::move(name));
      }
      if (ok) sink.OnNames(std::move(names));
    } else {
      ok = false;
    }
    if (!ok) break;  // cut or damaged here: keep what came before
    whole = r.at();
  }
  return whole;
}

// The header: false when it is not there whole.
bool ReadHeader(Reader& r, uint32_t* pid, uint64_t* start_unix_ns, std::string* program) {
  char type = 0;
  return r.Get(&type) && type == pf::kHeader && r.Get(pid) && r.Get(start_unix_ns) &&
         r.Str(program);
}

// Reads the events straight into run->events, as they come: t_ns holds
// the event's TSC and site the recorder's site id until DecodePointsRun
// turns them into ns and an index into run->sites, in place. (A vector
// of raw events beside them cost the time and memory of tens of millions
// of events twice: on this VM a fresh page costs ~10 us.)
struct RunSink {
  PointsRun* run = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>> clock;  // tsc, mono ns
  uint64_t tsc_hz = 0;
  std::map<uint64_t, uint32_t> site_of;
  // Per thread, the pauses taking its stacks made: where each began (its
  // TSC) and how many ticks it took.
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> pauses_of;
  uint64_t wait_ticks = 0;  // of those pauses, the waits for room
  void OnRate(uint64_t hz) { tsc_hz = hz; }
  void OnClock(uint64_t tsc, uint64_t ns) { clock.emplace_back(tsc, ns); }
  void OnSite(uint32_t id, PointSite site) {
    // A C++ function's scope (points record --at) is named by its symbol.
    if (site.name.compare(0, 2, "_Z") == 0) site.name = Demangle(site.name);
    if (site_of.emplace(id, static_cast<uint32_t>(run->sites.size())).second) {
      run->sites.push_back(std::move(site));
    }
  }
  // Per thread, its last kMaxStackBack ring slots, oldest first: an
  // event's index in run->events, or kNone for a stack's slot (or an
  // event no site can name).
  static constexpr size_t kNone = ~size_t{0};
  std::map<uint32_t, std::deque<size_t>> slots_of;
  void OnEvent(const RawEvent& e, bool) {
    std::deque<size_t>& slots = slots_of[e.tid];
    if (slots.size() == pf::kMaxStackBack) slots.pop_front();
    if (e.kind != pf::kStackKind) {
      if (e.site > UINT32_MAX) {  // no site record names it (their ids are 32-bit)
        ++run->lost;
        slots.push_back(kNone);
        return;
      }
      slots.push_back(run->events.size());
      PointEvent p;
      p.t_ns = static_cast<int64_t>(e.tsc);
      p.site = static_cast<uint32_t>(e.site);
      p.tid = e.tid;
      p.value = e.value;
      p.kind = static_cast<PointKind>(e.kind);
      run->events.push_back(p);
      return;
    }
    // The stack of the event `back` slots before this one, and the pause
    // taking it made, from the record's TSC on.
    const auto v = static_cast<uint64_t>(e.value);
    const uint64_t back = v & 0xff;
    if (back >= 1 && back <= slots.size()) {
      const size_t at = slots[slots.size() - back];
      if (at != kNone && run->events[at].stack == 0) {
        run->events[at].stack = static_cast<uint32_t>(e.site);
      }
    }
    if ((v >> 8) != 0) pauses_of[e.tid].emplace_back(e.tsc, v >> 8);
    if (back == 0 && e.site == 0) {  // a wait for room, not a stack
      ++run->waits;
      wait_ticks += v >> 8;
    }
    slots.push_back(kNone);
  }
  void OnStack(uint32_t id, std::vector<uint64_t> ips) { run->stacks.emplace(id, std::move(ips)); }
  void OnModule(PointsModule m) { run->modules.push_back(std::move(m)); }
  void OnLost(uint64_t n) { run->lost += n; }
  void OnStackless(uint64_t n) { run->stackless += n; }
  void OnEnd() { run->complete = true; }
  void OnNames(std::map<uint64_t, std::string> names) { run->frame_names.merge(names); }
};

struct ScanSink {
  PointsScan* scan;
  void OnRate(uint64_t) {}
  void OnClock(uint64_t, uint64_t) { scan->clock = true; }
  void OnSite(uint32_t id, PointSite site) { scan->tag_of.emplace(id, std::move(site.tag)); }
  void OnEvent(const RawEvent& e, bool whole) {
    if (e.kind <= 2) ++(whole ? scan->events_at : scan->cut_at)[e.site];
  }
  void OnStack(uint32_t, std::vector<uint64_t>) { scan->stacks = true; }
  void OnModule(PointsModule) {}
  void OnLost(uint64_t) {}
  void OnStackless(uint64_t) {}
  void OnEnd() { scan->complete = true; }
  void OnNames(std::map<uint64_t, std::string>) { scan->named = true; }
};

// The stacks, the modules and whether the run ended and was named: no
// event is kept (StacksOfPointsRun).
struct StacksSink {
  PointsStacks* out;
  void OnRate(uint64_t) {}
  void OnClock(uint64_t, uint64_t) {}
  void OnSite(uint32_t, PointSite) {}
  void OnEvent(const RawEvent&, bool) {}
  void OnStack(uint32_t id, std::vector<uint64_t> ips) { out->stacks.emplace(id, std::move(ips)); }
  void OnModule(PointsModule m) { out->modules.push_back(std::move(m)); }
  void OnLost(uint64_t) {}
  void OnStackless(uint64_t) {}
  void OnEnd() { out->complete = true; }
  void OnNames(std::map<uint64_t, std::string>) { out->named = true; }
};

// Takes the frames of fieldprof's own modules (pf::kOwnModules: the
// runtime's interposers, its detours, the recorder) out of the run's
// stacks, so that each is the stack the program would have without them.
// Stacks left the same are one; returns each stack's id as the events
// should name it (absent: no stack left).
std::map<uint32_t, uint32_t> LeaveOutOwnFrames(PointsRun* run) {
  std::vector<std::pair<uint64_t, uint64_t>> own;  // code spans
  for (const PointsModule& m : run->modules) {
    const std::string file = m.path.substr(m.path.rfind('/') + 1);
    for (const char* name : pf::kOwnModules) {
      if (file == name) own.emplace_back(m.lo, m.hi);
    }
  }
  const auto ours = [&own](uint64_t ip) {
    return std::any_of(own.begin(), own.end(),
                       [ip](const auto& span) { return ip >= span.first && ip < span.second; });
  };
  std::map<uint32_t, uint32_t> id_of;
  std::map<std::vector<uint64_t>, uint32_t> first;
  for (auto it = run->stacks.begin(); it != run->stacks.end();) {
    std::vector<uint64_t>& ips = it->second;
    ips.erase(std::remove_if(ips.begin(), ips.end(), ours), ips.end());
    if (ips.empty()) {
      it = run->stacks.erase(it);
      continue;
    }
    const auto [same, fresh] = first.emplace(ips, it->first);
    id_of.emplace(it->first, same->second);
    it = fresh ? std::next(it) : run->stacks.erase(it);
  }
  return id_of;
}

// The events by time, ties in file order: what std::stable_sort gives,
// with less memory. One thread's events come in time order but for a
// placed function's begin (pushed at the call's end), so most recordings
// need no sort. Several threads' come in the drain's rounds, a batch per
// thread a round, so disorder is local: each chunk of kChunk events is
// sorted alone, then merged into the sorted events before it where the two
// overlap in time only. A whole stable_sort's buffer would be half the
// events again, in fresh pages, which cost more here than the sort; the
// chunks' is a few MB, used again. If the overlaps come to more than twice
// the events (no recorder writes so), the whole is sorted after all.
void SortByTime(std::vector<PointEvent>* events) {
  const auto by_time = [](const PointEvent& a, const PointEvent& b) { return a.t_ns < b.t_ns; };
  const auto begin = events->begin(), end = events->end();
  if (std::is_sorted(begin, end, by_time)) return;
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t n = events->size();
  if (n <= 2 * kChunk) {
    std::stable_sort(begin, end, by_time);
    return;
  }
  for (size_t at = 0; at < n; at += kChunk) {
    std::stable_sort(begin + static_cast<long>(at),
                     begin + static_cast<long>(std::min(at + kChunk, n)), by_time);
  }
  size_t merged = 0;
  for (size_t at = kChunk; at < n; at += kChunk) {
    // [begin, mid) is sorted, and so is [mid, chunk_end). Those before
    // `from` are no later than mid's first; those from `to` on no earlier
    // than the last before mid: only [from, to) is out of order.
    const auto mid = begin + static_cast<long>(at);
    const auto chunk_end = begin + static_cast<long>(std::min(at + kChunk, n));
    const auto from = std::upper_bound(begin, mid, *mid, by_time);
    const auto to = std::lower_bound(mid, chunk_end, *(mid - 1), by_time);
    merged += static_cast<size_t>(to - from);
    if (merged > 2 * n) {
      std::stable_sort(begin, end, by_time);  // stable: ties are still in file order
      return;
    }
    std::inplace_merge(from, mid, to, by_time);
  }
}

}  // namespace

uint64_t PointsScan::Events() const {
  uint64_t n = 0;
  for (const auto* counts : {&events_at, &cut_at}) {
    for (const auto& [site, count] : *counts) {
      if (tag_of.count(site) != 0) n += count;
    }
  }
  return n;
}

std::set<std::string> PointsScan::Tags() const {
  std::set<std::string> tags;
  for (const auto& [site, tag] : tag_of) tags.insert(tag);
  return tags;
}

Status ScanPointsRun(std::string_view more, PointsScan* scan) {
  if (scan->Finished()) return Status::Ok();
  Reader r(more);
  if (scan->offset == 0) {
    if (more.size() < pf::kMagicSize) return Status::Ok();  // not yet written
    if (more.substr(0, pf::kMagicSize) != std::string_view(pf::kMagic, pf::kMagicSize)) {
      return InvalidArgument("not a points file (no FPPOINTS1 line)");
    }
    r.Skip(pf::kMagicSize);
    uint32_t pid = 0;
    if (!ReadHeader(r, &pid, &scan->start_unix_ns, &scan->program)) return Status::Ok();
  }
  ScanSink sink{scan};
  scan->cut_at.clear();  // a batch cut short last time is read again whole
  scan->offset += ReadRecords(r, sink);
  return Status::Ok();
}

Status ScanPointsFile(const std::string& path, PointsScan* scan) {
  if (scan->Finished()) return Status::Ok();
  StatusOr<std::string> more = ReadFileFrom(path, scan->offset);
  if (!more.ok()) return more.status();
  const Status s = ScanPointsRun(*more, scan);
  if (!s.ok()) return InvalidArgument(path + ": " + s.message());
  return s;
}

namespace {

// Ticks to ns: the straight line through the first and last clock
// readings, or, when they are less than 1 ms apart (a file cut early),
// the rate the command measured; 0 when neither is known.
double NsPerTick(std::pair<uint64_t, uint64_t> first, std::pair<uint64_t, uint64_t> last,
                 uint64_t tsc_hz) {
  const auto [tsc0, ns0] = first;
  const auto [tsc1, ns1] = last;
  double ns_per_tick = tsc1 > tsc0 && ns1 > ns0
                           ? static_cast<double>(ns1 - ns0) / static_cast<double>(tsc1 - tsc0)
                           : 0;
  if (tsc_hz > 0 && (ns1 < ns0 + 1000000 || ns_per_tick == 0)) {
    ns_per_tick = 1e9 / static_cast<double>(tsc_hz);
  }
  return ns_per_tick;
}

// Per thread: each of its pauses' end, in order, and the ticks of the
// pauses before each (one more: all of them).
using PausesEnded = std::map<uint32_t, std::pair<std::vector<uint64_t>, std::vector<uint64_t>>>;

// The threads' pauses (sorted here) as PausesEnded; `ticks` sums them all.
PausesEnded EndsOfPauses(decltype(RunSink::pauses_of)* pauses_of, uint64_t* ticks) {
  PausesEnded ended_of;
  for (auto& [tid, pauses] : *pauses_of) {
    std::sort(pauses.begin(), pauses.end());
    auto& [ends, before] = ended_of[tid];
    uint64_t sum = 0;
    for (const auto& [start, length] : pauses) {
      ends.push_back(start + length);
      before.push_back(sum);
      sum += length;
      *ticks += length;
    }
    before.push_back(sum);
  }
  return ended_of;
}

}  // namespace

StatusOr<PointsStacks> StacksOfPointsRun(std::string_view bytes) {
  if (bytes.substr(0, pf::kMagicSize) != std::string_view(pf::kMagic, pf::kMagicSize)) {
    return InvalidArgument("not a points file (no FPPOINTS1 line)");
  }
  Reader r(bytes.substr(pf::kMagicSize));
  uint32_t pid = 0;
  uint64_t start = 0;
  std::string program;
  if (!ReadHeader(r, &pid, &start, &program)) {
    return InvalidArgument("a points file with a damaged header");
  }
  PointsStacks out;
  StacksSink sink{&out};
  ReadRecords(r, sink);
  return out;
}

StatusOr<PointsRun> DecodePointsRun(std::string_view bytes) {
  if (bytes.substr(0, pf::kMagicSize) != std::string_view(pf::kMagic, pf::kMagicSize)) {
    return InvalidArgument("not a points file (no FPPOINTS1 line)");
  }
  Reader r(bytes.substr(pf::kMagicSize));
  PointsRun run;
  if (!ReadHeader(r, &run.pid, &run.start_unix_ns, &run.program)) {
    return InvalidArgument("a points file with a damaged header");
  }
  // At most one event in 3 bytes (a packed event's least): reserved, so
  // that tens of millions of events are not copied as the vector doubles.
  // Pages reserved and never written cost nothing. Where so much cannot
  // be reserved, the vector grows as it must (the failure is ignored on
  // purpose: reading goes on).
  try {
    run.events.reserve(bytes.size() / 3);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  RunSink sink;
  sink.run = &run;
  ReadRecords(r, sink);
  auto& clock = sink.clock;
  auto& site_of = sink.site_of;
  const uint64_t tsc_hz = sink.tsc_hz;
  if (clock.empty()) return InvalidArgument("a points file with no clock reading");
  const auto [tsc0, ns0] = clock.front();
  run.start_mono_ns = ns0;
  const double ns_per_tick = NsPerTick(clock.front(), clock.back(), tsc_hz);
  // Taking a stack (--stacks) paused the thread: each event is moved back
  // by the pauses its thread had ended before the event's time, so that
  // no segment or scope of one thread counts them. By time, not by place
  // in the ring: a placed function's begin is pushed as the call ends,
  // after the stacks taken inside it, with the TSC of the call's start.
  // (A point made during a pause, a signal handler's, is not moved by it.)
  const PausesEnded ended_of = EndsOfPauses(&sink.pauses_of, &run.stack_ns);  // ticks for now
  const std::map<uint32_t, uint32_t> stack_id = LeaveOutOwnFrames(&run);
  // In place: each event's TSC to ns, its site id to its index; those no
  // site names are left out, counted as lost.
  size_t kept = 0;
  for (size_t i = 0; i < run.events.size(); ++i) {
    PointEvent p = run.events[i];
    const auto raw_tsc = static_cast<uint64_t>(p.t_ns);
    uint64_t tsc = raw_tsc;
    if (const auto q = ended_of.find(p.tid); q != ended_of.end()) {
      const std::vector<uint64_t>& ends = q->second.first;
      tsc -= q->second.second[std::upper_bound(ends.begin(), ends.end(), raw_tsc) - ends.begin()];
    }
    const auto s = site_of.find(p.site);
    if (s == site_of.end()) {  // its name could not be read (the recorder's NewSiteIndex)
      ++run.lost;
      continue;
    }
    if (ns_per_tick == 0 && raw_tsc != tsc0) {
      return InvalidArgument(
          "a points file cut before its second clock reading, with no TSC rate to turn its "
          "times into ns");
    }
    p.t_ns =
        static_cast<int64_t>((static_cast<double>(tsc) - static_cast<double>(tsc0)) * ns_per_tick);
    p.site = s->second;
    const auto id = stack_id.find(p.stack);
    p.stack = id != stack_id.end() ? id->second : 0;
    run.events[kept++] = p;
  }
  run.events.resize(kept);
  run.stack_ns -= std::min(run.stack_ns, sink.wait_ticks);
  run.stack_ns = static_cast<uint64_t>(static_cast<double>(run.stack_ns) * ns_per_tick);
  run.wait_ns = static_cast<uint64_t>(static_cast<double>(sink.wait_ticks) * ns_per_tick);
  SortByTime(&run.events);
  return run;
}

StatusOr<PointsRun> ReadPointsRun(const std::string& path) {
  StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  StatusOr<PointsRun> run = DecodePointsRun(*bytes);
  if (!run.ok()) return InvalidArgument(path + ": " + run.status().message());
  run->file = path;
  return run;
}

StatusOr<std::vector<std::string>> PointsFiles(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::directory_iterator(p, ec)) {
        if (e.path().extension() == ".fppoints") files.push_back(e.path().string());
      }
      if (ec) return NotFound("cannot read " + p + ": " + ec.message());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      return NotFound(p + ": no such file or directory");
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

StatusOr<std::vector<PointsRun>> ReadPointsRuns(const std::vector<std::string>& paths) {
  StatusOr<std::vector<std::string>> files = PointsFiles(paths);
  if (!files.ok()) return files.status();
  std::vector<PointsRun> runs;
  for (const std::string& f : *files) {
    StatusOr<PointsRun> r = ReadPointsRun(f);
    if (!r.ok()) return r.status();
    runs.push_back(std::move(*r));
  }
  std::stable_sort(runs.begin(), runs.end(), [](const PointsRun& a, const PointsRun& b) {
    return a.start_unix_ns != b.start_unix_ns ? a.start_unix_ns < b.start_unix_ns : a.file < b.file;
  });
  return runs;
}

}  // namespace fieldprof
