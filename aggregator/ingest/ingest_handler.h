// POST /v1/batches: a batch from an agent, applied to the store exactly
// once. 200 {"batch_id","duplicate","records","day"} only after the batch
// is durable; a batch id seen before answers 200 with duplicate true and
// changes nothing; a malformed batch 400 with the rule it broke and
// nothing applied; 415 for another content type; 503/507 with Retry-After
// when the store cannot take it now (common/wire/validate.h has the rules).
#ifndef FIELDPROF_AGGREGATOR_INGEST_INGEST_HANDLER_H_
#define FIELDPROF_AGGREGATOR_INGEST_INGEST_HANDLER_H_

#include <chrono>
#include <functional>
#include <string_view>

#include "aggregator/http/http_types.h"
#include "aggregator/metrics.h"
#include "aggregator/reads/recent_apis.h"
#include "aggregator/store/store.h"
#include "common/base/status.h"
#include "common/crypto/upload_tokens.h"
#include "common/wire/plausible.h"

namespace fieldprof::aggregator {

// OK when `content_type` is application/x-protobuf (parameters such as
// "; proto=..." allowed); otherwise the Unsupported (415) error to answer.
// The server asks it before it reads a body.
[[nodiscard]] Status CheckBatchContentType(std::string_view content_type);

using WallClock = std::function<std::chrono::system_clock::time_point()>;

class IngestHandler {
 public:
  // The pointers must outlive the handler. `clock` picks the day records
  // are added to (tests inject one).
  // With `tokens`, a batch must carry a valid token (common/crypto/upload_tokens.h),
  // or be one the store already counted (answered as a duplicate, so that
  // an agent never sends a counted batch again under a fresh token).
  // Every batch must be plausible for one machine (common/wire/plausible.h).
  IngestHandler(Store* store, Metrics* metrics, RecentApis* recent, WallClock clock,
                const TokenIssuer* tokens = nullptr, PlausibleLimits plausible = {})
      : store_(store),
        metrics_(metrics),
        recent_(recent),
        clock_(std::move(clock)),
        tokens_(tokens),
        plausible_(plausible) {}

  // With `body_storage` (the string `body` views, which the handler then
  // takes), the batch's fold into the sums is left in the response's
  // `after` (store.h, ApplyBatchFoldLater); without, it is done here.
  HttpResponse Ingest(std::string_view content_type, std::string_view body,
                      std::string* body_storage = nullptr);

 private:
  Store* const store_;
  Metrics* const metrics_;
  RecentApis* const recent_;
  const WallClock clock_;
  const TokenIssuer* const tokens_;
  const PlausibleLimits plausible_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_INGEST_INGEST_HANDLER_H_
