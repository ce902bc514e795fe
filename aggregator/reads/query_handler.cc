#include "aggregator/reads/query_handler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "aggregator/http/http_status.h"
#include "aggregator/http/query_params.h"
#include "aggregator/reads/series_json.h"
#include "aggregator/store/calendar_tree.h"
#include "aggregator/store/suspect.h"
#include "common/base/json_writer.h"
#include "common/statistics/resolution.h"

namespace fieldprof::aggregator {
namespace {

enum class Order { kKey, kCalls, kMean };

// order=key|calls|mean, taken out of `params`.
StatusOr<Order> TakeOrder(QueryParams* params) {
  const std::string order = TakeParam(params, "order");
  if (order.empty() || order == "key") return Order::kKey;
  if (order == "calls") return Order::kCalls;
  if (order == "mean") return Order::kMean;
  return InvalidArgument("order must be key, calls or mean");
}

void SortBy(Order order, std::vector<ApiAggregate>* apis) {
  if (order == Order::kCalls) {
    std::stable_sort(apis->begin(), apis->end(), [](const ApiAggregate& a, const ApiAggregate& b) {
      return a.histogram.count() > b.histogram.count();
    });
  } else if (order == Order::kMean) {
    std::stable_sort(apis->begin(), apis->end(), [](const ApiAggregate& a, const ApiAggregate& b) {
      return a.histogram.Mean() > b.histogram.Mean();
    });
  }
}

StatusOr<std::string> ApiListJson(Store* store, const std::vector<ApiAggregate>& apis,
                                  const SeriesQuery& q) {
  JsonWriter j;
  j.BeginObject();
  j.Key("apis").BeginArray();
  size_t n = 0;
  for (const ApiAggregate& a : apis) {
    if (!q.FamilyMatches(a.key)) continue;
    if (n++ == q.limit) break;
    const HistogramStats st = a.histogram.Stats();
    j.BeginObject();
    WriteKey(j, a.key);
    j.Key("calls").Uint(st.count);
    j.Key("runs").Uint(a.runs);
    j.Key("machines").Uint(a.machines.Estimate());
    j.Key("mean").Double(st.mean);
    j.Key("p50").Double(st.p50);
    j.Key("p90").Double(st.p90);
    j.Key("p99").Double(st.p99);
    WriteResolution(j, st, a.resolution_ns);
    j.EndObject();
  }
  j.EndArray();
  j.Key("truncated").Bool(apis.size() > q.limit);
  FP_RETURN_IF_ERROR(WriteWithheld(j, store));
  j.EndObject();
  return j.Take();
}

// One API summed over every series that matches, in one pass of the store.
struct ApiSum {
  Histogram total;
  MachineSketch machines;      // the most of any series (machine_sketch.h)
  MachineSketch day_machines;  // a machine once a day and series
  uint64_t runs = 0, resolution_ns = 0;
  size_t series = 0;
  bool truncated = false;
};

Status SumApi(Store* store, const SeriesQuery& q, ApiSum* sum) {
  FP_RETURN_IF_ERROR(store->ForEachApiInRange(q.filter, q.from, q.to, [&](ApiAggregate&& a) {
    if (!q.FamilyMatches(a.key)) return true;
    sum->total.Merge(a.histogram);
    sum->runs += a.runs;
    sum->machines.KeepLarger(a.machines);
    sum->day_machines.Merge(a.day_machines);
    sum->truncated = sum->truncated || a.truncated;
    sum->resolution_ns = std::max(sum->resolution_ns, a.resolution_ns);
    return ++sum->series < q.limit;
  }));
  if (sum->series > 0) return Status::Ok();
  if (!q.all_time()) {
    // Nothing in the range: an empty answer when the API is known at all
    // ("series" then counts the series known).
    FP_ASSIGN_OR_RETURN(std::vector<ApiAggregate> any, store->ListApis(q.filter, 1000));
    for (const ApiAggregate& a : any) sum->series += q.FamilyMatches(a.key);
    if (sum->series > 0) return Status::Ok();
  }
  return NotFound("no data for " + q.filter.module + " " + q.filter.symbol_prefix + " (" +
                  std::string(MetricName(*q.filter.metric)) + ")");
}

// The API's latest day (today, else yesterday) against the days before
// it, summed over its series (aggregator/store/suspect.h).
StatusOr<Suspicion> Judge(Store* store, SeriesQuery q, int32_t today) {
  ApiSum day;
  int32_t latest = today;
  for (; latest >= today - 1; --latest) {
    day = ApiSum();
    q.from = q.to = latest;
    Status s = SumApi(store, q, &day);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
    if (day.runs > 0) break;
  }
  if (day.runs < kSuspectMinDayRuns) return Suspicion{};
  ApiSum history;
  q.from = kUnboundedFirst;
  q.to = latest - 1;
  Status s = SumApi(store, q, &history);
  if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  return JudgeLatestDay({day.total.Mean(), day.runs, day.day_machines.Estimate()},
                        {history.total.Mean(), history.runs, history.day_machines.Estimate()},
                        latest);
}

}  // namespace

HttpResponse QueryHandler::ListApis(std::string_view query) {
  StatusOr<QueryParams> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  StatusOr<Order> order = TakeOrder(&*params);
  if (!order.ok()) return ErrorResponse(order.status());
  SeriesQuery q;
  q.limit = 100;
  if (Status s = ParseSeriesQuery(*params, &q); !s.ok()) return ErrorResponse(s);
  if (!q.all_time()) {
    return ErrorResponse(InvalidArgument("/v1/apis lists all-time sums; use /v1/api for ranges"));
  }
  StatusOr<std::vector<ApiAggregate>> apis =
      store_->ListApis(q.filter, *order == Order::kKey ? q.limit + 1 : 100000);
  if (!apis.ok()) return ErrorResponse(apis.status());
  SortBy(*order, &*apis);
  StatusOr<std::string> json = ApiListJson(store_, *apis, q);
  if (!json.ok()) return ErrorResponse(json.status());
  return JsonResponse(std::move(*json));
}

HttpResponse QueryHandler::GetApi(std::string_view query) {
  StatusOr<QueryParams> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  SeriesQuery q;
  q.filter.metric = wire::METRIC_WALL_TIME_NS;
  if (Status s = ParseSeriesQuery(*params, &q); !s.ok()) return ErrorResponse(s);
  if (q.filter.module.empty() || q.filter.symbol_prefix.empty() || !q.filter.symbol_exact) {
    return ErrorResponse(InvalidArgument("/v1/api needs module= and symbol="));
  }
  ApiSum sum;
  if (Status s = SumApi(store_, q, &sum); !s.ok()) return ErrorResponse(s);
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(clock_().time_since_epoch()).count();
  StatusOr<Suspicion> suspicion = Judge(store_, q, DayFromUnixSeconds(now_s));
  if (!suspicion.ok()) return ErrorResponse(suspicion.status());
  if (suspicion->suspect) metrics_->SuspectAnswered();
  JsonWriter j;
  j.BeginObject();
  j.Key("module").String(q.filter.module);
  j.Key("symbol").String(q.filter.symbol_prefix);
  j.Key("metric").String(MetricName(*q.filter.metric));
  j.Key("from").String(q.from == kUnboundedFirst ? "" : FormatDay(q.from));
  j.Key("to").String(q.to == kUnboundedLast ? "" : FormatDay(q.to));
  j.Key("series").Uint(sum.series);
  j.Key("runs").Uint(sum.runs);
  j.Key("machines").Uint(sum.machines.Estimate());
  j.Key("suspect").Bool(suspicion->suspect);
  if (suspicion->suspect) j.Key("suspect_reason").String(suspicion->reason);
  j.Key("truncated").Bool(sum.truncated);
  WriteStats(j, sum.total);
  WriteResolution(j, sum.total.Stats(), sum.resolution_ns);
  WriteHistogram(j, sum.total);
  j.EndObject();
  return JsonResponse(j.Take());
}

}  // namespace fieldprof::aggregator
