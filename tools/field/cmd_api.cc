// fieldprof api: one API's field cost from the aggregator (GET /v1/api).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/wire/api_key.h"
#include "tools/commands.h"
#include "tools/shared/client_flags.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"

namespace fieldprof::tools {
namespace {

struct ApiOptions {
  ClientFlags client;
  std::string metric_name = "wall_time_ns", from, to, module, symbol;
  bool json = false;
  wire::Metric metric = wire::METRIC_WALL_TIME_NS;
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseApiOptions(int argc, char** argv, ApiOptions* o) {
  OptionTable t("fieldprof api",
                "Shows one API's field cost: statistics over every version and platform that\n"
                "matches, and its log2 histogram.\n\n"
                "  fieldprof api [options] MODULE SYMBOL     e.g. libz.so.1 deflate");
  o->client.Register(t);
  t.AddString("metric", &o->metric_name, "which metric (see fieldprof top --help)");
  t.AddString("from", &o->from, "first day YYYY-MM-DD (default: all time)");
  t.AddString("to", &o->to, "last day YYYY-MM-DD");
  t.AddBool("json", &o->json, "print the aggregator's JSON as is");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && t.positional().size() != 2) s = InvalidArgument("expected MODULE SYMBOL");
  StatusOr<wire::Metric> m = s.ok() ? ParseMetric(o->metric_name) : StatusOr<wire::Metric>(s);
  if (!m.ok()) return UsageError(t, m.status());
  o->metric = *m;
  o->module = t.positional()[0];
  o->symbol = t.positional()[1];
  return std::nullopt;
}

// The answer: statistics, then the histogram as bars.
void PrintApi(const nlohmann::json& a, const ApiOptions& o) {
  const uint64_t res = a.value("resolution_ns", uint64_t{0});
  const nlohmann::json& st = a.at("stats");
  auto f = [&](const char* k) { return FormatMetricValue(o.metric, st.value(k, 0.0), res); };
  std::printf("%s %s  (%s, %s series, %s runs, %s machines)\n", o.module.c_str(), o.symbol.c_str(),
              o.metric_name.c_str(), a.at("series").dump().c_str(), a.at("runs").dump().c_str(),
              a.value("machines", nlohmann::json(0)).dump().c_str());
  if (a.value("suspect", false)) {
    std::printf("  SUSPECT: %s; these figures may be poisoned\n",
                a.value("suspect_reason", std::string()).c_str());
  }
  std::printf("  calls %s   mean %s +- %s   min %s   max %s\n", st.at("count").dump().c_str(),
              f("mean").c_str(), FormatMetricValue(o.metric, st.value("stddev", 0.0)).c_str(),
              f("min").c_str(), f("max").c_str());
  std::printf("  p50 %s   p90 %s   p99 %s\n\n", f("p50").c_str(), f("p90").c_str(),
              f("p99").c_str());
  const nlohmann::json& h = a.at("histogram");
  double top = 1;
  for (const nlohmann::json& b : h.at("buckets")) top = std::max(top, b.at("count").get<double>());
  const double zeros = h.value("zero_count", 0.0);
  if (zeros > 0) std::printf("  %21s %10.0f\n", ZeroBucketLabel(o.metric, res).c_str(), zeros);
  for (const nlohmann::json& b : h.at("buckets")) {
    const double n = b.at("count").get<double>();
    const int width = static_cast<int>(40 * n / top + 0.5);
    const std::string range = FormatMetricValue(o.metric, b.at("low").get<double>()) + " .. ";
    std::printf("  %21s %10.0f %s\n", range.c_str(), n,
                std::string(std::max(width, 1), '#').c_str());
  }
}

}  // namespace

int CmdApi(int argc, char** argv) {
  ApiOptions o;
  if (const ExitCode done = ParseApiOptions(argc, argv, &o)) return *done;
  std::string target = "/v1/api?module=" + UrlEncode(o.module) + "&symbol=" + UrlEncode(o.symbol) +
                       "&metric=" + o.metric_name;
  if (!o.from.empty()) target += "&from=" + UrlEncode(o.from);
  if (!o.to.empty()) target += "&to=" + UrlEncode(o.to);
  HttpsClient c(o.client.Resolve());
  int http_status = 0;
  std::string raw;
  StatusOr<nlohmann::json> got = GetJson(c, target, &http_status, &raw);
  if (http_status == 404) {
    std::cerr << "fieldprof api: no " << o.metric_name << " data for " << o.module << " "
              << o.symbol << " yet (try fieldprof top --module " << o.module << ")\n";
    return 1;
  }
  if (o.json && http_status == 200) {
    std::cout << raw;
    return 0;
  }
  if (!got.ok()) {
    std::cerr << "fieldprof api: " << got.status().message() << "\n";
    return 1;
  }
  try {
    PrintApi(*got, o);
  } catch (const std::exception& e) {
    std::cerr << "fieldprof api: the aggregator's answer does not read: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace fieldprof::tools
