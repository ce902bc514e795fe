#include "common/wire.h"

#include "common/validate.h"

namespace fieldprof {

void HistogramToWire(const Histogram& h, wire::Histogram* out) {
  out->Clear();
  out->set_zero_count(h.zero_count());
  uint64_t count = h.zero_count();
  uint128 sum = 0;
  uint128 sum_sq = 0;
  bool saturated = h.sum_sq_saturated();
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& b = h.bucket(i);
    if (b.count == 0) continue;
    wire::Bucket* wb = out->add_buckets();
    wb->set_index(static_cast<uint32_t>(i));
    wb->set_count(b.count);
    wb->set_sum_lo(Lo64(b.sum));
    wb->set_sum_hi(Hi64(b.sum));
    wb->set_sum_sq_lo(Lo64(b.sum_sq));
    wb->set_sum_sq_hi(Hi64(b.sum_sq));
    count += b.count;
    sum += b.sum;
    sum_sq = SaturatingAdd(sum_sq, b.sum_sq, &saturated);
  }
  out->set_count(count);
  out->set_sum_lo(Lo64(sum));
  out->set_sum_hi(Hi64(sum));
  out->set_sum_sq_lo(Lo64(sum_sq));
  out->set_sum_sq_hi(Hi64(sum_sq));
  out->set_sum_sq_saturated(saturated);
  if (count > 0) {
    out->set_min(h.min());
    out->set_max(h.max());
  }
}

Histogram HistogramFromWire(const wire::Histogram& w) {
  Histogram h;
  h.SetZeroCount(w.zero_count());
  for (const wire::Bucket& wb : w.buckets()) {
    if (wb.index() >= static_cast<uint32_t>(kNumBuckets)) continue;
    HistogramBucket b;
    b.count = wb.count();
    b.sum = MakeUint128(wb.sum_lo(), wb.sum_hi());
    b.sum_sq = MakeUint128(wb.sum_sq_lo(), wb.sum_sq_hi());
    // A bucket at the maximum is a saturated one (validation enforces the
    // flag then); a saturated total alone is derived again from the buckets.
    if (b.sum_sq == kUint128Max) h.MarkSumSqSaturated();
    h.SetBucket(static_cast<int>(wb.index()), b);
  }
  if (w.count() > 0) h.SetMinMax(w.min(), w.max());
  return h;
}

StatusOr<wire::Batch> DecodeBatch(std::string_view bytes) {
  if (bytes.size() > kMaxBatchBytes) {
    return TooLarge("batch_size: batch is " + std::to_string(bytes.size()) +
                    " bytes, the limit is " + std::to_string(kMaxBatchBytes));
  }
  if (bytes.empty()) return InvalidArgument("parse: empty body");
  wire::Batch batch;
  if (!batch.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("parse: body is not a valid protobuf fieldprof.wire.Batch");
  }
  FP_RETURN_IF_ERROR(ValidateBatch(batch));
  return batch;
}

StatusOr<wire::Batch*> DecodeBatch(std::string_view bytes, google::protobuf::Arena* arena) {
  if (bytes.size() > kMaxBatchBytes) {
    return TooLarge("batch_size: batch is " + std::to_string(bytes.size()) +
                    " bytes, the limit is " + std::to_string(kMaxBatchBytes));
  }
  if (bytes.empty()) return InvalidArgument("parse: empty body");
  auto* batch = google::protobuf::Arena::CreateMessage<wire::Batch>(arena);
  if (!batch->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("parse: body is not a valid protobuf fieldprof.wire.Batch");
  }
  FP_RETURN_IF_ERROR(ValidateBatch(*batch));
  return batch;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    s += kHex[c >> 4];
    s += kHex[c & 15];
  }
  return s;
}

}  // namespace fieldprof
