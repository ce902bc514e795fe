#include "aggregator/store/k_anonymous_store.h"

#include <map>
#include <set>

#include "aggregator/metrics.h"
#include "aggregator/store/calendar_tree.h"
#include "aggregator/store/stack_others.h"

namespace fieldprof::aggregator {
namespace {

bool WholeStore(const ApiFilter& f) {
  return f.module.empty() && f.symbol_prefix.empty() && f.module_version.empty() && !f.metric &&
         !f.os && !f.arch && !f.cpu_vendor;
}

}  // namespace

bool KAnonymousStore::Published(const ApiAggregate& a) const {
  return a.machines.Estimate() >= static_cast<uint64_t>(k_);
}

Status KAnonymousStore::ForEachApi(const ApiFilter& filter,
                                   const std::function<bool(ApiAggregate&&)>& visit) {
  return Walk(filter, visit, nullptr);
}

Status KAnonymousStore::Walk(const ApiFilter& filter,
                             const std::function<bool(ApiAggregate&&)>& visit,
                             std::map<std::string, std::string>* folded_into) {
  const bool whole = WholeStore(filter);
  StackOthers others(k_);
  const auto started = std::chrono::steady_clock::now();
  int64_t series_withheld = 0;
  MachineSketch machines_withheld;
  std::map<std::string, bool> modules;  // whole walks only: module -> any series published
  bool stopped = false;
  Status s = inner_->ForEachApi(filter, [&](ApiAggregate&& a) {
    const bool published = Published(a);
    if (whole) modules[a.key.module] |= published;
    if (!published) {
      ++series_withheld;
      if (whole) machines_withheld.KeepLarger(a.machines);
      if (a.key.metric == wire::METRIC_STACK_CPU_NS) others.Add(a);
      return true;
    }
    if (!visit(std::move(a))) {
      stopped = true;
      return false;
    }
    return true;
  });
  // The rare stacks, folded under the frames enough machines share
  // (stack_others.h), after the series the walk found.
  if (s.ok() && !stopped && !others.empty()) {
    for (ApiAggregate& a : others.Fold(folded_into)) {
      if (!filter.Matches(a.key)) continue;
      if (whole) modules[a.key.module] = true;
      if (!visit(std::move(a))) {
        stopped = true;
        break;
      }
    }
  }
  // A walk over every series that went to its end: what Totals answers.
  if (s.ok() && whole && !stopped) {
    WithheldTotals t;
    t.series = series_withheld;
    t.modules = 0;
    for (const auto& [module, any] : modules) t.modules += !any;
    t.machines = static_cast<int64_t>(machines_withheld.Estimate());
    t.at = std::chrono::steady_clock::now();
    t.took = t.at - started;
    std::lock_guard lock(last_mu_);
    last_ = t;
  }
  return s;
}

StatusOr<std::vector<ApiAggregate>> KAnonymousStore::ListApis(const ApiFilter& filter,
                                                              size_t limit) {
  std::vector<ApiAggregate> out;
  if (limit == 0) return out;
  FP_RETURN_IF_ERROR(ForEachApi(filter, [&](ApiAggregate&& a) {
    out.push_back(std::move(a));
    return out.size() < limit;
  }));
  return out;
}

StatusOr<WithheldTotals> KAnonymousStore::Totals(std::chrono::seconds max_age) {
  std::lock_guard walk(walk_mu_);
  {
    std::lock_guard lock(last_mu_);
    const auto age = std::chrono::steady_clock::now() - last_.at;
    if (last_.series >= 0 && age <= max_age && age <= 10 * last_.took) return last_;
  }
  FP_RETURN_IF_ERROR(ForEachApi(ApiFilter(), [](ApiAggregate&&) { return true; }));
  std::lock_guard lock(last_mu_);
  return last_;
}

StatusOr<ApiAggregate> KAnonymousStore::QueryRange(const ApiKey& key, int32_t first_day,
                                                   int32_t last_day) {
  const bool all_time = first_day == kUnboundedFirst && last_day == kUnboundedLast;
  FP_ASSIGN_OR_RETURN(ApiAggregate all, inner_->QueryRange(key, kUnboundedFirst, kUnboundedLast));
  if (!Published(all)) {
    ApiAggregate none;
    none.key = key;
    return none;  // as a series with no data
  }
  if (all_time) return all;
  return inner_->QueryRange(key, first_day, last_day);
}

Status KAnonymousStore::ForEachApiInRange(const ApiFilter& filter, int32_t first_day,
                                          int32_t last_day,
                                          const std::function<bool(ApiAggregate&&)>& visit) {
  if (first_day == kUnboundedFirst && last_day == kUnboundedLast) {
    return ForEachApi(filter, visit);
  }
  // Which series are published, and which rare stacks fold where, is an
  // all-time question; the range's sums come from the store's own range
  // walk.
  std::set<std::string> published;
  std::map<std::string, std::string> folded_into;
  FP_RETURN_IF_ERROR(Walk(
      filter,
      [&](ApiAggregate&& a) {
        published.insert(EncodeApiKey(a.key));
        return true;
      },
      &folded_into));
  if (published.empty()) return Status::Ok();
  std::map<std::string, ApiAggregate> folded;
  bool stopped = false;
  FP_RETURN_IF_ERROR(inner_->ForEachApiInRange(filter, first_day, last_day, [&](ApiAggregate&& a) {
    const std::string enc = EncodeApiKey(a.key);
    if (auto f = folded_into.find(enc); f != folded_into.end()) {
      MergeAggregate(a, &folded[f->second]);
      return true;
    }
    if (!published.contains(enc)) return true;
    if (!visit(std::move(a))) stopped = true;
    return !stopped;
  }));
  for (auto& [enc, a] : folded) {
    if (stopped) break;
    StatusOr<ApiKey> key = DecodeApiKey(enc);
    if (!key.ok()) return key.status();
    a.key = std::move(*key);
    if (!visit(std::move(a))) stopped = true;
  }
  return Status::Ok();
}

void KAnonymousStore::AppendMetrics(std::string* out) {
  inner_->AppendMetrics(out);
  WithheldTotals t;
  {
    std::lock_guard lock(last_mu_);
    t = last_;
  }
  AppendPrometheusSample(out, "fieldprof_k_anonymity", "gauge",
                         "Distinct machines a series needs before it is published.",
                         std::to_string(k_));
  AppendPrometheusSample(out, "fieldprof_series_withheld", "gauge",
                         "Series seen on fewer than k machines, so published nowhere (as of the "
                         "last walk over every series; -1: none yet).",
                         std::to_string(t.series));
  AppendPrometheusSample(out, "fieldprof_modules_withheld", "gauge",
                         "Modules none of whose series is published yet (as of the same walk).",
                         std::to_string(t.modules));
  AppendPrometheusSample(out, "fieldprof_machines_withheld", "gauge",
                         "Machines (each counted once a day it sent) that sent the withheld "
                         "series, as of the same walk.",
                         std::to_string(t.machines));
}

}  // namespace fieldprof::aggregator
