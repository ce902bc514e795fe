#include "tools/loadgen/api_query.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace fieldprof::tools {

std::string SeriesQuery(const ApiKey& key) {
  return "module=" + UrlEncode(key.module) + "&symbol=" + UrlEncode(key.symbol) +
         "&version=" + UrlEncode(key.module_version) +
         "&metric=" + std::string(MetricName(key.metric)) +
         "&os=" + std::string(OsName(key.platform.os)) +
         "&arch=" + std::string(ArchName(key.platform.arch)) +
         "&vendor=" + std::string(CpuVendorName(key.platform.cpu_vendor)) +
         "&family=" + std::to_string(key.platform.cpu_family);
}

namespace {

// A series' runs and histogram as /v1/api and /v1/module answer them (the
// object with "runs" and "histogram"). Throws nlohmann's errors on a
// missing or mistyped field.
StatusOr<RemoteSeries> SeriesFromJson(const nlohmann::json& s, const std::string& endpoint) {
  RemoteSeries out;
  const nlohmann::json& h = s.at("histogram");
  out.runs = s.at("runs").get<uint64_t>();
  out.count = h.at("count").get<uint64_t>();
  out.zero_count = h.at("zero_count").get<uint64_t>();
  if (!ParseUint128(h.at("sum").get<std::string>(), &out.sum)) {
    return Internal("bad histogram.sum from " + endpoint);
  }
  for (const nlohmann::json& b : h.at("buckets")) {
    out.bucket_counts[b.at("index").get<int>()] = b.at("count").get<uint64_t>();
  }
  return out;
}

}  // namespace

StatusOr<RemoteSeries> FetchSeries(HttpsClient& client, const ApiKey& key) {
  FP_ASSIGN_OR_RETURN(HttpReply r, client.Get("/v1/api?" + SeriesQuery(key)));
  if (r.status == 404) return RemoteSeries{};
  if (r.status != 200) {
    return Internal("GET /v1/api answered " + std::to_string(r.status) + ": " + r.body);
  }
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded()) return Internal("bad JSON from /v1/api");
  try {
    return SeriesFromJson(j, "/v1/api");
  } catch (const std::exception& e) {
    return Internal(std::string("bad JSON from /v1/api: ") + e.what());
  }
}

StatusOr<std::map<std::string, RemoteSeries>> FetchModuleSeries(HttpsClient& client,
                                                                const std::string& module) {
  FP_ASSIGN_OR_RETURN(HttpReply r, client.Get("/v1/module?module=" + UrlEncode(module)));
  if (r.status == 401) return NotFound("module " + module + " needs a vendor token");
  if (r.status != 200) {
    return Internal("GET /v1/module answered " + std::to_string(r.status) + ": " + r.body);
  }
  std::map<std::string, RemoteSeries> out;
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded()) return Internal("bad JSON from /v1/module");
  try {
    if (j.at("truncated").get<bool>()) return Internal("/v1/module truncated " + module);
    for (const nlohmann::json& s : j.at("series")) {
      ApiKey k;
      k.module = s.at("module").get<std::string>();
      k.module_version = s.at("module_version").get<std::string>();
      k.symbol = s.at("symbol").get<std::string>();
      const nlohmann::json& p = s.at("platform");
      StatusOr<wire::Metric> metric = ParseMetric(s.at("metric").get<std::string>());
      StatusOr<wire::Os> os = ParseOs(p.at("os").get<std::string>());
      StatusOr<wire::Arch> arch = ParseArch(p.at("arch").get<std::string>());
      StatusOr<wire::CpuVendor> vendor = ParseCpuVendor(p.at("cpu_vendor").get<std::string>());
      if (!metric.ok() || !os.ok() || !arch.ok() || !vendor.ok()) {
        return Internal("a series of " + module + " with unknown names");
      }
      k.metric = *metric;
      k.platform = {*os, *arch, *vendor, p.at("cpu_family").get<uint8_t>()};
      FP_ASSIGN_OR_RETURN(RemoteSeries series, SeriesFromJson(s, "/v1/module"));
      out[EncodeApiKey(k)] = std::move(series);
    }
  } catch (const std::exception& e) {
    return Internal(std::string("bad JSON from /v1/module: ") + e.what());
  }
  return out;
}

std::string CompareDelta(const RemoteSeries& before, const RemoteSeries& after,
                         const Histogram& sent) {
  std::ostringstream diff;
  if (after.count - before.count != sent.count()) {
    diff << "count delta " << after.count - before.count << " != sent " << sent.count() << "; ";
  }
  if (after.sum - before.sum != sent.sum()) {
    diff << "sum delta " << Uint128ToString(after.sum - before.sum) << " != sent "
         << Uint128ToString(sent.sum()) << "; ";
  }
  if (after.zero_count - before.zero_count != sent.zero_count()) diff << "zero_count differs; ";
  for (int i = 0; i < kNumBuckets; ++i) {
    auto get = [i](const RemoteSeries& s) {
      auto it = s.bucket_counts.find(i);
      return it == s.bucket_counts.end() ? uint64_t{0} : it->second;
    };
    if (get(after) - get(before) != sent.bucket(i).count) {
      diff << "bucket " << i << " count delta " << get(after) - get(before) << " != sent "
           << sent.bucket(i).count << "; ";
    }
  }
  return diff.str();
}

}  // namespace fieldprof::tools
