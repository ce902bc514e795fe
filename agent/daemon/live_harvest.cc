#include "agent/daemon/live_harvest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <type_traits>
#include <vector>

#include "agent/daemon/live_stacks.h"
#include "agent/preload/runtime/records/live_layout.h"
#include "common/base/durable_file.h"
#include "common/spool/spool.h"
#include "common/wire/wire.h"

namespace fieldprof::agent {

namespace fs = std::filesystem;
using rt::LiveHeader;
using rt::ShadowStack;
using rt::Slab;

static_assert(std::is_trivially_copyable_v<Histogram>,
              "live files hold Histograms as the runtime's memory does");

namespace {

// ---------------------------------------------------------------- one bucket

// Whether `count` values of bucket `i` (the zero bucket: i < 0) can add up
// to `sum` and `sum_sq`: the wire rules' bucket checks (common/wire/validate.cc).
bool BucketHolds(int i, uint64_t count, uint128 sum, uint128 sum_sq) {
  if (count == 0) return sum == 0 && sum_sq == 0;
  const uint128 lo = BucketLow(i), hi = BucketHigh(i);
  if (sum < lo * count || sum > hi * count) return false;
  if (sum_sq == kUint128Max) return true;  // saturated: no finer check holds
  if (sum_sq < lo * sum) return false;
  if (hi <= (kUint128Max / sum) && sum_sq > hi * sum) return false;
  // Cauchy-Schwarz: sum^2 <= count * sum_sq.
  const long double cs = static_cast<long double>(count) * static_cast<long double>(sum_sq);
  const long double s = static_cast<long double>(sum);
  return s * s <= cs * (1 + 1e-12L);
}

}  // namespace

void HistogramPart(const Histogram& now, wire::Histogram* reported, bool last,
                   wire::Histogram* part, uint64_t* dropped) {
  const Histogram before = HistogramFromWire(*reported);
  uint64_t dz = 0;
  uint64_t zero_reported = before.zero_count();
  if (now.zero_count() >= before.zero_count()) {
    dz = now.zero_count() - before.zero_count();
    zero_reported = now.zero_count();
  }
  wire::Histogram next, out;
  WireHistogramBuilder next_b(&next, zero_reported);
  WireHistogramBuilder out_b(&out, dz);
  int lowest = dz > 0 ? -1 : 64, highest = dz > 0 ? -1 : -2;
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& n = now.bucket(i);
    const HistogramBucket& r = before.bucket(i);
    const bool grew = n.count >= r.count && n.sum >= r.sum && n.sum_sq >= r.sum_sq;
    const uint64_t dc = grew ? n.count - r.count : 0;
    const uint128 ds = grew ? n.sum - r.sum : 0;
    const uint128 dq = grew ? n.sum_sq - r.sum_sq : 0;
    if (grew && BucketHolds(i, n.count, n.sum, n.sum_sq) && BucketHolds(i, dc, ds, dq)) {
      if (n.count > 0) next_b.AddBucket(i, n.count, n.sum, n.sum_sq);
      if (dc > 0) {
        out_b.AddBucket(i, dc, ds, dq);
        lowest = std::min(lowest, i);
        highest = i;
      }
      continue;
    }
    // Read mid-update: this bucket waits for a later reading.
    if (r.count > 0) next_b.AddBucket(i, r.count, r.sum, r.sum_sq);
    if (last && n.count > r.count) *dropped += n.count - r.count;
  }
  next_b.Finish(now.min(), now.max(), now.sum_sq_saturated());
  // The part's extremes: now's where they fall in its lowest and highest
  // buckets, else those buckets' edges (a run reported in parts keeps its
  // min and max within a bucket).
  uint64_t lo = 0, hi = 0;
  if (highest >= -1) {
    if (lowest >= 0) {
      lo = now.min() >= BucketLow(lowest) && now.min() <= BucketHigh(lowest) ? now.min()
                                                                             : BucketLow(lowest);
    }
    if (highest >= 0) {
      hi = now.max() >= BucketLow(highest) && now.max() <= BucketHigh(highest)
               ? now.max()
               : BucketHigh(highest);
    }
  }
  out_b.Finish(lo, hi, false);
  *reported = std::move(next);
  *part = std::move(out);
}

