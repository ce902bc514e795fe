#include "aggregator/store/store_rocksdb.h"

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/merge_operator.h>
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
#include "aggregator/store/rocks_status.h"
#include "common/encoding.h"
#include "common/wire.h"

namespace fieldprof::aggregator {

// What went wrong, without the file names RocksDB's messages carry:
// these messages reach clients, which must not learn server paths. The
// operator's log gets the whole message (MarkBroken).
std::string Describe(const rocksdb::Status& s) {
  if (s.IsNoSpace()) return "no space left on the disk";
  if (s.IsIOError()) return "I/O error";
  if (s.IsCorruption()) return "corruption";
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return "busy";
  if (s.IsInvalidArgument()) return "invalid argument";
  return "RocksDB error (code " + std::to_string(static_cast<int>(s.code())) + ")";
}

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  std::string m(what);
  m += ": ";
  m += Describe(s);
  if (s.IsCorruption()) return DataLoss(std::move(m));
  if (s.IsNoSpace()) return NoSpace(std::move(m));
  if (s.IsIOError()) return IOError(std::move(m));
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return ResourceExhausted(std::move(m));
  return Internal(std::move(m));
}

namespace {

std::string Mib(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return b;
}

std::string NodeKey(const TimeNode& node, std::string_view api_key) {
  std::string k;
  k.reserve(api_key.size() + 5);
  k.push_back(static_cast<char>(node.level));
  if (node.level != TimeLevel::kAllTime) PutOrdered32(&k, node.period);
  k.append(api_key);
  return k;
}

// The roll-up point: days before `next_day` are in their month and
// all-time nodes; of `next_day` itself, the series up to `cursor` (an
// EncodeApiKey; empty = none yet).
constexpr std::string_view kRollupKey = "\x01rollup";

struct RollupPoint {
  int32_t next_day = 0;
  std::string cursor;

  bool Rolled(int32_t day, std::string_view api) const {
    return day < next_day || (day == next_day && !cursor.empty() && api <= cursor);
  }
  // Last day whose data for `api` is in the month and all-time nodes.
  int32_t RolledThrough(std::string_view api) const {
    return Rolled(next_day, api) ? next_day : next_day - 1;
  }
  std::string Encode() const {
    std::string v;
    PutOrdered32(&v, next_day);
    v += cursor;
    return v;
  }
  static std::optional<RollupPoint> Decode(std::string_view v) {
    if (v.size() < 4) return std::nullopt;
    return RollupPoint{GetOrdered32(v.data()), std::string(v.substr(4))};
  }
};

std::string DayPrefix(int32_t day) {
  std::string k(1, static_cast<char>(TimeLevel::kDay));
  PutOrdered32(&k, day);
  return k;
}

class HistogramMergeOperator : public rocksdb::MergeOperator {
 public:
  bool FullMergeV2(const MergeOperationInput& in, MergeOperationOutput* out) const override {
    SparseAggregate acc;
    if (in.existing_value != nullptr && !acc.AddEncoded(ToView(*in.existing_value))) return false;
    for (const rocksdb::Slice& op : in.operand_list) {
      if (!acc.AddEncoded(ToView(op))) return false;
    }
    acc.Encode(&out->new_value);
    return true;
  }

  bool PartialMergeMulti(const rocksdb::Slice& key, const std::deque<rocksdb::Slice>& operands,
                         std::string* new_value, rocksdb::Logger* logger) const override {
    SparseAggregate acc;
    for (const rocksdb::Slice& op : operands) {
      if (!acc.AddEncoded(ToView(op))) return false;
    }
    acc.Encode(new_value);
    return true;
  }

  bool AllowSingleOperand() const override { return true; }
  const char* Name() const override { return "fieldprof.HistogramAdd.v1"; }

