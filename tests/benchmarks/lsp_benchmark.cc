// The language server at scale:
//   lsp_benchmark SERIES [HOVERS]
// writes a snapshot cache of SERIES series in a temp dir (64 fragments, two
// metrics per API, histograms of 1..2000 log-normal calls under 997
// modules, as publish_benchmark makes them), then prints:
//   1. `fieldprof cost` on one API: its first call, which builds the symbol
//      index (a pass over the cache, as every call was before the index),
//      and later calls through the index;
//   2. the server's index: the time to open it;
//   3. lookups in it, in process: a symbol's first (its records read and
//      summed) and a remembered one, and the heap it holds;
//   4. hovers through the real `fieldprof lsp` on pipes: time to its index,
//      mean and p99 of a hover's round trip, and the ratio of a `fieldprof
//      cost` scan to one hover.
#include <fcntl.h>
#include <malloc.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/snapshot/snapshot_cache.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "tests/tools/ide/lsp_client.h"
#include "tools/ide/cost_index.h"

using namespace fieldprof;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Bytes the heap has handed out and not taken back.
size_t HeapInUse() { return mallinfo2().uordblks; }

std::string Symbol(uint64_t api) { return "fn_" + std::to_string(api); }
std::string Module(uint64_t api) { return "libmod" + std::to_string(api % 997) + ".so.1"; }

void WriteCache(const std::string& dir, uint64_t series, uint64_t* bytes) {
  constexpr uint32_t kFragments = 64;
  SnapshotCache cache(dir);
  std::vector<wire::Fragment> frags(kFragments);
  for (uint32_t i = 0; i < kFragments; ++i) {
    frags[i].set_schema_version(1);
    frags[i].set_index(i);
    frags[i].set_fragment_count(kFragments);
  }
  std::mt19937_64 rng(42);
  for (uint64_t s = 0; s < series; ++s) {
    const uint64_t api = s / 2;
    wire::Record* r = frags[(api * 2654435761u + s) % kFragments].add_records();
    wire::ApiKey* k = r->mutable_key();
    k->set_module(Module(api));
    k->set_module_version("1.0");
    k->set_symbol(Symbol(api));
    k->set_metric(s % 2 == 0 ? wire::METRIC_WALL_TIME_NS : wire::METRIC_ALLOC_BYTES_INCLUSIVE);
    k->mutable_platform()->set_os(wire::OS_LINUX);
    k->mutable_platform()->set_arch(wire::ARCH_X86_64);
    Histogram h;
    std::lognormal_distribution<double> cost(4.0 + static_cast<double>(api % 11), 1.0);
    const int calls = 1 + static_cast<int>(rng() % 2000);
    for (int c = 0; c < calls; ++c) h.Record(static_cast<uint64_t>(cost(rng)));
    HistogramToWire(h, r->mutable_histogram());
    r->set_runs(1 + rng() % 50);
  }
  wire::Manifest m;
  m.set_schema_version(1);
  m.set_snapshot_version(1);
  m.set_created_unix_ms(1795392000000);
  m.set_fragment_schema_version(1);
  m.set_fragment_count(kFragments);
  wire::SignedManifest sm;
  sm.set_manifest(m.SerializeAsString());
  if (!cache.StoreManifest(sm.SerializeAsString(), m, "e").ok()) std::abort();
  *bytes = 0;
  for (uint32_t i = 0; i < kFragments; ++i) {
    const std::string b = frags[i].SerializeAsString();
    *bytes += b.size();
    if (!cache.StoreFragment(i, i + 1, b).ok()) std::abort();
  }
}