namespace {

// ---------------------------------------------------------------- the file

bool LockByte(int fd, short type, off_t byte) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = byte;
  l.l_len = 1;
  return ::fcntl(fd, F_OFD_SETLK, &l) == 0;
}

bool LayoutOk(const LiveHeader& h) {
  return std::memcmp(h.magic, rt::kLiveMagic, sizeof h.magic) == 0 && h.layout == rt::kLiveLayout &&
         h.header_bytes == rt::kLiveHeaderBytes && h.slab_bytes == sizeof(Slab) &&
         h.stack_bytes == sizeof(ShadowStack) && h.slabs == rt::kSlabs &&
         h.stacks == rt::kShadowStacks && h.max_slots == FP_MAX_SLOTS &&
         h.metrics == FP_NUM_METRICS && h.tick_table == rt::kTickTable && h.ring == rt::kRing &&
         h.histogram_bytes == sizeof(Histogram);
}

// Every kept slot's cumulative counts: what the runtime's record writer
// would sum now (agent/preload/runtime/records/record.cc SumSlabs): the slabs' histograms,
// their tick tables converted once a value, zeros for quiet calls, then
// the calls still kept in the threads' rings. The slabs are read before
// the rings: a ring flushed in between is missed now and read next time,
// never counted twice.
struct Totals {
  std::vector<int> slots;
  std::vector<std::array<Histogram, FP_NUM_METRICS>> h;
  uint64_t dropped = 0;  // short calls of a run whose clock never calibrated
};

