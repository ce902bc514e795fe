// The RocksDB store (store_rocksdb_impl.h): the queries, each from one
// snapshot.
#include "aggregator/store/store_rocksdb_impl.h"

namespace fieldprof::aggregator {

StatusOr<bool> RocksDbStore::BatchAccepted(std::string_view batch_id) {
  std::shared_lock open_lock(close_mutex_);
  if (!db_) return Unavailable("store is closed");
  std::string seen;
  rocksdb::Status gs = db_->Get(rocksdb::ReadOptions(), ids_cf_,
                                rocksdb::Slice(batch_id.data(), batch_id.size()), &seen);
  if (gs.ok()) return true;
  if (gs.IsNotFound()) return false;
  return FromRocks(gs, "looking up batch id");
}

StatusOr<std::vector<ApiAggregate>> RocksDbStore::ListApis(const ApiFilter& filter, size_t limit) {
  std::vector<ApiAggregate> out;
  Status s = ForEachApi(filter, [&](ApiAggregate&& a) {
    out.push_back(std::move(a));
    return out.size() < limit;
  });
  if (!s.ok()) return s;
  return out;
}

Status RocksDbStore::ForEachApi(const ApiFilter& filter,
                                const std::function<bool(ApiAggregate&&)>& visit) {
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
  std::string api;
  SparseAggregate acc;  // one series after another
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
    api.assign(next);
    acc.Clear();
    for (Source& src : sources) {
      if (!src.Valid() || src.Api() != api) continue;
      if (!acc.AddEncoded(std::string_view(src.it->value().data(), src.it->value().size()))) {
        return DataLoss("corrupt stored value in listing");
      }
      src.it->Next();
    }
    FP_ASSIGN_OR_RETURN(ApiKey key, DecodeApiKey(api));
    if (!filter.Matches(key)) continue;
    if (!visit({std::move(key), acc.ToHistogram(), acc.runs(), acc.truncated(), acc.resolution_ns(),
                acc.TakeMachines(), acc.TakeDayMachines()}))
      break;
  }
  for (Source& src : sources) {
    if (!src.it->status().ok()) return FromRocks(src.it->status(), "listing APIs");
  }
  return Status::Ok();
}

StatusOr<ApiAggregate> RocksDbStore::QueryRange(const ApiKey& key, int32_t first_day,
                                                int32_t last_day) {
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
  return ApiAggregate{key,
                      acc.ToHistogram(),
                      acc.runs(),
                      acc.truncated(),
                      acc.resolution_ns(),
                      acc.machines(),
                      acc.day_machines()};
}

}  // namespace fieldprof::aggregator
