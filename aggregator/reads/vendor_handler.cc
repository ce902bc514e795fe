#include "aggregator/reads/vendor_handler.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include "aggregator/http/http_status.h"
#include "aggregator/http/query_params.h"
#include "aggregator/reads/series_json.h"
#include "common/base/json_writer.h"
#include "common/model/model_json.h"
#include "common/model/module_diff.h"
#include "common/model/module_model.h"
#include "common/stacks/field_stacks.h"

namespace fieldprof::aggregator {
namespace {

HttpResponse Unauthorized() {
  return BearerRequired("this module's pages need its vendor's token");
}

// Every series `q` matches, summed over its day range (a series with no
// data there is skipped), to `visit`: at most q.limit, else *truncated.
Status ForEachInRange(Store* store, const SeriesQuery& q, bool* truncated,
                      const std::function<void(ApiAggregate&&)>& visit) {
  size_t n = 0;
  return store->ForEachApiInRange(q.filter, q.from, q.to, [&](ApiAggregate&& a) {
    if (!q.FamilyMatches(a.key)) return true;
    if (n == q.limit) {
      *truncated = true;
      return false;
    }
    ++n;
    visit(std::move(a));
    return true;
  });
}

// The same, as the model's series.
Status CollectSeries(Store* store, const SeriesQuery& q, std::vector<SeriesSum>* out,
                     bool* truncated) {
  return ForEachInRange(store, q, truncated, [&](ApiAggregate&& a) {
    SeriesSum x;
    ApiKeyToWire(a.key, &x.key);
    x.histogram = std::move(a.histogram);
    x.runs = a.runs;
    x.resolution_ns = a.resolution_ns;
    x.machines = a.machines.Estimate();
    out->push_back(std::move(x));
  });
}

// The default and the largest `limit` of a /v1/stacks answer in JSON (the
// dashboard asks the largest).
constexpr size_t kStacksLimit = 10000, kStacksMostLimit = 100000;

// The modules the warmer keeps warm are looked up again when the sums
// moved, at most this often, and no more than one lookup per this many
// times its duration (a second on a new store, 15 s for one module of
// 100,000 stacks here).
constexpr std::chrono::seconds kWarmRelist(1);
constexpr int kWarmRelistTimes = 50;
// Of a big module with several versions, the dashboard's question of
// each of its biggest versions (at most this many) is kept warm too.
constexpr size_t kWarmVersions = 3;
// What a kept answer holds a stack in, about (JSON 125 bytes, gzipped
// 15, on the benchmark's stacks): what warm answers may take is
// estimated before they are built.
constexpr size_t kAnswerBytesPerStack = 140;

// The /v1/stacks question `q` asks in `format`, however its parameters
// were ordered and spelled: the key its answer is kept under.
std::string StacksQuestion(const SeriesQuery& q, bool folded, size_t limit) {
  std::string k = folded ? "folded" : "json&limit=" + std::to_string(limit);
  auto add = [&k](std::string_view name, const std::string& v) {
    k += '&';
    k += name;
    k += '=';
    k += std::to_string(v.size());  // a value may hold any byte
    k += ':';
    k += v;
  };
  const ApiFilter& f = q.filter;
  add("module", f.module);
  add("version", f.module_version);
  add("os", f.os ? std::to_string(*f.os) : "");
  add("arch", f.arch ? std::to_string(*f.arch) : "");
  add("vendor", f.cpu_vendor ? std::to_string(*f.cpu_vendor) : "");
  add("family", q.family ? std::to_string(*q.family) : "");
  add("from", std::to_string(q.from));
  add("to", std::to_string(q.to));
  return k;
}

// Builds the answer to the /v1/stacks question `q` (whose filter names
// the module) in `format`, at most `limit` stacks in JSON.
AnswerCache::Build StacksAnswer(Store* store, SeriesQuery q, bool folded, size_t limit) {
  q.filter.metric = wire::METRIC_STACK_CPU_NS;
  q.limit = 100000000;  // every stack is summed; the answer keeps `limit`
  return [store, q, folded, limit] {
    // Summed as the store streams them: no copy of a series' histogram kept.
    FieldStacksBuilder builder(q.filter.module, /*keep_per_run=*/false, /*split_frames=*/false);
    bool truncated = false;
    if (Status s = ForEachInRange(store, q, &truncated,
                                  [&](ApiAggregate&& a) {
                                    builder.Add(std::move(a.key.symbol), a.key.module_version,
                                                a.histogram, a.runs, a.machines.Estimate());
                                  });
        !s.ok()) {
      return ErrorResponse(s);
    }
    // The answer orders (and shows) only the `limit` dearest.
    const FieldStacks stacks = builder.Finish(folded ? SIZE_MAX : limit);
    HttpResponse r;
    if (folded) {
      r.content_type = "text/plain; charset=utf-8";
      r.body = FieldStacksFolded(stacks);
    } else {
      r = JsonResponse(FieldStacksJson(stacks, limit));
    }
    // A kept answer may go gzipped (answer_cache.h) to whom accepts it.
    r.headers.emplace_back("Vary", "Accept-Encoding");
    return r;
  };
}

std::string RangeText(const SeriesQuery& q) {
  if (q.all_time()) return "all time";
  return (q.from == kUnboundedFirst ? std::string("...") : FormatDay(q.from)) + " .. " +
         (q.to == kUnboundedLast ? std::string("...") : FormatDay(q.to));
}

// What /v1/diff compares: two versions, or two day ranges.
struct DiffSides {
  bool by_version = false;
  std::string a_version, b_version;
  int32_t a_from = kUnboundedFirst, a_to = kUnboundedLast;
  int32_t b_from = kUnboundedFirst, b_to = kUnboundedLast;
  std::string before, after;  // their names in the answer
};

StatusOr<int32_t> DayOr(const std::string& d, int32_t unbounded) {
  if (d.empty()) return unbounded;
  return ParseDay(d);
}

StatusOr<DiffSides> TakeDiffSides(QueryParams* params) {
  DiffSides d;
  d.a_version = TakeParam(params, "a_version");
  d.b_version = TakeParam(params, "b_version");
  const std::string af = TakeParam(params, "a_from"), at = TakeParam(params, "a_to");
  const std::string bf = TakeParam(params, "b_from"), bt = TakeParam(params, "b_to");
  d.by_version = !d.a_version.empty() || !d.b_version.empty();
  const bool by_range = !af.empty() || !at.empty() || !bf.empty() || !bt.empty();
  if (d.by_version == by_range || (d.by_version && (d.a_version.empty() || d.b_version.empty()))) {
    return InvalidArgument(
        "/v1/diff takes a_version= and b_version=, or a_from=, a_to=, b_from=, b_to=");
  }
  if (d.by_version) {
    d.before = d.a_version;
    d.after = d.b_version;
    return d;
  }
  FP_ASSIGN_OR_RETURN(d.a_from, DayOr(af, kUnboundedFirst));
  FP_ASSIGN_OR_RETURN(d.a_to, DayOr(at, kUnboundedLast));
  FP_ASSIGN_OR_RETURN(d.b_from, DayOr(bf, kUnboundedFirst));
  FP_ASSIGN_OR_RETURN(d.b_to, DayOr(bt, kUnboundedLast));
  d.before = af + ".." + at;
  d.after = bf + ".." + bt;
  return d;
}

// Both sides' models of the module, as `sides` asks.
Status DiffModels(Store* store, SeriesQuery q, const DiffSides& sides, ModuleModel* a,
                  ModuleModel* b) {
  std::vector<SeriesSum> sa, sb;
  bool truncated = false;
  ModelFilter fa, fb;
  if (sides.by_version) {
    FP_RETURN_IF_ERROR(CollectSeries(store, q, &sa, &truncated));
    sb = sa;
    fa.module_version = sides.a_version;
    fb.module_version = sides.b_version;
  } else {
    q.from = sides.a_from;
    q.to = sides.a_to;
    FP_RETURN_IF_ERROR(CollectSeries(store, q, &sa, &truncated));
    q.from = sides.b_from;
    q.to = sides.b_to;
    FP_RETURN_IF_ERROR(CollectSeries(store, q, &sb, &truncated));
  }
  *a = BuildModuleModel(q.filter.module, sa, fa);
  *b = BuildModuleModel(q.filter.module, sb, fb);
  return Status::Ok();
}

}  // namespace

VendorHandler::VendorHandler(Store* store, const VendorAccess* vendors, Metrics* metrics,
                             std::chrono::milliseconds answer_max_stale, size_t answer_warm_stacks)
    : store_(store),
      vendors_(vendors),
      warm_stacks_(answer_warm_stacks),
      stacks_answers_(store, answer_max_stale, kAnswerBytes, metrics) {
  if (warm_stacks_ > 0 && answer_max_stale.count() > 0)
    warmer_ = std::thread([this] { WarmLoop(); });
}

VendorHandler::~VendorHandler() {
  {
    std::lock_guard lock(warm_mu_);
    warm_stop_ = true;
  }
  warm_wake_.notify_all();
  if (warmer_.joinable()) warmer_.join();
}

void VendorHandler::WarmLoop() {
  // Work nobody waits for (nice 19, this thread only).
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  std::unique_lock lock(warm_mu_);
  std::optional<uint64_t> listed;  // the data version of the last lookup
  std::chrono::steady_clock::duration wait{0};
  while (!warm_wake_.wait_for(lock, wait, [this] { return warm_stop_; })) {
    wait = kWarmRelist;
    const uint64_t version = store_->DataVersion();
    if (listed == version) continue;
    lock.unlock();
    // Which modules have many stacks: a walk of every stack series (the
    // rare ones folded as any answer folds them).
    const auto started = std::chrono::steady_clock::now();
    std::map<std::string, std::map<std::string, size_t>> stacks;  // module -> version -> n
    ApiFilter all;
    all.metric = wire::METRIC_STACK_CPU_NS;
    const Status s = store_->ForEachApi(all, [&](ApiAggregate&& a) {
      ++stacks[a.key.module][a.key.module_version];
      std::lock_guard stopping(warm_mu_);
      return !warm_stop_;
    });
    const auto took = std::chrono::steady_clock::now() - started;
    if (s.ok()) {
      // The biggest modules first, while their answers take at most half
      // of what kept answers may (the rest for questions off the list).
      std::vector<std::pair<size_t, std::string>> modules;  // (stacks, module)
      for (const auto& [module, versions] : stacks) {
        size_t n = 0;
        for (const auto& [version, m] : versions) n += m;
        if (n >= warm_stacks_) modules.emplace_back(n, module);
      }
      std::sort(modules.rbegin(), modules.rend());
      std::map<std::string, AnswerCache::Build> questions;
      size_t bytes = 0;
      auto fits = [&](size_t stacks, size_t limit) {
        bytes += std::min(stacks, limit) * kAnswerBytesPerStack;
        return bytes <= kAnswerBytes / 2;
      };
      for (const auto& [n, module] : modules) {
        if (!fits(n, kStacksLimit) || !fits(n, kStacksMostLimit)) break;
        const std::map<std::string, size_t>& versions = stacks[module];
        std::vector<std::pair<size_t, std::string>> big;  // (stacks, version)
        for (const auto& [version, m] : versions) {
          if (m >= warm_stacks_) big.emplace_back(m, version);
        }
        SeriesQuery q;
        q.filter.module = module;
        for (const size_t limit : {kStacksLimit, kStacksMostLimit}) {
          questions.emplace(StacksQuestion(q, /*folded=*/false, limit),
                            StacksAnswer(store_, q, /*folded=*/false, limit));
        }
        // The module page with a version picked.
        if (versions.size() < 2) continue;
        std::sort(big.rbegin(), big.rend());
        if (big.size() > kWarmVersions) big.resize(kWarmVersions);
        for (const auto& [m, version] : big) {
          if (!fits(m, kStacksMostLimit)) break;
          q.filter.module_version = version;
          questions.emplace(StacksQuestion(q, /*folded=*/false, kStacksMostLimit),
                            StacksAnswer(store_, q, /*folded=*/false, kStacksMostLimit));
        }
      }
      stacks_answers_.KeepWarm(questions);
      listed = version;
    }
    lock.lock();
    wait = std::max<std::chrono::steady_clock::duration>(kWarmRelist, took * kWarmRelistTimes);
  }
}

HttpResponse VendorHandler::GetModule(std::string_view query, std::string_view authorization) {
  StatusOr<QueryParams> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  SeriesQuery q;
  if (Status s = ParseSeriesQuery(*params, &q); !s.ok()) return ErrorResponse(s);
  if (q.filter.module.empty() || !q.filter.symbol_prefix.empty()) {
    return ErrorResponse(InvalidArgument("/v1/module needs module= (and takes no symbol)"));
  }
  if (!vendors_->Allows(q.filter.module, authorization)) return Unauthorized();
  JsonWriter j;
  j.BeginObject();
  j.Key("module").String(q.filter.module);
  j.Key("from").String(q.from == kUnboundedFirst ? "" : FormatDay(q.from));
  j.Key("to").String(q.to == kUnboundedLast ? "" : FormatDay(q.to));
  j.Key("series").BeginArray();
  bool truncated = false;
  Status s = ForEachInRange(store_, q, &truncated, [&](ApiAggregate&& a) {
    j.BeginObject();
    WriteKey(j, a.key);
    j.Key("runs").Uint(a.runs);
    j.Key("machines").Uint(a.machines.Estimate());
    if (a.resolution_ns != 0) j.Key("resolution_ns").Uint(a.resolution_ns);
    WriteHistogram(j, a.histogram);
    j.EndObject();
  });
  if (!s.ok()) return ErrorResponse(s);
  j.EndArray();
  j.Key("truncated").Bool(truncated);
  j.EndObject();
  return JsonResponse(j.Take());
}

HttpResponse VendorHandler::GetStacks(std::string_view query, std::string_view authorization,
                                      bool gzip) {
  StatusOr<QueryParams> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  const std::string format = TakeParam(&*params, "format");
  if (!format.empty() && format != "json" && format != "folded") {
    return ErrorResponse(InvalidArgument("format must be json or folded"));
  }
  SeriesQuery q;
  q.limit = kStacksLimit;
  if (Status s = ParseSeriesQuery(*params, &q); !s.ok()) return ErrorResponse(s);
  if (q.filter.module.empty() || !q.filter.symbol_prefix.empty() || q.filter.metric) {
    return ErrorResponse(
        InvalidArgument("/v1/stacks needs module= (and takes no symbol or metric)"));
  }
  if (!vendors_->Allows(q.filter.module, authorization)) return Unauthorized();
  const bool folded = format == "folded";
  return stacks_answers_.Get(StacksQuestion(q, folded, q.limit),
                             StacksAnswer(store_, q, folded, q.limit), gzip);
}

HttpResponse VendorHandler::GetReport(std::string_view query, std::string_view authorization) {
  StatusOr<QueryParams> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  ModelFilter mf;
  mf.scope = TakeParam(&*params, "namespace");
  SeriesQuery q;
  if (Status s = ParseSeriesQuery(*params, &q); !s.ok()) return ErrorResponse(s);
  if (q.filter.module.empty()) return ErrorResponse(InvalidArgument("/v1/report needs module="));
  if (!vendors_->Allows(q.filter.module, authorization)) return Unauthorized();
  std::vector<SeriesSum> series;
  bool truncated = false;
  if (Status s = CollectSeries(store_, q, &series, &truncated); !s.ok()) return ErrorResponse(s);
  const ModuleModel m = BuildModuleModel(q.filter.module, series, mf);
  std::string filters = mf.scope.empty() ? "" : "namespace " + mf.scope;
  if (!q.filter.module_version.empty()) {
    filters += (filters.empty() ? "" : ", ") + std::string("version ") + q.filter.module_version;
  }
  return HttpResponse{
      200, "application/json", ModuleModelJson(m, "aggregator", RangeText(q), filters), {}};
}

HttpResponse VendorHandler::GetDiff(std::string_view query, std::string_view authorization) {
  StatusOr<QueryParams> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  StatusOr<DiffSides> sides = TakeDiffSides(&*params);
  std::string statistic = TakeParam(&*params, "statistic");
  if (statistic.empty()) statistic = "mean";
  SeriesQuery q;
  Status s = ParseSeriesQuery(*params, &q);
  if (s.ok() && q.filter.module.empty()) s = InvalidArgument("/v1/diff needs module=");
  if (s.ok() && !sides.ok()) s = sides.status();
  if (!s.ok()) return ErrorResponse(s);
  if (!vendors_->Allows(q.filter.module, authorization)) return Unauthorized();
  DiffOptions o;
  o.metric = q.filter.metric ? static_cast<int>(*q.filter.metric) - 1 : 0;
  o.test.stop_after = 20;
  if (Status st = ParseStatistic(statistic, &o.test); !st.ok()) {
    return ErrorResponse(st.WithContext("statistic"));
  }
  q.filter.metric.reset();
  ModuleModel before, after;
  if (Status d = DiffModels(store_, q, *sides, &before, &after); !d.ok()) return ErrorResponse(d);
  const ModuleDiff d = DiffModules(before, after, o);
  return HttpResponse{200,
                      "application/json",
                      ModuleDiffJson(d, q.filter.module, sides->before, sides->after,
                                     ModelMetricName(o.metric), statistic, o, /*all=*/true),
                      {}};
}

}  // namespace fieldprof::aggregator
