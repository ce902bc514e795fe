// Call trees at the sizes the issue names. Prints, in one run:
//   - combining 10 runs of 1M samples each: add, mean, min, and sub of 5
//     against 5 with each node's significance (goal: each < 1 s), and the
//     most memory each held at once against the largest input tree's
//     (goal: <= 2x), counted by this program's operator new;
//   - a trace of 10M entry/exit events built into a tree as the events
//     come, its file against the trace's (goal: >= 50x smaller), beside
//     two trace formats: 16-byte binary events and Chrome trace JSON;
//   - the queries (top functions and call paths, callers and callees,
//     paths to a function, a subtree, allocated-not-freed) on both trees
//     (goal: <= 10 ms).
//
//   call_tree_benchmark [SAMPLES_PER_RUN=1000000] [EVENTS=10000000]
//
// The runs: 20,000 distinct call paths of depth 4 to 24 over 3,000
// function names, sampled Zipf-like, each run drawing its own samples
// (so runs differ as real runs do).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "tools/tree/call_tree.h"
#include "tools/tree/tree_report.h"

namespace {

std::atomic<int64_t> g_live{0}, g_peak{0};

}  // namespace

// Every allocation counted: live bytes and their peak.
void* operator new(size_t n) {
  void* p = std::malloc(n + 16);
  if (p == nullptr) throw std::bad_alloc();
  *static_cast<size_t*>(p) = n;
  const int64_t live = g_live += static_cast<int64_t>(n);
  int64_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return static_cast<char*>(p) + 16;
}
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - 16;
  g_live -= static_cast<int64_t>(*reinterpret_cast<size_t*>(base));
  std::free(base);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

using fieldprof::tools::CallTree;
using fieldprof::tools::CallTreeBuilder;
using fieldprof::tools::Combine;
using fieldprof::tools::Metric;
using fieldprof::tools::Op;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Universe {
  std::vector<std::string> names;
  std::vector<std::vector<uint32_t>> paths;
  std::vector<double> cumulative;  // Zipf-like weights, summed
};

Universe MakeUniverse(std::mt19937_64& rng) {
  Universe u;
  for (int i = 0; i < 3000; ++i)
    u.names.push_back("ns::Module" + std::to_string(i % 40) + "::fn" + std::to_string(i) +
                      "(int, char const*)");
  // Paths share prefixes, as a program's do: each extends an earlier one.
  u.paths.push_back({0, 1, 2, 3});
  while (u.paths.size() < 20000) {
    std::vector<uint32_t> p = u.paths[rng() % u.paths.size()];
    if (p.size() > 22) p.resize(4 + rng() % 10);
    const int more = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < more; ++i) p.push_back(static_cast<uint32_t>(rng() % u.names.size()));
    u.paths.push_back(std::move(p));
  }
  double sum = 0;
  for (size_t i = 0; i < u.paths.size(); ++i) {
    sum += 1.0 / std::pow(static_cast<double>(i + 1), 0.9);
    u.cumulative.push_back(sum);
  }
  return u;
}

CallTree MakeRun(const Universe& u, std::mt19937_64& rng, int64_t samples) {
  std::vector<int64_t> count(u.paths.size());
  std::uniform_real_distribution<double> pick(0, u.cumulative.back());
  for (int64_t i = 0; i < samples; ++i) {
    const size_t at = std::lower_bound(u.cumulative.begin(), u.cumulative.end(), pick(rng)) -
                      u.cumulative.begin();
    ++count[std::min(at, u.paths.size() - 1)];
  }
  CallTree t;
  std::vector<std::string_view> frames;
  for (size_t i = 0; i < u.paths.size(); ++i) {
    if (count[i] == 0) continue;
    frames.clear();
    for (uint32_t f : u.paths[i]) frames.push_back(u.names[f]);
    const uint32_t n = t.AddPath(frames);
    t.Add(n, Metric::kSamples, count[i]);
    t.Add(n, Metric::kTimeNs, count[i] * 1001001);
  }
  return t;
}

template <typename F>
void Timed(const char* what, int64_t input_bytes, F f) {
  g_peak = g_live.load();
  const int64_t before = g_live.load();
  const auto t0 = Clock::now();
  f();
  const double ms = Ms(Clock::now() - t0);
  const double held = static_cast<double>(g_peak.load() - before);
  std::printf(
      "  %-34s %8.1f ms (goal < 1000)  held %6.1f MB = %.2fx the largest input (goal <= 2)\n", what,
      ms, held / 1e6, held / static_cast<double>(input_bytes));
}

template <typename F>
double QueryMs(F f) {
  std::vector<double> v;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    f();
    v.push_back(Ms(Clock::now() - t0));
  }
  std::sort(v.begin(), v.end());
  return v[2];
}

