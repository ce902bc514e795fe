// The RocksDB store (store_rocksdb_impl.h): opening, closing, reopening
// after a failed write, health and metrics.
#include "aggregator/store/store_rocksdb.h"

#include "aggregator/store/rocks_crc32c.h"
#include "aggregator/store/store_rocksdb_impl.h"

namespace fieldprof::aggregator {
namespace {

std::string Mib(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return b;
}

}  // namespace

Status RocksDbStore::Open() {
  if (Status s = OpenDb(); !s.ok()) {
    return s.WithContext("opening RocksDB at " + options_.path);
  }
  FP_RETURN_IF_ERROR(LoadRollupPoint());
  FP_RETURN_IF_ERROR(RecoverPending());
  applier_ = std::thread([this] { ApplierLoop(); });
  return Status::Ok();
}

Status RocksDbStore::OpenDb() {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.IncreaseParallelism(2);
  db_options.max_background_jobs = 2;
  db_options.keep_log_file_num = 5;
  // The applier's large fold writes would otherwise hold up the small synced
  // ingest writes queued behind them while their memtable inserts run.
  db_options.enable_pipelined_write = true;

  rocksdb::ColumnFamilyOptions data;
  data.merge_operator = std::make_shared<HistogramMergeOperator>();
  data.max_successive_merges = static_cast<size_t>(options_.max_successive_merges);
  data.write_buffer_size = options_.write_buffer_bytes;
  // A fold's merges come sorted, each landing just before the same
  // series' merges of earlier folds: with a hint kept per node level, the
  // skip list finds each position from the previous insert's. Without
  // one, a merge whose key is already in the memtable is searched for
  // from the top (RocksDB reuses the previous position only for a key
  // landing right after it): a fold's insert took 66-78 ms against 39-49
  // with the hint (docs/benchmarks-history.md, stop 105).
  data.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(1));
  data.compression = rocksdb::kNoCompression;
  data.bottommost_compression = rocksdb::kZSTD;
  rocksdb::BlockBasedTableOptions table;
  table.checksum = rocksdb::kXXH3;  // 7.8's default; faster than any CRC32C here
  table.block_cache = rocksdb::NewLRUCache(options_.block_cache_bytes);
  data.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  rocksdb::ColumnFamilyOptions ids;
  expiry_ = std::make_unique<BatchIdExpiry>(options_.batch_id_retention);
  ids.compaction_filter = expiry_.get();
  ids.write_buffer_size = 8 << 20;

  rocksdb::ColumnFamilyOptions pending;
  pending.write_buffer_size = options_.pending_write_buffer_bytes;
  pending.compression = rocksdb::kNoCompression;  // entries live about a second

  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, data}, {"batch_ids", ids}, {"pending", pending}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options_.path, cfs, &handles, &db);
  if (!s.ok()) {
    std::cerr << "fieldprof-aggregator: opening RocksDB: " << s.ToString() << "\n";
    return FromRocks(s, "opening the database");
  }
  db_.reset(db);
  data_cf_ = handles[0];
  ids_cf_ = handles[1];
  pending_cf_ = handles[2];
  return Status::Ok();
}

void RocksDbStore::CloseDb(bool flush_wal, rocksdb::Status* flushed, rocksdb::Status* closed) {
  if (flush_wal) *flushed = db_->FlushWAL(/*sync=*/true);
  for (auto* h : {data_cf_, ids_cf_, pending_cf_}) {
    IgnoreError(FromRocks(db_->DestroyColumnFamilyHandle(h), ""));
  }
  *closed = db_->Close();
  db_.reset();
}

Status RocksDbStore::Health() {
  if (broken_.load()) {
    std::lock_guard lock(health_mutex_);
    return broken_status_;
  }
  if (closed_.load()) return Unavailable("the store is closed");
  const int64_t free = FreeBytes(/*fresh=*/false);
  if (free >= 0 && static_cast<uint64_t>(free) < options_.min_free_bytes) {
    return NoSpace("the disk holding the database has " + Mib(free) + " free, under the " +
                   Mib(static_cast<int64_t>(options_.min_free_bytes)) +
                   " reserve (--min_free_mib); uploads resume by themselves when space returns");
  }
  return Status::Ok();
}

Status RocksDbStore::WaitApplied(std::chrono::milliseconds timeout) {
  std::unique_lock lock(fold_mutex_);
  if (!applied_cv_.wait_for(lock, timeout, [this] { return pending_count_.load() == 0; })) {
    return Unavailable(std::to_string(pending_count_.load()) + " batches still pending after " +
                       std::to_string(timeout.count()) + " ms");
  }
  return Status::Ok();
}

