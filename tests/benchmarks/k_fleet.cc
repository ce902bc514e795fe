// What "k means k machines" costs in what gets published (docs/privacy.md,
// docs/benchmarks.md): a simulated fleet of MACHINES volunteers sends its
// series for DAYS days to a real aggregator over HTTPS, as agents send
// them: a new day key each day, a record marked first_from_machine the
// first time the machine ever sends that series. Then it counts the series
// the aggregator publishes, beside what each rule would publish from the
// same data, counted here:
//   machine-days   k distinct day keys (what aggregators counted before)
//   machines       k distinct machines (what they count now; the
//                  aggregator's own count must agree)
//   one day        k distinct machines on one day (the other design: no
//                  agent state, publishes only what is common every day)
//
// The fleet (deterministic, seed 86): a universe of SERIES series whose
// popularity falls as a Zipf law (s = 1.1); each machine has a library mix
// of its own (a persistent set of 40..400 series drawn by popularity), and
// each day sends a random half of it plus a few series drawn afresh (the
// programs it happened to run), in batches of at most 4,000 records.
//
//   k_fleet PORT CA_FILE [MACHINES] [DAYS] [K] [SERIES]
//     defaults 1000 30 5 20000
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/net/https_client.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"

namespace {

using fieldprof::HttpsClient;
using fieldprof::HttpsClientOptions;
namespace wire = fieldprof::wire;

struct Fleet {
  int machines, days, k, series;
};

// Zipf over [0, n): the rank of a draw (0 the most popular).
class Zipf {
 public:
  Zipf(int n, double s) : cdf_(static_cast<size_t>(n)) {
    double sum = 0;
    for (int i = 0; i < n; ++i) cdf_[static_cast<size_t>(i)] = sum += 1.0 / std::pow(i + 1, s);
    for (double& c : cdf_) c /= sum;
  }
  int operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<int>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

void FillRecord(int series, wire::Record* r) {
  r->mutable_key()->set_module("libsim" + std::to_string(series % 97) + ".so.1");
  r->mutable_key()->set_module_version("1.0");
  r->mutable_key()->set_symbol("api_" + std::to_string(series));
  r->mutable_key()->set_metric(wire::METRIC_WALL_TIME_NS);
  fieldprof::Histogram h;
  h.Record(1000 + static_cast<uint64_t>(series % 1000));
  fieldprof::HistogramToWire(h, r->mutable_histogram());
  r->set_runs(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: k_fleet PORT CA_FILE [MACHINES] [DAYS] [K] [SERIES]\n");
    return 2;
  }
  const Fleet f{argc > 3 ? std::atoi(argv[3]) : 1000, argc > 4 ? std::atoi(argv[4]) : 30,
                argc > 5 ? std::atoi(argv[5]) : 5, argc > 6 ? std::atoi(argv[6]) : 20000};
  HttpsClientOptions o;
  o.host = "127.0.0.1";
  o.port = static_cast<uint16_t>(std::atoi(argv[1]));
  o.ca_file = argv[2];
  HttpsClient http(o);
  std::mt19937_64 rng(86);
  const Zipf popularity(f.series, 1.1);
  // Each machine's library mix: a persistent set drawn by popularity.
  std::vector<std::vector<int>> mix(static_cast<size_t>(f.machines));
  for (auto& m : mix) {
    std::set<int> s;
    const int want = 40 + static_cast<int>(rng() % 361);
    for (int tries = 0; static_cast<int>(s.size()) < want && tries < want * 20; ++tries) {
      s.insert(popularity(rng));
    }
    m.assign(s.begin(), s.end());
  }
  // What each rule counts, per series.
  std::vector<std::unordered_set<int>> machines(static_cast<size_t>(f.series));
  std::vector<int> machine_days(static_cast<size_t>(f.series), 0);
  std::vector<int> best_day(static_cast<size_t>(f.series), 0);
  std::vector<std::unordered_set<int>> sent_by(static_cast<size_t>(f.machines));  // counted
  long batches = 0, records = 0;
  auto post = [&](wire::Batch& b) {
    if (b.records_size() == 0) return true;
    b.set_schema_version(1);
    std::string id(16, '\0');
    for (int i = 0; i < 8; ++i) id[static_cast<size_t>(i)] = static_cast<char>(batches >> (8 * i));
    id[15] = 'K';
    b.set_batch_id(id);
    b.set_created_unix_ms(1795000000000);
    b.mutable_client_platform()->set_os(wire::OS_LINUX);
    b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto r = http.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
      if (r.ok() && r->status == 200) {
        ++batches;
        records += b.records_size();
        b.clear_records();
        return true;
      }
      if (r.ok() && r->status != 503 && r->status != 429) {
        std::fprintf(stderr, "k_fleet: batch refused: %d %s\n", r->status, r->body.c_str());
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::fprintf(stderr, "k_fleet: the aggregator does not take batches\n");
    return false;
  };
  for (int day = 0; day < f.days; ++day) {
    std::vector<std::unordered_set<int>> today(static_cast<size_t>(f.series));
    for (int m = 0; m < f.machines; ++m) {
      std::set<int> sends;
      for (int s : mix[static_cast<size_t>(m)]) {
        if (rng() % 2 == 0) sends.insert(s);
      }
      for (int i = 0; i < 5; ++i) sends.insert(popularity(rng));
      wire::Batch b;
      std::string key(16, '\0');
      const uint64_t v = static_cast<uint64_t>(m) * 1000003 + static_cast<uint64_t>(day);
      for (int i = 0; i < 8; ++i) key[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
      key[15] = 'D';
      b.set_machine_key(key);
      for (int s : sends) {
        wire::Record* r = b.add_records();
        FillRecord(s, r);
        // As the agent marks it (common/spool/counted_series.h).
        if (sent_by[static_cast<size_t>(m)].insert(s).second) r->set_first_from_machine(true);
        machines[static_cast<size_t>(s)].insert(m);
        ++machine_days[static_cast<size_t>(s)];
        today[static_cast<size_t>(s)].insert(m);
        if (b.records_size() == 4000 && !post(b)) return 1;
      }
      if (!post(b)) return 1;
    }
    for (int s = 0; s < f.series; ++s) {
      best_day[static_cast<size_t>(s)] = std::max(
          best_day[static_cast<size_t>(s)], static_cast<int>(today[static_cast<size_t>(s)].size()));
    }
  }
  // The aggregator's own answer, once every batch is applied.
  for (int w = 0; w < 1200; ++w) {
    auto m = http.Get("/metrics");
    if (m.ok() && m->body.find("\nfieldprof_pending_batches 0\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto apis = http.Get("/v1/apis?limit=100000");
  if (!apis.ok() || apis->status != 200) {
    std::fprintf(stderr, "k_fleet: GET /v1/apis failed\n");
    return 1;
  }
  const nlohmann::json j = nlohmann::json::parse(apis->body);
  const long published = static_cast<long>(j["apis"].size());
  long sent = 0, by_machine_days = 0, by_machines = 0, by_one_day = 0;
  for (int s = 0; s < f.series; ++s) {
    if (machines[static_cast<size_t>(s)].empty()) continue;
    ++sent;
    by_machine_days += machine_days[static_cast<size_t>(s)] >= f.k;
    by_machines += static_cast<int>(machines[static_cast<size_t>(s)].size()) >= f.k;
    by_one_day += best_day[static_cast<size_t>(s)] >= f.k;
  }
  std::printf("fleet: %d machines, %d days, k = %d; %ld batches, %ld records\n", f.machines, f.days,
              f.k, batches, records);
  std::printf("series sent:                              %ld\n", sent);
  std::printf("published by k machine-days (before):     %ld (%.1f%%)\n", by_machine_days,
              100.0 * by_machine_days / std::max(1L, sent));
  std::printf("published by k machines (now):            %ld (%.1f%%)\n", by_machines,
              100.0 * by_machines / std::max(1L, sent));
  std::printf("published by k machines on one day:       %ld (%.1f%%)\n", by_one_day,
              100.0 * by_one_day / std::max(1L, sent));
  std::printf("published by the aggregator:              %ld\n", published);
  const long withheld = j.contains("withheld") ? j["withheld"].value("series", -1L) : -1;
  std::printf("withheld by the aggregator:               %ld\n", withheld);
  return 0;
}
