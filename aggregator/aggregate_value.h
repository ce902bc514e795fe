// The stored value of one series at one time node, and how values merge.
//
// A value is a wire::Record without its key (histogram, runs, truncated),
// serialized with protobuf. Merging decodes every operand, adds them exactly
// (common/histogram.h) and encodes the sum; the same inputs in any order give
// the same bytes. Kept free of RocksDB so it can be tested and benchmarked
// on its own; store_rocksdb.cc wraps it in a rocksdb::MergeOperator.
#ifndef FIELDPROF_AGGREGATOR_AGGREGATE_VALUE_H_
#define FIELDPROF_AGGREGATOR_AGGREGATE_VALUE_H_

#include <string>
#include <string_view>

#include "common/histogram.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof::aggregator {

// Sum of values being merged; Add() each operand, then Encode().
class AggregateAccumulator {
 public:
  // False when `encoded` is not a valid stored value (it is then not added).
  [[nodiscard]] bool Add(std::string_view encoded);
  // Adds a record (key ignored) straight from an uploaded batch.
  void AddRecord(const wire::Record& r);
  void Encode(std::string* out) const;

  const Histogram& histogram() const { return histogram_; }
  uint64_t runs() const { return runs_; }
  bool truncated() const { return truncated_; }

 private:
  Histogram histogram_;
  uint64_t runs_ = 0;
  bool truncated_ = false;
};

// Encodes one uploaded record as a merge operand.
std::string EncodeRecordValue(const wire::Record& r);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_AGGREGATE_VALUE_H_
