// What an instrumentation point costs, in one run with its
// anchors.
// - Disarmed (goal: no measurable difference against a loop without it,
//   <= 0.5 ns a point), against a USDT probe site with no tracer (a nop
//   and its note, as <sys/sdt.h> makes it without a semaphore).
// - Armed, with --recorder LIB (fieldprof points record's recorder,
//   libfieldprof-points.so): the benchmark runs itself with the recorder
//   preloaded, as `points record` does.
//   - per event on one thread (goal: <= 10 ns), in bursts of 8,192 points
//     that the drain empties between them, against the same bursts
//     unarmed; the floor beside it: one rdtsc;
//   - an lttng-ust tracepoint, the anchor, where Debian's liblttng-ust-dev
//     and lttng-tools are installed: per event, in the same bursts, with a
//     session of its own enabling it (a session daemon of this user's,
//     started and stopped here);
//   - 1M points a second across 2 threads (goal: <= 1% of wall time, no
//     event lost or every loss counted): 2 threads of 2 us work units with
//     a point each, for a second, armed against unarmed, ROUNDS rounds
//     interleaved, each armed run against the unarmed one of its round;
//     units spun on the clock and units of fixed work; beside them the
//     same units with one RDTSC each instead of a point (the floor of any
//     TSC-stamped event); and the CPU time all threads took, whose
//     difference is the CPU a point costs, the drain thread's included.
//
// - In the field, with --field RUNTIME (libfieldprof.so, the runtime an
//   install preloads): the benchmark runs itself in a measured run, as
//   `fieldprof run` does, and times bursts of FP_SCOPE (2 points, whose
//   durations go into the run's histograms) against the same bursts
//   without, on one thread and on 2 threads at once; the floor beside it:
//   two rdtsc (a measured API call's clock reads). With --base-field, an
//   earlier build's runtime, in the same rounds.
//
//   points_benchmark [ITERATIONS] [ROUNDS] [--recorder LIB] [--base-recorder LIB]
//                    [--field RUNTIME] [--base-field RUNTIME]
//                    (default 100000000 15; LIB: build/lib/fieldprof/libfieldprof-points.so;
//                    the base: another build's recorder, in the same 2-thread rounds;
//                    RUNTIME: build/lib/fieldprof/libfieldprof.so)
//
// The disarmed loops are the same dependent multiply-add, interleaved
// round by round so the machine's drift lands on all of them; with
// lttng-ust, its tracepoint with no session enabling it is one of them.
#include <fieldprof/points.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/points/points_file.h"

#ifdef FIELDPROF_HAVE_LTTNG_UST
#include "fieldprof_bench_tp.h"
#endif

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// The anchor probe's semaphore (<sys/sdt.h> refers to one, as the header
// turns semaphores on): never tested, so the probe site is the bare nop.
__attribute__((section(".probes"))) volatile unsigned short fieldprof_bench_tick_semaphore;