 private:
  static std::string_view ToView(const rocksdb::Slice& s) { return {s.data(), s.size()}; }
};

// Drops batch ids older than the retention.
class BatchIdExpiry : public rocksdb::CompactionFilter {
 public:
  explicit BatchIdExpiry(std::chrono::seconds retention) : retention_(retention) {}
  bool Filter(int, const rocksdb::Slice&, const rocksdb::Slice& value, std::string*,
              bool*) const override {
    if (value.size() != 8) return false;
    int64_t t = 0;
    std::memcpy(&t, value.data(), 8);
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    return now - t > retention_.count();
  }
  const char* Name() const override { return "fieldprof.BatchIdExpiry"; }

 private:
  std::chrono::seconds retention_;
};

// Reads from one RocksDB snapshot, released on destruction.
class SnapshotReader {
 public:
  explicit SnapshotReader(rocksdb::DB* db) : db_(db), snapshot_(db->GetSnapshot()) {
    options_.snapshot = snapshot_;
  }
  ~SnapshotReader() { db_->ReleaseSnapshot(snapshot_); }
  SnapshotReader(const SnapshotReader&) = delete;
  SnapshotReader& operator=(const SnapshotReader&) = delete;

  const rocksdb::ReadOptions& options() const { return options_; }
  std::unique_ptr<rocksdb::Iterator> NewIterator(rocksdb::ColumnFamilyHandle* cf) const {
    return std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(options_, cf));
  }

  StatusOr<RollupPoint> ReadRollupPoint(rocksdb::ColumnFamilyHandle* cf) const {
    std::string v;
    rocksdb::Status s =
        db_->Get(options_, cf, rocksdb::Slice(kRollupKey.data(), kRollupKey.size()), &v);
    if (!s.ok()) return FromRocks(s, "reading the roll-up point");
    std::optional<RollupPoint> p = RollupPoint::Decode(v);
    if (!p) return DataLoss("roll-up point is corrupt");
    return *p;
  }

  // Days in [first, last] that have day nodes, found by seeking from one to
  // the next (after the roll-up point these are today and perhaps yesterday).
  StatusOr<std::vector<int32_t>> DaysWithData(rocksdb::ColumnFamilyHandle* cf, int32_t first,
                                              int32_t last) const {
    std::vector<int32_t> days;
    auto it = NewIterator(cf);
    int64_t d = first;
    while (d <= last) {
      it->Seek(DayPrefix(static_cast<int32_t>(d)));
      if (!it->Valid() || it->key().size() < 5 ||
          it->key()[0] != static_cast<char>(TimeLevel::kDay)) {
        break;
      }
      const int32_t day = GetOrdered32(it->key().data() + 1);
      if (day > last) break;
      days.push_back(day);
      d = int64_t{day} + 1;
    }
    if (!it->status().ok()) return FromRocks(it->status(), "finding days");
    return days;
  }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snapshot_;
  rocksdb::ReadOptions options_;
};

class RocksDbStore : public Store {
 public:
  explicit RocksDbStore(const RocksDbStoreOptions& options) : options_(options) {}
  ~RocksDbStore() override { IgnoreError(Close()); }

  Status Open() {
    if (Status s = OpenDb(); !s.ok()) {
      return s.WithContext("opening RocksDB at " + options_.path);
    }
    FP_RETURN_IF_ERROR(LoadRollupPoint());
    FP_RETURN_IF_ERROR(RecoverPending());
    applier_ = std::thread([this] { ApplierLoop(); });
    return Status::Ok();
  }

