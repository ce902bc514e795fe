// fieldprof top: the most called APIs an aggregator holds, with their costs.
#include <boost/property_tree/ptree.hpp>
#include <cstdio>
#include <iostream>

#include "common/api_key.h"
#include "tools/cli/client_flags.h"
#include "tools/commands.h"
#include "tools/cli/format.h"

namespace fieldprof::tools {

int CmdTop(int argc, char** argv) {
  ClientFlags client;
  int64_t limit = 15;
  std::string metric = "wall_time_ns", module, order = "calls";
  bool json = false;
  OptionTable t("fieldprof top",
                "Lists the most called APIs the aggregator holds (all-time sums), with calls,\n"
                "runs and cost percentiles, most called first (or costliest per call first).");
  client.Register(t);
  t.AddInt("limit", &limit, "how many APIs", 1, 100000);
  t.AddString("metric", &metric,
              "wall_time_ns, alloc_bytes_inclusive, alloc_bytes_exclusive, alloc_count, "
              "file_io_bytes or socket_io_bytes");
  t.AddString("module", &module, "only this module (soname)");
  t.AddString("order", &order, "calls (most called first) or mean (highest mean per call first)");
  t.AddBool("json", &json, "print the aggregator's JSON as is");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  StatusOr<wire::Metric> m = s.ok() ? ParseMetric(metric) : StatusOr<wire::Metric>(s);
  if (!m.ok()) {
    std::cerr << "fieldprof top: " << m.status().message() << "\n";
    return 2;
  }
  if (order != "calls" && order != "mean") {
    std::cerr << "fieldprof top: --order must be calls or mean\n";
    return 2;
  }
  HttpsClient c(client.Resolve());
  std::string target =
      "/v1/apis?order=" + order + "&limit=" + std::to_string(limit) + "&metric=" + metric;
  if (!module.empty()) target += "&module=" + UrlEncode(module);
  int http_status = 0;
  std::string raw;
  StatusOr<boost::property_tree::ptree> got = GetJson(c, target, &http_status, &raw);
  if (json && http_status == 200) {
    std::cout << raw;
    return 0;
  }
  if (!got.ok()) {
    std::cerr << "fieldprof top: " << got.status().message() << "\n";
    return 1;
  }
  const boost::property_tree::ptree& pt = *got;
  std::printf("%-4s %10s %7s %10s %10s %10s %10s  %-18s %s\n", "#", "calls", "runs", "mean", "p50",
              "p90", "p99", "module", "symbol (platform)");
  int rank = 0;
  for (const auto& [_, a] : pt.get_child("apis")) {
    auto v = [&](const char* k) { return a.get<double>(k, 0); };
    const uint64_t res = a.get<uint64_t>("resolution_ns", 0);
    auto f = [&](const char* k) { return FormatMetricValue(*m, v(k), res); };
    std::string platform = a.get<std::string>("platform.arch") + "/" +
                           a.get<std::string>("platform.cpu_vendor") + "/" +
                           a.get<std::string>("platform.cpu_family");
    std::printf("%-4d %10.0f %7.0f %10s %10s %10s %10s  %-18s %s (%s)\n", ++rank, v("calls"),
                v("runs"), f("mean").c_str(), f("p50").c_str(), f("p90").c_str(), f("p99").c_str(),
                a.get<std::string>("module").c_str(), a.get<std::string>("symbol").c_str(),
                platform.c_str());
  }
  if (rank == 0) std::printf("(no %s data yet)\n", metric.c_str());
  return 0;
}

}  // namespace fieldprof::tools
