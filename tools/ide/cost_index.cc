#include "tools/ide/cost_index.h"

#include <algorithm>

#include "common/snapshot/snapshot_index.h"
#include "common/wire/api_key.h"
#include "common/wire/wire.h"

namespace fieldprof::tools {

namespace {

// What one module's records of a symbol sum to.
struct Acc {
  Histogram time;
  uint64_t runs = 0, resolution_ns = 0;
  uint64_t machines = 0;  // the most any one series was seen on
  std::string suspect;    // why a series of it is suspect, if one is
  bool truncated = false;
  uint32_t series = 0;
  std::vector<std::string> platforms;  // distinct, few
  // count and sum of each other metric, to make per-call means.
  struct Other {
    wire::Metric metric;
    uint64_t n;
    double sum;
  };
  std::vector<Other> others;
};

std::string PlatformText(const wire::Platform& p) {
  std::string s(ArchName(p.arch()));
  s += "/";
  s += CpuVendorName(p.cpu_vendor());
  s += "/" + std::to_string(p.cpu_family());
  return s;
}

}  // namespace

StatusOr<CostIndex> CostIndex::Build(const SnapshotCache& cache, bool* rebuilt) {
  CostIndex ix;
  FP_ASSIGN_OR_RETURN(wire::Manifest manifest, cache.Manifest());
  ix.snapshot_version_ = manifest.snapshot_version();
  ix.created_unix_ms_ = manifest.created_unix_ms();
  ix.fragment_count_ = manifest.fragment_count();
  ix.fragments_held_ = static_cast<uint32_t>(cache.Fragments().size());
  FP_ASSIGN_OR_RETURN(SnapshotIndex records, SnapshotIndex::Open(cache, rebuilt));
  ix.signature_ = records.signature();
  ix.records_ = std::make_shared<const SnapshotIndex>(std::move(records));
  ix.memo_ = std::make_shared<Memo>();
  return ix;
}

std::vector<std::string> CostIndex::SymbolsWithPrefix(const std::string& prefix,
                                                      size_t limit) const {
  std::vector<std::string> out;
  if (!records_ || prefix.empty()) return out;
  (void)records_->ForEachRecordWithPrefix(prefix, [&](const wire::Record& r) {
    const std::string& sym = r.key().symbol();
    if (r.key().metric() != wire::METRIC_WALL_TIME_NS || sym.find(';') != std::string::npos) {
      return true;  // another metric, or a field stack under it
    }
    if (out.empty() || out.back() != sym) out.push_back(sym);
    return out.size() < limit;
  });
  return out;
}

std::shared_ptr<const std::vector<ApiCost>> CostIndex::Compute(const std::string& symbol) const {
  std::vector<std::pair<std::string, Acc>> acc;  // by module
  Status s = records_->ForEachRecordOf(symbol, [&](const wire::Record& r) {
    const wire::ApiKey& k = r.key();
    auto found =
        std::find_if(acc.begin(), acc.end(), [&](const auto& e) { return e.first == k.module(); });
    if (found == acc.end()) {
      acc.emplace_back(k.module(), Acc());
      found = acc.end() - 1;
    }
    Acc& a = found->second;
    const Histogram h = HistogramFromWire(r.histogram());
    if (k.metric() == wire::METRIC_WALL_TIME_NS) {
      a.time.Merge(h);
      a.runs += r.runs();
      a.machines = std::max<uint64_t>(a.machines, r.machine_count());
      if (a.suspect.empty()) a.suspect = r.suspect();
      a.resolution_ns = std::max(a.resolution_ns, r.resolution_ns());
      a.truncated = a.truncated || r.truncated();
      ++a.series;
      std::string p = PlatformText(k.platform());
      if (std::find(a.platforms.begin(), a.platforms.end(), p) == a.platforms.end()) {
        a.platforms.push_back(std::move(p));
      }
    } else {
      auto it = std::find_if(a.others.begin(), a.others.end(),
                             [&](const Acc::Other& o) { return o.metric == k.metric(); });
      if (it == a.others.end()) {
        a.others.push_back({k.metric(), 0, 0});
        it = a.others.end() - 1;
      }
      it->n += h.count();
      it->sum += static_cast<double>(h.sum());
    }
    return true;
  });
  auto out = std::make_shared<std::vector<ApiCost>>();
  if (!s.ok()) return out;  // the cache changed under us: the next index has it
  // The field stacks under it: "symbol;..." (a stack of the symbol alone
  // came with the records above, and has no frame inside).
  std::vector<SeriesSum> stacks;
  s = records_->ForEachRecordWithPrefix(symbol + ";", [&](const wire::Record& r) {
    if (r.key().metric() != wire::METRIC_STACK_CPU_NS) return true;
    SeriesSum x;
    x.key = r.key();
    x.histogram = HistogramFromWire(r.histogram());
    x.runs = r.runs();
    x.machines = r.machine_count();
    stacks.push_back(std::move(x));
    return true;
  });
  if (!s.ok()) return out;
  for (auto& [module, a] : acc) {
    if (a.time.empty()) continue;  // no wall time
    const Histogram& time = a.time;
    ApiCost c;
    c.symbol = symbol;
    c.module = module;
    c.time = time.Stats();
    c.zero_count = time.zero_count();
    int lo = kNumBuckets, hi = -1;
    for (int i = 0; i < kNumBuckets; ++i) {
      if (time.bucket(i).count > 0) lo = std::min(lo, i), hi = std::max(hi, i);
    }
    c.first_bucket = static_cast<uint8_t>(hi < 0 ? 0 : lo);
    for (int i = lo; i <= hi; ++i) c.buckets.push_back(time.bucket(i).count);
    c.runs = a.runs;
    c.machines = a.machines;
    c.suspect = std::move(a.suspect);
    c.resolution_ns = a.resolution_ns;
    c.truncated = a.truncated;
    c.series = a.series;
    std::sort(a.platforms.begin(), a.platforms.end());
    c.platforms = std::move(a.platforms);
    auto mean = [&](wire::Metric m) {
      for (const Acc::Other& o : a.others) {
        if (o.metric == m && o.n > 0) return o.sum / static_cast<double>(o.n);
      }
      return -1.0;
    };
    c.alloc_bytes = mean(wire::METRIC_ALLOC_BYTES_INCLUSIVE);
    c.alloc_count = mean(wire::METRIC_ALLOC_COUNT);
    c.file_io_bytes = mean(wire::METRIC_FILE_IO_BYTES);
    c.socket_io_bytes = mean(wire::METRIC_SOCKET_IO_BYTES);
    const FieldStacks under = StacksUnder(BuildFieldStacks(module, stacks, {}), symbol);
    c.inside_ns = under.total_ns;
    c.inside = TopFramesUnder(under, symbol, 5);
    out->push_back(std::move(c));
  }
  std::sort(out->begin(), out->end(), [](const ApiCost& a, const ApiCost& b) {
    return a.time.count != b.time.count ? a.time.count > b.time.count : a.module < b.module;
  });
  return out;
}

std::shared_ptr<const std::vector<ApiCost>> CostIndex::Find(const std::string& symbol) const {
  std::lock_guard<std::mutex> l(memo_->mu);
  auto it = memo_->by_symbol.find(symbol);
  if (it != memo_->by_symbol.end()) return it->second;
  if (memo_->by_symbol.size() >= kMemoEntries) memo_->by_symbol.clear();  // callers hold theirs
  auto costs = Compute(symbol);
  memo_->by_symbol.emplace(symbol, costs);
  return costs;
}

std::shared_ptr<const std::vector<PointSeries>> CostIndex::ComputePoints(
    const std::string& tag) const {
  struct Acc {
    Histogram time;
    PointSeries s;
    std::vector<std::string> versions;
  };
  std::vector<Acc> acc;  // few: one per module and segment
  const std::string prefix = tag + "$";
  Status st = records_->ForEachRecordWithPrefix(prefix, [&](const wire::Record& r) {
    const wire::ApiKey& k = r.key();
    if (k.metric() != wire::METRIC_POINT_NS) return true;
    auto it = std::find_if(acc.begin(), acc.end(), [&](const Acc& a) {
      return a.s.module == k.module() && a.s.symbol == k.symbol();
    });
    if (it == acc.end()) {
      acc.emplace_back();
      it = acc.end() - 1;
      it->s.module = k.module();
      it->s.symbol = k.symbol();
      const std::string rest = k.symbol().substr(prefix.size());
      const size_t dollar = rest.find('$');
      if (dollar == std::string::npos) {
        it->s.scope = rest;
      } else {
        it->s.from = rest.substr(0, dollar);
        it->s.to = rest.substr(dollar + 1);
      }
    }
    it->time.Merge(HistogramFromWire(r.histogram()));
    it->s.runs += r.runs();
    it->s.machines = std::max<uint64_t>(it->s.machines, r.machine_count());
    it->s.resolution_ns = std::max(it->s.resolution_ns, r.resolution_ns());
    if (std::find(it->versions.begin(), it->versions.end(), k.module_version()) ==
        it->versions.end()) {
      it->versions.push_back(k.module_version());
    }
    return true;
  });
  auto out = std::make_shared<std::vector<PointSeries>>();
  if (!st.ok()) return out;  // the cache changed under us: the next index has it
  for (Acc& a : acc) {
    if (a.time.empty()) continue;
    a.s.time = a.time.Stats();
    a.s.builds = static_cast<uint32_t>(a.versions.size());
    out->push_back(std::move(a.s));
  }
  return out;  // in the index's order: by symbol, then module
}

std::shared_ptr<const std::vector<PointSeries>> CostIndex::FindPoints(
    const std::string& tag) const {
  std::lock_guard<std::mutex> l(memo_->mu);
  auto it = memo_->by_tag.find(tag);
  if (it != memo_->by_tag.end()) return it->second;
  if (memo_->by_tag.size() >= kMemoEntries) memo_->by_tag.clear();  // callers hold theirs
  auto series = ComputePoints(tag);
  memo_->by_tag.emplace(tag, series);
  return series;
}

}  // namespace fieldprof::tools
