#include "common/points_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "common/durable_file.h"
#include "common/points_format.h"

namespace fieldprof::local {

namespace {

namespace pf = points;

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool done() const { return at_ >= b_.size(); }
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
};

}  // namespace

StatusOr<PointsRun> DecodePointsRun(std::string_view bytes) {
  if (bytes.substr(0, pf::kMagicSize) != std::string_view(pf::kMagic, pf::kMagicSize)) {
    return InvalidArgument("not a points file (no FPPOINTS1 line)");
  }
  Reader r(bytes.substr(pf::kMagicSize));
  PointsRun run;
  char type = 0;
  if (!r.Get(&type) || type != pf::kHeader || !r.Get(&run.pid) || !r.Get(&run.start_unix_ns) ||
      !r.Str(&run.program)) {
    return InvalidArgument("a points file with a damaged header");
  }
  std::vector<std::pair<uint64_t, uint64_t>> clock;  // tsc, mono ns
  uint64_t tsc_hz = 0;
  std::map<uint64_t, uint32_t> site_of;
  std::vector<RawEvent> raw;
  while (!r.done()) {
    if (!r.Get(&type)) break;
    bool ok = true;
    if (type == pf::kRate) {
      ok = r.Get(&tsc_hz);
    } else if (type == pf::kClock) {
      uint64_t tsc = 0, ns = 0;
      ok = r.Get(&tsc) && r.Get(&ns);
      if (ok) clock.emplace_back(tsc, ns);
    } else if (type == pf::kSite) {
      uint32_t id = 0;
      PointSite s;
      ok = r.Get(&id) && r.Str(&s.tag) && r.Str(&s.name);
      if (ok && site_of.emplace(id, static_cast<uint32_t>(run.sites.size())).second) {
        run.sites.push_back(std::move(s));
      }
    } else if (type == pf::kBatch) {
      uint32_t tid = 0, n = 0;
      uint64_t tsc = 0;
      ok = r.Get(&tid) && r.Get(&n) && n <= pf::kMaxBatch && r.Get(&tsc);
      for (uint32_t i = 0; ok && i < n; ++i) {
        uint64_t delta = 0, site_kind = 0, zigzag = 0;
        ok = r.Varint(&delta) && r.Varint(&site_kind) && r.Varint(&zigzag);
        tsc += delta;
        const auto value = static_cast<int64_t>((zigzag >> 1) ^ (~(zigzag & 1) + 1));
        if (ok)
          raw.push_back({tsc, site_kind >> 2, value, tid, static_cast<uint8_t>(site_kind & 3)});
      }
    } else if (type == pf::kLost) {
      uint32_t tid = 0;
      uint64_t n = 0;
      ok = r.Get(&tid) && r.Get(&n);
      run.lost += n;
    } else if (type == pf::kEnd) {
      run.complete = true;
      break;
    } else {
      ok = false;
    }
    if (!ok) break;  // cut or damaged here: keep what came before
  }
  if (clock.empty()) return InvalidArgument("a points file with no clock reading");
  // Ticks to ns: the straight line through the first and last readings,
  // or, when they are less than 1 ms apart (a file cut early), the rate
  // the command measured.
  const auto [tsc0, ns0] = clock.front();
  const auto [tsc1, ns1] = clock.back();
  double ns_per_tick = tsc1 > tsc0 && ns1 > ns0
                           ? static_cast<double>(ns1 - ns0) / static_cast<double>(tsc1 - tsc0)
                           : 0;
  if (tsc_hz > 0 && (ns1 < ns0 + 1000000 || ns_per_tick == 0)) {
    ns_per_tick = 1e9 / static_cast<double>(tsc_hz);
  }
  for (const RawEvent& e : raw) {
    const auto s = site_of.find(e.site);
    if (s == site_of.end() || e.kind > 2) continue;
    if (ns_per_tick == 0 && e.tsc != tsc0) {
      return InvalidArgument(
          "a points file cut before its second clock reading, with no TSC rate to turn its "
          "times into ns");
    }
    PointEvent p;
    p.t_ns = static_cast<int64_t>((static_cast<double>(e.tsc) - static_cast<double>(tsc0)) *
                                  ns_per_tick);
    p.site = s->second;
    p.tid = e.tid;
    p.value = e.value;
    p.kind = static_cast<PointKind>(e.kind);
    run.events.push_back(p);
  }
  std::stable_sort(run.events.begin(), run.events.end(),
                   [](const PointEvent& a, const PointEvent& b) { return a.t_ns < b.t_ns; });
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

}  // namespace fieldprof::local
