#include "aggregator/store_rocksdb.h"

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <shared_mutex>

#include "aggregator/aggregate_value.h"
#include "aggregator/time_tree.h"
#include "common/wire.h"

namespace fieldprof::aggregator {
namespace {

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  std::string m(what);
  m += ": ";
  m += s.ToString();
  if (s.IsCorruption()) return DataLoss(std::move(m));
  if (s.IsNoSpace() || s.IsIOError()) return IOError(std::move(m));
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return ResourceExhausted(std::move(m));
  return Internal(std::move(m));
}

void AppendBigEndian32(std::string* s, int32_t v) {
  // Offset so that negative periods still sort before positive ones.
  const uint32_t u = static_cast<uint32_t>(v) ^ 0x80000000u;
  s->push_back(static_cast<char>(u >> 24));
  s->push_back(static_cast<char>(u >> 16));
  s->push_back(static_cast<char>(u >> 8));
  s->push_back(static_cast<char>(u));
}

std::string NodeKey(const TimeNode& node, std::string_view api_key) {
  std::string k;
  k.reserve(api_key.size() + 5);
  k.push_back(static_cast<char>(node.level));
  if (node.level != TimeLevel::kAllTime) AppendBigEndian32(&k, node.period);
  k.append(api_key);
  return k;
}

class HistogramMergeOperator : public rocksdb::MergeOperator {
 public:
  bool FullMergeV2(const MergeOperationInput& in, MergeOperationOutput* out) const override {
    AggregateAccumulator acc;
    if (in.existing_value != nullptr && !acc.Add(ToView(*in.existing_value))) return false;
    for (const rocksdb::Slice& op : in.operand_list) {
      if (!acc.Add(ToView(op))) return false;
    }
    acc.Encode(&out->new_value);
    return true;
  }

  bool PartialMergeMulti(const rocksdb::Slice& key, const std::deque<rocksdb::Slice>& operands,
                         std::string* new_value, rocksdb::Logger* logger) const override {
    AggregateAccumulator acc;
    for (const rocksdb::Slice& op : operands) {
      if (!acc.Add(ToView(op))) return false;
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

class RocksDbStore : public Store {
 public:
  RocksDbStore(const RocksDbStoreOptions& options) : options_(options) {}
  ~RocksDbStore() override { IgnoreError(Close()); }

  Status Open() {
    rocksdb::DBOptions db_options;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.IncreaseParallelism(2);
    db_options.max_background_jobs = 2;
    db_options.keep_log_file_num = 5;

    rocksdb::ColumnFamilyOptions data;
    data.merge_operator = std::make_shared<HistogramMergeOperator>();
    data.max_successive_merges = static_cast<size_t>(options_.max_successive_merges);
    data.write_buffer_size = 64 << 20;
    data.compression = rocksdb::kNoCompression;
    data.bottommost_compression = rocksdb::kZSTD;
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = rocksdb::NewLRUCache(options_.block_cache_bytes);
    data.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

    rocksdb::ColumnFamilyOptions ids;
    expiry_ = std::make_unique<BatchIdExpiry>(options_.batch_id_retention);
    ids.compaction_filter = expiry_.get();
    ids.write_buffer_size = 8 << 20;

    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
        {rocksdb::kDefaultColumnFamilyName, data}, {"batch_ids", ids}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(db_options, options_.path, cfs, &handles, &db);
    if (!s.ok()) return FromRocks(s, "opening RocksDB at " + options_.path);
    db_.reset(db);
    data_cf_ = handles[0];
    ids_cf_ = handles[1];
    return Status::Ok();
  }

  StatusOr<ApplyResult> ApplyBatch(const wire::Batch& batch, int32_t day) override {
    std::shared_lock open_lock(close_mutex_);
    if (!db_) return Unavailable("store is closed");
    const std::string& id = batch.batch_id();
    // Check-then-write must be atomic per id: two concurrent uploads of one id
    // serialize on the id's stripe, and the second sees the first's write.
    std::mutex& stripe = stripes_[std::hash<std::string>()(id) % stripes_.size()];
    std::lock_guard lock(stripe);
    std::string seen;
    rocksdb::Status gs = db_->Get(rocksdb::ReadOptions(), ids_cf_, id, &seen);
    if (gs.ok()) return ApplyResult{.duplicate = true, .records = 0};
    if (!gs.IsNotFound()) return FromRocks(gs, "looking up batch id");

    rocksdb::WriteBatch wb;
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    char tbuf[8];
    std::memcpy(tbuf, &now, 8);
    rocksdb::Status s = wb.Put(ids_cf_, id, rocksdb::Slice(tbuf, 8));
    const std::vector<TimeNode> nodes = NodesForDay(day);
    for (const wire::Record& r : batch.records()) {
      if (!s.ok()) break;
      const std::string api = EncodeApiKey(ApiKeyFromWire(r.key(), batch.client_platform()));
      const std::string value = EncodeRecordValue(r);
      for (const TimeNode& n : nodes) {
        s = wb.Merge(data_cf_, NodeKey(n, api), value);
        if (!s.ok()) break;
      }
    }
    if (!s.ok()) return FromRocks(s, "building write batch");
    rocksdb::WriteOptions wo;
    wo.sync = options_.sync;
    s = db_->Write(wo, &wb);
    if (!s.ok()) return FromRocks(s, "writing batch");
    return ApplyResult{.duplicate = false, .records = static_cast<size_t>(batch.records_size())};
  }

  StatusOr<std::vector<ApiAggregate>> ListApis(const ApiFilter& filter, size_t limit) override {
    std::shared_lock open_lock(close_mutex_);
    if (!db_) return Unavailable("store is closed");
    std::string prefix(1, static_cast<char>(TimeLevel::kAllTime));
    if (!filter.module.empty()) {
      prefix += filter.module;
      prefix += '\0';
      prefix += filter.symbol_prefix;
      if (filter.symbol_exact) prefix += '\0';
    }
    std::vector<ApiAggregate> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), data_cf_));
    for (it->Seek(prefix); it->Valid() && out.size() < limit; it->Next()) {
      rocksdb::Slice k = it->key();
      if (!k.starts_with(prefix)) break;
      StatusOr<ApiKey> key = DecodeApiKey(std::string_view(k.data() + 1, k.size() - 1));
      if (!key.ok()) return key.status();
      if (!filter.Matches(*key)) continue;
      AggregateAccumulator acc;
      if (!acc.Add(std::string_view(it->value().data(), it->value().size()))) {
        return DataLoss("corrupt stored value for " + key->module + " " + key->symbol);
      }
      out.push_back({std::move(*key), acc.histogram(), acc.runs(), acc.truncated()});
    }
    if (!it->status().ok()) return FromRocks(it->status(), "listing APIs");
    return out;
  }

