// fieldprof top: the most called APIs an aggregator holds, with their costs
// (GET /v1/apis).
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

struct TopOptions {
  ClientFlags client;
  int64_t limit = 15;
  std::string metric_name = "wall_time_ns", module, order = "calls";
  bool json = false;
  wire::Metric metric = wire::METRIC_WALL_TIME_NS;
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseTopOptions(int argc, char** argv, TopOptions* o) {
  OptionTable t("fieldprof top",
                "Lists the most called APIs the aggregator holds (all-time sums), with calls,\n"
                "runs and cost percentiles, most called first (or costliest per call first).");
  o->client.Register(t);
  t.AddInt("limit", &o->limit, "how many APIs", 1, 100000);
  t.AddString("metric", &o->metric_name,
              "wall_time_ns, alloc_bytes_inclusive, alloc_bytes_exclusive, alloc_count, "
              "file_io_bytes or socket_io_bytes");
  t.AddString("module", &o->module, "only this module (soname)");
  t.AddString("order", &o->order,
              "calls (most called first) or mean (highest mean per call first)");
  t.AddBool("json", &o->json, "print the aggregator's JSON as is");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  StatusOr<wire::Metric> m = s.ok() ? ParseMetric(o->metric_name) : StatusOr<wire::Metric>(s);
  if (!m.ok()) return UsageError(t, m.status());
  o->metric = *m;
  if (o->order != "calls" && o->order != "mean") {
    return UsageError(t, InvalidArgument("--order must be calls or mean"));
  }
  return std::nullopt;
}

// The answer as a table, most called (or dearest) first.
void PrintTop(const nlohmann::json& answer, const TopOptions& o) {
  std::printf("%-4s %10s %7s %10s %10s %10s %10s  %-18s %s\n", "#", "calls", "runs", "mean", "p50",
              "p90", "p99", "module", "symbol (platform)");
  int rank = 0;
  for (const nlohmann::json& a : answer.at("apis")) {
    const uint64_t res = a.value("resolution_ns", uint64_t{0});
    auto f = [&](const char* k) { return FormatMetricValue(o.metric, a.value(k, 0.0), res); };
    const nlohmann::json& p = a.at("platform");
    const std::string platform = p.at("arch").get<std::string>() + "/" +
                                 p.at("cpu_vendor").get<std::string>() + "/" +
                                 p.at("cpu_family").dump();
    std::printf("%-4d %10.0f %7.0f %10s %10s %10s %10s  %-18s %s (%s)\n", ++rank,
                a.value("calls", 0.0), a.value("runs", 0.0), f("mean").c_str(), f("p50").c_str(),
                f("p90").c_str(), f("p99").c_str(), a.at("module").get<std::string>().c_str(),
                a.at("symbol").get<std::string>().c_str(), platform.c_str());
  }
  // Behind k-anonymity: what is not shown yet, and why.
  std::string held;
  if (const auto w = answer.find("withheld"); w != answer.end() && w->is_object()) {
    held = WithheldText(w->value("k", int64_t{0}), w->value("series", int64_t{0}),
                        w->value("modules", int64_t{0}), w->value("machines", int64_t{0}));
  }
  if (rank == 0)
    std::printf("(no %s data %s)\n", o.metric_name.c_str(), held.empty() ? "yet" : "published yet");
  if (!held.empty()) std::printf("held back: %s\n", held.c_str());
}

}  // namespace

int CmdTop(int argc, char** argv) {
  TopOptions o;
  if (const ExitCode done = ParseTopOptions(argc, argv, &o)) return *done;
  HttpsClient c(o.client.Resolve());
  std::string target = "/v1/apis?order=" + o.order + "&limit=" + std::to_string(o.limit) +
                       "&metric=" + o.metric_name;
  if (!o.module.empty()) target += "&module=" + UrlEncode(o.module);
  int http_status = 0;
  std::string raw;
  StatusOr<nlohmann::json> got = GetJson(c, target, &http_status, &raw);
  if (o.json && http_status == 200) {
    std::cout << raw;
    return 0;
  }
  if (!got.ok()) {
    std::cerr << "fieldprof top: " << got.status().message() << "\n";
    return 1;
  }
  try {
    PrintTop(*got, o);
  } catch (const std::exception& e) {
    std::cerr << "fieldprof top: the aggregator's answer does not read: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace fieldprof::tools
