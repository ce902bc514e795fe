// Store: where the aggregator keeps its sums. Two implementations: the
// embedded RocksDB store (store_rocksdb.h, one machine) and the ClickHouse
// store (store_clickhouse.h, several aggregators over a ClickHouse cluster).
// tests/aggregator/store/store_test.cc runs this contract against both.
//
// Contract for every implementation:
// - ApplyBatch is atomic and durable: when it returns OK, the batch id and
//   every record of the batch are on stable storage and will be counted
//   exactly once, also across crashes; when it fails, the batch is not
//   counted until it is sent again (RocksDB: nothing of it was applied;
//   ClickHouse: it may be stored, and the retry is recognised). A batch id
//   already accepted answers {duplicate=true} and changes nothing, also when
//   the same id arrives concurrently on two connections to one store (two
//   ClickHouse aggregators taking one batch at once may both answer
//   duplicate=false; it still counts once).
// - Records go to `day`, normally today. A store that may have rolled that
//   day up already may put them on a later day (ClickHouse: today, for a
//   day older than its horizon); all-time sums are the same.
// - Accepted batches become visible to queries once applied, normally within
//   milliseconds; pending_batches() says how many are not yet, and
//   WaitApplied() waits for them (tests, verification).
// - All methods are thread-safe.
#ifndef FIELDPROF_AGGREGATOR_STORE_STORE_H_
#define FIELDPROF_AGGREGATOR_STORE_STORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/machine_sketch.h"
#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"
#include "common/wire/batch_view.h"

namespace fieldprof::aggregator {

struct ApplyResult {
  bool duplicate = false;
  size_t records = 0;  // records merged (0 for a duplicate)
};

// Filter for listing APIs; empty/absent fields match everything.
struct ApiFilter {
  std::string module;          // exact soname
  std::string symbol_prefix;   // symbols starting with this
  bool symbol_exact = false;   // symbol_prefix must match the whole symbol
  std::string module_version;  // exact
  std::optional<wire::Metric> metric;
  std::optional<wire::Os> os;
  std::optional<wire::Arch> arch;
  std::optional<wire::CpuVendor> cpu_vendor;

  bool Matches(const ApiKey& k) const;
};

// A series and its value summed over all time.
struct ApiAggregate {
  ApiKey key;
  Histogram histogram;
  uint64_t runs = 0;
  bool truncated = false;
  uint64_t resolution_ns = 0;  // wall time: the coarsest run's (wire::Record)
  // The distinct machines that sent it (machines.Estimate(): what k
  // compares), and the machines of each day it covers (a machine counted
  // once a day: the suspect judge's runs per machine). Two series' or
  // two aggregates' sketches never add up to distinct machines
  // (machine_sketch.h): where several are summed, `machines` keeps the
  // largest (MergeAggregate).
  MachineSketch machines;
  MachineSketch day_machines;
};

class Store {
 public:
  virtual ~Store() = default;

  // `batch` is `body` decoded and validated (DecodeBatchView); `body` is the
  // encoded form as received. Its records are added to `day` (and the coarser
  // nodes above it). Neither is used after the call returns.
  // ResourceExhausted when too many accepted batches wait to be applied.
  [[nodiscard]] virtual StatusOr<ApplyResult> ApplyBatch(const BatchView& batch,
                                                         std::string_view body, int32_t day) = 0;

  // ApplyBatch, leaving in *fold what may wait until the client has its
  // answer: the batch is durable and will be counted when this returns OK;
  // *fold adds it to the sums in memory (the RocksDB store's fold). The
  // caller runs it once, on the same thread, while `batch` and `body`
  // live; until it has run, the batch counts as pending (pending_batches,
  // WaitApplied), and Close() (and the RocksDB store's reopening after a
  // failed write) wait for it: a thread holding a fold it has not run
  // must not call them. A store with nothing to leave does all of it here
  // and leaves *fold empty.
  [[nodiscard]] virtual StatusOr<ApplyResult> ApplyBatchFoldLater(const BatchView& batch,
                                                                  std::string_view body,
                                                                  int32_t day,
                                                                  std::function<void()>* fold) {
    *fold = nullptr;
    return ApplyBatch(batch, body, day);
  }

  // Whether a batch with this id was accepted and is counted (sending it
  // again answers duplicate), once it is applied (as its sums: see
  // WaitApplied). Asked where a batch is about to be refused for its
  // upload token, so that one already counted is answered as the duplicate
  // it is and its sender does not send it again under a new id.
  [[nodiscard]] virtual StatusOr<bool> BatchAccepted(std::string_view batch_id) = 0;

  // Accepted batches not yet visible to queries.
  virtual uint64_t pending_batches() = 0;
  // Waits until every batch accepted so far is applied. DeadlineExceeded as
  // Unavailable when `timeout` passes first.
  [[nodiscard]] virtual Status WaitApplied(std::chrono::milliseconds timeout) = 0;

  // Every series matching `filter` with its all-time sum, in key order,
  // all from one consistent snapshot, one at a time (memory stays flat for
  // any number of series); stops early when `visit` returns false.
  [[nodiscard]] virtual Status ForEachApi(const ApiFilter& filter,
                                          const std::function<bool(ApiAggregate&&)>& visit) = 0;
  // Series matching `filter`, with their all-time sums, in key order; at most
  // `limit` of them.
  [[nodiscard]] virtual StatusOr<std::vector<ApiAggregate>> ListApis(const ApiFilter& filter,
                                                                     size_t limit) = 0;

  // Sum of one series over the inclusive day range (see calendar_tree.h for the
  // unbounded values). A series with no data answers an empty aggregate.
  [[nodiscard]] virtual StatusOr<ApiAggregate> QueryRange(const ApiKey& key, int32_t first_day,
                                                          int32_t last_day) = 0;

  // Every series matching `filter` with its sum over the inclusive day
  // range, in key order, one at a time; series with nothing in the range
  // are left out. Stops early when `visit` returns false. The default walks
  // ForEachApi and asks QueryRange for each series (a store that reads a
  // range as cheaply in one pass overrides it).
  [[nodiscard]] virtual Status ForEachApiInRange(const ApiFilter& filter, int32_t first_day,
                                                 int32_t last_day,
                                                 const std::function<bool(ApiAggregate&&)>& visit);

  // A number that moves whenever the sums this store answers may have
  // changed, so that an answer built at one number holds while it stays
  // (aggregator/reads/answer_cache.h). The default moves every five seconds: a store
  // that cannot tell (other aggregators write to it).
  virtual uint64_t DataVersion();

  // Whether the store can take batches now: OK, or why not (NoSpace: the
  // disk is full or under its reserve; IOError or Unavailable: a write
  // failed or the store is being reopened). It recovers by itself.
  virtual Status Health() = 0;

  // Appends Prometheus text-format lines about the store.
  virtual void AppendMetrics(std::string* out) = 0;

  // Flushes and closes; later calls fail with Unavailable.
  [[nodiscard]] virtual Status Close() = 0;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_STORE_H_
