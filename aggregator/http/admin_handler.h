// For operators and load balancers:
//   GET  /healthz                 200 "ok" while batches are taken; else 503
//                                 and why (a full disk, a write being
//                                 recovered, a ClickHouse shard away)
//   GET  /metrics                 Prometheus text: the service's, the
//                                 store's, and whether this aggregator holds
//                                 the lease
//   POST /v1/admin/publish[?all=1]  one publish cycle now (all: every
//                                 fragment, not the next in rotation); needs
//                                 "Authorization: Bearer <admin token>"
#ifndef FIELDPROF_AGGREGATOR_HTTP_ADMIN_HANDLER_H_
#define FIELDPROF_AGGREGATOR_HTTP_ADMIN_HANDLER_H_

#include <string>
#include <string_view>
#include <vector>

#include "aggregator/http/http_types.h"
#include "aggregator/ingest/source_limits.h"
#include "aggregator/metrics.h"
#include "aggregator/publish/lease.h"
#include "aggregator/publish/publisher.h"
#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

class AdminHandler {
 public:
  // The pointers must outlive the handler. `publish` may be null (not
  // publishing), `lease` too (not reported). An empty `admin_token` turns
  // the admin calls off (403).
  AdminHandler(Store* store, Metrics* metrics, PublishLoop* publish, std::string admin_token,
               Lease* lease, std::vector<const SourceLimiter*> source_limits = {})
      : store_(store),
        metrics_(metrics),
        publish_(publish),
        admin_token_(std::move(admin_token)),
        lease_(lease),
        source_limits_(std::move(source_limits)) {}

  HttpResponse Health();
  HttpResponse MetricsText();
  HttpResponse Publish(std::string_view authorization, std::string_view query);

 private:
  Store* const store_;
  Metrics* const metrics_;
  PublishLoop* const publish_;
  const std::string admin_token_;
  Lease* const lease_;
  const std::vector<const SourceLimiter*> source_limits_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_HTTP_ADMIN_HANDLER_H_