void Queries(const CallTree& t, const std::string& fn, const char* label) {
  using namespace fieldprof::tools;  // NOLINT: the queries
  const Metric m = t.PrimaryMetric();
  std::printf("queries on the %s (%zu nodes), median of 5 (goal <= 10 ms):\n", label, t.size());
  std::printf("  top functions            %7.2f ms\n",
              QueryMs([&] { (void)TopFunctions(t, m, false); }));
  std::printf("  top 30 call paths        %7.2f ms\n",
              QueryMs([&] { (void)TopNodes(t, m, true, 30); }));
  std::printf("  callers and callees      %7.2f ms\n",
              QueryMs([&] { (void)ButterflyOf(t, fn, m); }));
  std::printf("  every path to a function %7.2f ms\n", QueryMs([&] { (void)PathsTo(t, fn, m); }));
  std::printf("  a subtree                %7.2f ms\n", QueryMs([&] { (void)Subtree(t, fn); }));
  std::printf("  allocated, not freed     %7.2f ms\n",
              QueryMs([&] { (void)AllocatedNotFreed(t); }));
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t samples = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const int64_t events = argc > 2 ? std::atoll(argv[2]) : 10000000;
  std::mt19937_64 rng(1);
  const Universe u = MakeUniverse(rng);

  std::vector<CallTree> runs;
  int64_t largest = 0;
  for (int i = 0; i < 10; ++i) {
    const int64_t before = g_live.load();
    runs.push_back(MakeRun(u, rng, samples));
    largest = std::max(largest, g_live.load() - before);
  }
  std::printf("10 runs of %lld samples: %zu to %zu nodes each, the largest %.1f MB in memory\n",
              static_cast<long long>(samples), runs[0].size(), runs[9].size(),
              static_cast<double>(largest) / 1e6);
  std::vector<const CallTree*> all, first, second;
  for (int i = 0; i < 10; ++i) {
    all.push_back(&runs[i]);
    (i < 5 ? first : second).push_back(&runs[i]);
  }
  CallTree sum;
  Timed("add of 10", largest, [&] { sum = *Combine(all, Op::kAdd, {}); });
  Timed("mean of 10", largest, [&] { (void)*Combine(all, Op::kMean, {}); });
  Timed("min of 10", largest, [&] { (void)*Combine(all, Op::kMin, {}); });
  Timed("sub, 5 against 5, with significance", largest, [&] {
    std::vector<const CallTree*> both(second);
    both.insert(both.end(), first.begin(), first.end());
    fieldprof::tools::CombineOptions co;
    co.sub_group = second.size();
    const CallTree d = *Combine(both, Op::kSub, co);
    fieldprof::tools::SignificanceOptions o;
    o.metric = Metric::kSamples;
    const auto changes = fieldprof::tools::Significance(d, second, first, o);
    size_t tested = 0;
    for (const auto& c : changes) tested += c.tested;
    std::printf("  (sub: %zu nodes, %zu over the floors and tested)\n", d.size(), tested);
  });

  // A trace of `events` entries and exits on 4 threads: calls nest up to
  // 10 deep over 500 names, a few hundred ns apart.
  std::vector<std::string> fn;
  for (int i = 0; i < 500; ++i) fn.push_back("app::Handler" + std::to_string(i) + "::Run()");
  CallTree traced;
  CallTreeBuilder builder(&traced);
  double json_bytes = 0;
  int64_t now = 0;
  std::vector<int> depth(4, 0);
  std::vector<std::vector<uint32_t>> top(4);
  const auto t0 = Clock::now();
  for (int64_t e = 0; e < events; ++e) {
    const uint32_t th = static_cast<uint32_t>(rng() % 4);
    now += 1 + static_cast<int64_t>(rng() % 400);
    const bool enter = depth[th] == 0 || (depth[th] < 10 && rng() % 2 == 0);
    if (enter) {
      // Calls follow a program's call graph: each function calls one of
      // three callees of its own.
      const uint32_t caller = depth[th] == 0 ? 0 : top[th].back();
      const uint32_t callee = (caller * 7 + 1 + static_cast<uint32_t>(rng() % 3)) % 500;
      const std::string& name = fn[callee];
      top[th].push_back(callee);
      builder.Enter(th, name, now);
      ++depth[th];
      json_bytes += 52 + static_cast<double>(name.size()) + 12;  // {"ph":"B","name":..,"ts":..}
    } else {
      builder.Exit(th, now);
      top[th].pop_back();
      --depth[th];
      json_bytes += 52 + 12;
    }
  }
  builder.Finish(now);
  const double build_ms = Ms(Clock::now() - t0);
  const std::string file = fieldprof::tools::EncodeCallTree(traced);
  const double binary = 16.0 * static_cast<double>(events);
  std::printf(
      "a trace of %lld entry/exit events built as they came in %.0f ms: %zu nodes, the tree's "
      "file %.1f KB\n  against 16-byte binary events (%.1f MB): %.0fx smaller; against Chrome "
      "trace JSON (%.1f MB): %.0fx smaller (goal >= 50x)\n",
      static_cast<long long>(events), build_ms, traced.size(),
      static_cast<double>(file.size()) / 1e3, binary / 1e6,
      binary / static_cast<double>(file.size()), json_bytes / 1e6,
      json_bytes / static_cast<double>(file.size()));

  Queries(sum, u.names[u.paths[5].back()], "sum of 10 runs");
  Queries(traced, fn[8], "traced tree");
  return 0;
}
