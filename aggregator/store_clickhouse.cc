#include "aggregator/store_clickhouse.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "aggregator/clickhouse.h"
#include "aggregator/time_tree.h"
#include "common/wire.h"

namespace fieldprof::aggregator {
namespace {

// The SQL conditions of a filter on the raw rows' columns.
std::string Where(const ApiFilter& f) {
  std::string w;
  auto add = [&w](const std::string& c) { w += (w.empty() ? "" : " AND ") + c; };
  if (!f.module.empty()) add("module = " + SqlString(f.module));
  if (!f.symbol_prefix.empty()) {
    add(f.symbol_exact ? "symbol = " + SqlString(f.symbol_prefix)
                       : "startsWith(symbol, " + SqlString(f.symbol_prefix) + ")");
  }
  if (!f.module_version.empty()) add("module_version = " + SqlString(f.module_version));
  if (f.metric) add("metric = " + std::to_string(static_cast<int>(*f.metric)));
  if (f.os) add("os = " + std::to_string(static_cast<int>(*f.os)));
  if (f.arch) add("arch = " + std::to_string(static_cast<int>(*f.arch)));
  if (f.cpu_vendor) add("cpu_vendor = " + std::to_string(static_cast<int>(*f.cpu_vendor)));
  return w;
}

int32_t FirstDay(int32_t d) { return d == kUnboundedFirst ? 0 : std::max(d, 0); }
int32_t LastDay(int32_t d) { return d == kUnboundedLast ? 4000000 : d; }

class ClickHouseStore : public Store {
 public:
  ClickHouseStore(const ClickHouseStoreOptions& o, HttpsClientOptions http) : o_(o), http_(http) {}

  Status Init() {
    std::lock_guard<std::mutex> lock(mu_);
    ClickHouseClient ch(http_);
    FP_RETURN_IF_ERROR(ch.Execute(RawRowsTableSql(o_.rows_table)));
    return ch.Execute("CREATE TABLE IF NOT EXISTS " + o_.ids_table +
                      " (batch_id FixedString(16), day UInt32) ENGINE = ReplacingMergeTree"
                      " ORDER BY batch_id");
  }

  StatusOr<ApplyResult> ApplyBatch(const BatchView& batch, std::string_view, int32_t day) override {
    if (closed_) return Unavailable("the store is closed");
    ClickHouseClient ch(http_);
    StatusOr<std::string> seen =
        ch.Query("SELECT count() FROM " + o_.ids_table + " WHERE batch_id = unhex('" +
                 HexEncode(batch.batch_id()) + "') FORMAT TSV");
    if (!seen.ok()) return seen.status();
    if (std::strtoull(seen->c_str(), nullptr, 10) > 0) return ApplyResult{true, 0};
    FP_RETURN_IF_ERROR(ch.InsertRowBinary(o_.rows_table, BatchRows(batch, day)));
    std::string id_row(16, '\0');
    std::copy_n(batch.batch_id().data(), std::min<size_t>(16, batch.batch_id().size()),
                id_row.begin());
    const uint32_t d = static_cast<uint32_t>(day);
    id_row.append(reinterpret_cast<const char*>(&d), 4);
    FP_RETURN_IF_ERROR(ch.InsertRowBinary(o_.ids_table, id_row));
    return ApplyResult{false, static_cast<size_t>(batch.records_size())};
  }

  uint64_t pending_batches() override { return 0; }  // visible once acknowledged
  Status WaitApplied(std::chrono::milliseconds) override { return Status::Ok(); }

  Status ForEachApi(const ApiFilter& filter,
                    const std::function<bool(ApiAggregate&&)>& visit) override {
    if (closed_) return Unavailable("the store is closed");
    ClickHouseClient ch(http_);
    StatusOr<std::vector<ApiAggregate>> all =
        ReadSums(ch, o_.rows_table, 0, LastDay(kUnboundedLast), Where(filter));
    if (!all.ok()) return all.status();
    for (ApiAggregate& a : *all) {
      if (!filter.Matches(a.key)) continue;
      if (!visit(std::move(a))) break;
    }
    return Status::Ok();
  }

  StatusOr<std::vector<ApiAggregate>> ListApis(const ApiFilter& filter, size_t limit) override {
    std::vector<ApiAggregate> out;
    Status s = ForEachApi(filter, [&](ApiAggregate&& a) {
      if (out.size() == limit) return false;
      out.push_back(std::move(a));
      return true;
    });
    if (!s.ok()) return s;
    return out;
  }

  StatusOr<ApiAggregate> QueryRange(const ApiKey& key, int32_t first_day,
                                    int32_t last_day) override {
    if (closed_) return Unavailable("the store is closed");
    ApiFilter f;
    f.module = key.module;
    f.symbol_prefix = key.symbol;
    f.symbol_exact = true;
    f.module_version = key.module_version;
    f.metric = key.metric;
    f.os = key.platform.os;
    f.arch = key.platform.arch;
    f.cpu_vendor = key.platform.cpu_vendor;
    ClickHouseClient ch(http_);
    StatusOr<std::vector<ApiAggregate>> r =
        ReadSums(ch, o_.rows_table, FirstDay(first_day), LastDay(last_day),
                 Where(f) + " AND cpu_family = " + std::to_string(key.platform.cpu_family));
    if (!r.ok()) return r.status();
    for (ApiAggregate& a : *r) {
      if (a.key == key) return std::move(a);
    }
    ApiAggregate empty;
    empty.key = key;
    return empty;
  }

  Status Health() override {
    if (closed_) return Unavailable("the store is closed");
    ClickHouseClient ch(http_);
    Status s = ch.Execute("SELECT 1");
    return s.ok() ? s : Unavailable("ClickHouse does not answer: " + s.message());
  }

  void AppendMetrics(std::string* out) override {
    *out += "# TYPE fieldprof_store_clickhouse gauge\nfieldprof_store_clickhouse 1\n";
  }

  Status Close() override {
    closed_ = true;
    return Status::Ok();
  }

 private:
  ClickHouseStoreOptions o_;
  HttpsClientOptions http_;
  std::mutex mu_;
  std::atomic<bool> closed_{false};
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenClickHouseStore(const ClickHouseStoreOptions& options) {
  // http://HOST:PORT
  std::string rest = options.url;
  if (rest.rfind("http://", 0) != 0) {
    return InvalidArgument("--clickhouse_url must be http://HOST:PORT, got '" + options.url + "'");
  }
  rest = rest.substr(7);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  HttpsClientOptions http;
  http.tls = false;
  http.host = colon == std::string::npos ? rest : rest.substr(0, colon);
  const long port =
      colon == std::string::npos ? 8123 : std::strtol(rest.c_str() + colon + 1, nullptr, 10);
  if (http.host.empty() || port <= 0 || port > 65535) {
    return InvalidArgument("--clickhouse_url must be http://HOST:PORT, got '" + options.url + "'");
  }
  http.port = static_cast<uint16_t>(port);
  auto store = std::make_unique<ClickHouseStore>(options, http);
  FP_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace fieldprof::aggregator
