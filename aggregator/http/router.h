// Router: turns one complete HTTP request into a response. Knows nothing
// about sockets or TLS (server.h does), so every endpoint is testable as a
// plain function call. Handle() may block on the store: the server calls it
// from its worker pool, never from an I/O thread.
//
// Endpoints:
//   POST /v1/batches   application/x-protobuf Batch -> 200 {"duplicate":false,...}
//   GET  /v1/apis      ?module=&prefix=&metric=&version=&os=&arch=&vendor=&limit=
//                      [&order=key|calls]
//   GET  /v1/api       ?module=&symbol=[&metric=][&version=][&os=][&arch=][&vendor=]
//                      [&family=][&from=YYYY-MM-DD][&to=YYYY-MM-DD]
//   GET  /healthz      200 "ok"
//   GET  /metrics      Prometheus text
//   GET  /v1/config    the fleet settings agents apply
//   GET  /v1/snapshot/manifest           the SignedManifest (application/x-protobuf);
//                                        ETag, If-None-Match -> 304
//   GET  /v1/snapshot/fragments/{i}      fragment i as the current manifest lists it;
//                      [?version=HEX]    that version (immutable; old versions
//                                        stay for keep_old after replacement)
//   POST /v1/admin/publish[?all=1]       one publish cycle now (all: every
//                                        fragment, not the next in rotation); needs
//                                        "Authorization: Bearer <admin token>"
#ifndef FIELDPROF_AGGREGATOR_HTTP_ROUTER_H_
#define FIELDPROF_AGGREGATOR_HTTP_ROUTER_H_

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/metrics.h"
#include "aggregator/store/store.h"
#include "common/runtime_settings.h"
#include "common/status.h"
#include "common/wire.h"

namespace fieldprof::aggregator {

inline constexpr std::string_view kProtobufContentType = kBatchContentType;

class PublishLoop;
class Lease;
class LabStorage;

// One complete request, as the router needs it.
struct HttpRequest {
  std::string_view method, target, content_type, body;
  std::string_view if_none_match;  // the If-None-Match header, if any
  std::string_view authorization;  // the Authorization header, if any
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

// OK when `content_type` is application/x-protobuf (parameters such as
// "; proto=..." allowed); otherwise the Unsupported (415) error to answer.
// Used by the server before it reads a body and by Router::Ingest.
[[nodiscard]] Status CheckBatchContentType(std::string_view content_type);

// The one mapping from Status to an HTTP status code.
int HttpStatusFor(const Status& s);
// A JSON error response for `s`: {"error":"InvalidArgument","rule":"...","message":"..."}.
HttpResponse ErrorResponse(const Status& s);

class Router {
 public:
  // `store` and `metrics` must outlive the router. `clock` gives the time
  // used to pick the day records are added to (tests inject one).
  Router(Store* store, Metrics* metrics,
         std::function<std::chrono::system_clock::time_point()> clock =
             std::chrono::system_clock::now);

  HttpResponse Handle(const HttpRequest& request);
  HttpResponse Handle(std::string_view method, std::string_view target,
                      std::string_view content_type, std::string_view body) {
    return Handle(HttpRequest{method, target, content_type, body, {}, {}});
  }

  // Individual endpoints.
  HttpResponse Ingest(std::string_view content_type, std::string_view body);
  HttpResponse ListApis(std::string_view query);
  HttpResponse GetApi(std::string_view query);
  HttpResponse Metrics();
  // GET /v1/config: the settings agents apply (see common/runtime_settings.h).
  HttpResponse Config();

  void SetFleetSettings(const FleetSettings& f) { fleet_ = f; }
  // Keeps uploaded lab profiles in `lab` (POST/GET /v1/lab/profiles), apart
  // from the field sums; it must outlive the router. Null (the default):
  // the lab endpoints answer 404.
  void SetLabStorage(LabStorage* lab) { lab_ = lab; }
  // Vendor pages (issue #19): a module that matches a vendor's patterns is
  // served by GET /v1/module only with that vendor's bearer token.
  struct Vendor {
    std::string name;
    std::string token_sha256;           // of the token; compared in constant time
    std::vector<std::string> patterns;  // module globs ('*' any run of characters)
  };
  void SetVendors(std::vector<Vendor> v) { vendors_ = std::move(v); }
  // GET /v1/module: every series of one module over a day range, with
  // histograms (the model of reports, diffs and the dashboard).
  HttpResponse GetModule(std::string_view query, std::string_view authorization);
  // The dashboard's reads (aggregator/ui/): every module; one module's model
  // (common/model_json.h); a diff of two versions or ranges; the APIs seen
  // most recently; and the dashboard's own static files.
  HttpResponse ListModules(std::string_view authorization);
  HttpResponse GetReport(std::string_view query, std::string_view authorization);
  HttpResponse GetDiff(std::string_view query, std::string_view authorization);
  HttpResponse Recent(std::string_view query);
  HttpResponse UiAsset(std::string_view path);
  HttpResponse LabUpload(std::string_view body);
  HttpResponse LabList();
  HttpResponse LabGet(std::string_view id);
  // Serves the snapshot endpoints from `publish` (must outlive the router).
  // An empty `admin_token` turns the admin calls off.
  void SetPublisher(PublishLoop* publish, std::string admin_token) {
    publish_ = publish;
    admin_token_ = std::move(admin_token);
  }

  // Reports `lease` (must outlive the router) in /metrics.
  void SetLease(Lease* lease) { lease_ = lease; }

  HttpResponse SnapshotManifest(std::string_view if_none_match);
  HttpResponse SnapshotFragment(std::string_view index, std::string_view query,
                                std::string_view if_none_match);
  HttpResponse AdminPublish(std::string_view authorization, std::string_view query);

 private:
  Store* store_;
  FleetSettings fleet_;
  PublishLoop* publish_ = nullptr;
  Lease* lease_ = nullptr;
  std::string admin_token_;
  LabStorage* lab_ = nullptr;
  std::vector<Vendor> vendors_;
  // Whether `module` may be served: claimed by no vendor, or `authorization`
  // is a claiming vendor's token. `claimed` says whether any vendor claims it.
  bool VendorAllows(std::string_view module, std::string_view authorization,
                    bool* claimed = nullptr) const;
  // The most recently ingested APIs (module, symbol) with the unix ms of
  // their batch: a few keys of each batch, in a ring (O(1) per key on the
  // ingest path; Recent() drops the older repeats).
  struct Seen {
    std::string module, symbol;
    int64_t unix_ms = 0;
  };
  // /v1/modules scans every series: its result is kept for a minute, and
  // concurrent requests wait for one scan instead of starting their own.
  struct ModuleSummary {
    std::string module;
    size_t apis = 0;
    uint64_t calls = 0, series = 0;
    std::vector<std::string> versions;
  };
  std::mutex modules_mu_;
  std::vector<ModuleSummary> modules_;
  std::chrono::steady_clock::time_point modules_at_{};
  bool modules_valid_ = false;
  std::mutex recent_mu_;
  std::vector<Seen> recent_;  // the ring, kRecent entries once full
  size_t recent_next_ = 0;    // where the next key goes
  static constexpr size_t kRecent = 512;
  class Metrics* metrics_;
  std::function<std::chrono::system_clock::time_point()> clock_;
};

// Decodes an application/x-www-form-urlencoded query string. Errors on bad
// percent escapes.
[[nodiscard]] StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQuery(
    std::string_view query);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_HTTP_ROUTER_H_
