// A module's series, for reports, diffs and the dashboard's module pages.
// A module a vendor claims needs that vendor's token
// (vendor_access.h): 401 without it.
//   GET /v1/module  ?module=[&version=][&metric=][&os=][&arch=][&vendor=]
//                   [&family=][&from=][&to=][&limit=]
//     every series of the module over the day range, with histograms (the
//     input of `fieldprof report|diff|docs --host`).
//   GET /v1/report  ?module=[&namespace=]... : the module's model
//     (common/model_json.h), as `fieldprof report --format json` prints it.
//   GET /v1/diff    ?module=&a_version=&b_version=  or
//                   ?module=&a_from=&a_to=&b_from=&b_to=  [&statistic=mean|pNN]
//     which APIs got slower or faster (common/module_diff.h).
//   GET /v1/stacks  ?module=[&version=][&os=][&arch=][&vendor=][&family=]
//                   [&from=][&to=][&limit=][&format=json|folded]
//     the module's field stacks (common/field_stacks.h): where its CPU time
//     goes, summed over the versions asked for; `limit` (default 10,000)
//     bounds the stacks in JSON, the dearest first; `folded` gives every
//     stack as flame graph tools read it.
#ifndef FIELDPROF_AGGREGATOR_HTTP_VENDOR_HANDLER_H_
#define FIELDPROF_AGGREGATOR_HTTP_VENDOR_HANDLER_H_

#include <string_view>

#include "aggregator/http/http_types.h"
#include "aggregator/http/vendor_access.h"
#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

class VendorHandler {
 public:
  // Both must outlive the handler.
  VendorHandler(Store* store, const VendorAccess* vendors) : store_(store), vendors_(vendors) {}

  HttpResponse GetModule(std::string_view query, std::string_view authorization);
  HttpResponse GetReport(std::string_view query, std::string_view authorization);
  HttpResponse GetDiff(std::string_view query, std::string_view authorization);
  HttpResponse GetStacks(std::string_view query, std::string_view authorization);

 private:
  Store* const store_;
  const VendorAccess* const vendors_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_HTTP_VENDOR_HANDLER_H_
