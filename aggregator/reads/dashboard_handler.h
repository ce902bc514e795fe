// The dashboard (aggregator/ui/) and the reads only it makes:
//   GET /ui, /ui/           the page (its files are built into the binary)
//   GET /ui/FILE            app.js, style.css
//   GET /v1/modules         every module: APIs, series, calls, versions, and
//                           whether a vendor claims it and the request may
//                           open it. The list is one scan of every series,
//                           kept for a minute; requests meanwhile wait for
//                           the one scan instead of starting their own.
//                           Behind k-anonymity, "withheld": what is held
//                           back until k machines sent it (series_json.h).
//   GET /v1/recent[?limit=] the APIs seen most recently (recent_apis.h)
#ifndef FIELDPROF_AGGREGATOR_READS_DASHBOARD_HANDLER_H_
#define FIELDPROF_AGGREGATOR_READS_DASHBOARD_HANDLER_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/http/http_types.h"
#include "aggregator/reads/recent_apis.h"
#include "aggregator/reads/vendor_access.h"
#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

class DashboardHandler {
 public:
  // The pointers must outlive the handler.
  DashboardHandler(Store* store, const VendorAccess* vendors, const RecentApis* recent)
      : store_(store), vendors_(vendors), recent_(recent) {}

  HttpResponse ListModules(std::string_view authorization);
  HttpResponse Recent(std::string_view query);
  // `path` is "/ui" or starts with "/ui/".
  HttpResponse UiAsset(std::string_view path);

 private:
  struct ModuleSummary {
    std::string module;
    size_t apis = 0;
    uint64_t calls = 0, series = 0;
    std::vector<std::string> versions;
  };
  // The module list, scanned again when older than a minute; the age of
  // the list returned in *age_s.
  [[nodiscard]] StatusOr<std::vector<ModuleSummary>> Modules(double* age_s);

  Store* const store_;
  const VendorAccess* const vendors_;
  const RecentApis* const recent_;
  std::mutex modules_mu_;                               // held through a scan
  std::vector<ModuleSummary> modules_;                  // GUARDED_BY(modules_mu_)
  std::chrono::steady_clock::time_point modules_at_{};  // GUARDED_BY(modules_mu_)
  bool modules_valid_ = false;                          // GUARDED_BY(modules_mu_)
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_READS_DASHBOARD_HANDLER_H_
