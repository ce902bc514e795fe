// Fuzz target: batch decoding + validation, the aggregator's first contact
// with untrusted bytes. Anything that passes must also convert and re-encode
// consistently.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/histogram.h"
#include "common/validate.h"
#include "common/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fieldprof;
  StatusOr<wire::Batch> b =
      DecodeBatch(std::string_view(reinterpret_cast<const char*>(data), size));
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
