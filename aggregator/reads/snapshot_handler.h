// What agents and clients download (docs/snapshot.md):
//   GET /v1/config                      the fleet settings agents apply
//                                       (common/settings/runtime_settings.h)
//   GET /v1/snapshot/manifest           the signed manifest (protobuf);
//                                       ETag, If-None-Match -> 304
//   GET /v1/snapshot/fragments/{i}      fragment i as the current manifest
//       [?version=HEX]                  lists it, or that version (immutable;
//                                       replaced versions stay keep_old)
// Without a publisher the snapshot endpoints answer 404.
#ifndef FIELDPROF_AGGREGATOR_READS_SNAPSHOT_HANDLER_H_
#define FIELDPROF_AGGREGATOR_READS_SNAPSHOT_HANDLER_H_

#include <string_view>

#include "aggregator/http/http_types.h"
#include "aggregator/metrics.h"
#include "aggregator/publish/publisher.h"
#include "common/settings/runtime_settings.h"

namespace fieldprof::aggregator {

class SnapshotHandler {
 public:
  // `publish` (may be null: not publishing) and `metrics` must outlive the
  // handler.
  SnapshotHandler(PublishLoop* publish, FleetSettings fleet, Metrics* metrics)
      : publish_(publish), fleet_(std::move(fleet)), metrics_(metrics) {}

  HttpResponse Config();
  HttpResponse Manifest(std::string_view if_none_match);
  HttpResponse Fragment(std::string_view index, std::string_view query,
                        std::string_view if_none_match);

 private:
  PublishLoop* const publish_;
  const FleetSettings fleet_;
  Metrics* const metrics_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_READS_SNAPSHOT_HANDLER_H_
