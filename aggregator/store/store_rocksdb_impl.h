// The RocksDB store's class, whose parts live in three files:
// store_rocksdb.cc (opening, closing, reopening after a failure, health
// and metrics), store_rocksdb_apply.cc (a batch accepted, folded by
// series and applied; the roll-up of days into months) and
// store_rocksdb_read.cc (the queries). Only those files include it.
#ifndef FIELDPROF_AGGREGATOR_STORE_STORE_ROCKSDB_IMPL_H_
#define FIELDPROF_AGGREGATOR_STORE_STORE_ROCKSDB_IMPL_H_

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>

#include "aggregator/metrics.h"
#include "aggregator/store/aggregate_value.h"
#include "aggregator/store/calendar_tree.h"
#include "aggregator/store/fold_table.h"
#include "aggregator/store/rocks_keys.h"
#include "aggregator/store/rocks_merge.h"
#include "aggregator/store/rocks_status.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/base/encoding.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator {

class RocksDbStore : public Store {
 public:
  explicit RocksDbStore(const RocksDbStoreOptions& options) : options_(options) {}
  ~RocksDbStore() override { IgnoreError(Close()); }

  Status Open();

  // Opens the database and its column families (db_ and the handles).
  Status OpenDb();

  // The database and its handles closed. A WAL whose last write failed is
  // not flushed first: RocksDB 7.8 aborts on any write to it.
  void CloseDb(bool flush_wal, rocksdb::Status* flushed, rocksdb::Status* closed);

  StatusOr<ApplyResult> ApplyBatch(const BatchView& batch, std::string_view body,
                                   int32_t day) override;
  StatusOr<ApplyResult> ApplyBatchFoldLater(const BatchView& batch, std::string_view body,
                                            int32_t day, std::function<void()>* fold) override;

  StatusOr<bool> BatchAccepted(std::string_view batch_id) override;

  Status Health() override;

  uint64_t pending_batches() override { return pending_count_.load(); }
  // Moves with every fold applied and every reopening (a roll-up moves
  // sums between nodes, and every answer stays what it was).
  uint64_t DataVersion() override { return data_version_.load(); }

  Status WaitApplied(std::chrono::milliseconds timeout) override;

  StatusOr<std::vector<ApiAggregate>> ListApis(const ApiFilter& filter, size_t limit) override;

  Status ForEachApi(const ApiFilter& filter,
                    const std::function<bool(ApiAggregate&&)>& visit) override;

  StatusOr<ApiAggregate> QueryRange(const ApiKey& key, int32_t first_day,
                                    int32_t last_day) override;

  void AppendMetrics(std::string* out) override;

  Status Close() override;

 private:
  // Batches accepted but not yet written into the sums, already summed by
  // series: (day, api key) -> sum. Ingest threads add whole batches under
  // fold_mutex_; the applier swaps the whole fold out under the same mutex,
  // so a batch is always entirely in one fold.
  struct Fold {
    FoldTable sums;
    std::vector<std::string> ids;  // batch ids to delete from the pending log
  };

  // A pending value's mark before the machine's secret (16 bytes):
  // "\xfe\x02" starts no protobuf message (field 31 with wire type 6), so
  // a value without it (no machine) is day + body. "\xfe\x01" and an
  // 8-byte hash: a value of an aggregator before the series' entries.
  static constexpr char kPendingMachineMark[] = "\xfe\x02";
  static constexpr char kPendingMachineHashMark[] = "\xfe\x01";

  static std::optional<MachineSecret> MachineOf(const BatchView& batch);

  // Adds a durable batch to the open fold; pending_count_ already counts it.
  void AddToFold(const std::string& id, int32_t day, const BatchView& batch,
                 const std::optional<MachineSecret>& machine);

  int32_t Today() const;

  Status LoadRollupPoint();

