#include "aggregator/dev/lab_handler.h"

#include "aggregator/http/http_status.h"
#include "common/base/json_writer.h"
#include "common/crypto/signing.h"
#include "common/model/lab_format.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator {
namespace {

bool LabIdOk(std::string_view id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

HttpResponse NoLabStorage() {
  return ErrorResponse(NotFound("this aggregator keeps no lab profiles"));
}

}  // namespace

HttpResponse LabHandler::Upload(std::string_view body) {
  if (lab_ == nullptr) return NoLabStorage();
  StatusOr<wire::LabProfile> p = ParseLabProfile(body, "the body");
  if (!p.ok()) return ErrorResponse(InvalidArgument(p.status().message()));
  if (Status v = ValidateLabProfile(*p); !v.ok()) return ErrorResponse(v);
  const std::string id = HexEncode(Sha256(body)).substr(0, 32);
  bool duplicate = false;
  if (Status w = lab_->Put(id, std::string(body), &duplicate); !w.ok()) {
    HttpResponse r = ErrorResponse(Unavailable("cannot keep the profile: " + w.message()));
    r.status = 503;
    r.headers.clear();
    r.headers.emplace_back("Retry-After", "10");
    return r;
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("id").String(id).Key("duplicate").Bool(duplicate);
  j.Key("records").Uint(static_cast<uint64_t>(p->records_size()));
  j.EndObject();
  return JsonResponse(j.Take());
}
HttpResponse LabHandler::List() {
  if (lab_ == nullptr) return NoLabStorage();
  StatusOr<std::vector<std::string>> ids = lab_->List();
  if (!ids.ok()) return ErrorResponse(ids.status());
  JsonWriter j;
  j.BeginObject();
  j.Key("profiles").BeginArray();
  for (const std::string& id : *ids) {
    if (!LabIdOk(id)) continue;
    StatusOr<std::string> bytes = lab_->Get(id);
    if (!bytes.ok()) continue;
    StatusOr<wire::LabProfile> p = ParseLabProfile(*bytes, id);
    if (!p.ok()) continue;
    j.BeginObject();
    j.Key("id").String(id).Key("bytes").Uint(bytes->size());
    j.Key("scenarios").BeginArray();
    for (const std::string& s : p->scenarios()) j.String(s);
    j.EndArray();
    j.Key("apis").Uint(static_cast<uint64_t>(p->apis_size()));
    j.Key("records").Uint(static_cast<uint64_t>(p->records_size()));
    j.Key("runs").Uint(static_cast<uint64_t>(p->passes_size()));
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return JsonResponse(j.Take());
}
HttpResponse LabHandler::Get(std::string_view id) {
  if (lab_ == nullptr) return NoLabStorage();
  if (!LabIdOk(id)) return ErrorResponse(InvalidArgument("a lab profile id is 32 hex digits"));
  StatusOr<std::string> bytes = lab_->Get(std::string(id));
  if (!bytes.ok()) {
    return ErrorResponse(bytes.status().code() == StatusCode::kNotFound
                             ? NotFound("no lab profile " + std::string(id))
                             : bytes.status());
  }
  return HttpResponse{200, "application/octet-stream", std::move(*bytes), {}};
}

}  // namespace fieldprof::aggregator
