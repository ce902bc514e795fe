// The RocksDB store's keys (docs/aggregator.md): a calendar node's key,
// the roll-up point, and reads from one snapshot.
#ifndef FIELDPROF_AGGREGATOR_STORE_ROCKS_KEYS_H_
#define FIELDPROF_AGGREGATOR_STORE_ROCKS_KEYS_H_

#include <rocksdb/db.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/calendar_tree.h"
#include "aggregator/store/rocks_status.h"
#include "common/base/encoding.h"
#include "common/base/status.h"

namespace fieldprof::aggregator {

// Appends the key of `node`'s sum of the series `api_key` to `*k`.
inline void AppendNodeKey(const TimeNode& node, std::string_view api_key, std::string* k) {
  k->push_back(static_cast<char>(node.level));
  if (node.level != TimeLevel::kAllTime) PutOrdered32(k, node.period);
  k->append(api_key);
}

inline std::string NodeKey(const TimeNode& node, std::string_view api_key) {
  std::string k;
  k.reserve(api_key.size() + 5);
  AppendNodeKey(node, api_key, &k);
  return k;
}

// The roll-up point: days before `next_day` are in their month and
// all-time nodes; of `next_day` itself, the series up to `cursor` (an
// EncodeApiKey; empty = none yet).
inline constexpr std::string_view kRollupKey = "\x01rollup";

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

inline std::string DayPrefix(int32_t day) {
  std::string k(1, static_cast<char>(TimeLevel::kDay));
  PutOrdered32(&k, day);
  return k;
}

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

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_ROCKS_KEYS_H_