bool ReadTotals(int fd, const LiveHeader& hdr, uint64_t ns_per_tick_q32, Totals* t) {
  auto kept = [&](int a) { return hdr.bound[a] && !hdr.evicted[a]; };
  auto duration_ns = [&](uint64_t ticks) {
    const uint64_t d = ticks > hdr.probe_ticks ? ticks - hdr.probe_ticks : 0;
    return static_cast<uint64_t>((static_cast<unsigned __int128>(d) * ns_per_tick_q32) >> 32);
  };
  std::array<int, FP_MAX_SLOTS> index;
  index.fill(-1);
  for (int a = 0; a < FP_MAX_SLOTS; ++a) {
    if (!kept(a)) continue;
    index[a] = static_cast<int>(t->slots.size());
    t->slots.push_back(a);
    t->h.emplace_back();
  }
  std::vector<uint64_t> ticks(rt::kTickTable);
  for (int s = 0; s < rt::kSlabs; ++s) {
    if (!hdr.slabs_ready[s]) continue;
    const size_t slab = rt::kLiveSlabsOffset + sizeof(Slab) * static_cast<size_t>(s);
    for (size_t k = 0; k < t->slots.size(); ++k) {
      const int a = t->slots[k];
      std::array<Histogram, FP_NUM_METRICS>& sum = t->h[k];
      for (int m = 0; m < FP_NUM_METRICS; ++m) {
        Histogram one;
        if (!ReadAt(fd, &one, sizeof one,
                    slab + offsetof(Slab, h) +
                        sizeof(Histogram) * static_cast<size_t>(a * FP_NUM_METRICS + m))) {
          return false;
        }
        sum[m].Merge(one);
      }
      uint64_t quiet = 0;
      if (!ReadAt(fd, &quiet, sizeof quiet, slab + offsetof(Slab, quiet) + 8 * size_t(a)) ||
          !ReadAt(fd, ticks.data(), sizeof(uint64_t) * ticks.size(),
                  slab + offsetof(Slab, ticks) + sizeof(Slab::ticks[0]) * size_t(a))) {
        return false;
      }
      for (int v = 0; v < rt::kTickTable; ++v) {
        const uint64_t n = ticks[v];
        if (n == 0) continue;
        if (ns_per_tick_q32 == 0) {
          t->dropped += n;
          continue;
        }
        sum[0].RecordCopies(duration_ns(static_cast<uint64_t>(v)), n);
        quiet += n;
      }
      for (int m = 1; m < FP_NUM_METRICS; ++m) sum[m].RecordZeros(quiet);
    }
  }
  const int stacks = std::min<int>(std::max<int>(int{hdr.next_stack}, 0), rt::kShadowStacks);
  for (int i = 0; i < stacks; ++i) {
    const size_t at = rt::kLiveStacksOffset + sizeof(ShadowStack) * static_cast<size_t>(i);
    uint32_t nring = 0;
    if (!ReadAt(fd, &nring, sizeof nring, at + offsetof(ShadowStack, nring))) return false;
    const uint32_t n = std::min<uint32_t>(nring, rt::kRing);
    if (n == 0) continue;
    uint64_t ring_ticks[rt::kRing];
    uint8_t ring_slot[rt::kRing];
    if (!ReadAt(fd, ring_ticks, sizeof(uint64_t) * n, at + offsetof(ShadowStack, ring_ticks)) ||
        !ReadAt(fd, ring_slot, n, at + offsetof(ShadowStack, ring_slot))) {
      return false;
    }
    for (uint32_t p = 0; p < n; ++p) {
      const int a = ring_slot[p] & ~rt::kRingCounted;
      if (a >= FP_MAX_SLOTS || index[a] < 0) continue;
      if (ns_per_tick_q32 == 0) {
        ++t->dropped;
        continue;
      }
      std::array<Histogram, FP_NUM_METRICS>& sum = t->h[static_cast<size_t>(index[a])];
      sum[0].Record(duration_ns(ring_ticks[p]));
      if (!(ring_slot[p] & rt::kRingCounted)) {
        for (int m = 1; m < FP_NUM_METRICS; ++m) sum[m].RecordZeros(1);
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------- reports

struct Names {
  std::string module, build_id, symbol;
};

Names NamesOf(const LiveHeader& hdr, int a) {
  const rt::LiveApi& api = hdr.apis[a];
  return {FixedField(api.module, sizeof api.module), FixedField(api.build_id, sizeof api.build_id),
          FixedField(api.symbol, sizeof api.symbol)};
}

// The reported series of `base` matching this slot and metric, added if new.
wire::Record* BaseRecord(wire::RunRecord* base, const Names& n, int metric) {
  for (wire::Record& r : *base->mutable_records()) {
    const wire::ApiKey& k = r.key();
    if (k.metric() == metric && k.symbol() == n.symbol && k.module() == n.module &&
        k.module_version() == n.build_id) {
      return &r;
    }
  }
  wire::Record* r = base->add_records();
  r->mutable_key()->set_module(n.module);
  r->mutable_key()->set_module_version(n.build_id);
  r->mutable_key()->set_symbol(n.symbol);
  r->mutable_key()->set_metric(static_cast<wire::Metric>(metric));
  return r;
}

StatusOr<wire::RunRecord> ReadBase(const std::string& path, bool* found) {
  std::ifstream in(path, std::ios::binary);
  *found = static_cast<bool>(in);
  wire::RunRecord base;
  if (!in) return base;
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  if (!base.ParseFromString(bytes)) return DataLoss(path + ": not what the agent wrote");
  return base;
}

std::string PartName(const LiveHeader& hdr, const std::string& live_name, uint32_t part) {
  // run-<pid>-<id>.fplive -> its id
  std::string id = live_name.substr(0, live_name.size() - 7);
  id = id.substr(id.rfind('-') + 1);
  return "run-" + std::to_string(hdr.start_unix_ms) + "-" + std::to_string(hdr.pid) + "-" + id +
         "-p" + std::to_string(part) + ".fpr";
}

enum class Outcome { kNothing, kPart, kEnded, kRetired, kUnreadable };

// The runtime's ns per TSC tick, in 32.32 fixed point: its own
// calibration, else the machine's rate; 0 when neither is known.
uint64_t NsPerTickQ32(const LiveHeader& hdr, int64_t tsc_hz) {
  if (hdr.calibrated && hdr.ns_per_tick_q32 != 0) return hdr.ns_per_tick_q32;
  if (tsc_hz <= 0) return 0;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(1000000000) << 32) /
                               static_cast<uint64_t>(tsc_hz));
}

// Into `rec`, a new part, each API's histograms since `next_base` (which
// then holds them); the calls it counts. An ended run's last part takes everything
// (HistogramPart).
uint64_t AddParts(const LiveHarvestConfig& c, const LiveHeader& hdr, const Totals& totals,
                  uint64_t q32, bool ended, wire::RunRecord* next_base, wire::RunRecord* rec,
                  uint64_t* dropped, uint32_t* truncated) {
  rec->set_schema_version(kSchemaVersion);
  PlatformToWire(c.platform, rec->mutable_platform());
  uint64_t calls = 0;
  const uint64_t resolution_ns =
      q32 == 0 ? 0
               : std::max<uint64_t>(
                     1, static_cast<uint64_t>(
                            (static_cast<unsigned __int128>(hdr.resolution_ticks) * q32) >> 32));
  for (size_t k = 0; k < totals.slots.size(); ++k) {
    const int a = totals.slots[k];
    const Names n = NamesOf(hdr, a);
    *truncated += hdr.truncated[a] != 0;
    for (int m = 0; m < FP_NUM_METRICS; ++m) {
      wire::Record* b = BaseRecord(next_base, n, m + 1);
      const bool counted_before = b->histogram().count() > 0;
      wire::Histogram piece;
      HistogramPart(totals.h[k][m], b->mutable_histogram(), ended, &piece, dropped);
      if (piece.count() == 0) continue;
      wire::Record* r = rec->add_records();
      *r->mutable_key() = b->key();
      PlatformToWire(c.platform, r->mutable_key()->mutable_platform());
      *r->mutable_histogram() = std::move(piece);
      r->set_runs(counted_before ? 0 : 1);
      if (hdr.truncated[a]) r->set_truncated(true);
      if (m == 0) {
        if (resolution_ns != 0) r->set_resolution_ns(resolution_ns);
        calls += r->histogram().count();
      }
    }
  }
  return calls;
}

// Announces part `part` in the live file, writes it to the spool and,
// while the run lives, keeps what it reported (`next_base`). kPart when
// all is written.
Outcome WritePart(int fd, const LiveHarvestConfig& c, const std::string& part_path,
                  const std::string& base_path, uint32_t part, const wire::RunRecord& rec,
                  bool ended, int64_t now_ms, wire::RunRecord* next_base) {
  // Announced before it is written: a runtime ending now leaves the rest
  // to the agent instead of writing the whole run again.
  const uint32_t announce = part;
  if (::pwrite(fd, &announce, sizeof announce, offsetof(LiveHeader, parts)) !=
      static_cast<ssize_t>(sizeof announce)) {
    return Outcome::kUnreadable;
  }
  if (!MakeDirs(c.spool_dir).ok() || !WriteFileDurably(part_path, rec.SerializeAsString()).ok()) {
    return Outcome::kNothing;  // tried again at the next look, under the same name
  }
  if (!ended) {
    // What was reported, kept before the pass goes on to seal the part: a
    // part sealed with this not kept would be reported again. If it cannot
    // be kept, the part is taken back (and tried again at the next look).
    next_base->set_ended_unix_ms(now_ms);
    next_base->set_part(part);
    if (!MakeDirs(c.state_dir + "/live").ok() ||
        !WriteFileDurably(base_path, next_base->SerializeAsString()).ok()) {
      std::error_code ec;
      fs::remove(part_path, ec);
      return Outcome::kNothing;
    }
  }
  return Outcome::kPart;
}

// The live file's header, if the file is one: a regular file of ours, of
// the live layout's size.
bool ReadLiveHeader(int fd, LiveHeader* hdr) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
         static_cast<size_t>(st.st_size) == rt::kLiveFileBytes && ReadAt(fd, hdr, sizeof *hdr, 0) &&
         LayoutOk(*hdr);
}

// What was reported of a live run so far (`found`: there was a record). A
// damaged one is removed and taken as lost, never a file looked at forever.
wire::RunRecord ReadBaseOrNone(const std::string& path, bool* found) {
  StatusOr<wire::RunRecord> base = ReadBase(path, found);
  if (base.ok()) return std::move(*base);
  std::error_code ec;
  fs::remove(path, ec);
  *found = false;
  return wire::RunRecord();
}

// A part's runtime counters.
void SetCounters(const LiveHeader& hdr, uint64_t q32, uint32_t chosen, uint32_t truncated,
                 uint64_t calls, uint64_t dropped, uint64_t run_ns, wire::RuntimeCounters* ctr) {
  ctr->set_calls_measured(calls);
  ctr->set_calls_dropped(dropped);
  ctr->set_probe_ns(q32 == 0 ? 0
                             : static_cast<uint64_t>(
                                   (static_cast<unsigned __int128>(hdr.probe_ticks) * q32) >> 32));
  ctr->set_apis_chosen(chosen);
  ctr->set_apis_truncated(truncated);
  ctr->set_run_ns(run_ns);
}

// What was reported of a live run, kept for the next look (best effort:
// lost, it is taken as unknown then).
void KeepBase(const LiveHarvestConfig& c, const std::string& base_path,
              const wire::RunRecord& base) {
  IgnoreError(MakeDirs(c.state_dir + "/live"));
  IgnoreError(WriteFileDurably(base_path, base.SerializeAsString()));
}

// A live file that ended, and what was reported of it, removed.
void RemoveEnded(const fs::path& path, const std::string& base_path) {
  std::error_code ec;
  fs::remove(path, ec);
  fs::remove(base_path, ec);
}

// Whether parts were announced and what was reported not kept (no base).
// Part 1 written but not yet sealed (the pass died before keeping it) is
// written again under its name. Otherwise what was reported is unknown:
// what is counted now is taken as reported, unreported (counted as
// dropped), and parts go on from there; never a call in two parts.
bool MustResync(const LiveHarvestConfig& c, const LiveHeader& hdr, const std::string& name,
                bool have_base) {
  return !have_base && hdr.parts > 0 &&
         !(hdr.parts == 1 && fs::exists(c.spool_dir + "/" + PartName(hdr, name, 1)));
}

// One live file: see live_harvest.h.
Outcome HarvestOne(const LiveHarvestConfig& c, const fs::path& path, int64_t now_ms,
                   LiveHarvestResult* result) {
  const std::string name = path.filename().string();
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Outcome::kNothing;  // gone meanwhile
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  LiveHeader hdr;
  if (!ReadLiveHeader(fd, &hdr)) return Outcome::kUnreadable;
  // The alive lock free: the image has ended (we now hold it).
  const bool ended = LockByte(fd, F_WRLCK, rt::kLiveAliveByte);
  const std::string base_path = c.state_dir + "/live/" + name + ".base";
  bool have_base = false;
  const wire::RunRecord base = ReadBaseOrNone(base_path, &have_base);
  const int64_t last_ms = have_base ? base.ended_unix_ms() : hdr.start_unix_ms;
  if (!ended && now_ms - last_ms < c.interval_s * 1000) return Outcome::kNothing;
  if (!LockByte(fd, F_WRLCK, rt::kLiveReportByte)) return Outcome::kNothing;  // the runtime's now
  if (!ReadAt(fd, &hdr, sizeof hdr, 0)) return Outcome::kUnreadable;
  auto finish = [&](Outcome o) {
    if (ended) RemoveEnded(path, base_path);
    return o;
  };
  if (hdr.state == rt::kLiveRetired || hdr.rate_refuted) {
    // The runtime reported it (or nothing is to be reported): nothing here.
    if (ended) ++result->retired_removed;
    return finish(Outcome::kRetired);
  }
  const bool resync = MustResync(c, hdr, name, have_base);
  const uint64_t q32 = NsPerTickQ32(hdr, c.tsc_hz);
  Totals totals;
  if (!ReadTotals(fd, hdr, q32, &totals)) return Outcome::kUnreadable;
  wire::RunRecord next_base = base;
  // The part after the last one kept, so that a part written and not kept
  // (the pass died) is written again under its own name, not a new one.
  const uint32_t part = (have_base ? next_base.part() : resync ? uint32_t{hdr.parts} : 0) + 1;
  wire::RunRecord rec;
  uint64_t dropped = totals.dropped;
  uint32_t truncated = 0;
  const uint64_t calls =
      AddParts(c, hdr, totals, q32, ended, &next_base, &rec, &dropped, &truncated);
  result->calls_dropped += dropped;
  if (resync) {
    result->calls_dropped += calls;
    rec.clear_records();
  }
  // A run that ended without folding its stacks (killed): folded here,
  // into its last part.
  if (ended) {
    LiveStacks stacks;
    if (ReadLiveStacks(fd, &stacks) && !stacks.folded) {
      result->stacks_folded += AddLiveStackRecords(stacks, c.platform, &rec);
    }
  }
  if (rec.records_size() == 0) {
    // Nothing new: no part; a live run's clock starts again.
    if (ended) return finish(Outcome::kEnded);
    next_base.set_ended_unix_ms(now_ms);
    next_base.set_part(part - 1);
    KeepBase(c, base_path, next_base);
    return Outcome::kNothing;
  }
  // The span this part covers (since the last part, or the start): the
  // window its calls were made in (common/wire/plausible.h).
  SetCounters(hdr, q32, static_cast<uint32_t>(totals.slots.size()), truncated, calls, dropped,
              static_cast<uint64_t>(std::max<int64_t>(0, now_ms - last_ms)) * 1000000,
              rec.mutable_counters());
  rec.set_ended_unix_ms(now_ms);
  rec.set_part(part);
  rec.set_last_part(ended);
  if (Status v = ValidateRunRecord(rec); !v.ok()) {
    // Never expected: a part that the aggregator would refuse is not written.
    result->calls_dropped += calls;
    return finish(Outcome::kUnreadable);
  }
  const std::string part_path = c.spool_dir + "/" + PartName(hdr, name, part);
  if (const Outcome w =
          WritePart(fd, c, part_path, base_path, part, rec, ended, now_ms, &next_base);
      w != Outcome::kPart) {
    return w;
  }
  ++result->parts_written;
  return ended ? finish(Outcome::kEnded) : Outcome::kPart;
}

}  // namespace

