#include "tools/lsp/cost_index.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "common/api_key.h"
#include "common/wire.h"

namespace fieldprof::tools {

namespace {

namespace fs = std::filesystem;

// What one (module, symbol) gathers during the scan.
struct Acc {
  Histogram time;
  uint64_t runs = 0, resolution_ns = 0;
  bool truncated = false;
  uint32_t series = 0;
  std::set<std::string> platforms;
  // count and sum of each other metric, to make per-call means.
  std::map<wire::Metric, std::pair<uint64_t, double>> others;
};

std::string PlatformText(const wire::Platform& p) {
  std::string s(ArchName(p.arch()));
  s += "/";
  s += CpuVendorName(p.cpu_vendor());
  s += "/" + std::to_string(p.cpu_family());
  return s;
}

}  // namespace

std::string CostIndex::CacheSignature(const std::string& dir) {
  std::string sig;
  struct stat st {};
  if (stat((dir + "/manifest.signed").c_str(), &st) == 0) {
    sig += std::to_string(st.st_size) + "@" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + ";";
  }
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir + "/fragments", ec)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) sig += n + ";";
  return sig;
}

StatusOr<CostIndex> CostIndex::Build(const SnapshotCache& cache) {
  CostIndex ix;
  ix.signature_ = CacheSignature(cache.dir());
  StatusOr<wire::Manifest> manifest = cache.Manifest();
  if (!manifest.ok()) return manifest.status();
  ix.snapshot_version_ = manifest->snapshot_version();
  ix.created_unix_ms_ = manifest->created_unix_ms();
  ix.fragment_count_ = manifest->fragment_count();
  ix.fragments_held_ = static_cast<uint32_t>(cache.Fragments().size());

  std::map<std::pair<std::string, std::string>, Acc> acc;  // (symbol, module)
  Status s = cache.ForEachRecord([&](const wire::Record& r) {
    const wire::ApiKey& k = r.key();
    if (k.symbol().empty()) return true;
    Acc& a = acc[{k.symbol(), k.module()}];
    const Histogram h = HistogramFromWire(r.histogram());
    if (k.metric() == wire::METRIC_WALL_TIME_NS) {
      a.time.Merge(h);
      a.runs += r.runs();
      a.resolution_ns = std::max(a.resolution_ns, r.resolution_ns());
      a.truncated = a.truncated || r.truncated();
      ++a.series;
      a.platforms.insert(PlatformText(k.platform()));
    } else {
      auto& [n, sum] = a.others[k.metric()];
      n += h.count();
      sum += static_cast<double>(h.sum());
    }
    return true;
  });
  if (!s.ok()) return s;

  for (auto& [name, a] : acc) {
    if (a.time.empty()) continue;  // no wall time: nothing to show
    ApiCost c;
    c.symbol = name.first;
    c.module = name.second;
    c.time = a.time.Stats();
    c.zero_count = a.time.zero_count();
    for (int i = 0; i < kNumBuckets; ++i) c.buckets[i] = a.time.bucket(i).count;
    c.runs = a.runs;
    c.resolution_ns = a.resolution_ns;
    c.truncated = a.truncated;
    c.series = a.series;
    c.platforms.assign(a.platforms.begin(), a.platforms.end());
    auto mean = [&](wire::Metric m) {
      auto it = a.others.find(m);
      return it == a.others.end() || it->second.first == 0
                 ? -1.0
                 : it->second.second / static_cast<double>(it->second.first);
    };
    c.alloc_bytes = mean(wire::METRIC_ALLOC_BYTES_INCLUSIVE);
    c.alloc_count = mean(wire::METRIC_ALLOC_COUNT);
    c.file_io_bytes = mean(wire::METRIC_FILE_IO_BYTES);
    c.socket_io_bytes = mean(wire::METRIC_SOCKET_IO_BYTES);
    ix.by_symbol_[c.symbol].push_back(std::move(c));
  }
  for (auto& [_, v] : ix.by_symbol_) {
    std::sort(v.begin(), v.end(), [](const ApiCost& a, const ApiCost& b) {
      return a.time.count != b.time.count ? a.time.count > b.time.count : a.module < b.module;
    });
  }
  return ix;
}

const std::vector<ApiCost>& CostIndex::Find(const std::string& symbol) const {
  static const std::vector<ApiCost> kNone;
  auto it = by_symbol_.find(symbol);
  return it == by_symbol_.end() ? kNone : it->second;
}

}  // namespace fieldprof::tools