  // Opens the database and its column families (db_ and the handles).
  Status OpenDb() {
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
    data.compression = rocksdb::kNoCompression;
    data.bottommost_compression = rocksdb::kZSTD;
    rocksdb::BlockBasedTableOptions table;
    table.checksum = rocksdb::kXXH3;  // Debian's RocksDB has only the software CRC32C
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

  // The database and its handles closed. A WAL whose last write failed is
  // not flushed first: RocksDB 7.8 aborts on any write to it.
  void CloseDb(bool flush_wal, rocksdb::Status* flushed, rocksdb::Status* closed) {
    if (flush_wal) *flushed = db_->FlushWAL(/*sync=*/true);
    for (auto* h : {data_cf_, ids_cf_, pending_cf_}) {
      IgnoreError(FromRocks(db_->DestroyColumnFamilyHandle(h), ""));
    }
    *closed = db_->Close();
    db_.reset();
  }

  StatusOr<ApplyResult> ApplyBatch(const BatchView& batch, std::string_view body,
                                   int32_t day) override {
    std::shared_lock open_lock(close_mutex_);
    if (Status h = Health(); !h.ok()) {
      if (h.code() == StatusCode::kNoSpace) refused_no_space_.fetch_add(1);
      return h;
    }
    if (!db_) return Unavailable("store is closed");
    if (pending_count_.load() >= static_cast<uint64_t>(options_.max_pending_batches)) {
      return ResourceExhausted(std::to_string(pending_count_.load()) +
                               " accepted batches are waiting to be applied");
    }
    const std::string id(batch.batch_id());
    // Check-then-write must be atomic per id: two concurrent uploads of one id
    // serialize on the id's stripe, and the second sees the first's write.
    std::mutex& stripe = stripes_[std::hash<std::string>()(id) % stripes_.size()];
    std::lock_guard lock(stripe);
    std::string seen;
    rocksdb::Status gs = db_->Get(rocksdb::ReadOptions(), ids_cf_, id, &seen);
    if (gs.ok()) return ApplyResult{.duplicate = true, .records = 0};
    if (!gs.IsNotFound()) return FromRocks(gs, "looking up batch id");

    // One synced write makes the batch durable: its id (dedupe) and its body
    // in the pending log. The applier folds pending batches into the sums
    // and deletes them from the log in one atomic write, so every accepted
    // batch is counted exactly once whatever crashes in between.
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    char tbuf[8];
    std::memcpy(tbuf, &now, 8);
    // The pending value is day [+ machine] + body, given in two parts so
    // the 128 KiB body is not copied once more just to prepend a few
    // bytes. The body is kept without the machine key and the token (no
    // store keeps them); the machine is kept as its hash, all the sketch
    // needs.
    std::string prefix;
    PutOrdered32(&prefix, day);
    const std::optional<uint64_t> machine = MachineOf(batch);
    if (machine) {
      prefix.append(kPendingMachineMark, 2);
      PutBigEndian64(&prefix, *machine);
    }
    std::string scratch;
    const std::string_view kept = StorableBatchBody(body, &scratch);
    // A body that decoded always parses; never store one that would not
    // recover (or one still holding its key).
    if (kept.empty()) return Internal("a decoded batch does not parse again");
    const rocksdb::Slice value_parts[2] = {prefix, rocksdb::Slice(kept.data(), kept.size())};
    const rocksdb::Slice key_part(id);
    rocksdb::WriteBatch wb;
    rocksdb::Status s = wb.Put(ids_cf_, id, rocksdb::Slice(tbuf, 8));
    if (s.ok()) {
      s = wb.Put(pending_cf_, rocksdb::SliceParts(&key_part, 1),
                 rocksdb::SliceParts(value_parts, 2));
    }
    if (!s.ok()) return FromRocks(s, "building write batch");
    rocksdb::WriteOptions wo;
    wo.sync = options_.sync;
    s = db_->Write(wo, &wb);
    if (!s.ok()) {
      MarkBroken(s, "writing a batch");
      return FromRocks(s, "writing the batch");
    }
    AddToFold(id, day, batch, machine);
    return ApplyResult{.duplicate = false, .records = static_cast<size_t>(batch.records_size())};
  }

  StatusOr<bool> BatchAccepted(std::string_view batch_id) override {
    std::shared_lock open_lock(close_mutex_);
    if (!db_) return Unavailable("store is closed");
    std::string seen;
    rocksdb::Status gs = db_->Get(rocksdb::ReadOptions(), ids_cf_,
                                  rocksdb::Slice(batch_id.data(), batch_id.size()), &seen);
    if (gs.ok()) return true;
    if (gs.IsNotFound()) return false;
    return FromRocks(gs, "looking up batch id");
  }

  Status Health() override {
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

  uint64_t pending_batches() override { return pending_count_.load(); }

  Status WaitApplied(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(fold_mutex_);
    if (!applied_cv_.wait_for(lock, timeout, [this] { return pending_count_.load() == 0; })) {
      return Unavailable(std::to_string(pending_count_.load()) + " batches still pending after " +
                         std::to_string(timeout.count()) + " ms");
    }
    return Status::Ok();
  }

  StatusOr<std::vector<ApiAggregate>> ListApis(const ApiFilter& filter, size_t limit) override {
    std::vector<ApiAggregate> out;
    Status s = ForEachApi(filter, [&](ApiAggregate&& a) {
      out.push_back(std::move(a));
      return out.size() < limit;
    });
    if (!s.ok()) return s;
    return out;
  }

  Status ForEachApi(const ApiFilter& filter,
                    const std::function<bool(ApiAggregate&&)>& visit) override {
    std::shared_lock open_lock(close_mutex_);
    if (!db_) return Unavailable("store is closed");
    std::string key_prefix;  // of the EncodeApiKey part
    if (!filter.module.empty()) {
      key_prefix += filter.module;
      key_prefix += '\0';
      key_prefix += filter.symbol_prefix;
      if (filter.symbol_exact) key_prefix += '\0';
    }
    SnapshotReader view(db_.get());
    FP_ASSIGN_OR_RETURN(RollupPoint point, view.ReadRollupPoint(data_cf_));
    // All time = the all-time nodes + the day nodes after the roll-up point,
    // walked side by side in API key order.
    struct Source {
      std::unique_ptr<rocksdb::Iterator> it;
      std::string prefix;       // level (+ day) + key_prefix
      size_t level_bytes;       // 1 for all time, 5 for a day
      std::string_view rolled;  // skip API keys <= this (already rolled up)
      std::string_view Api() const {
        rocksdb::Slice k = it->key();
        return {k.data() + level_bytes, k.size() - level_bytes};
      }
      bool Valid() {
        while (it->Valid() && it->key().starts_with(prefix)) {
          if (rolled.empty() || Api() > rolled) return true;
          it->Next();
        }
        return false;
      }
    };
    std::vector<Source> sources;
    sources.push_back({view.NewIterator(data_cf_), std::string(1, 'A') + key_prefix, 1, {}});
    FP_ASSIGN_OR_RETURN(std::vector<int32_t> days,
                        view.DaysWithData(data_cf_, point.next_day, kUnboundedLast));
    for (int32_t day : days) {
      sources.push_back(
          {view.NewIterator(data_cf_), DayPrefix(day) + key_prefix, 5,
           day == point.next_day ? std::string_view(point.cursor) : std::string_view()});
    }
    for (Source& src : sources) src.it->Seek(src.prefix);
    for (;;) {
      std::string_view next;
      bool any = false;
      for (Source& src : sources) {
        if (src.Valid() && (!any || src.Api() < next)) {
          next = src.Api();
          any = true;
        }
      }
      if (!any) break;
      const std::string api(next);
      SparseAggregate acc;
      for (Source& src : sources) {
        if (!src.Valid() || src.Api() != api) continue;
        if (!acc.AddEncoded(std::string_view(src.it->value().data(), src.it->value().size()))) {
          return DataLoss("corrupt stored value in listing");
        }
        src.it->Next();
      }
      FP_ASSIGN_OR_RETURN(ApiKey key, DecodeApiKey(api));
      if (!filter.Matches(key)) continue;
      if (!visit({std::move(key), acc.ToHistogram(), acc.runs(), acc.truncated(),
                  acc.resolution_ns(), acc.machines()}))
        break;
    }
    for (Source& src : sources) {
      if (!src.it->status().ok()) return FromRocks(src.it->status(), "listing APIs");
    }
    return Status::Ok();
  }

  StatusOr<ApiAggregate> QueryRange(const ApiKey& key, int32_t first_day,
                                    int32_t last_day) override {
    std::shared_lock open_lock(close_mutex_);
    if (!db_) return Unavailable("store is closed");
    const std::string api = EncodeApiKey(key);
    // One consistent view for the roll-up point and all nodes of the range.
    SnapshotReader view(db_.get());
    FP_ASSIGN_OR_RETURN(RollupPoint point, view.ReadRollupPoint(data_cf_));
    const int32_t rolled = point.RolledThrough(api);
    std::vector<TimeNode> nodes = CoverRange(first_day, last_day, rolled, rolled);
    if (rolled < last_day) {
      FP_ASSIGN_OR_RETURN(std::vector<int32_t> days,
                          view.DaysWithData(data_cf_, std::max(first_day, rolled + 1), last_day));
      for (int32_t d : days) nodes.push_back({TimeLevel::kDay, d});
    }
    std::vector<std::string> keys;
    keys.reserve(nodes.size());
    for (const TimeNode& n : nodes) keys.push_back(NodeKey(n, api));
    std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
    std::vector<rocksdb::ColumnFamilyHandle*> cfs(keys.size(), data_cf_);
    std::vector<std::string> values;
    std::vector<rocksdb::Status> st = db_->MultiGet(view.options(), cfs, slices, &values);
    SparseAggregate acc;
    for (size_t i = 0; i < st.size(); ++i) {
      if (st[i].IsNotFound()) continue;
      if (!st[i].ok()) return FromRocks(st[i], "reading range");
      if (!acc.AddEncoded(values[i])) return DataLoss("corrupt stored value");
    }
    return ApiAggregate{
        key, acc.ToHistogram(), acc.runs(), acc.truncated(), acc.resolution_ns(), acc.machines()};
  }

  void AppendMetrics(std::string* out) override {
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

  Status Close() override {
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

 private:
  // Batches accepted but not yet written into the sums, already summed by
  // series: (day, api key) -> sum. Ingest threads add whole batches under
  // fold_mutex_; the applier swaps the whole fold out under the same mutex,
  // so a batch is always entirely in one fold.
  struct Fold {
    FoldTable sums;
    std::vector<std::string> ids;  // batch ids to delete from the pending log
  };

  static void DayKey(int32_t day, const RecordView& r, const PlatformView& p, std::string* k) {
    k->clear();
    PutOrdered32(k, day);
    AppendWireApiKey(r.key(), p, k);
  }

  // A pending value's mark before the machine's hash: "\xfe\x01" starts
  // no protobuf message (field 31 with wire type 6), so a value without
  // it (no machine, or written before the mark) is day + body.
  static constexpr char kPendingMachineMark[] = "\xfe\x01";

  static std::optional<uint64_t> MachineOf(const BatchView& batch) {
    if (batch.machine_key().empty()) return std::nullopt;
    return MachineHash(batch.machine_key());
  }

  void AddToFold(const std::string& id, int32_t day, const BatchView& batch,
                 std::optional<uint64_t> machine) {
    // Straight into the open fold: one hash lookup and one in-place add per
    // record. The lock is held for the batch (~0.3 ms), far less than the
    // synced write before it.
    std::string key;
    {
      std::lock_guard lock(fold_mutex_);
      for (const RecordView& r : batch.records()) {
        DayKey(day, r, batch.client_platform(), &key);
        SparseAggregate& sum = fold_.sums[key];
        sum.AddRecord(r);
        if (machine) sum.AddMachine(*machine);
      }
      fold_.ids.push_back(id);
      pending_count_.fetch_add(1);
    }
    fold_cv_.notify_one();
  }

  int32_t Today() const {
    if (options_.today) return options_.today();
    return DayFromUnixSeconds(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  }

  Status LoadRollupPoint() {
    std::string v;
    const rocksdb::Slice key(kRollupKey.data(), kRollupKey.size());
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), data_cf_, key, &v);
    if (s.ok()) {
      std::optional<RollupPoint> p = RollupPoint::Decode(v);
      if (!p) return DataLoss("roll-up point in " + options_.path + " is corrupt");
      rollup_ = std::move(*p);
    } else if (s.IsNotFound()) {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), data_cf_));
      it->SeekToFirst();
      if (it->Valid()) {
        return Unsupported("database " + options_.path +
                           " holds sums but no roll-up point: it was written by an older "
                           "fieldprof; start with an empty --db");
      }
      FP_RETURN_IF_ERROR(FromRocks(it->status(), "checking for sums"));
      rollup_ = RollupPoint{};
      rocksdb::WriteOptions wo;
      wo.sync = options_.sync;
      FP_RETURN_IF_ERROR(
          FromRocks(db_->Put(wo, data_cf_, key, rollup_.Encode()), "writing the roll-up point"));
    } else {
      return FromRocks(s, "reading the roll-up point");
    }
    rollup_next_day_.store(rollup_.next_day);
    return Status::Ok();
  }