  // One step of the roll-up, if a day before today is not rolled up yet:
  // adds up to rollup_chunk_series day nodes to their month and all-time
  // nodes and moves the roll-up point past them, in one atomic write.
  // Returns whether more is left to do. Applier thread only.
  StatusOr<bool> RollupStep();
  // Deletes the series below k whose first day is older than the
  // retention (RocksDbStoreOptions::unpublished_retention_days), as of
  // `today`; once the roll-up reached today. Returns how many.
  StatusOr<size_t> ExpireUnpublished(int32_t today);

  // Batches accepted before a crash or shutdown but not yet applied.
  Status RecoverPending();

  // Writes the open fold whenever there is one. While a fold is being
  // written, the next one grows, so under load folds get larger and the
  // number of merges per batch smaller (like group commit).
  void ApplierLoop();

  // Free bytes on the database's filesystem (-1: unknown), looked up at
  // most every 100 ms unless `fresh`.
  int64_t FreeBytes(bool fresh);

  // The size of the database's write-ahead logs (what an open replays).
  uint64_t WalBytes() const;

  // A write failed: nothing more is written (RocksDB 7.8 aborts on the next
  // write to a WAL whose write failed) until the applier reopens the
  // database. The batches of acknowledged writes are all in the WAL, the
  // failed one is not acknowledged, and what was pending is folded again
  // from the pending log after the reopen.
  void MarkBroken(const rocksdb::Status& s, std::string_view what);

  // Applier thread: closes and opens the database again once the reserve is
  // free, and folds the pending log again. False while it cannot.
  bool TryReopen();

  Status WriteFold(const Fold& work);

  // After a fold is written (close_mutex_ held shared): flushes the
  // pending memtable while its bodies are deleted, once it is half full.
  void FlushFoldedBodies();

  const RocksDbStoreOptions options_;
  std::unique_ptr<BatchIdExpiry> expiry_;  // must outlive db_
  // Readers and writers hold it shared; Close() holds it exclusively.
  std::shared_mutex close_mutex_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* data_cf_ = nullptr;     // owned by db_
  rocksdb::ColumnFamilyHandle* ids_cf_ = nullptr;      // owned by db_
  rocksdb::ColumnFamilyHandle* pending_cf_ = nullptr;  // owned by db_

  std::mutex fold_mutex_;
  std::condition_variable fold_cv_;                        // a batch was added, or stop_
  std::condition_variable applied_cv_;                     // pending_count_ went down
  Fold fold_;                                              // GUARDED_BY(fold_mutex_)
  bool stop_ = false;                                      // GUARDED_BY(fold_mutex_)
  std::chrono::steady_clock::time_point last_fold_start_;  // applier thread only
  std::atomic<uint64_t> pending_count_{0};
  std::atomic<uint64_t> applied_batches_{0};
  std::atomic<uint64_t> data_version_{0};
  std::atomic<uint64_t> folds_{0};
  std::atomic<uint64_t> series_written_{0};
  std::atomic<uint64_t> apply_errors_{0};
  std::atomic<uint64_t> series_expired_{0};
  int32_t expired_through_ = 0;  // the applier's: the day expiry last ran
  // Whether writes may go on (Health): a failed write stops them until the
  // applier reopens the database; the reserve's free space is checked.
  std::atomic<bool> broken_{false};
  std::atomic<bool> closed_{false};
  std::mutex health_mutex_;
  Status broken_status_;  // GUARDED_BY(health_mutex_): why, while broken_
  std::atomic<int64_t> free_bytes_{-1};
  std::atomic<int64_t> free_checked_ms_{std::numeric_limits<int64_t>::min() / 2};
  std::atomic<uint64_t> refused_no_space_{0};
  std::atomic<uint64_t> write_failures_{0};
  std::atomic<uint64_t> reopens_{0};
  RollupPoint rollup_;  // applier thread only (and Open before it starts)
  std::atomic<int32_t> rollup_next_day_{0};
  std::atomic<uint64_t> rolled_series_{0};
  static constexpr std::chrono::milliseconds kRollupPoll{1000};
  std::thread applier_;
  std::array<std::mutex, 64> stripes_;  // serialize check+write per batch id
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_STORE_ROCKSDB_IMPL_H_