void RocksDbStore::AppendMetrics(std::string* out) {
  const Status health = Health();
  AppendPrometheusSample(out, "fieldprof_store_writable", "gauge",
                         "1 when the store takes batches, 0 when the disk is under its reserve "
                         "or a write failed (see /healthz).",
                         health.ok() ? "1" : "0");
  AppendPrometheusSample(out, "fieldprof_store_free_bytes", "gauge",
                         "Free bytes on the database's filesystem (-1: unknown).",
                         std::to_string(free_bytes_.load()));
  AppendPrometheusSample(out, "fieldprof_store_min_free_bytes", "gauge",
                         "The reserve (--min_free_mib) under which uploads get 507.",
                         std::to_string(options_.min_free_bytes));
  AppendPrometheusSample(out, "fieldprof_store_refused_no_space_total", "counter",
                         "Batches refused (507) for lack of space.",
                         std::to_string(refused_no_space_.load()));
  AppendPrometheusSample(out, "fieldprof_store_write_failures_total", "counter",
                         "RocksDB writes that failed (the store then stops writing until "
                         "reopened).",
                         std::to_string(write_failures_.load()));
  AppendPrometheusSample(out, "fieldprof_store_reopens_total", "counter",
                         "Times the database was reopened after a failed write.",
                         std::to_string(reopens_.load()));
  AppendPrometheusSample(out, "fieldprof_series_expired_total", "counter",
                         "Series below k deleted after the retention of what is never published "
                         "(--unpublished_days).",
                         std::to_string(series_expired_.load()));
  *out +=
      "# HELP fieldprof_rocksdb_crc32c_info Which code computes RocksDB's CRC32C.\n"
      "# TYPE fieldprof_rocksdb_crc32c_info gauge\nfieldprof_rocksdb_crc32c_info{code=\"" +
      std::string(RocksCrc32cCode()) + "\"} 1\n";
  std::shared_lock open_lock(close_mutex_);
  if (!db_) return;
  static const std::pair<const char*, const char*> kProps[] = {
      {"rocksdb.estimate-num-keys", "fieldprof_rocksdb_estimate_num_keys"},
      {"rocksdb.total-sst-files-size", "fieldprof_rocksdb_sst_bytes"},
      {"rocksdb.cur-size-all-mem-tables", "fieldprof_rocksdb_memtable_bytes"},
      {"rocksdb.num-running-compactions", "fieldprof_rocksdb_running_compactions"},
      {"rocksdb.num-running-flushes", "fieldprof_rocksdb_running_flushes"},
      {"rocksdb.estimate-pending-compaction-bytes", "fieldprof_rocksdb_pending_compaction_bytes"},
      {"rocksdb.live-sst-files-size", "fieldprof_rocksdb_live_sst_bytes"},
      {"rocksdb.background-errors", "fieldprof_rocksdb_background_errors"},
  };
  *out +=
      "# HELP fieldprof_pending_batches Accepted batches not yet applied to the sums.\n"
      "# TYPE fieldprof_pending_batches gauge\nfieldprof_pending_batches " +
      std::to_string(pending_count_.load()) + "\n";
  *out += "# TYPE fieldprof_applied_batches_total counter\nfieldprof_applied_batches_total " +
          std::to_string(applied_batches_.load()) + "\n";
  *out += "# TYPE fieldprof_apply_folds_total counter\nfieldprof_apply_folds_total " +
          std::to_string(folds_.load()) + "\n";
  *out +=
      "# HELP fieldprof_apply_series_written_total Series sums written (after folding).\n"
      "# TYPE fieldprof_apply_series_written_total counter\n"
      "fieldprof_apply_series_written_total " +
      std::to_string(series_written_.load()) + "\n";
  *out += "# TYPE fieldprof_apply_errors_total counter\nfieldprof_apply_errors_total " +
          std::to_string(apply_errors_.load()) + "\n";
  *out +=
      "# HELP fieldprof_rollup_next_day First day (days since 1970-01-01) not yet fully in "
      "the month and all-time sums.\n"
      "# TYPE fieldprof_rollup_next_day gauge\nfieldprof_rollup_next_day " +
      std::to_string(rollup_next_day_.load()) + "\n";
  *out +=
      "# HELP fieldprof_rollup_series_total Day sums added to their month and all-time sums.\n"
      "# TYPE fieldprof_rollup_series_total counter\nfieldprof_rollup_series_total " +
      std::to_string(rolled_series_.load()) + "\n";
  for (const auto& [cf, cf_name] : {std::pair{data_cf_, "data"}, std::pair{ids_cf_, "batch_ids"},
                                    std::pair{pending_cf_, "pending"}}) {
    for (const auto& [prop, metric] : kProps) {
      uint64_t v = 0;
      if (db_->GetIntProperty(cf, prop, &v)) {
        *out += std::string(metric) + "{cf=\"" + cf_name + "\"} " + std::to_string(v) + "\n";
      }
    }
  }
}

