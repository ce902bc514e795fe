#include "tools/api_query.h"

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
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