  // One step of the roll-up, if a day before today is not rolled up yet:
  // adds up to rollup_chunk_series day nodes to their month and all-time
  // nodes and moves the roll-up point past them, in one atomic write.
  // Returns whether more is left to do. Applier thread only.
  StatusOr<bool> RollupStep() {
    const int32_t today = Today();
    if (rollup_.cursor.empty() && rollup_.next_day >= today) return false;
    std::shared_lock open_lock(close_mutex_);
    if (!db_) return Unavailable("store is closed");
    if (broken_.load()) return Unavailable("the store is being reopened");
    RollupPoint next = rollup_;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), data_cf_));
    if (next.cursor.empty()) {
      // Skip the days without data up to the next day that has some.
      it->Seek(DayPrefix(next.next_day));
      int32_t day = today;
      if (it->Valid() && it->key().size() >= 5 &&
          it->key()[0] == static_cast<char>(TimeLevel::kDay)) {
        day = std::min(today, GetOrdered32(it->key().data() + 1));
      }
      FP_RETURN_IF_ERROR(FromRocks(it->status(), "finding the next day to roll up"));
      next.next_day = day;
    } else {
      const std::string from = DayPrefix(next.next_day) + next.cursor;
      it->Seek(from);
      if (it->Valid() && it->key() == rocksdb::Slice(from)) it->Next();
    }
    rocksdb::WriteBatch wb;
    size_t n = 0;
    if (next.next_day < today) {
      const std::string prefix = DayPrefix(next.next_day);
      const std::string month = NodeKey({TimeLevel::kMonth, MonthOfDay(next.next_day)}, "");
      const std::string all = NodeKey({TimeLevel::kAllTime, 0}, "");
      std::string k;
      for (; it->Valid() && it->key().starts_with(prefix) &&
             n < static_cast<size_t>(options_.rollup_chunk_series);
           it->Next(), ++n) {
        const rocksdb::Slice api(it->key().data() + 5, it->key().size() - 5);
        for (const std::string* level : {&month, &all}) {
          k.assign(*level);
          k.append(api.data(), api.size());
          FP_RETURN_IF_ERROR(FromRocks(wb.Merge(data_cf_, k, it->value()), "building roll-up"));
        }
        next.cursor.assign(api.data(), api.size());
      }
      FP_RETURN_IF_ERROR(FromRocks(it->status(), "reading a day to roll up"));
      if (!it->Valid() || !it->key().starts_with(prefix)) next = {next.next_day + 1, ""};
    }
    FP_RETURN_IF_ERROR(FromRocks(
        wb.Put(data_cf_, rocksdb::Slice(kRollupKey.data(), kRollupKey.size()), next.Encode()),
        "building roll-up"));
    // Not synced, like folds: lost together with everything after it.
    if (rocksdb::Status ws = db_->Write(rocksdb::WriteOptions(), &wb); !ws.ok()) {
      MarkBroken(ws, "writing a roll-up");
      return FromRocks(ws, "writing roll-up");
    }
    rollup_ = std::move(next);
    rollup_next_day_.store(rollup_.next_day);
    rolled_series_.fetch_add(n);
    return !rollup_.cursor.empty() || rollup_.next_day < today;
  }

  // Batches accepted before a crash or shutdown but not yet applied.
  Status RecoverPending() {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), pending_cf_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      rocksdb::Slice v = it->value();
      if (v.size() < 4) return DataLoss("pending batch entry too short");
      const int32_t day = GetOrdered32(v.data());
      std::string_view body(v.data() + 4, v.size() - 4);
      std::optional<uint64_t> machine;
      if (body.size() >= 10 && body.substr(0, 2) == std::string_view(kPendingMachineMark, 2)) {
        machine = GetBigEndian64(body.data() + 2);
        body.remove_prefix(10);
      }
      BatchView batch;
      if (Status s = DecodeBatchView(body, &batch); !s.ok()) {
        return DataLoss("pending batch " + HexEncode(it->key().ToString()) +
                        " does not decode: " + s.message());
      }
      // A value from before the mark may still hold the key itself.
      if (!machine) machine = MachineOf(batch);
      AddToFold(it->key().ToString(), day, batch, machine);
    }
    return FromRocks(it->status(), "reading pending batches");
  }

  // Writes the open fold whenever there is one. While a fold is being
  // written, the next one grows, so under load folds get larger and the
  // number of merges per batch smaller (like group commit).
  void ApplierLoop() {
    bool rollup_left = true;  // check once at start
    for (;;) {
      if (broken_.load()) {
        // Nothing is written until the database is reopened, tried once a
        // second while the reserve is free.
        if (TryReopen()) continue;
        std::unique_lock lock(fold_mutex_);
        if (stop_) return;
        fold_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
        continue;
      }
      Fold work;
      {
        std::unique_lock lock(fold_mutex_);
        // Idle: wake for batches, to stop, or once a second to see whether
        // a day has ended (at once while a roll-up is under way).
        fold_cv_.wait_for(lock, rollup_left ? std::chrono::milliseconds(0) : kRollupPoll,
                          [this] { return stop_ || !fold_.ids.empty(); });
        if (stop_ && fold_.ids.empty()) return;
        if (!fold_.ids.empty()) {
          // Let the fold grow for up to fold_interval since the last write
          // started: more batches per fold, fewer merges per batch. Cut short
          // when stopping or when half the pending budget is used.
          const auto due = last_fold_start_ + options_.fold_interval;
          fold_cv_.wait_until(lock, due, [this] {
            return stop_ ||
                   pending_count_.load() * 2 >= static_cast<uint64_t>(options_.max_pending_batches);
          });
          last_fold_start_ = std::chrono::steady_clock::now();
          std::swap(work, fold_);
        }
      }
      if (!work.ids.empty()) {
        Status s = WriteFold(work);
        std::unique_lock lock(fold_mutex_);
        if (!s.ok()) {
          // E.g. disk full. The batches stay durable in the pending log; put
          // the sums back in front of what arrived meanwhile and retry.
          apply_errors_.fetch_add(1);
          fold_.sums.ForEach(
              [&work](std::string_view k, const SparseAggregate& v) { work.sums[k].Merge(v); });
          work.ids.insert(work.ids.end(), fold_.ids.begin(), fold_.ids.end());
          std::swap(work, fold_);
          if (stop_) return;  // applied on the next start
          fold_cv_.wait_for(lock, std::chrono::milliseconds(200));
          continue;
        }
        pending_count_.fetch_sub(work.ids.size());
        applied_batches_.fetch_add(work.ids.size());
        folds_.fetch_add(1);
        applied_cv_.notify_all();
      }
      // One roll-up chunk between folds keeps ingest going during a roll-up.
      StatusOr<bool> more = RollupStep();
      if (!more.ok()) {
        apply_errors_.fetch_add(1);
        rollup_left = false;  // retried at the next poll
      } else {
        rollup_left = *more;
      }
    }
  }

  // Free bytes on the database's filesystem (-1: unknown), looked up at
  // most every 100 ms unless `fresh`.
  int64_t FreeBytes(bool fresh) {
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

  // The size of the database's write-ahead logs (what an open replays).
  uint64_t WalBytes() const {
    std::error_code ec;
    uint64_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(options_.path, ec)) {
      if (e.path().extension() == ".log") n += e.file_size(ec);
    }
    return n;
  }

  // A write failed: nothing more is written (RocksDB 7.8 aborts on the next
  // write to a WAL whose write failed) until the applier reopens the
  // database. The batches of acknowledged writes are all in the WAL, the
  // failed one is not acknowledged, and what was pending is folded again
  // from the pending log after the reopen.
  void MarkBroken(const rocksdb::Status& s, std::string_view what) {
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

  // Applier thread: closes and opens the database again once the reserve is
  // free, and folds the pending log again. False while it cannot.
  bool TryReopen() {
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

  Status WriteFold(const Fold& work) {
    std::shared_lock open_lock(close_mutex_);
    if (!db_) return Unavailable("store is closed");
    if (broken_.load()) return Unavailable("the store is being reopened");
    // Merges go in key order: the memtable's skip list then finds each
    // insert position next to the previous one instead of from the top.
    std::vector<std::pair<std::string, const std::string*>> merges;
    std::vector<std::string> values;
    values.reserve(work.sums.size());
    merges.reserve(work.sums.size() * 3);
    work.sums.ForEach([&](std::string_view dk, const SparseAggregate& sum) {
      const int32_t day = GetOrdered32(dk.data());
      const std::string_view api(dk.data() + 4, dk.size() - 4);
      values.emplace_back();
      sum.Encode(&values.back());
      if (rollup_.Rolled(day, api)) {
        for (const TimeNode& n : NodesForDay(day))
          merges.emplace_back(NodeKey(n, api), &values.back());
      } else {
        merges.emplace_back(NodeKey({TimeLevel::kDay, day}, api), &values.back());
      }
    });
    std::sort(merges.begin(), merges.end());
    rocksdb::WriteBatch wb;
    rocksdb::Status s;
    for (const auto& [key, value] : merges) {
      s = wb.Merge(data_cf_, key, *value);
      if (!s.ok()) return FromRocks(s, "building fold");
    }
    for (const std::string& id : work.ids) {
      s = wb.Delete(pending_cf_, id);
      if (!s.ok()) return FromRocks(s, "building fold");
    }
    // Not synced on purpose: the merges and the pending deletes are one
    // atomic WAL record. If it is lost, both are lost and the batches are
    // applied again from the pending log; the next synced ingest write also
    // makes it durable.
    s = db_->Write(rocksdb::WriteOptions(), &wb);
    if (!s.ok()) {
      MarkBroken(s, "writing sums");
      return FromRocks(s, "writing fold");
    }
    series_written_.fetch_add(work.sums.size());
    return Status::Ok();
  }

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
  std::atomic<uint64_t> folds_{0};
  std::atomic<uint64_t> series_written_{0};
  std::atomic<uint64_t> apply_errors_{0};
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

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(const RocksDbStoreOptions& options) {
  if (options.path.empty()) return InvalidArgument("store path is empty");
  auto store = std::make_unique<RocksDbStore>(options);
  FP_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace fieldprof::aggregator
