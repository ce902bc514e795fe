#include "aggregator/store/store.h"

#include "aggregator/store/calendar_tree.h"

namespace fieldprof::aggregator {

bool ApiFilter::Matches(const ApiKey& k) const {
  if (!module.empty() && k.module != module) return false;
  if (!symbol_prefix.empty()) {
    if (symbol_exact ? k.symbol != symbol_prefix : !k.symbol.starts_with(symbol_prefix)) {
      return false;
    }
  }
  if (!module_version.empty() && k.module_version != module_version) return false;
  if (metric && k.metric != *metric) return false;
  if (os && k.platform.os != *os) return false;
  if (arch && k.platform.arch != *arch) return false;
  if (cpu_vendor && k.platform.cpu_vendor != *cpu_vendor) return false;
  return true;
}

uint64_t Store::DataVersion() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count() /
                               5);
}

Status Store::ForEachApiInRange(const ApiFilter& filter, int32_t first_day, int32_t last_day,
                                const std::function<bool(ApiAggregate&&)>& visit) {
  if (first_day == kUnboundedFirst && last_day == kUnboundedLast) {
    return ForEachApi(filter, visit);
  }
  Status err = Status::Ok();
  Status s = ForEachApi(filter, [&](ApiAggregate&& a) {
    StatusOr<ApiAggregate> r = QueryRange(a.key, first_day, last_day);
    if (!r.ok()) {
      err = r.status();
      return false;
    }
    if (r->histogram.empty()) return true;
    return visit(std::move(*r));
  });
  return s.ok() ? err : s;
}

}  // namespace fieldprof::aggregator