// Wall time of one command, its output thrown away. posix_spawn, not
// fork: this process holds the cache it wrote, and copying its page tables
// would be timed too.
double RunMs(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  const auto t0 = Clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "lsp_benchmark: cannot run %s\n", argv[0]);
    std::exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double ms = Ms(Clock::now() - t0);
  posix_spawn_file_actions_destroy(&fa);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "lsp_benchmark: %s failed\n", args[0].c_str());
    std::exit(1);
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: lsp_benchmark SERIES [HOVERS]\n");
    return 2;
  }
  const uint64_t series = std::strtoull(argv[1], nullptr, 10);
  const int hovers = argc > 2 ? std::atoi(argv[2]) : 2000;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("fieldprof-lspbench-" + std::to_string(getpid())))
          .string();
  uint64_t bytes = 0;
  WriteCache(dir, series, &bytes);
  const uint64_t apis = series / 2;
  const std::string probe = Symbol(apis / 3);
  std::printf("cache: %llu series (%llu APIs) in 64 fragments, %.1f MiB\n",
              static_cast<unsigned long long>(series), static_cast<unsigned long long>(apis),
              static_cast<double>(bytes) / 1048576);

  // 1. fieldprof cost: its first call after the cache changed builds the
  // symbol index (one pass, as the scan it replaces); later calls read the
  // API's records only.
  const std::vector<std::string> cost = {FIELDPROF_CLI_BIN, "cost",  "--cache", dir,
                                         "--color",         "never", probe};
  const double first_ms = RunMs(cost);
  std::vector<double> cost_ms;
  for (int i = 0; i < 3; ++i) cost_ms.push_back(RunMs(cost));
  std::sort(cost_ms.begin(), cost_ms.end());
  std::printf(
      "fieldprof cost %s: first call (builds symbols.idx, %.1f MiB) %.0f ms; later calls "
      "%.1f ms (median of 3)\n",
      probe.c_str(),
      static_cast<double>(std::filesystem::file_size(dir + "/symbols.idx")) / 1048576, first_ms,
      cost_ms[1]);

  // 2. and 3. The server's index, in process: opening it (the symbol
  // index is there, fresh), then lookups.
  const size_t heap0 = HeapInUse();
  auto t0 = Clock::now();
  bool rebuilt = false;
  StatusOr<tools::CostIndex> ix = tools::CostIndex::Build(SnapshotCache(dir), &rebuilt);
  const double open_ms = Ms(Clock::now() - t0);
  if (!ix.ok()) {
    std::fprintf(stderr, "lsp_benchmark: %s\n", ix.status().ToString().c_str());
    return 1;
  }
  std::printf("index: %llu APIs, opened in %.2f ms%s\n",
              static_cast<unsigned long long>(ix->symbols()), open_ms,
              rebuilt ? " (rebuilt: the cache had changed)" : "");
  std::mt19937_64 rng(7);
  const int lookups = 20000;
  size_t found = 0;
  t0 = Clock::now();
  for (int i = 0; i < lookups; ++i) found += ix->Find(Symbol(rng() % apis))->size();
  const double first_ns = Ms(Clock::now() - t0) * 1e6 / lookups;
  t0 = Clock::now();
  for (int i = 0; i < lookups; ++i) found += ix->Find(Symbol(apis / 3))->size();
  const double again_ns = Ms(Clock::now() - t0) * 1e6 / lookups;
  std::printf(
      "lookup: %.1f us a symbol's first (reads and sums its records), %.0f ns "
      "remembered; heap held %.1f MiB (%zu entries found)\n",
      first_ns / 1000, again_ns, static_cast<double>(HeapInUse() - heap0) / 1048576, found);

  // 4. Hovers through the server.
  testing::LspClient c({FIELDPROF_CLI_BIN, "lsp", "--cache", dir});
  t0 = Clock::now();
  c.Call("initialize", {{"capabilities", testing::json::object()}});
  c.Notify("initialized", testing::json::object());
  if (!c.AwaitLog("index of")) {
    std::fprintf(stderr, "lsp_benchmark: the server built no index: %s\n", c.problem.c_str());
    return 1;
  }
  const double ready_ms = Ms(Clock::now() - t0);
  const std::string text = "int f(void) { return " + probe + "(1); }\n";
  c.Notify("textDocument/didOpen",
           {{"textDocument",
             {{"uri", "file:///b.c"}, {"languageId", "c"}, {"version", 1}, {"text", text}}}});
  std::vector<double> us;
  double first_us = 0;
  for (int i = 0; i < hovers; ++i) {
    const auto h0 = Clock::now();
    testing::json r =
        c.Call("textDocument/hover", {{"textDocument", {{"uri", "file:///b.c"}}},
                                      {"position", {{"line", 0}, {"character", 22}}}});
    us.push_back(Ms(Clock::now() - h0) * 1000);
    if (i == 0) first_us = us.back();
    if (i == 0 && (!r.contains("result") || r["result"].is_null())) {
      std::fprintf(stderr, "lsp_benchmark: no hover: %s\n", r.dump().c_str());
      return 1;
    }
  }
  c.Call("shutdown", nullptr);
  c.Notify("exit", nullptr);
  c.Wait();
  std::sort(us.begin(), us.end());
  double mean = 0;
  for (double u : us) mean += u / static_cast<double>(us.size());
  std::printf(
      "fieldprof lsp: index ready %.0f ms after initialize; hover round trip %.0f us mean, "
      "%.0f us p50, %.0f us p99, %.0f us max, the first %.0f us (%d hovers)\n",
      ready_ms, mean, us[us.size() / 2], us[us.size() * 99 / 100], us.back(), first_us, hovers);
  std::printf(
      "ratio: one indexed fieldprof cost = %.1f hovers; one full scan (its first call) "
      "= %.0f hovers\n",
      cost_ms[1] * 1000 / mean, first_ms * 1000 / mean);
  if (std::getenv("LSP_BENCH_KEEP") == nullptr) std::filesystem::remove_all(dir);
  return 0;
}