bool AnyLiveFile(const std::string& live_dir) {
  std::error_code ec;
  fs::directory_iterator it(live_dir, ec);
  if (ec) return false;
  for (const auto& e : it) {
    if (e.path().extension() == ".fplive") return true;
  }
  return false;
}

StatusOr<LiveHarvestResult> HarvestLive(const LiveHarvestConfig& c, int64_t now_unix_ms) {
  LiveHarvestResult result;
  if (c.live_dir.empty()) return result;
  std::error_code ec;
  fs::directory_iterator it(c.live_dir, ec);
  if (ec) return result;  // no live directory: no measured run has made one
  std::vector<fs::path> files;
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".fplive") == 0) {
      files.push_back(e.path());
    }
  }
  for (const fs::path& p : files) {
    ++result.files;
    switch (HarvestOne(c, p, now_unix_ms, &result)) {
      case Outcome::kEnded:
        ++result.runs_ended;
        break;
      case Outcome::kUnreadable:
        ++result.unreadable;
        break;
      default:
        break;
    }
  }
  // What was reported of runs whose files are gone (removed by hand, or a
  // crash between removing a file and its record) is of no use any more.
  fs::directory_iterator bases(c.state_dir + "/live", ec);
  if (!ec) {
    for (const auto& e : bases) {
      const std::string name = e.path().filename().string();
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".base") == 0 &&
          !fs::exists(c.live_dir + "/" + name.substr(0, name.size() - 5), ec)) {
        fs::remove(e.path(), ec);
      }
    }
  }
  return result;
}

}  // namespace fieldprof::agent