  StatusOr<ApiAggregate> QueryRange(const ApiKey& key, int32_t first_day,
                                    int32_t last_day) override {
    std::shared_lock open_lock(close_mutex_);
    if (!db_) return Unavailable("store is closed");
    const std::string api = EncodeApiKey(key);
    const std::vector<TimeNode> nodes = CoverRange(first_day, last_day);
    std::vector<std::string> keys;
    keys.reserve(nodes.size());
    for (const TimeNode& n : nodes) keys.push_back(NodeKey(n, api));
    std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
    std::vector<rocksdb::ColumnFamilyHandle*> cfs(keys.size(), data_cf_);
    std::vector<std::string> values;
    // One consistent view for all nodes of the range.
    rocksdb::ReadOptions ro;
    const rocksdb::Snapshot* snap = db_->GetSnapshot();
    ro.snapshot = snap;
    std::vector<rocksdb::Status> st = db_->MultiGet(ro, cfs, slices, &values);
    db_->ReleaseSnapshot(snap);
    AggregateAccumulator acc;
    for (size_t i = 0; i < st.size(); ++i) {
      if (st[i].IsNotFound()) continue;
      if (!st[i].ok()) return FromRocks(st[i], "reading range");
      if (!acc.Add(values[i])) return DataLoss("corrupt stored value");
    }
    return ApiAggregate{key, acc.histogram(), acc.runs(), acc.truncated()};
  }

  void AppendMetrics(std::string* out) override {
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
    for (const auto& [cf, cf_name] : {std::pair{data_cf_, "data"}, std::pair{ids_cf_, "batch_ids"}}) {
      for (const auto& [prop, metric] : kProps) {
        uint64_t v = 0;
        if (db_->GetIntProperty(cf, prop, &v)) {
          *out += std::string(metric) + "{cf=\"" + cf_name + "\"} " + std::to_string(v) + "\n";
        }
      }
    }
  }

  Status Close() override {
    std::unique_lock lock(close_mutex_);
    if (!db_) return Status::Ok();
    rocksdb::Status s = db_->FlushWAL(/*sync=*/true);
    for (auto* h : {data_cf_, ids_cf_}) IgnoreError(FromRocks(db_->DestroyColumnFamilyHandle(h), ""));
    rocksdb::Status cs = db_->Close();
    db_.reset();
    if (!s.ok()) return FromRocks(s, "flushing WAL on close");
    return FromRocks(cs, "closing RocksDB");
  }

 private:
  const RocksDbStoreOptions options_;
  std::unique_ptr<BatchIdExpiry> expiry_;  // must outlive db_
  // Readers and writers hold it shared; Close() holds it exclusively.
  std::shared_mutex close_mutex_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* data_cf_ = nullptr;  // owned by db_
  rocksdb::ColumnFamilyHandle* ids_cf_ = nullptr;   // owned by db_
  std::array<std::mutex, 64> stripes_;  // serialize check+write per batch id
};

}  // namespace

bool ApiFilter::Matches(const ApiKey& k) const {
  if (!module.empty() && k.module != module) return false;
  if (!symbol_prefix.empty()) {
    if (symbol_exact ? k.symbol != symbol_prefix : !k.symbol.starts_with(symbol_prefix)) {
      return false;
    }
  }
  if (!module_version.empty() && k.module_version != module_version) return false;
  if (metric && k.metric != *metric) return false;
  if (os && k.platform.os != *os) return false;
  if (arch && k.platform.arch != *arch) return false;
  if (cpu_vendor && k.platform.cpu_vendor != *cpu_vendor) return false;
  return true;
}

StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(const RocksDbStoreOptions& options) {
  if (options.path.empty()) return InvalidArgument("store path is empty");
  auto store = std::make_unique<RocksDbStore>(options);
  FP_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace fieldprof::aggregator
