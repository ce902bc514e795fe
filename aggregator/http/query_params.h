// The query strings of the read endpoints: decoding, and the series filter
// that /v1/apis, /v1/api, /v1/module, /v1/report and /v1/diff share:
//   module= prefix= | symbol= metric= version= os= arch= vendor= family=
//   from=YYYY-MM-DD to=YYYY-MM-DD limit=
// An unknown parameter is an error (a typo must not widen a query); an
// endpoint takes its own parameters out (TakeParam) before the filter's.
#ifndef FIELDPROF_AGGREGATOR_HTTP_QUERY_PARAMS_H_
#define FIELDPROF_AGGREGATOR_HTTP_QUERY_PARAMS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aggregator/store/calendar_tree.h"
#include "aggregator/store/store.h"
#include "common/base/decimal.h"
#include "common/base/status.h"

namespace fieldprof::aggregator {

using QueryParams = std::vector<std::pair<std::string, std::string>>;

// Decodes an application/x-www-form-urlencoded query string ('+' is a
// space, %XX a byte). InvalidArgument on a bad or cut percent escape.
[[nodiscard]] StatusOr<QueryParams> ParseQuery(std::string_view query);

// Takes `name` out of `params` and returns its value ("" when absent).
std::string TakeParam(QueryParams* params, std::string_view name);

// The whole of `v` as a decimal integer ("10abc" and "" are not numbers).
std::optional<int64_t> ParseWholeNumber(std::string_view v);
// ParseDecimalIn (a decimal number in [lo, hi]) is common/base/decimal.h's.

// Which series a read is about, over which days, and how many at most.
struct SeriesQuery {
  ApiFilter filter;
  int32_t from = kUnboundedFirst, to = kUnboundedLast;
  size_t limit = 100000;      // 1..100000
  std::optional<int> family;  // the CPU family class, 0..255

  bool all_time() const { return from == kUnboundedFirst && to == kUnboundedLast; }
  bool FamilyMatches(const ApiKey& k) const { return !family || k.platform.cpu_family == *family; }
};

// Reads every parameter of `params` into `q` (whose fields hold the
// endpoint's defaults). InvalidArgument names the parameter that is wrong.
[[nodiscard]] Status ParseSeriesQuery(const QueryParams& params, SeriesQuery* q);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_HTTP_QUERY_PARAMS_H_
