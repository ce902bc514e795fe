#include "common/wire/wire.h"

#include "common/wire/validate.h"

namespace fieldprof {

WireHistogramBuilder::WireHistogramBuilder(wire::Histogram* out, uint64_t zero_count)
    : out_(out), count_(zero_count) {
  out_->Clear();
  out_->set_zero_count(zero_count);
}

void WireHistogramBuilder::AddBucket(int index, uint64_t count, uint128 sum, uint128 sum_sq) {
  wire::Bucket* wb = out_->add_buckets();
  wb->set_index(static_cast<uint32_t>(index));
  wb->set_count(count);
  wb->set_sum_lo(Lo64(sum));
  wb->set_sum_hi(Hi64(sum));
  wb->set_sum_sq_lo(Lo64(sum_sq));
  wb->set_sum_sq_hi(Hi64(sum_sq));
  count_ += count;
  sum_ += sum;
  if (sum_sq == kUint128Max) saturated_ = true;
  sum_sq_ = SaturatingAdd(sum_sq_, sum_sq, &saturated_);
}

void WireHistogramBuilder::Finish(uint64_t min, uint64_t max, bool saturated) {
  out_->set_count(count_);
  out_->set_sum_lo(Lo64(sum_));
  out_->set_sum_hi(Hi64(sum_));
  out_->set_sum_sq_lo(Lo64(sum_sq_));
  out_->set_sum_sq_hi(Hi64(sum_sq_));
  out_->set_sum_sq_saturated(saturated || saturated_);
  if (count_ > 0) {
    out_->set_min(min);
    out_->set_max(max);
  }
}

void HistogramToWire(const Histogram& h, wire::Histogram* out) {
  WireHistogramBuilder w(out, h.zero_count());
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& b = h.bucket(i);
    if (b.count != 0) w.AddBucket(i, b.count, b.sum, b.sum_sq);
  }
  w.Finish(h.min(), h.max(), h.sum_sq_saturated());
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

namespace {

// Size limit, protobuf parse and ValidateBatch, shared by both DecodeBatch forms.
Status ParseAndValidate(std::string_view bytes, wire::Batch* batch) {
  if (bytes.size() > kMaxBatchBytes) {
    return TooLarge("batch_size: batch is " + std::to_string(bytes.size()) +
                    " bytes, the limit is " + std::to_string(kMaxBatchBytes));
  }
  if (bytes.empty()) return InvalidArgument("parse: empty body");
  if (!batch->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("parse: body is not a valid protobuf fieldprof.wire.Batch");
  }
  return ValidateBatch(*batch);
}

}  // namespace

StatusOr<wire::Batch> DecodeBatch(std::string_view bytes) {
  wire::Batch batch;
  FP_RETURN_IF_ERROR(ParseAndValidate(bytes, &batch));
  return batch;
}

StatusOr<wire::Batch*> DecodeBatch(std::string_view bytes, google::protobuf::Arena* arena) {
  auto* batch = google::protobuf::Arena::CreateMessage<wire::Batch>(arena);
  FP_RETURN_IF_ERROR(ParseAndValidate(bytes, batch));
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

bool HexDecode(std::string_view hex, std::string* out) {
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

}  // namespace fieldprof
