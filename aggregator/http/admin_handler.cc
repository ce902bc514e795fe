#include "aggregator/http/admin_handler.h"

#include <cstdio>

#include "aggregator/http/http_status.h"
#include "aggregator/http/query_params.h"
#include "common/base/json_writer.h"

namespace fieldprof::aggregator {
namespace {

// Compared in constant time: the token is a secret.
bool TokenMatches(std::string_view authorization, const std::string& token) {
  const std::string expected = "Bearer " + token;
  if (authorization.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(authorization[i] ^ expected[i]);
  }
  return diff == 0;
}

// ?all=0|1
StatusOr<bool> PublishAll(std::string_view query) {
  FP_ASSIGN_OR_RETURN(QueryParams params, ParseQuery(query));
  bool all = false;
  for (const auto& [k, v] : params) {
    if (k != "all" || (v != "0" && v != "1")) {
      return InvalidArgument("the only parameter is all=0|1");
    }
    all = v == "1";
  }
  return all;
}

}  // namespace

HttpResponse AdminHandler::Health() {
  const Status h = store_->Health();
  if (h.ok()) return HttpResponse{200, "text/plain", "ok\n", {}};
  return HttpResponse{
      503, "text/plain", "unhealthy: " + h.ToString() + "\n", {{"Retry-After", "10"}}};
}

HttpResponse AdminHandler::MetricsText() {
  HttpResponse r{200, "text/plain; version=0.0.4", "", {}};
  metrics_->AppendPrometheus(&r.body);
  store_->AppendMetrics(&r.body);
  AppendSourceLimitMetrics(source_limits_, &r.body);
  if (lease_ != nullptr) {
    r.body +=
        "# HELP fieldprof_lease_held 1 while this aggregator publishes and rolls up\n"
        "# TYPE fieldprof_lease_held gauge\nfieldprof_lease_held " +
        std::string(lease_->Held() ? "1" : "0") + "\n";
  }
  return r;
}

HttpResponse AdminHandler::Publish(std::string_view authorization, std::string_view query) {
  if (publish_ == nullptr) {
    return ErrorResponse(
        NotFound("this aggregator does not publish snapshots (start it with --signing_key)"));
  }
  if (admin_token_.empty()) {
    HttpResponse r = ErrorResponse(
        InvalidArgument("admin calls are off (start the aggregator with --admin_token_file)"));
    r.status = 403;
    return r;
  }
  if (!TokenMatches(authorization, admin_token_)) {
    return BearerRequired("missing or wrong admin token");
  }
  StatusOr<bool> all = PublishAll(query);
  if (!all.ok()) return ErrorResponse(all.status());
  StatusOr<CycleResult> c = publish_->RunNow(*all);
  if (!c.ok()) {
    // The whole reason (file names included) goes to the operator's log;
    // the client is told what kind of failure, never a server path. The
    // published snapshot stays as it was.
    std::fprintf(stderr, "fieldprof-aggregator: publish cycle failed: %s\n",
                 c.status().ToString().c_str());
    return ErrorResponse(
        Status(c.status().code(), "the publish cycle failed (" +
                                      std::string(StatusCodeName(c.status().code())) +
                                      "); the published snapshot is unchanged and the reason is in "
                                      "the aggregator's log"));
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("snapshot_version").Uint(c->snapshot_version);
  j.Key("rebuilt").Uint(c->rebuilt);
  j.Key("changed").Uint(c->changed);
  j.Key("series").Uint(c->series);
  j.Key("bytes").Uint(c->bytes);
  j.EndObject();
  return JsonResponse(j.Take());
}

}  // namespace fieldprof::aggregator
