#include "aggregator/aggregate_value.h"

#include "common/wire.h"

namespace fieldprof::aggregator {

bool AggregateAccumulator::Add(std::string_view encoded) {
  wire::Record r;
  if (!r.ParseFromArray(encoded.data(), static_cast<int>(encoded.size()))) return false;
  AddRecord(r);
  return true;
}

void AggregateAccumulator::AddRecord(const wire::Record& r) {
  histogram_.Merge(HistogramFromWire(r.histogram()));
  runs_ += r.runs();
  truncated_ = truncated_ || r.truncated();
}

void AggregateAccumulator::Encode(std::string* out) const {
  wire::Record r;
  HistogramToWire(histogram_, r.mutable_histogram());
  r.set_runs(runs_);
  r.set_truncated(truncated_);
  out->clear();
  r.SerializeToString(out);
}

std::string EncodeRecordValue(const wire::Record& in) {
  wire::Record r;
  *r.mutable_histogram() = in.histogram();
  r.set_runs(in.runs());
  r.set_truncated(in.truncated());
  return r.SerializeAsString();
}

}  // namespace fieldprof::aggregator
