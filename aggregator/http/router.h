// Router: turns one complete HTTP request into a response by its method
// and path. Knows nothing of sockets or TLS (server.h does), so every
// endpoint is a plain function call in tests. Handle() may block on the
// store: the server calls it from its worker pool, never an I/O thread.
//
// The endpoints, by area (each handler's header describes its own):
//   ingest     POST /v1/batches                       ingest_handler.h
//   query      GET  /v1/apis, /v1/api                 query_handler.h
//   vendor     GET  /v1/module, /v1/report, /v1/diff  vendor_handler.h
//   dashboard  GET  /ui/..., /v1/modules, /v1/recent  dashboard_handler.h
//   lab        GET, POST /v1/lab/profiles[/{id}]      lab_handler.h
//   dev        GET, POST /v1/dev/runs[/{id}], GET /v1/dev/tags
//                                                     dev_handler.h
//   snapshot   GET  /v1/config, /v1/snapshot/...      snapshot_handler.h
//   admin      GET  /healthz, /metrics; POST /v1/admin/publish
//                                                     admin_handler.h
// Routes() lists them all; docs/aggregator.md's table is checked against
// it. HEAD is answered as GET. A known path asked with another method
// answers 405 with Allow; an unknown path 404.
//
//   RouterParts parts;
//   parts.store = store;
//   parts.metrics = &metrics;
//   Router router(std::move(parts));
//   HttpResponse r = router.Handle("GET", "/v1/apis?module=libz.so.1", "", "");
#ifndef FIELDPROF_AGGREGATOR_HTTP_ROUTER_H_
#define FIELDPROF_AGGREGATOR_HTTP_ROUTER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/dev/dev_handler.h"
#include "aggregator/dev/lab_handler.h"
#include "aggregator/http/admin_handler.h"
#include "aggregator/http/http_status.h"
#include "aggregator/http/http_types.h"
#include "aggregator/ingest/ingest_handler.h"
#include "aggregator/ingest/source_limits.h"
#include "aggregator/ingest/token_handler.h"
#include "aggregator/metrics.h"
#include "aggregator/publish/lease.h"
#include "aggregator/publish/publisher.h"
#include "aggregator/reads/dashboard_handler.h"
#include "aggregator/reads/query_handler.h"
#include "aggregator/reads/recent_apis.h"
#include "aggregator/reads/snapshot_handler.h"
#include "aggregator/reads/vendor_access.h"
#include "aggregator/reads/vendor_handler.h"
#include "aggregator/store/lab_storage.h"
#include "aggregator/store/store.h"
#include "common/settings/runtime_settings.h"

namespace fieldprof::aggregator {

// What the endpoints need. The pointers must outlive the router; the
// optional ones turn their endpoints off when null.
struct RouterParts {
  Store* store = nullptr;      // required
  Metrics* metrics = nullptr;  // required
  // Served to agents at GET /v1/config.
  FleetSettings fleet;
  // Uploaded lab profiles; null: the lab endpoints answer 404.
  LabStorage* lab = nullptr;
  // The snapshot publisher; null: the snapshot endpoints answer 404.
  PublishLoop* publish = nullptr;
  // The admin calls' bearer token; empty: they answer 403.
  std::string admin_token;
  // Reported in /metrics when set (several aggregators).
  Lease* lease = nullptr;
  // Vendors whose modules need their token.
  std::vector<Vendor> vendors;
  // Developers' runs; null: the developer endpoints answer 404.
  DevStore* dev = nullptr;
  // Developers and their programs (apart from the vendors).
  std::vector<Developer> developers;
  // The time batches are dated by (tests inject one).
  WallClock clock = std::chrono::system_clock::now;
  // The token issuer; null: batches need no token, /v1/tokens answers 404.
  const TokenIssuer* tokens = nullptr;
  // What one machine's batch can hold (common/wire/plausible.h).
  PlausibleLimits plausible;
  // Per-source limits the server asks (server.h), reported in /metrics.
  std::vector<const SourceLimiter*> source_limits;
  // How far behind the sums a kept /v1/stacks answer may be served
  // (reads/answer_cache.h); zero keeps none.
  std::chrono::milliseconds answer_max_stale{10000};
  // A module with at least this many stack series has its usual
  // /v1/stacks questions answered ahead and kept warm (vendor_handler.h);
  // zero warms none.
  size_t answer_warm_stacks = 5000;
};

class Router {
 public:
  explicit Router(RouterParts parts);
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  HttpResponse Handle(const HttpRequest& request);
  HttpResponse Handle(std::string_view method, std::string_view target,
                      std::string_view content_type, std::string_view body) {
    return Handle(HttpRequest{method, target, content_type, body, {}, {}, {}});
  }

  // One route: the methods it takes ("GET", "POST", "GET, POST"), its path
  // ("{name}" at the end matches the rest of the path: one segment or, for
  // "/ui/{file}", none), and its handler area.
  struct Route {
    std::string_view methods, path, area;
  };
  static std::span<const Route> Routes();

  // Which handler method a route calls (router.cc).
  enum class Endpoint;

 private:
  HttpResponse Call(Endpoint e, const HttpRequest& req, std::string_view query,
                    std::string_view param);

  Store* const store_;
  const VendorAccess vendors_;
  RecentApis recent_;
  IngestHandler ingest_;
  TokenHandler tokens_;
  QueryHandler query_;
  VendorHandler vendor_;
  DashboardHandler dashboard_;
  LabHandler lab_;
  DevHandler dev_;
  SnapshotHandler snapshot_;
  AdminHandler admin_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_HTTP_ROUTER_H_