namespace {

[[gnu::noinline]] uint64_t Plain(long n, uint64_t x) {
  for (long i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ __volatile__("" : "+r"(x));
  }
  return x;
}

[[gnu::noinline]] uint64_t WithPoint(long n, uint64_t x) {
  for (long i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    FP_POINT("bench", "tick");
    __asm__ __volatile__("" : "+r"(x));
  }
  return x;
}

[[gnu::noinline]] uint64_t WithUsdt(long n, uint64_t x) {
  for (long i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    STAP_PROBE1(fieldprof_bench, tick, x);
    __asm__ __volatile__("" : "+r"(x));
  }
  return x;
}

[[gnu::noinline]] uint64_t WithScope(long n, uint64_t x) {
  for (long i = 0; i < n; ++i) {
    FP_SCOPE("bench", "scope");
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ __volatile__("" : "+r"(x));
  }
  return x;
}

#ifdef FIELDPROF_HAVE_LTTNG_UST
[[gnu::noinline]] uint64_t WithLttng(long n, uint64_t x) {
  for (long i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    lttng_ust_tracepoint(fieldprof_bench, tick, x);
    __asm__ __volatile__("" : "+r"(x));
  }
  return x;
}
#endif

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---------------------------------------------------------------- armed

constexpr int kBurst = 8192;

using Loop = uint64_t (*)(long, uint64_t);

// ns per iteration of a burst timed from t0 to t1.
double PerIteration(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / kBurst;
}

// Bursts of kBurst iterations of Plain and of `loop`, rounds * 20 times,
// with a pause between for whatever drains the events; with `tsc`, a
// burst of rdtsc reads too. Medians, ns per iteration.
struct Bursts {
  double plain, loop, tsc;
};
Bursts TimeBursts(int rounds, Loop loop, bool tsc) {
  std::vector<double> plain, looped, reads;
  uint64_t sink = 1;
  for (int r = 0; r < rounds * 20; ++r) {
    auto t0 = Clock::now();
    sink = Plain(kBurst, sink);
    plain.push_back(PerIteration(t0, Clock::now()));
    t0 = Clock::now();
    sink = loop(kBurst, sink);
    looped.push_back(PerIteration(t0, Clock::now()));
    if (tsc) {
      t0 = Clock::now();
      for (int i = 0; i < kBurst; ++i) sink += __rdtsc();
      reads.push_back(PerIteration(t0, Clock::now()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(8));  // the drain empties the ring
  }
  __asm__ __volatile__("" : : "r"(sink));
  return {Median(plain), Median(looped), tsc ? Median(reads) : 0};
}

// In the child, armed: per-event cost in bursts the drain keeps up with.
int ArmedChild(int rounds) {
  if (fieldprof_point_semaphore == 0) {
    std::fprintf(stderr, "points_benchmark: the recorder did not arm this program\n");
    return 1;
  }
  const Bursts b = TimeBursts(rounds, WithPoint, true);
  std::printf("armed, one thread: %d bursts of %d points, median ns per iteration\n", rounds * 20,
              kBurst);
  std::printf("  %-26s %7.3f ns\n  %-26s %7.3f ns  added %+.3f ns per event (goal <= 10)\n",
              "plain loop", b.plain, "armed FP_POINT", b.loop, b.loop - b.plain);
  std::printf("  %-26s %7.3f ns  (the floor under any timestamp)\n", "one rdtsc", b.tsc);
  return 0;
}

// 2 threads of 2 us work units with a point each, for `seconds`: 1M
// points a second in all. A unit spins on the clock until 2 us have passed
// (`fixed_iterations` 0), or runs that many iterations of Plain, which the
// parent measured to take 2 us: a program's own work, where no clock read
// comes right before each point. (A clock read is an RDTSCP; on AMD a
// point's RDTSC right after it waits for it.) With `tsc_only`, each unit
// ends with one RDTSC instead of a point: the floor under any recorder
// that stamps its events with the TSC. Prints its wall time and the CPU
// time of all its threads (the recorder's drain thread's too) in ns.
int ThroughputChild(double seconds, long fixed_iterations, bool tsc_only) {
  const long units = static_cast<long>(seconds * 500000);
  auto worker = [units, fixed_iterations, tsc_only](uint64_t* out) {
    uint64_t x = 1;
    for (long u = 0; u < units; ++u) {
      if (fixed_iterations > 0) {
        x = Plain(fixed_iterations, x);
      } else {
        const auto until = Clock::now() + std::chrono::nanoseconds(2000);
        x = Plain(64, x);
        while (Clock::now() < until) x = Plain(8, x);
      }
      if (tsc_only) {
        x += __rdtsc();
      } else {
        FP_POINT_V("bench", "unit", u);
      }
    }
    *out = x;
  };
  uint64_t a = 0, b = 0;
  const auto t0 = Clock::now();
  std::thread t1(worker, &a), t2(worker, &b);
  t1.join();
  t2.join();
  const auto t_end = Clock::now();
  timespec cpu;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  std::printf("%.0f %.0f %llu\n", std::chrono::duration<double, std::nano>(t_end - t0).count(),
              static_cast<double>(cpu.tv_sec) * 1e9 + static_cast<double>(cpu.tv_nsec),
              static_cast<unsigned long long>(a ^ b));
  return 0;
}

// Iterations of Plain that take 2 us here: the median of 201 timings.
long IterationsFor2us() {
  constexpr long kN = 1 << 20;
  std::vector<double> ns;
  uint64_t sink = 1;
  for (int i = 0; i < 201; ++i) {
    const auto t0 = Clock::now();
    sink = Plain(kN, sink);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kN);
  }
  __asm__ __volatile__("" : : "r"(sink));
  return static_cast<long>(2000 / Median(ns));
}

// Runs this program with `args`; armed: with the recorder preloaded,
// writing to `dir`. Its stdout.
std::string RunSelf(const char* self, const std::vector<std::string>& args, const std::string& lib,
                    const std::string& dir, const std::vector<std::string>& more_env = {}) {
  int pipe_fd[2];
  if (pipe(pipe_fd) != 0) return "";
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) && std::strncmp(*e, "FIELDPROF_POINTS_DIR=", 21)) {
      env_s.push_back(*e);
    }
  }
  if (!lib.empty()) {
    env_s.push_back("LD_PRELOAD=" + lib);
    if (!dir.empty()) env_s.push_back("FIELDPROF_POINTS_DIR=" + dir);
  }
  env_s.insert(env_s.end(), more_env.begin(), more_env.end());
  std::vector<char*> env, argv{const_cast<char*>(self)};
  for (std::string& e : env_s) env.push_back(e.data());
  env.push_back(nullptr);
  std::vector<std::string> args_s = args;
  for (std::string& a : args_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipe_fd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pipe_fd[0]);
  pid_t pid;
  const int rc = posix_spawn(&pid, self, &fa, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  close(pipe_fd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(pipe_fd[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  close(pipe_fd[0]);
  if (rc == 0) waitpid(pid, nullptr, 0);
  return out;
}

// Events and losses in the files under `dir`.
void SayRecorded(const std::string& dir) {
  auto runs = fieldprof::ReadPointsRuns({dir});
  if (!runs.ok()) {
    std::printf("  (cannot read %s: %s)\n", dir.c_str(), runs.status().message().c_str());
    return;
  }
  size_t events = 0;
  uint64_t lost = 0;
  for (const auto& r : *runs) {
    events += r.events.size();
    lost += r.lost;
  }
  std::printf("  recorded %zu events, %llu lost\n", events, static_cast<unsigned long long>(lost));
}

// `base`, when given, is another recorder (an earlier build's) measured
// in the same rounds.
void Armed(const char* self, const std::string& lib, const std::string& base, int rounds) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("points-bench-" + std::to_string(getpid()));
  fs::create_directories(tmp / "one");
  fs::create_directories(tmp / "two");
  fs::create_directories(tmp / "base");
  std::fputs(
      RunSelf(self, {"--armed-child", std::to_string(rounds)}, lib, (tmp / "one").string()).c_str(),
      stdout);
  SayRecorded((tmp / "one").string());
  // Plain, then each recorder, round by round, so the machine's drift
  // lands on all of them; every other round in the reverse order, since
  // the run measured later in a round read up to 0.7 points slower,
  // whichever it was (shown by swapping --recorder and --base-recorder).
  struct Kind {
    const char* name;
    std::string lib, dir;
    bool tsc_only;
    std::vector<double> wall, cpu;
  };
  std::vector<Kind> kinds = {{"unarmed", "", (tmp / "two").string(), false, {}, {}},
                             {"one rdtsc a unit (floor)", "", "", true, {}, {}},
                             {"armed", lib, (tmp / "two").string(), false, {}, {}}};
  if (!base.empty()) {
    kinds.insert(kinds.begin() + 2,
                 {"armed, base recorder", base, (tmp / "base").string(), false, {}, {}});
  }
  const long fixed = IterationsFor2us();
  for (const long iterations : {0L, fixed}) {
    for (Kind& k : kinds) {
      k.wall.clear();
      k.cpu.clear();
    }
    for (int r = 0; r < rounds; ++r) {
      for (size_t j = 0; j < kinds.size(); ++j) {
        Kind& k = kinds[r % 2 == 0 ? j : kinds.size() - 1 - j];
        std::vector<std::string> args = {"--throughput-child", "1", std::to_string(iterations)};
        if (k.tsc_only) args.push_back("--tsc-only");
        const std::string out = RunSelf(self, args, k.lib, k.dir);
        double wall = 0, cpu = 0;
        if (std::sscanf(out.c_str(), "%lf %lf", &wall, &cpu) != 2) {
          std::fprintf(stderr, "points_benchmark: a throughput run printed '%s'\n", out.c_str());
          return;
        }
        k.wall.push_back(wall);
        k.cpu.push_back(cpu);
      }
    }
    if (kinds[0].wall.empty()) return;
    std::printf(
        "armed, 2 threads at 1M points a second for 1 s, %d rounds interleaved (every\n"
        "other one in reverse order), %s;\n"
        "median wall, and against the unarmed run of the same round: the median change and\n"
        "its middle half, and the CPU time all threads took more, per point (the point and\n"
        "the drain thread's share):\n",
        rounds,
        iterations == 0
            ? "each unit spun on the clock for 2 us"
            : ("each unit " + std::to_string(iterations) + " iterations of work (2 us)").c_str());
    const Kind& plain = kinds[0];
    std::printf("  %-26s %9.2f ms\n", plain.name, Median(plain.wall) / 1e6);
    for (const Kind& k : kinds) {
      if (&k == &plain || k.wall.size() != plain.wall.size()) continue;
      std::vector<double> change, cpu_ns;
      for (size_t r = 0; r < k.wall.size(); ++r) {
        change.push_back((k.wall[r] - plain.wall[r]) / plain.wall[r] * 100);
        cpu_ns.push_back((k.cpu[r] - plain.cpu[r]) / 1e6);  // 1M points
      }
      std::vector<double> sorted = change;
      std::sort(sorted.begin(), sorted.end());
      std::printf("  %-26s %9.2f ms  %+.2f%% (%+.2f to %+.2f; goal <= 1%%)  cpu %+.1f ns a point\n",
                  k.name, Median(k.wall) / 1e6, Median(change), sorted[sorted.size() / 4],
                  sorted[sorted.size() * 3 / 4], Median(cpu_ns));
    }
  }
  SayRecorded((tmp / "two").string());
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

// ---------------------------------------------------------------- field

// In the child, in a measured run: `threads` threads at once, each timing
// rounds * 20 bursts of Plain and of WithScope (and of two rdtsc reads),
// one after the other. Prints the medians over all threads' bursts, ns per
// iteration: plain, scope, two rdtsc.
int FieldChild(int threads, int rounds) {
  if (fieldprof_point_semaphore == 0) {
    std::fprintf(stderr,
                 "points_benchmark: the runtime did not arm this program (not measured?)\n");
    return 1;
  }
  std::vector<std::vector<double>> plain(threads), scope(threads), reads(threads);
  std::atomic<int> ready{0};
  auto worker = [&](int t) {
    ready.fetch_add(1);
    while (ready.load() < threads) {
    }
    uint64_t sink = 1;
    for (int r = 0; r < rounds * 20; ++r) {
      auto t0 = Clock::now();
      sink = Plain(kBurst, sink);
      plain[t].push_back(PerIteration(t0, Clock::now()));
      t0 = Clock::now();
      sink = WithScope(kBurst, sink);
      scope[t].push_back(PerIteration(t0, Clock::now()));
      t0 = Clock::now();
      for (int i = 0; i < kBurst; ++i) sink += __rdtsc() + __rdtsc();
      reads[t].push_back(PerIteration(t0, Clock::now()));
    }
    __asm__ __volatile__("" : : "r"(sink));
  };
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) running.emplace_back(worker, t);
  for (std::thread& t : running) t.join();
  std::vector<double> p, s, d;
  for (int t = 0; t < threads; ++t) {
    p.insert(p.end(), plain[t].begin(), plain[t].end());
    s.insert(s.end(), scope[t].begin(), scope[t].end());
    d.insert(d.end(), reads[t].begin(), reads[t].end());
  }
  std::printf("%.3f %.3f %.3f\n", Median(p), Median(s), Median(d));
  return 0;
}

// The field runtime (and `base`, another build's), measured runs of the
// child, on 1 and on 2 threads, `rounds` runs each, interleaved.
void Field(const char* self, const std::string& runtime, const std::string& base, int rounds) {
  namespace fs = std::filesystem;
  const fs::path tmp =
      fs::temp_directory_path() / ("points-bench-field-" + std::to_string(getpid()));
  fs::create_directories(tmp);
  const std::string settings = (tmp / "measured.conf").string();
  if (FILE* f = std::fopen(settings.c_str(), "w")) {
    std::fprintf(f,
                 "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\n"
                 "max_load_per_cpu = 1000\nspool_dir = %s/spool\nslot_dir = %s/slots\n",
                 tmp.c_str(), tmp.c_str());
    std::fclose(f);
  }
  struct Kind {
    const char* name;
    std::string lib;
    std::vector<double> plain, scope, reads;
  };
  std::vector<Kind> kinds = {{"field runtime", runtime, {}, {}, {}}};
  if (!base.empty()) kinds.push_back({"field runtime, base", base, {}, {}, {}});
  for (const int threads : {1, 2}) {
    for (Kind& k : kinds) {
      k.plain.clear();
      k.scope.clear();
      k.reads.clear();
    }
    for (int r = 0; r < rounds; ++r) {
      for (size_t j = 0; j < kinds.size(); ++j) {
        Kind& k = kinds[r % 2 == 0 ? j : kinds.size() - 1 - j];
        const std::string out = RunSelf(self, {"--field-child", std::to_string(threads), "1"},
                                        k.lib, "", {"FIELDPROF_SETTINGS=" + settings});
        double p = 0, s = 0, d = 0;
        if (std::sscanf(out.c_str(), "%lf %lf %lf", &p, &s, &d) != 3) {
          std::fprintf(stderr, "points_benchmark: a field run printed '%s'\n", out.c_str());
          return;
        }
        k.plain.push_back(p);
        k.scope.push_back(s);
        k.reads.push_back(d);
      }
    }
    std::printf(
        "in the field (a measured run), %d thread%s at once, %d runs of 20 bursts of %d, "
        "interleaved;\nmedian ns per iteration, and added per FP_SCOPE (2 points):\n",
        threads, threads == 1 ? "" : "s", rounds, kBurst);
    for (const Kind& k : kinds) {
      const double p = Median(k.plain), sc = Median(k.scope), d = Median(k.reads);
      std::printf(
          "  %-26s plain %6.3f ns  FP_SCOPE %7.3f ns  added %+7.3f ns  (%.2fx two rdtsc, "
          "%.3f ns)\n",
          k.name, p, sc, sc - p, (sc - p) / d, d);
    }
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

#ifdef FIELDPROF_HAVE_LTTNG_UST
// In the child, with a session enabling the tracepoint: per event in the
// same bursts as ArmedChild, the consumer draining between them.
int LttngChild(int rounds) {
  if (!lttng_ust_tracepoint_enabled(fieldprof_bench, tick)) {
    std::printf("  (no lttng session enabled fieldprof_bench:tick)\n");
    return 1;
  }
  const Bursts b = TimeBursts(rounds, WithLttng, false);
  std::printf("  %-26s %7.3f ns  added %+.3f ns per event (the anchor)\n",
              "lttng-ust tracepoint, on", b.loop, b.loop - b.plain);
  return 0;
}

// A command's exit code, its output (stdout and stderr) in *out.
int Sh(const std::string& cmd, std::string* out) {
  out->clear();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// A session daemon of this user's (LTTNG_HOME in a directory of its own),
// a session enabling fieldprof_bench:tick, the child measuring under it,
// and everything stopped again.
void LttngEnabled(const char* self, int rounds) {
  namespace fs = std::filesystem;
  if (access("/usr/bin/lttng", X_OK) != 0 || access("/usr/bin/lttng-sessiond", X_OK) != 0) {
    std::printf("  (lttng-tools not installed: no enabled lttng-ust figure)\n");
    return;
  }
  const fs::path home =
      fs::temp_directory_path() / ("points-bench-lttng-" + std::to_string(getpid()));
  fs::create_directories(home);
  setenv("LTTNG_HOME", home.c_str(), 1);
  pid_t daemon = -1;
  const char* argv[] = {"lttng-sessiond", "--no-kernel", "--quiet", nullptr};
  if (posix_spawn(&daemon, "/usr/bin/lttng-sessiond", nullptr, nullptr,
                  const_cast<char* const*>(argv), environ) != 0) {
    std::printf("  (cannot start lttng-sessiond)\n");
    return;
  }
  std::string out;
  const std::string session = "fpbench" + std::to_string(getpid());
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {  // up to 10 s for the daemon to answer
    up = Sh("lttng list", &out) == 0;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (up && Sh("lttng create " + session + " --output=" + (home / "trace").string(), &out) == 0 &&
      Sh("lttng enable-event --userspace fieldprof_bench:tick --session=" + session, &out) == 0 &&
      Sh("lttng start " + session, &out) == 0) {
    std::fputs(RunSelf(self, {"--lttng-child", std::to_string(rounds)}, "", "").c_str(), stdout);
    Sh("lttng stop " + session, &out);
    // lttng says how many events its buffers had to discard, if any.
    for (size_t at = out.find("discarded"); at != std::string::npos; at = std::string::npos) {
      const size_t line = out.rfind('\n', at);
      std::printf("  lttng: %s\n",
                  out.substr(line == std::string::npos ? 0 : line + 1,
                             out.find('\n', at) - (line == std::string::npos ? 0 : line + 1))
                      .c_str());
    }
    Sh("lttng destroy " + session, &out);
  } else {
    std::printf("  (lttng session could not start: %s)\n", out.c_str());
  }
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
  unsetenv("LTTNG_HOME");
  std::error_code ec;
  fs::remove_all(home, ec);
}
#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef FIELDPROF_HAVE_LTTNG_UST
  if (argc == 3 && !std::strcmp(argv[1], "--lttng-child")) return LttngChild(std::atoi(argv[2]));
#endif
  if (argc == 3 && !std::strcmp(argv[1], "--armed-child")) return ArmedChild(std::atoi(argv[2]));
  if (argc == 4 && !std::strcmp(argv[1], "--field-child")) {
    return FieldChild(std::atoi(argv[2]), std::atoi(argv[3]));
  }
  if (argc >= 3 && !std::strcmp(argv[1], "--throughput-child")) {
    return ThroughputChild(std::atof(argv[2]), argc > 3 ? std::atol(argv[3]) : 0,
                           argc > 4 && !std::strcmp(argv[4], "--tsc-only"));
  }
  std::string lib, base, field, base_field;
  std::vector<char*> pos;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--recorder") && i + 1 < argc) {
      lib = std::filesystem::absolute(argv[++i]).string();
    } else if (!std::strcmp(argv[i], "--base-recorder") && i + 1 < argc) {
      base = std::filesystem::absolute(argv[++i]).string();
    } else if (!std::strcmp(argv[i], "--field") && i + 1 < argc) {
      field = std::filesystem::absolute(argv[++i]).string();
    } else if (!std::strcmp(argv[i], "--base-field") && i + 1 < argc) {
      base_field = std::filesystem::absolute(argv[++i]).string();
    } else {
      pos.push_back(argv[i]);
    }
  }
  const long n = pos.size() > 0 ? std::atol(pos[0]) : 100000000;
  const int rounds = pos.size() > 1 ? std::atoi(pos[1]) : 15;
  if (n <= 0 || rounds <= 0) {
    std::fprintf(stderr,
                 "usage: points_benchmark [ITERATIONS] [ROUNDS] [--recorder LIB] "
                 "[--base-recorder LIB] [--field RUNTIME] [--base-field RUNTIME]\n");
    return 2;
  }
  std::vector<Loop> loops = {Plain, WithPoint, WithUsdt};
  std::vector<const char*> names = {"plain loop", "disarmed FP_POINT", "bare USDT probe (anchor)"};
#ifdef FIELDPROF_HAVE_LTTNG_UST
  loops.push_back(WithLttng);
  names.push_back("lttng-ust, no session");
#endif
  const int nloops = static_cast<int>(loops.size());
  std::vector<std::vector<double>> ns(loops.size());
  uint64_t sink = 1;
  for (int r = 0; r < rounds; ++r) {
    for (int l = 0; l < nloops; ++l) {
      const auto t0 = Clock::now();
      sink = loops[l](n, sink);
      const auto t1 = Clock::now();
      ns[l].push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                      static_cast<double>(n));
    }
    std::fprintf(stderr, "\rround %d of %d", r + 1, rounds);
  }
  std::fprintf(stderr, "\r");
  const double plain = Median(ns[0]);
  std::printf("disarmed: %ld iterations x %d rounds, interleaved; median ns per iteration\n", n,
              rounds);
  for (int l = 0; l < nloops; ++l) {
    const double m = Median(ns[l]);
    // The spread: the middle half of the rounds.
    std::vector<double> v = ns[l];
    std::sort(v.begin(), v.end());
    std::printf("  %-26s %7.3f ns  (%.3f-%.3f)  added %+.3f ns\n", names[l], m, v[v.size() / 4],
                v[v.size() * 3 / 4], m - plain);
  }
  std::printf("semaphore %u (0: disarmed), sink %llu\n",
              static_cast<unsigned>(fieldprof_point_semaphore),
              static_cast<unsigned long long>(sink));
  if (!lib.empty()) {
    std::fflush(stdout);
    Armed("/proc/self/exe", lib, base, rounds);
#ifdef FIELDPROF_HAVE_LTTNG_UST
    std::printf("the anchor, enabled, in the same bursts:\n");
    std::fflush(stdout);
    LttngEnabled("/proc/self/exe", rounds);
#else
    std::printf("(no lttng-ust anchor: liblttng-ust-dev was not installed at build time)\n");
#endif
  } else {
    std::printf("(armed figures: --recorder build/lib/fieldprof/libfieldprof-points.so)\n");
  }
  if (!field.empty()) {
    std::fflush(stdout);
    Field("/proc/self/exe", field, base_field, rounds);
  } else {
    std::printf("(field figures: --field build/lib/fieldprof/libfieldprof.so)\n");
  }
  return 0;
}