Status RocksDbStore::Close() {
  {
    std::lock_guard lock(fold_mutex_);
    stop_ = true;
  }
  fold_cv_.notify_all();
  if (applier_.joinable()) applier_.join();
  std::unique_lock lock(close_mutex_);
  closed_.store(true);
  if (!db_) return Status::Ok();
  rocksdb::Status s, cs;
  CloseDb(/*flush_wal=*/!broken_.load(), &s, &cs);
  if (!s.ok()) return FromRocks(s, "flushing WAL on close");
  return FromRocks(cs, "closing RocksDB");
}

int64_t RocksDbStore::FreeBytes(bool fresh) {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (!fresh && now - free_checked_ms_.load() < 100) return free_bytes_.load();
  struct statvfs v;
  const int64_t free = statvfs(options_.path.c_str(), &v) == 0
                           ? static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize)
                           : -1;
  free_bytes_.store(free);
  free_checked_ms_.store(now);
  return free;
}

uint64_t RocksDbStore::WalBytes() const {
  std::error_code ec;
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(options_.path, ec)) {
    if (e.path().extension() == ".log") n += e.file_size(ec);
  }
  return n;
}

void RocksDbStore::MarkBroken(const rocksdb::Status& s, std::string_view what) {
  write_failures_.fetch_add(1);
  {
    std::lock_guard lock(health_mutex_);
    if (broken_.load()) return;
    const std::string why = std::string(what) + " failed (" + Describe(s) + ")";
    broken_status_ = s.IsNoSpace()
                         ? NoSpace(why + "; uploads resume by themselves when space returns")
                         : IOError(why +
                                   "; the database is reopened once a second until it "
                                   "takes writes again");
    broken_.store(true);
  }
  std::cerr << "fieldprof-aggregator: " << what << " failed: " << s.ToString()
            << "; not writing until the database is reopened\n";
  fold_cv_.notify_all();
}

bool RocksDbStore::TryReopen() {
  // Opening replays the WAL and flushes it into tables: an open that runs
  // out of space on the way can abort in RocksDB 7.8, so it waits for
  // room for that too.
  const int64_t free = FreeBytes(/*fresh=*/true);
  const uint64_t need = options_.min_free_bytes + WalBytes() + (uint64_t{4} << 20);
  if (free < 0 || static_cast<uint64_t>(free) < need) {
    std::lock_guard lock(health_mutex_);
    if (broken_status_.code() == StatusCode::kNoSpace) {
      broken_status_ = NoSpace("the disk holding the database has " + Mib(free < 0 ? 0 : free) +
                               " free; a write failed for lack of space, and the database is "
                               "reopened by itself once " +
                               Mib(static_cast<int64_t>(need)) + " are free");
    }
    return false;
  }
  std::unique_lock lock(close_mutex_);  // no ingest or query in flight
  if (closed_.load()) return false;
  if (db_) {
    rocksdb::Status flushed, closed;
    CloseDb(/*flush_wal=*/false, &flushed, &closed);
    if (!closed.ok()) std::cerr << "fieldprof-aggregator: closing: " << closed.ToString() << "\n";
  }
  {
    std::lock_guard fold_lock(fold_mutex_);
    fold_ = Fold{};  // all of it is in the pending log
    pending_count_.store(0);
  }
  Status s = OpenDb();
  data_version_.fetch_add(1);
  if (s.ok()) s = LoadRollupPoint();
  if (s.ok()) s = RecoverPending();
  if (!s.ok()) {
    std::cerr << "fieldprof-aggregator: reopening the database: " << s.ToString() << "\n";
    std::lock_guard health_lock(health_mutex_);
    // Its message may name files: clients are told the kind only.
    broken_status_ = s.code() == StatusCode::kNoSpace
                         ? s
                         : Unavailable("reopening the database failed (" +
                                       std::string(StatusCodeName(s.code())) +
                                       "); retried once a second, the reason is in the log");
    return false;
  }
  reopens_.fetch_add(1);
  broken_.store(false);
  std::cerr << "fieldprof-aggregator: database reopened; " << pending_count_.load()
            << " pending batches folded again\n";
  return true;
}

StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(const RocksDbStoreOptions& options) {
  if (options.path.empty()) return InvalidArgument("store path is empty");
  auto store = std::make_unique<RocksDbStore>(options);
  FP_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace fieldprof::aggregator
