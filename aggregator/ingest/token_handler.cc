#include "aggregator/ingest/token_handler.h"

#include "aggregator/http/http_status.h"
#include "common/base/json_writer.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator {
namespace {

HttpResponse NoTokens() {
  return ErrorResponse(NotFound("this aggregator takes batches without tokens"));
}

}  // namespace

int64_t TokenHandler::NowSeconds() const {
  return std::chrono::duration_cast<std::chrono::seconds>(clock_().time_since_epoch()).count();
}

HttpResponse TokenHandler::Info() {
  if (issuer_ == nullptr) return NoTokens();
  const int64_t epoch = issuer_->EpochAt(NowSeconds());
  StatusOr<voprf::KeyPair> key = issuer_->KeyFor(epoch);
  if (!key.ok()) return ErrorResponse(Internal(key.status().message()));
  JsonWriter j;
  j.BeginObject();
  j.Key("epoch").Int(epoch);
  j.Key("epoch_seconds").Int(issuer_->options().epoch_s);
  j.Key("public_key").String(HexEncode(key->pub));
  j.Key("max_per_request").Int(issuer_->options().max_per_request);
  j.EndObject();
  return JsonResponse(j.Take());
}

HttpResponse TokenHandler::Issue(std::string_view content_type, std::string_view body) {
  if (issuer_ == nullptr) return NoTokens();
  if (Status s = CheckBatchContentType(content_type); !s.ok()) return ErrorResponse(s);
  wire::TokenRequest request;
  if (!request.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return ErrorResponse(InvalidArgument("the body is not a fieldprof.wire.TokenRequest"));
  }
  StatusOr<wire::TokenResponse> response = issuer_->Issue(request, NowSeconds());
  if (!response.ok()) return ErrorResponse(response.status());
  return HttpResponse{200, std::string(kProtobufContentType), response->SerializeAsString(), {}};
}

}  // namespace fieldprof::aggregator
