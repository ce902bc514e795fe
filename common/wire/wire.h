// Conversions between in-memory types and the wire schema
// (common/proto/fieldprof.proto), and decoding of untrusted batches.
//
//   StatusOr<wire::Batch> batch = DecodeBatch(body);  // parse + ValidateBatch
//   if (!batch.ok()) return Reject(batch.status());
//   for (const wire::Record& r : batch->records()) Sum(HistogramFromWire(r.histogram()));
#ifndef FIELDPROF_COMMON_WIRE_WIRE_H_
#define FIELDPROF_COMMON_WIRE_WIRE_H_

#include <google/protobuf/arena.h>

#include <string>
#include <string_view>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"

namespace fieldprof {

inline constexpr uint32_t kSchemaVersion = 1;
inline constexpr size_t kBatchIdBytes = 16;
// A batch's machine key (wire::Batch.machine_key): empty or this long.
inline constexpr size_t kMachineKeyBytes = 16;
// The media type of an encoded Batch in POST /v1/batches.
inline constexpr std::string_view kBatchContentType = "application/x-protobuf";

inline uint128 MakeUint128(uint64_t lo, uint64_t hi) {
  return (static_cast<uint128>(hi) << 64) | lo;
}
inline uint64_t Lo64(uint128 v) { return static_cast<uint64_t>(v); }
inline uint64_t Hi64(uint128 v) { return static_cast<uint64_t>(v >> 64); }

// Fills a sparse wire histogram bucket by bucket (increasing index) and
// keeps the totals, so every encoder writes the same, valid shape.
class WireHistogramBuilder {
 public:
  WireHistogramBuilder(wire::Histogram* out, uint64_t zero_count);
  void AddBucket(int index, uint64_t count, uint128 sum, uint128 sum_sq);
  // `saturated`: some sum of squares saturated before (it is also set when a
  // bucket or the total is at 2^128-1).
  void Finish(uint64_t min, uint64_t max, bool saturated);

 private:
  wire::Histogram* out_;
  uint64_t count_;
  uint128 sum_ = 0;
  uint128 sum_sq_ = 0;
  bool saturated_ = false;
};

// Sparse encoding: only non-empty buckets, totals filled in.
void HistogramToWire(const Histogram& h, wire::Histogram* out);
// Trusts its input: call ValidateHistogram first on anything from outside.
// Out-of-range bucket indexes are skipped.
Histogram HistogramFromWire(const wire::Histogram& w);

// Parses and validates an uploaded batch. Errors: InvalidArgument (the
// message starts with the rule that failed, e.g. "bucket_sum_range: ..."),
// TooLarge, Unsupported (schema version).
[[nodiscard]] StatusOr<wire::Batch> DecodeBatch(std::string_view bytes);

// The same, parsing into `arena` (much cheaper: one allocation per arena
// block instead of one per message). The batch is owned by the arena and
// lives as long as it.
[[nodiscard]] StatusOr<wire::Batch*> DecodeBatch(std::string_view bytes,
                                                 google::protobuf::Arena* arena);

// Lower-case hex of a batch id (or any bytes).
std::string HexEncode(std::string_view bytes);
// Its inverse (either case); false for an odd length or a non-hex digit.
bool HexDecode(std::string_view hex, std::string* out);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_WIRE_WIRE_H_
