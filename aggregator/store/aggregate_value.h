// The stored value of one series at one time node, and how values add up.
//
// A value is a wire::Record without its key (histogram, runs, truncated,
// resolution_ns, and the sketch of distinct machines in `machines`),
// serialized with protobuf. SparseAggregate adds values exactly (the same
// rules as common/histogram.h) while holding only the non-empty buckets, so
// a fold over tens of thousands of series stays small in memory; the same
// inputs in any order give the same bytes. Kept free of RocksDB so it can be
// tested and benchmarked on its own; store_rocksdb.cc wraps it in a
// rocksdb::MergeOperator and uses it to pre-aggregate folds.
#ifndef FIELDPROF_AGGREGATOR_STORE_AGGREGATE_VALUE_H_
#define FIELDPROF_AGGREGATOR_STORE_AGGREGATE_VALUE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/machine_sketch.h"
#include "common/batch_view.h"
#include "common/histogram.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof::aggregator {

class SparseAggregate {
 public:
  // Adds a record (its key is ignored); it must have passed validation.
  void AddRecord(const wire::Record& r);
  void AddRecord(const RecordView& r);  // the same, from a view of the wire bytes
  // Counts a machine (MachineHash of a batch's machine key) as one that
  // added to this value; the same machine again changes nothing.
  void AddMachine(uint64_t machine_hash) { machines_.Add(machine_hash); }
  // Each machine of the batch `batch`'s records came from (none for a
  // batch without a machine key).
  void AddMachineOf(const BatchView& batch) {
    if (!batch.machine_key().empty()) AddMachine(MachineHash(batch.machine_key()));
  }
  void AddMachines(const MachineSketch& machines) { machines_.Merge(machines); }
  // Adds an encoded value. False (and nothing added) when it does not parse.
  [[nodiscard]] bool AddEncoded(std::string_view encoded);
  void Merge(const SparseAggregate& other);
  void Encode(std::string* out) const;

  // Empty again, keeping what it allocated for buckets (a walk sums one
  // series after another in one aggregate).
  void Clear();

  Histogram ToHistogram() const;
  uint64_t runs() const { return runs_; }
  bool truncated() const { return truncated_; }
  uint64_t resolution_ns() const { return resolution_ns_; }  // the largest added
  const MachineSketch& machines() const { return machines_; }
  MachineSketch TakeMachines() { return std::move(machines_); }
  bool empty() const { return buckets_.empty() && zero_count_ == 0; }

 private:
  struct Bucket {
    int index;
    uint64_t count;
    uint128 sum;
    uint128 sum_sq;  // saturating
  };
  template <typename H>
  void AddHistogram(const H& h);
  template <typename R>
  void AddRecordT(const R& r);

  std::vector<Bucket> buckets_;  // sorted by index, non-empty only
  uint64_t zero_count_ = 0;
  uint64_t min_ = std::numeric_limits<uint64_t>::max();
  uint64_t max_ = 0;
  uint64_t runs_ = 0;
  bool truncated_ = false;
  uint64_t resolution_ns_ = 0;
  MachineSketch machines_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_AGGREGATE_VALUE_H_
