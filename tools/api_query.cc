#include "tools/api_query.h"

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

namespace fieldprof::tools {
namespace {}  // namespace

std::string SeriesQuery(const ApiKey& key) {
  return "module=" + UrlEncode(key.module) + "&symbol=" + UrlEncode(key.symbol) +
         "&version=" + UrlEncode(key.module_version) +
         "&metric=" + std::string(MetricName(key.metric)) +
         "&os=" + std::string(OsName(key.platform.os)) +
         "&arch=" + std::string(ArchName(key.platform.arch)) +
         "&vendor=" + std::string(CpuVendorName(key.platform.cpu_vendor)) +
         "&family=" + std::to_string(key.platform.cpu_family);
}

StatusOr<RemoteSeries> FetchSeries(HttpsClient& client, const ApiKey& key) {
  StatusOr<HttpReply> r = client.Get("/v1/api?" + SeriesQuery(key));
  if (!r.ok()) return r.status();
  RemoteSeries out;
  if (r->status == 404) return out;
  if (r->status != 200) {
    return Internal("GET /v1/api answered " + std::to_string(r->status) + ": " + r->body);
  }
  try {
    boost::property_tree::ptree pt;
    std::istringstream in(r->body);
    boost::property_tree::read_json(in, pt);
    out.runs = pt.get<uint64_t>("runs");
    out.count = pt.get<uint64_t>("histogram.count");
    out.zero_count = pt.get<uint64_t>("histogram.zero_count");
    if (!ParseUint128(pt.get<std::string>("histogram.sum"), &out.sum)) {
      return Internal("bad histogram.sum from /v1/api");
    }
    for (const auto& [_, b] : pt.get_child("histogram.buckets")) {
      out.bucket_counts[b.get<int>("index")] = b.get<uint64_t>("count");
    }
  } catch (const std::exception& e) {
    return Internal(std::string("bad JSON from /v1/api: ") + e.what());
  }
  return out;
}

StatusOr<std::map<std::string, RemoteSeries>> FetchModuleSeries(HttpsClient& client,
                                                                const std::string& module) {
  StatusOr<HttpReply> r = client.Get("/v1/module?module=" + UrlEncode(module));
  if (!r.ok()) return r.status();
  if (r->status == 401) return NotFound("module " + module + " needs a vendor token");
  if (r->status != 200) {
    return Internal("GET /v1/module answered " + std::to_string(r->status) + ": " + r->body);
  }
  std::map<std::string, RemoteSeries> out;
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
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
      RemoteSeries series;
      const nlohmann::json& h = s.at("histogram");
      series.runs = s.at("runs").get<uint64_t>();
      series.count = h.at("count").get<uint64_t>();
      series.zero_count = h.at("zero_count").get<uint64_t>();
      if (!ParseUint128(h.at("sum").get<std::string>(), &series.sum)) {
        return Internal("bad histogram.sum from /v1/module");
      }
      for (const nlohmann::json& b : h.at("buckets")) {
        series.bucket_counts[b.at("index").get<int>()] = b.at("count").get<uint64_t>();
      }
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
