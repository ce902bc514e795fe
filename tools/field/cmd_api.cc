// fieldprof api: one API's field cost from the aggregator.
#include <algorithm>
#include <boost/property_tree/ptree.hpp>
#include <cstdio>
#include <iostream>

#include "common/api_key.h"
#include "tools/cli/client_flags.h"
#include "tools/commands.h"
#include "tools/cli/format.h"

namespace fieldprof::tools {

int CmdApi(int argc, char** argv) {
  ClientFlags client;
  std::string metric = "wall_time_ns", from, to;
  bool json = false;
  OptionTable t("fieldprof api",
                "Shows one API's field cost: statistics over every version and platform that\n"
                "matches, and its log2 histogram.\n\n"
                "  fieldprof api [options] MODULE SYMBOL     e.g. libz.so.1 deflate");
  client.Register(t);
  t.AddString("metric", &metric, "which metric (see fieldprof top --help)");
  t.AddString("from", &from, "first day YYYY-MM-DD (default: all time)");
  t.AddString("to", &to, "last day YYYY-MM-DD");
  t.AddBool("json", &json, "print the aggregator's JSON as is");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  if (s.ok() && t.positional().size() != 2) s = InvalidArgument("expected MODULE SYMBOL");
  StatusOr<wire::Metric> m = s.ok() ? ParseMetric(metric) : StatusOr<wire::Metric>(s);
  if (!m.ok()) {
    std::cerr << "fieldprof api: " << m.status().message() << " (see --help)\n";
    return 2;
  }
  std::string target = "/v1/api?module=" + UrlEncode(t.positional()[0]) +
                       "&symbol=" + UrlEncode(t.positional()[1]) + "&metric=" + metric;
  if (!from.empty()) target += "&from=" + UrlEncode(from);
  if (!to.empty()) target += "&to=" + UrlEncode(to);
  HttpsClient c(client.Resolve());
  int http_status = 0;
  std::string raw;
  StatusOr<boost::property_tree::ptree> got = GetJson(c, target, &http_status, &raw);
  if (http_status == 404) {
    std::cerr << "fieldprof api: no " << metric << " data for " << t.positional()[0] << " "
              << t.positional()[1] << " yet (try fieldprof top --module " << t.positional()[0]
              << ")\n";
    return 1;
  }
  if (json && http_status == 200) {
    std::cout << raw;
    return 0;
  }
  if (!got.ok()) {
    std::cerr << "fieldprof api: " << got.status().message() << "\n";
    return 1;
  }
  const boost::property_tree::ptree& pt = *got;
  const uint64_t res = pt.get<uint64_t>("resolution_ns", 0);
  auto f = [&](const char* k) { return FormatMetricValue(*m, pt.get<double>(k, 0), res); };
  std::printf("%s %s  (%s, %s series, %s runs)\n", t.positional()[0].c_str(),
              t.positional()[1].c_str(), metric.c_str(), pt.get<std::string>("series").c_str(),
              pt.get<std::string>("runs").c_str());
  std::printf("  calls %s   mean %s +- %s   min %s   max %s\n",
              pt.get<std::string>("stats.count").c_str(), f("stats.mean").c_str(),
              FormatMetricValue(*m, pt.get<double>("stats.stddev", 0)).c_str(),
              f("stats.min").c_str(), f("stats.max").c_str());
  std::printf("  p50 %s   p90 %s   p99 %s\n\n", f("stats.p50").c_str(), f("stats.p90").c_str(),
              f("stats.p99").c_str());
  double top = 1;
  for (const auto& [_, b] : pt.get_child("histogram.buckets")) {
    top = std::max(top, b.get<double>("count"));
  }
  const double zeros = pt.get<double>("histogram.zero_count", 0);
  if (zeros > 0) std::printf("  %21s %10.0f\n", ZeroBucketLabel(*m, res).c_str(), zeros);
  for (const auto& [_, b] : pt.get_child("histogram.buckets")) {
    const double n = b.get<double>("count");
    const int width = static_cast<int>(40 * n / top + 0.5);
    std::string range = FormatMetricValue(*m, b.get<double>("low")) + " .. ";
    std::printf("  %21s %10.0f %s\n", range.c_str(), n,
                std::string(std::max(width, 1), '#').c_str());
  }
  return 0;
}

}  // namespace fieldprof::tools
