#include "aggregator/ingest/ingest_handler.h"

#include "aggregator/http/http_status.h"
#include "aggregator/store/calendar_tree.h"
#include "common/base/json_writer.h"
#include "common/wire/batch_view.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator {

Status CheckBatchContentType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  if (media == kProtobufContentType) return Status::Ok();
  return Unsupported("content type must be " + std::string(kProtobufContentType) + ", got '" +
                     std::string(content_type) + "'");
}

namespace {

HttpResponse AcceptedResponse(std::string_view batch_id, bool duplicate, size_t records,
                              int32_t day) {
  JsonWriter j;
  j.BeginObject();
  j.Key("batch_id").String(HexEncode(std::string(batch_id)));
  j.Key("duplicate").Bool(duplicate);
  j.Key("records").Uint(records);
  j.Key("day").String(FormatDay(day));
  j.EndObject();
  return JsonResponse(j.Take());
}

}  // namespace

HttpResponse IngestHandler::Ingest(std::string_view content_type, std::string_view body_view,
                                   std::string* body_storage) {
  if (Status s = CheckBatchContentType(content_type); !s.ok()) {
    metrics_->BatchRejected("content_type");
    return ErrorResponse(s);
  }
  // The body and its view, kept together for the fold after the answer
  // where the caller takes that (else the body is only viewed).
  struct Held {
    std::string body;
    BatchView batch;
  };
  auto held = std::make_shared<Held>();
  if (body_storage != nullptr) held->body = std::move(*body_storage);
  const std::string_view body = body_storage != nullptr ? held->body : body_view;
  BatchView& batch = held->batch;
  using Stage = Metrics::IngestStage;
  using std::chrono::steady_clock;
  const steady_clock::time_point decode_start = steady_clock::now();
  // Decoded straight from the body (one pass, no protobuf messages) unless
  // the body is unusual; see common/wire/batch_view.h.
  if (Status s = DecodeBatchView(body, &batch); !s.ok()) {
    const std::string_view rule = ValidationRule(s);
    metrics_->BatchRejected(rule.empty() ? "invalid" : std::string(rule));
    return ErrorResponse(s);
  }
  if (Status s = CheckPlausible(batch, plausible_); !s.ok()) {
    metrics_->BatchRejected(std::string(ValidationRule(s)));
    return ErrorResponse(s);
  }
  const auto now = clock_().time_since_epoch();
  if (tokens_ != nullptr) {
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(now).count();
    if (Status s = tokens_->Check(batch.batch_id(), batch.token(), batch.token_epoch(), now_s);
        !s.ok()) {
      // A batch already counted is answered as the duplicate it is,
      // whatever its token says now (sent before tokens were asked for, or
      // before its token's epoch ended): its agent then deletes it instead
      // of sending it again under a fresh token and a new id. Asked only
      // here, so a batch with a good token costs no extra lookup.
      StatusOr<bool> accepted = store_->BatchAccepted(batch.batch_id());
      if (!accepted.ok()) {
        metrics_->StoreError();
        return ErrorResponse(accepted.status());
      }
      if (*accepted) {
        metrics_->BatchDuplicate();
        return AcceptedResponse(batch.batch_id(), /*duplicate=*/true, 0, DayFromUnixSeconds(now_s));
      }
      metrics_->BatchRejected(std::string(ValidationRule(s)));
      return ErrorResponse(s);
    }
  }
  const int32_t day =
      DayFromUnixSeconds(std::chrono::duration_cast<std::chrono::seconds>(now).count());
  const steady_clock::time_point write_start = steady_clock::now();
  metrics_->IngestStageTime(Stage::kDecode, write_start - decode_start);
  std::function<void()> fold;
  StatusOr<ApplyResult> applied = body_storage != nullptr
                                      ? store_->ApplyBatchFoldLater(batch, body, day, &fold)
                                      : store_->ApplyBatch(batch, body, day);  // folds too
  // A write's time: a duplicate's lookup or a refusal would pull it down.
  if (applied.ok() && !applied->duplicate) {
    metrics_->IngestStageTime(Stage::kWrite, steady_clock::now() - write_start);
  }
  // What the store left (the batch is durable and counted) runs once,
  // whatever happens below: after the answer, or when `after` goes.
  std::shared_ptr<AfterAnswer> after;
  if (fold) {
    after =
        std::make_shared<AfterAnswer>([held, fold = std::move(fold), metrics = metrics_]() mutable {
          const steady_clock::time_point fold_start = steady_clock::now();
          std::exchange(fold, nullptr)();  // and the store's lock with it
          metrics->IngestStageTime(Stage::kFold, steady_clock::now() - fold_start);
        });
  }
  if (!applied.ok()) {
    metrics_->StoreError();
    return ErrorResponse(applied.status());
  }
  HttpResponse r = AcceptedResponse(batch.batch_id(), applied->duplicate, applied->records, day);
  if (applied->duplicate) {
    metrics_->BatchDuplicate();
    return r;
  }
  metrics_->BatchAccepted(applied->records, body.size());
  recent_->Add(batch, std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
  r.after = std::move(after);
  return r;
}

}  // namespace fieldprof::aggregator
