#include "aggregator/store/aggregate_value.h"

#include <algorithm>
#include <optional>

#include "common/wire/wire.h"

namespace fieldprof::aggregator {

template <typename H>
void SparseAggregate::AddHistogram(const H& h) {
  if (h.count() == 0) return;
  zero_count_ += h.zero_count();
  min_ = std::min(min_, h.min());
  max_ = std::max(max_, h.max());
  // In-place merge of sorted bucket lists (validated input is sorted): walk
  // both in order, add to existing buckets, insert the new ones. No
  // allocation once the vector has grown to the histogram's width.
  if (buckets_.capacity() < 12) buckets_.reserve(12);
  size_t i = 0;
  bool ignored = false;
  for (const auto& wb : h.buckets()) {
    const int index = static_cast<int>(wb.index());
    while (i < buckets_.size() && buckets_[i].index < index) ++i;
    const uint128 sum = MakeUint128(wb.sum_lo(), wb.sum_hi());
    const uint128 sum_sq = MakeUint128(wb.sum_sq_lo(), wb.sum_sq_hi());
    if (i < buckets_.size() && buckets_[i].index == index) {
      Bucket& b = buckets_[i];
      b.count += wb.count();
      b.sum += sum;
      b.sum_sq = SaturatingAdd(b.sum_sq, sum_sq, &ignored);
    } else {
      buckets_.insert(buckets_.begin() + static_cast<ptrdiff_t>(i),
                      Bucket{index, wb.count(), sum, sum_sq});
    }
    ++i;
  }
}

template <typename R>
void SparseAggregate::AddRecordT(const R& r) {
  AddHistogram(r.histogram());
  runs_ += r.runs();
  truncated_ = truncated_ || r.truncated();
  resolution_ns_ = std::max(resolution_ns_, r.resolution_ns());
}

void SparseAggregate::AddRecord(const wire::Record& r) { AddRecordT(r); }
void SparseAggregate::AddRecord(const RecordView& r) { AddRecordT(r); }

bool SparseAggregate::AddEncoded(std::string_view encoded) {
  // Read in place (every stored value a walk or a merge reads passes
  // here): no message, no allocation once this thread's bucket scratch has
  // grown. Bytes that reader does not take go to protobuf, which decides.
  thread_local std::vector<BucketView> buckets;
  RecordView view;
  std::optional<wire::Record> message;
  std::string_view machines, day_machines;
  int32_t first_day = 0;
  if (ParseRecordViewFast(encoded, &view, &buckets)) {
    machines = view.machines();
    day_machines = view.day_machines();
    first_day = view.first_day();
  } else {
    message.emplace();
    if (!message->ParseFromArray(encoded.data(), static_cast<int>(encoded.size()))) return false;
    machines = message->machines();
    day_machines = message->day_machines();
    first_day = message->first_day();
  }
  // The first value's sketches decoded in place, later ones merged.
  for (auto [sketch, bytes] : {std::pair{&machines_, machines}, {&day_machines_, day_machines}}) {
    if (sketch->empty()) {
      if (!sketch->Decode(bytes)) return false;
    } else {
      MachineSketch more;
      if (!more.Decode(bytes)) return false;
      sketch->Merge(more);
    }
  }
  if (message) {
    AddRecord(*message);
  } else {
    AddRecord(view);
  }
  NoteDay(first_day);
  return true;
}

void SparseAggregate::Clear() {
  buckets_.clear();
  zero_count_ = 0;
  min_ = std::numeric_limits<uint64_t>::max();
  max_ = 0;
  runs_ = 0;
  truncated_ = false;
  resolution_ns_ = 0;
  machines_ = MachineSketch();
  day_machines_ = MachineSketch();
  first_day_ = 0;
}

void SparseAggregate::Merge(const SparseAggregate& other) {
  if (other.empty()) return;
  std::vector<Bucket> merged;
  merged.reserve(buckets_.size() + other.buckets_.size());
  size_t i = 0, j = 0;
  bool ignored = false;
  while (i < buckets_.size() || j < other.buckets_.size()) {
    if (j == other.buckets_.size() ||
        (i < buckets_.size() && buckets_[i].index < other.buckets_[j].index)) {
      merged.push_back(buckets_[i++]);
    } else if (i == buckets_.size() || other.buckets_[j].index < buckets_[i].index) {
      merged.push_back(other.buckets_[j++]);
    } else {
      Bucket b = buckets_[i++];
      const Bucket& o = other.buckets_[j++];
      b.count += o.count;
      b.sum += o.sum;
      b.sum_sq = SaturatingAdd(b.sum_sq, o.sum_sq, &ignored);
      merged.push_back(b);
    }
  }
  buckets_.swap(merged);
  zero_count_ += other.zero_count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  runs_ += other.runs_;
  truncated_ = truncated_ || other.truncated_;
  resolution_ns_ = std::max(resolution_ns_, other.resolution_ns_);
  machines_.Merge(other.machines_);
  day_machines_.Merge(other.day_machines_);
  NoteDay(other.first_day_);
}

Histogram SparseAggregate::ToHistogram() const {
  Histogram h;
  h.SetZeroCount(zero_count_);
  for (const Bucket& b : buckets_) {
    h.SetBucket(b.index, HistogramBucket{b.count, b.sum, b.sum_sq});
    if (b.sum_sq == kUint128Max) h.MarkSumSqSaturated();
  }
  if (!empty()) h.SetMinMax(min_, max_);
  return h;
}

void SparseAggregate::Encode(std::string* out) const {
  out->clear();
  AppendEncoded(out);
}

void SparseAggregate::AppendEncoded(std::string* out) const {
  // One message a thread for every value, its histogram kept through the
  // Clear (which would delete it): the histogram's own Clear keeps its
  // buckets for the next value instead of allocating them again (the
  // applier encodes every series of a fold, RocksDB's merges every value
  // they write).
  thread_local wire::Record r;
  wire::Histogram* histogram = r.release_histogram();
  r.Clear();
  r.set_allocated_histogram(histogram != nullptr ? histogram : new wire::Histogram);
  WireHistogramBuilder w(r.mutable_histogram(), zero_count_);
  for (const Bucket& b : buckets_) w.AddBucket(b.index, b.count, b.sum, b.sum_sq);
  w.Finish(min_, max_, /*saturated=*/false);
  r.set_runs(runs_);
  r.set_truncated(truncated_);
  if (resolution_ns_ != 0) r.set_resolution_ns(resolution_ns_);
  machines_.Encode(r.mutable_machines());
  day_machines_.Encode(r.mutable_day_machines());
  if (first_day_ != 0) r.set_first_day(first_day_);
  r.AppendToString(out);
}

}  // namespace fieldprof::aggregator
