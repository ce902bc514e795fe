// What RocksDB runs for the store inside its own compactions and reads:
// the merge operator that adds encoded aggregates (one Merge per series
// and fold, summed when read or compacted), and the compaction filter
// that drops batch ids past their retention.
#ifndef FIELDPROF_AGGREGATOR_STORE_ROCKS_MERGE_H_
#define FIELDPROF_AGGREGATOR_STORE_ROCKS_MERGE_H_

#include <rocksdb/compaction_filter.h>
#include <rocksdb/merge_operator.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>

#include "aggregator/store/aggregate_value.h"

namespace fieldprof::aggregator {

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

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_ROCKS_MERGE_H_
