// The stored value of one series at one time node, and how values add up.
//
// A value is a wire::Record without its key (histogram, runs, truncated,
// resolution_ns, and the sketches of distinct machines in `machines` and
// `day_machines`: machine_sketch.h),
// serialized with protobuf. SparseAggregate adds values exactly (the same
// rules as common/statistics/histogram.h) while holding only the non-empty buckets, so
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
#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"
#include "common/wire/batch_view.h"

namespace fieldprof::aggregator {

class SparseAggregate {
 public:
  // Adds a record (its key is ignored); it must have passed validation.
  void AddRecord(const wire::Record& r);
  void AddRecord(const RecordView& r);  // the same, from a view of the wire bytes
  // Counts a machine (its SeriesEntry of kind kFirst) as one that sent the
  // series; the same entry again changes nothing.
  void AddMachine(uint64_t entry) { machines_.Add(entry); }
  // Counts a machine on a day (its SeriesEntry of kind kDay).
  void AddDayMachine(uint64_t entry) { day_machines_.Add(entry); }
  // The entries of `r`'s machine (`secret`, nullptr for a batch without a
  // machine key) in the series `series_key`: its day's, and, where the
  // agent marked the record its first of the series, its own.
  void AddMachineOf(const MachineSecret* secret, const RecordView& r, std::string_view series_key) {
    if (secret == nullptr) return;
    AddDayMachine(SeriesEntry(*secret, EntryKind::kDay, series_key));
    if (r.first_from_machine()) AddMachine(SeriesEntry(*secret, EntryKind::kFirst, series_key));
  }
  void AddMachines(const MachineSketch& machines) { machines_.Merge(machines); }
  void AddDayMachines(const MachineSketch& machines) { day_machines_.Merge(machines); }
  // A record of `day` was added: the first day is the earliest.
  void NoteDay(int32_t day) {
    if (day > 0 && (first_day_ == 0 || day < first_day_)) first_day_ = day;
  }
  // Adds an encoded value. False (and nothing added) when it does not parse.
  [[nodiscard]] bool AddEncoded(std::string_view encoded);
  void Merge(const SparseAggregate& other);
  void Encode(std::string* out) const;
  // The same bytes appended to `*out` (a fold's values go into one buffer).
  void AppendEncoded(std::string* out) const;

  // Empty again, keeping what it allocated for buckets (a walk sums one
  // series after another in one aggregate).
  void Clear();

  Histogram ToHistogram() const;
  uint64_t runs() const { return runs_; }
  bool truncated() const { return truncated_; }
  uint64_t resolution_ns() const { return resolution_ns_; }  // the largest added
  const MachineSketch& machines() const { return machines_; }
  MachineSketch TakeMachines() { return std::move(machines_); }
  const MachineSketch& day_machines() const { return day_machines_; }
  int32_t first_day() const { return first_day_; }  // 0: unknown
  MachineSketch TakeDayMachines() { return std::move(day_machines_); }
  bool empty() const { return buckets_.empty() && zero_count_ == 0; }

  // Where the buckets are (nullptr while none): FoldTable asks the cache
  // for them a few records before adding to this sum.
  const void* buckets_data() const { return buckets_.data(); }

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
  MachineSketch day_machines_;
  int32_t first_day_ = 0;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_AGGREGATE_VALUE_H_
