// Fuzz target: batch decoding + validation, the aggregator's first contact
// with untrusted bytes. Anything that passes must also convert and re-encode
// consistently, and the fast decoder the aggregator uses (batch_view.h) must
// give exactly protobuf's answer: acceptance, error message and content.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"
#include "common/wire/batch_view.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fieldprof;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  StatusOr<wire::Batch> b = DecodeBatch(bytes);
  BatchView view;
  Status vs = DecodeBatchView(bytes, &view);
  if (vs.ok() != b.ok()) __builtin_trap();
  if (!vs.ok() && vs.ToString() != b.status().ToString()) __builtin_trap();
  if (vs.ok()) {
    if (view.records_size() != b->records_size() || view.batch_id() != b->batch_id()) {
      __builtin_trap();
    }
    for (int i = 0; i < view.records_size(); ++i) {
      const RecordView& v = view.records(i);
      const wire::Record& r = b->records(i);
      std::string kv, kr;
      AppendWireApiKey(v.key(), view.client_platform(), &kv);
      AppendWireApiKey(r.key(), b->client_platform(), &kr);
      const HistogramView& vh = v.histogram();
      const wire::Histogram& rh = r.histogram();
      if (kv != kr || v.runs() != r.runs() || v.truncated() != r.truncated() ||
          v.resolution_ns() != r.resolution_ns() || vh.count() != rh.count() ||
          vh.sum_lo() != rh.sum_lo() || vh.sum_hi() != rh.sum_hi() ||
          vh.sum_sq_lo() != rh.sum_sq_lo() || vh.sum_sq_hi() != rh.sum_sq_hi() ||
          vh.min() != rh.min() || vh.max() != rh.max() || vh.zero_count() != rh.zero_count() ||
          vh.buckets_size() != rh.buckets_size()) {
        __builtin_trap();
      }
      for (int k = 0; k < vh.buckets_size(); ++k) {
        const BucketView& x = vh.buckets(k);
        const wire::Bucket& y = rh.buckets(k);
        if (x.index() != y.index() || x.count() != y.count() || x.sum_lo() != y.sum_lo() ||
            x.sum_hi() != y.sum_hi() || x.sum_sq_lo() != y.sum_sq_lo() ||
            x.sum_sq_hi() != y.sum_sq_hi()) {
          __builtin_trap();
        }
      }
    }
  }
  if (!b.ok()) {
    if (ValidationRule(b.status()).empty() && b.status().code() == StatusCode::kInvalidArgument) {
      __builtin_trap();  // every rejection names its rule
    }
    return 0;
  }
  for (const wire::Record& r : b->records()) {
    Histogram h = HistogramFromWire(r.histogram());
    wire::Histogram again;
    HistogramToWire(h, &again);
    // A valid histogram survives the round trip exactly.
    if (HistogramFromWire(again) != h || !ValidateHistogram(again).ok()) __builtin_trap();
    if (h.count() != r.histogram().count()) __builtin_trap();
    (void)h.Stats();
  }
  return 0;
}
