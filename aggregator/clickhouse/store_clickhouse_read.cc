// The ClickHouse store (store_clickhouse_impl.h): the queries.
#include "aggregator/clickhouse/store_clickhouse_impl.h"

namespace fieldprof::aggregator::ch {

Status ClickHouseStore::ReadSums(int32_t first, int32_t last, const std::string& where,
                                 const std::function<bool(ApiAggregate&&)>& visit) {
  if (closed_) return Unavailable("the store is closed");
  FP_ASSIGN_OR_RETURN(Pointers p, ReadPointers());
  const int32_t a = first == kUnboundedFirst ? 0 : std::max(first, 0);
  const int32_t b = last == kUnboundedLast ? kLastChDay : std::min(last, kLastChDay);
  if (a > b) return Status::Ok();
  const int32_t R = p.rolled_day;
  std::vector<std::string> parts;
  // Whole months inside [a, min(b, R)] that are folded.
  int32_t covered_first = 1, covered_last = 0;
  if (p.rolled_month >= 0 && R >= a) {
    int32_t m_lo = MonthOfDay(a);
    if (FirstDayOfMonth(m_lo) < a) ++m_lo;
    int32_t m_hi = std::min(p.rolled_month, MonthOfDay(std::min(b, R)));
    if (LastDayOfMonth(m_hi) > std::min(b, R)) --m_hi;
    if (m_lo <= m_hi) {
      parts.push_back(ChDedupRowsSql(
          tables_.All("fp_months"), std::string(kChKeyColumns) + ", month",
          And("month BETWEEN " + std::to_string(m_lo) + " AND " + std::to_string(m_hi), where)));
      covered_first = FirstDayOfMonth(m_lo);
      covered_last = LastDayOfMonth(m_hi);
    }
  }
  // Folded days outside those months.
  if (R >= a) {
    std::string cond = "day BETWEEN " + DateSql(a) + " AND " + DateSql(std::min(b, R));
    if (covered_first <= covered_last) {
      cond +=
          " AND NOT (day BETWEEN " + DateSql(covered_first) + " AND " + DateSql(covered_last) + ")";
    }
    parts.push_back(ChDedupRowsSql(tables_.All("fp_days"), std::string(kChKeyColumns) + ", day",
                                   And(cond, where)));
  }
  // Raw rows after the rolled day: each batch once, at the first day it
  // was stored (the day before is read too, for a retry that crossed
  // midnight; its partition is kept until the next day is folded).
  const int32_t lo = std::max(a, R + 1);
  if (lo <= b) parts.push_back(RawSumsSql(lo, b, where));
  if (parts.empty()) return Status::Ok();
  std::string all;
  for (const std::string& part : parts) all += (all.empty() ? "" : " UNION ALL ") + part;
  // Through replicas that are not behind, where a shard has one.
  return StreamSums(ChOrderedRowsSql(all), visit, /*caught_up=*/true);
}

Status ClickHouseStore::ForEachApi(const ApiFilter& filter,
                                   const std::function<bool(ApiAggregate&&)>& visit) {
  return ForEachApiInRange(filter, kUnboundedFirst, kUnboundedLast, visit);
}

Status ClickHouseStore::ForEachApiInRange(const ApiFilter& filter, int32_t first_day,
                                          int32_t last_day,
                                          const std::function<bool(ApiAggregate&&)>& visit) {
  return ReadSums(first_day, last_day, KeyWhere(filter), [&](ApiAggregate&& a) {
    if (!filter.Matches(a.key)) return true;
    return visit(std::move(a));
  });
}

StatusOr<std::vector<ApiAggregate>> ClickHouseStore::ListApis(const ApiFilter& filter,
                                                              size_t limit) {
  std::vector<ApiAggregate> out;
  Status s = ForEachApi(filter, [&](ApiAggregate&& a) {
    if (out.size() == limit) return false;
    out.push_back(std::move(a));
    return true;
  });
  if (!s.ok()) return s;
  return out;
}

StatusOr<ApiAggregate> ClickHouseStore::QueryRange(const ApiKey& key, int32_t first_day,
                                                   int32_t last_day) {
  ApiFilter f;
  f.module = key.module;
  f.symbol_prefix = key.symbol;
  f.symbol_exact = true;
  f.module_version = key.module_version;
  f.metric = key.metric;
  f.os = key.platform.os;
  f.arch = key.platform.arch;
  f.cpu_vendor = key.platform.cpu_vendor;
  ApiAggregate found;
  found.key = key;
  Status s = ReadSums(first_day, last_day,
                      And(KeyWhere(f), "cpu_family = " + std::to_string(key.platform.cpu_family)),
                      [&](ApiAggregate&& a) {
                        if (a.key == key) found = std::move(a);
                        return true;
                      });
  if (!s.ok()) return s;
  return found;
}

}  // namespace fieldprof::aggregator::ch
