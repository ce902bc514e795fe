// fieldprof check at scale:
//   check_benchmark [APIS] [SLOWED_EVERY]
// writes a field snapshot of APIS APIs (20,000 log-normal calls each, from
// 500 runs) and 5 run records of ~300 calls of each, one API in
// SLOWED_EVERY 30% slower; then times `fieldprof check` on them (the real
// binary, posix_spawn), with the sequential stop (default) and without it,
// and prints the APIs flagged and the resamples drawn.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/snapshot/snapshot_cache.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"

using namespace fieldprof;
using Clock = std::chrono::steady_clock;

namespace {

Histogram Calls(std::mt19937_64& rng, int n, double mu, double scale = 1) {
  std::lognormal_distribution<double> d(mu, 0.6);
  Histogram h;
  for (int i = 0; i < n; ++i) h.Record(static_cast<uint64_t>(scale * d(rng)));
  return h;
}

wire::Record Rec(uint64_t api, const Histogram& h, uint64_t runs) {
  wire::Record r;
  wire::ApiKey* k = r.mutable_key();
  k->set_module("libmod" + std::to_string(api % 37) + ".so.1");
  k->set_module_version("1.0");
  k->set_symbol("fn_" + std::to_string(api));
  k->set_metric(wire::METRIC_WALL_TIME_NS);
  k->mutable_platform()->set_os(wire::OS_LINUX);
  k->mutable_platform()->set_arch(wire::ARCH_X86_64);
  HistogramToWire(h, r.mutable_histogram());
  r.set_runs(runs);
  return r;
}

// Runs the command with its stdout into `out_path`: the wall time, in ms.
double RunMs(const std::vector<std::string>& args, const std::string& out_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const auto t0 = Clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) std::exit(1);
  int status = 0;
  waitpid(pid, &status, 0);
  posix_spawn_file_actions_destroy(&fa);
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int apis = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int every = argc > 2 ? std::atoi(argv[2]) : 50;
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("fieldprof-checkbench-" + std::to_string(getpid())))
                              .string();
  std::filesystem::create_directories(dir + "/spool");
  std::mt19937_64 rng(1);
  // The field.
  SnapshotCache cache(dir + "/cache");
  constexpr uint32_t kFragments = 16;
  std::vector<wire::Fragment> frags(kFragments);
  for (uint32_t i = 0; i < kFragments; ++i) {
    frags[i].set_schema_version(1);
    frags[i].set_index(i);
    frags[i].set_fragment_count(kFragments);
  }
  for (int a = 0; a < apis; ++a) {
    *frags[a % kFragments].add_records() = Rec(a, Calls(rng, 20000, 6 + (a % 9) * 0.4), 500);
  }
  wire::Manifest m;
  m.set_schema_version(1);
  m.set_snapshot_version(1);
  m.set_fragment_schema_version(1);
  m.set_fragment_count(kFragments);
  wire::SignedManifest sm;
  sm.set_manifest(m.SerializeAsString());
  if (!cache.StoreManifest(sm.SerializeAsString(), m, "e").ok()) return 1;
  for (uint32_t i = 0; i < kFragments; ++i) {
    if (!cache.StoreFragment(i, i + 1, frags[i].SerializeAsString()).ok()) return 1;
  }
  // The user's runs.
  for (int run = 0; run < 5; ++run) {
    wire::RunRecord r;
    r.set_schema_version(1);
    r.mutable_platform()->set_os(wire::OS_LINUX);
    r.mutable_platform()->set_arch(wire::ARCH_X86_64);
    for (int a = 0; a < apis; ++a) {
      *r.add_records() = Rec(a, Calls(rng, 60, 6 + (a % 9) * 0.4, a % every == 0 ? 1.3 : 1.0), 1);
    }
    std::ofstream(dir + "/spool/run-" + std::to_string(run) + ".fpr", std::ios::binary)
        << r.SerializeAsString();
  }
  const std::vector<std::string> base = {FIELDPROF_CLI_BIN, "check",   "--cache",
                                         dir + "/cache",    "--spool", dir + "/spool",
                                         "--json",          "--all"};
  // The symbol index is built by the first reader: once, not timed.
  RunMs(base, dir + "/warm.json");
  std::printf(
      "fieldprof check: %d APIs (5 runs of 60 calls each against 20,000 field calls), "
      "1 in %d slowed by 30%%\n",
      apis, every);
  for (const char* stop : {"20", "0"}) {
    std::vector<std::string> args = base;
    args.push_back("--stop_after");
    args.push_back(stop);
    const double ms = RunMs(args, dir + "/out.json");
    std::ifstream in(dir + "/out.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    long resamples = 0;
    int flagged = 0, right = 0;
    for (const auto& f : j["findings"]) {
      resamples += f["resamples"].get<long>();
      if (f["evidence"].get<bool>()) {
        ++flagged;
        right += std::stoi(f["symbol"].get<std::string>().substr(3)) % every == 0;
      }
    }
    std::printf(
        "  --stop_after %-3s %7.0f ms; %ld resamples in all (%.0f per API, at most 9,999); "
        "%d flagged, %d of them slowed (%d slowed in all)\n",
        stop, ms, resamples, static_cast<double>(resamples) / apis, flagged, right,
        (apis + every - 1) / every);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
