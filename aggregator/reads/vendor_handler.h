// A module's series, for reports, diffs and the dashboard's module pages.
// A module a vendor claims needs that vendor's token
// (vendor_access.h): 401 without it.
//   GET /v1/module  ?module=[&version=][&metric=][&os=][&arch=][&vendor=]
//                   [&family=][&from=][&to=][&limit=]
//     every series of the module over the day range, with histograms (the
//     input of `fieldprof report|diff|docs --host`).
//   GET /v1/report  ?module=[&namespace=]... : the module's model
//     (common/model/model_json.h), as `fieldprof report --format json` prints it.
//   GET /v1/diff    ?module=&a_version=&b_version=  or
//                   ?module=&a_from=&a_to=&b_from=&b_to=  [&statistic=mean|pNN]
//     which APIs got slower or faster (common/model/module_diff.h).
//   GET /v1/stacks  ?module=[&version=][&os=][&arch=][&vendor=][&family=]
//                   [&from=][&to=][&limit=][&format=json|folded]
//     the module's field stacks (common/stacks/field_stacks.h): where its CPU time
//     goes, summed over the versions asked for; `limit` (default 10,000)
//     bounds the stacks in JSON, the dearest first; `folded` gives every
//     stack as flame graph tools read it. Answers are kept between
//     requests (answer_cache.h): at most `answer_max_stale` behind the
//     sums while batches keep coming (the Age header says how long ago
//     an answer was built), current otherwise. A module with at least
//     `answer_warm_stacks` stacks (a walk of them takes more than a few
//     tens of milliseconds) has its usual questions answered before
//     anyone asks: every version, the default limit and the dashboard's
//     (limit=100000), and the dashboard's for each of its three biggest
//     versions of that many stacks; the biggest such modules first, while
//     their answers would take at most half the kept answers' bound. Which modules those are is
//     looked up in the background at start and again while the sums move, at most one fiftieth of
//     the time.
#ifndef FIELDPROF_AGGREGATOR_READS_VENDOR_HANDLER_H_
#define FIELDPROF_AGGREGATOR_READS_VENDOR_HANDLER_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string_view>
#include <thread>

#include "aggregator/http/http_types.h"
#include "aggregator/reads/answer_cache.h"
#include "aggregator/reads/vendor_access.h"
#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

class VendorHandler {
 public:
  // The pointers must outlive the handler. `answer_max_stale` zero: every
  // /v1/stacks answer is built in its request (and none is warmed);
  // `answer_warm_stacks` zero: none is warmed.
  VendorHandler(Store* store, const VendorAccess* vendors, Metrics* metrics,
                std::chrono::milliseconds answer_max_stale, size_t answer_warm_stacks);
  ~VendorHandler();  // stops the warmer
  VendorHandler(const VendorHandler&) = delete;
  VendorHandler& operator=(const VendorHandler&) = delete;

  HttpResponse GetModule(std::string_view query, std::string_view authorization);
  HttpResponse GetReport(std::string_view query, std::string_view authorization);
  HttpResponse GetDiff(std::string_view query, std::string_view authorization);
  // `gzip`: the client takes a gzipped answer (Accept-Encoding).
  HttpResponse GetStacks(std::string_view query, std::string_view authorization, bool gzip);

 private:
  // What kept /v1/stacks answers may hold: twenty answers of 100,000
  // stacks (12.5 MB each). Bounded low: any client may ask questions that
  // differ only in `limit`, each kept apart.
  static constexpr size_t kAnswerBytes = size_t{256} << 20;

  // Finds the modules with many stacks and keeps their usual questions
  // warm, until the handler goes.
  void WarmLoop();

  Store* const store_;
  const VendorAccess* const vendors_;
  const size_t warm_stacks_;
  AnswerCache stacks_answers_;
  std::mutex warm_mu_;
  std::condition_variable warm_wake_;
  bool warm_stop_ = false;
  std::thread warmer_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_READS_VENDOR_HANDLER_H_
