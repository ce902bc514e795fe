// An API's field cost by symbol name, for the language server:
// the cache's symbol index (common/snapshot/snapshot_index.h, the one fieldprof cost
// reads through) finds a symbol's records; they are summed per module on
// first use and remembered. Opening costs a map of the index file; the
// server opens a new CostIndex when the cache's files change.
//
//   StatusOr<CostIndex> ix = CostIndex::Build(SnapshotCache(dir));
//   for (const ApiCost& c : *ix->Find("deflate")) ...   // one per module
//
// Each entry sums every version and platform of one symbol in one module:
// the wall-time histogram's statistics and bucket counts (for bars), the
// other metrics as per-call means.
#ifndef FIELDPROF_TOOLS_IDE_COST_INDEX_H_
#define FIELDPROF_TOOLS_IDE_COST_INDEX_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/base/status.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/snapshot/snapshot_index.h"
#include "common/stacks/field_stacks.h"
#include "common/statistics/histogram.h"

namespace fieldprof::tools {

struct ApiCost {
  std::string module;
  std::string symbol;
  HistogramStats time;  // wall time, ns
  uint64_t zero_count = 0;
  // Wall-time counts per log2 bucket, from bucket first_bucket to the last
  // with calls.
  uint8_t first_bucket = 0;
  std::vector<uint64_t> buckets;
  uint64_t runs = 0;  // of the wall-time series
  // Distinct machines: the most any one of the series was seen on (the
  // snapshot's estimate). A lower bound for the API: series overlap.
  uint64_t machines = 0;
  // Why a series of it is suspect (wire::Record.suspect); empty if none.
  std::string suspect;
  uint64_t resolution_ns = 0;  // the coarsest among them
  bool truncated = false;
  uint32_t series = 0;  // wall-time series: versions x platforms
  std::vector<std::string> platforms;
  // Per call; negative when the cache has no data for the metric.
  double alloc_bytes = -1, alloc_count = -1, file_io_bytes = -1, socket_io_bytes = -1;
  // Where its time goes inside the module, from the field stacks whose
  // outermost frame it is (docs/field-stacks.md): the frames with the
  // most of it, and the sampled CPU time they share.
  std::vector<FrameShare> inside;
  uint64_t inside_ns = 0;
};

// One series of an instrumentation point's durations (metric point_ns,
// symbol "tag$from$to" or "tag$name"; docs/points.md) in one module,
// summed over its versions and platforms.
struct PointSeries {
  std::string module;
  std::string symbol;    // as keyed
  std::string from, to;  // a segment between two points; both empty for a scope
  std::string scope;     // a scope's name; empty for a segment
  HistogramStats time;   // ns
  uint64_t runs = 0;
  uint64_t machines = 0;  // the most any one of its series was seen on
  uint64_t resolution_ns = 0;
  uint32_t builds = 0;  // distinct module versions summed
};

class CostIndex {
 public:
  // Opens the cache's symbol index (common/snapshot/snapshot_index.h), building it
  // when the cache changed since (`rebuilt` says so). NotFound: no snapshot
  // in the cache.
  [[nodiscard]] static StatusOr<CostIndex> Build(const SnapshotCache& cache,
                                                 bool* rebuilt = nullptr);

  // Every module's entry for the symbol, most called first; empty when the
  // cache has no wall-time data for it. Summed from the symbol's records on
  // first use, then remembered (up to kMemoEntries symbols). Thread-safe.
  std::shared_ptr<const std::vector<ApiCost>> Find(const std::string& symbol) const;

  // Every series of the point tag `tag` in any module, by module and
  // symbol: one prefix read of the index ("tag$"), remembered like Find's.
  std::shared_ptr<const std::vector<PointSeries>> FindPoints(const std::string& tag) const;

  // Symbols that start with `prefix` and have wall-time data, in order, at
  // most `limit` (the other overloads of a C++ function: its mangled name
  // up to the function's own name).
  std::vector<std::string> SymbolsWithPrefix(const std::string& prefix, size_t limit) const;

  uint64_t symbols() const { return records_ ? records_->symbols() : 0; }
  uint64_t snapshot_version() const { return snapshot_version_; }
  int64_t created_unix_ms() const { return created_unix_ms_; }
  uint32_t fragments_held() const { return fragments_held_; }
  uint32_t fragment_count() const { return fragment_count_; }
  const std::string& signature() const { return signature_; }

  static constexpr size_t kMemoEntries = 4096;

 private:
  std::shared_ptr<const std::vector<ApiCost>> Compute(const std::string& symbol) const;
  std::shared_ptr<const std::vector<PointSeries>> ComputePoints(const std::string& tag) const;

  struct Memo {
    std::mutex mu;
    std::unordered_map<std::string, std::shared_ptr<const std::vector<ApiCost>>> by_symbol;
    std::unordered_map<std::string, std::shared_ptr<const std::vector<PointSeries>>> by_tag;
  };
  std::shared_ptr<const SnapshotIndex> records_;
  std::shared_ptr<Memo> memo_;
  uint64_t snapshot_version_ = 0;
  int64_t created_unix_ms_ = 0;
  uint32_t fragments_held_ = 0, fragment_count_ = 0;
  std::string signature_;
};

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_IDE_COST_INDEX_H_
