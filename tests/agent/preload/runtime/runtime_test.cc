// The runtime inside real processes: a test library with known per-call
// costs is measured by the preloaded runtime, and the record
// left in the spool is checked. Each run is compared with an
// uninstrumented run of the same command (exit code and output).
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/proto/fieldprof.pb.h"
#include "common/settings/runtime_settings.h"
#include "common/settings/settings_rules.h"
#include "common/settings/tsc_rate.h"
#include "common/spool/run_counters.h"
#include "common/spool/spool.h"
#include "common/statistics/histogram.h"
#include "tests/support/system_code.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

namespace fs = std::filesystem;
using fieldprof::testing::TempDir;

struct Result {
  int exit_code = -1;
  std::string out;
};

// Runs argv with extra environment, capturing stdout.
std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Result RunCmd(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::string cmd = "env";
  for (const auto& e : env) cmd += " " + ShellQuote(e);
  for (const auto& a : argv) cmd += " " + ShellQuote(a);
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

class RuntimeTest : public ::testing::Test {
 protected:
  // The environment of a measured run: `force`d APIs, `k` of them at most.
  std::vector<std::string> Env(const std::string& force, int k = 1) {
    std::vector<std::string> env = extra_env_;
    env.insert(env.end(),
               {"FIELDPROF_RUN=1", "FIELDPROF_K=" + std::to_string(k), "FIELDPROF_FORCE=" + force,
                testing::SystemCodeEnv(), "FIELDPROF_SPOOL=" + spool(),
                "FIELDPROF_SLOT_DIR=" + dir_.path() + "/slots",
                "FIELDPROF_LIVE_DIR=" + dir_.path() + "/live", "FIELDPROF_MAX_LOAD=1000",
                "LD_PRELOAD=" + std::string(FIELDPROF_PRELOAD_LIB)});
    return env;
  }
  std::string spool() const { return dir_.path() + "/spool"; }
  // Locks slot-0 of this test's slot directory as a measured program would;
  // the descriptor (-1 on failure) holds it until closed.
  int HoldSlotZero() {
    const std::string slots = dir_.path() + "/slots";
    fs::create_directories(slots);
    const int fd = open((slots + "/slot-0").c_str(), O_RDWR | O_CREAT, 0666);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  std::vector<std::string> extra_env_;  // added to every measured run

  // Runs with and without the runtime; same exit code and output.
  Result RunBoth(const std::vector<std::string>& argv, const std::string& force) {
    Result plain = RunCmd(argv, {});
    Result measured = RunCmd(argv, Env(force));
    EXPECT_EQ(measured.exit_code, plain.exit_code);
    EXPECT_EQ(measured.out, plain.out);
    return measured;
  }

  // Every record in the spool, read and validated by the agent's reader.
  std::vector<wire::RunRecord> Records() {
    std::vector<wire::RunRecord> out;
    StatusOr<std::vector<SpoolEntry>> files = ListSpool(spool());
    EXPECT_TRUE(files.ok()) << files.status().ToString();
    if (!files.ok()) return out;
    for (const SpoolEntry& e : *files) {
      EXPECT_EQ(fs::status(e.path).permissions() & fs::perms::all,
                fs::perms::owner_read | fs::perms::owner_write);
      StatusOr<wire::RunRecord> r = ReadRunRecord(e.path);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) out.push_back(std::move(*r));
    }
    return out;
  }

  // The histogram of `metric` for `symbol` in the only record.
  const wire::Histogram* Find(const std::vector<wire::RunRecord>& recs, const std::string& symbol,
                              wire::Metric metric) {
    for (const auto& r : recs) {
      for (const auto& rec : r.records()) {
        if (rec.key().symbol() == symbol && rec.key().metric() == metric) {
          return &rec.histogram();
        }
      }
    }
    return nullptr;
  }

  TempDir dir_;
  const std::string prog_ = FIELDPROF_TESTPROG;
};

// The process-wide state (FP_HOT_DATA, hotpath.h) sits in .data on the
// page the dynamic linker writes when it relocates .got.plt: a run, measured
// or not, then writes no page of the library that was not private already.
// A .data grown past that page costs every measured run a page fault.
TEST(RuntimeLayoutTest, DataSharesTheRelocatedPage) {
  std::ifstream in(FIELDPROF_RUNTIME_LIB, std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(image.size(), sizeof(Elf64_Ehdr));
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(image.data());
  ASSERT_LE(eh->e_shoff + eh->e_shnum * sizeof(Elf64_Shdr), image.size());
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(image.data() + eh->e_shoff);
  const char* names = image.data() + sh[eh->e_shstrndx].sh_offset;
  const Elf64_Shdr* data = nullptr;
  const Elf64_Shdr* got_plt = nullptr;
  const Elf64_Shdr* bss = nullptr;
  for (int i = 0; i < eh->e_shnum; ++i) {
    const std::string name = names + sh[i].sh_name;
    if (name == ".data") data = &sh[i];
    if (name == ".got.plt") got_plt = &sh[i];
    if (name == ".bss") bss = &sh[i];
  }
  ASSERT_NE(data, nullptr);
  ASSERT_NE(got_plt, nullptr);
  ASSERT_NE(bss, nullptr);
  const uint64_t page = 4096;
  const uint64_t relocated = (got_plt->sh_addr + got_plt->sh_size - 1) / page;
  EXPECT_EQ(data->sh_addr / page, relocated);
  EXPECT_EQ((data->sh_addr + data->sh_size - 1) / page, relocated)
      << ".data is " << data->sh_size << " bytes and spills onto the next page";
  // Every exit writes crtbegin's flag in .bss: on a page of its own that is
  // one more fault in every process, measured or not (FP_COLD_BSS).
  EXPECT_EQ((bss->sh_addr + bss->sh_size - 1) / page, relocated)
      << ".bss is " << bss->sh_size << " bytes from " << std::hex << bss->sh_addr
      << " and spills onto the next page";
}

// What a session preloads is the front (front.cc): a run it does not
// measure maps no page of the runtime, one it measures loads it; so does
// a sampled run the rate cap refuses (the front decides). Read from
// /proc/self/maps by a real program (cat).
TEST(FrontTest, AnUnmeasuredRunMapsNothingOfTheRuntime) {
  TempDir dir;
  const std::string conf = dir.path() + "/runtime.conf";
  auto maps = [&](const std::string& first, int per_minute = 0) {
    {
      std::ofstream(conf) << first << "max_runs_per_minute = " << per_minute
                          << "\nmax_load_per_cpu = 1000\n"
                          << "spool_dir = " << dir.path() << "/spool\nslot_dir = " << dir.path()
                          << "/slots\n";
    }
    Result r =
        RunCmd({"cat", "/proc/self/maps"},
               {"FIELDPROF_SETTINGS=" + conf, "LD_PRELOAD=" + std::string(FIELDPROF_FRONT_LIB)});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("/libfieldprof-front.so"), std::string::npos) << r.out;
    return r.out.find("/libfieldprof.so") != std::string::npos;
  };
  EXPECT_FALSE(maps("consent = no\nsample_fraction = 1\n")) << "no consent";
  EXPECT_FALSE(maps("consent = yes\nsample_fraction = 0\n")) << "not sampled";
  EXPECT_TRUE(maps("consent = yes\nsample_fraction = 1\n")) << "sampled: the runtime is loaded";
  // One run a minute: the first is measured, the next refused by the cap.
  EXPECT_TRUE(maps("consent = yes\nsample_fraction = 1\n", 1));
  EXPECT_FALSE(maps("consent = yes\nsample_fraction = 1\n", 1)) << "refused by the rate cap";
  StatusOr<RunCounts> counts = ReadRunCounters(dir.path() + "/spool");
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ((*counts)[kRunRefusedRate], 1u);
  // Preloaded through a link, absolute or relative (a session links its
  // runtime directory to the installed front), it finds the runtime
  // beside what the link names.
  const fs::path front = fs::canonical(FIELDPROF_FRONT_LIB);
  for (const fs::path& to : {front, fs::relative(front, dir.path())}) {
    const std::string link = dir.path() + "/libfieldprof.so";
    fs::remove(link);
    fs::create_symlink(to, link);
    {
      std::ofstream(conf) << "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\n"
                          << "max_load_per_cpu = 1000\nspool_dir = " << dir.path()
                          << "/spool\nslot_dir = " << dir.path() << "/slots\n";
    }
    Result r =
        RunCmd({"cat", "/proc/self/maps"}, {"FIELDPROF_SETTINGS=" + conf, "LD_PRELOAD=" + link});
    EXPECT_NE(r.out.find(front.parent_path().string() + "/libfieldprof.so"), std::string::npos)
        << to << "\n"
        << r.out;
  }
}

TEST_F(RuntimeTest, AllocationsLandInTheirBucket) {
  RunBoth({prog_, "alloc", "5000", "40"}, "fp_test_alloc");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  const auto* bytes = Find(recs, "fp_test_alloc", wire::METRIC_ALLOC_BYTES_INCLUSIVE);
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(bytes->count(), 40u);
  ASSERT_EQ(bytes->buckets_size(), 1);
  EXPECT_EQ(bytes->buckets(0).index(), static_cast<uint32_t>(BucketIndex(5000)));
  EXPECT_EQ(bytes->sum_lo(), 40u * 5000);
  const auto* count = Find(recs, "fp_test_alloc", wire::METRIC_ALLOC_COUNT);
  ASSERT_NE(count, nullptr);
  EXPECT_EQ(count->sum_lo(), 40u);
  EXPECT_EQ(recs[0].records(0).key().module(), "libfieldprof_testlib.so");
  EXPECT_EQ(recs[0].counters().apis_chosen(), 1u);
}

// A call cheaper than the timing can resolve (a 16-byte malloc and free)
// mostly records 0 once the probe's cost is taken off. The record says how
// fine its timing was, on wall time only, and `fieldprof spool show` reads
// such figures as "< N ns", never as 0 ns.
TEST_F(RuntimeTest, CheapCallsReadAsUnderTheResolution) {
  extra_env_ = {"FIELDPROF_BUDGET=1000"};
  RunBoth({prog_, "alloc", "16", "3000"}, "fp_test_alloc");
  const std::vector<wire::RunRecord> recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  uint64_t resolution = 0;
  for (const wire::Record& r : recs[0].records()) {
    if (r.key().metric() == wire::METRIC_WALL_TIME_NS) {
      resolution = r.resolution_ns();
    } else {
      EXPECT_EQ(r.resolution_ns(), 0u) << r.key().metric();
    }
  }
  EXPECT_GE(resolution, 1u);
  EXPECT_LE(resolution, 1000u);
  const std::string shown = dir_.path() + "/shown";
  ASSERT_EQ(std::system((std::string(FIELDPROF_CLI) + " spool show --histograms --spool " +
                         spool() + " > " + shown)
                            .c_str()),
            0);
  const std::string out = ReadFile(shown);
  const size_t wall = out.find("wall_time_ns");
  ASSERT_NE(wall, std::string::npos) << out;
  std::string line = out.substr(wall, out.find('\n', wall) - wall);
  // Figures under the resolution read "< R ns"; none reads as a plain
  // 0 ns, nor as 1 ns unless R is 1 (a machine whose probe cost hardly
  // varies), where a mean of 1.3 ns is above it and reads "1 ns".
  const std::string under = "< " + std::to_string(resolution) + " ns";
  for (size_t p = line.find(under); p != std::string::npos; p = line.find(under)) {
    line.erase(p, under.size());
  }
  EXPECT_EQ(line.find(" 0 ns"), std::string::npos) << line;
  if (resolution > 1) {
    EXPECT_EQ(line.find(" 1 ns"), std::string::npos) << line;
  }
  const wire::Histogram* h = Find(recs, "fp_test_alloc", wire::METRIC_WALL_TIME_NS);
  ASSERT_NE(h, nullptr);
  if (h->zero_count() > 0) {  // the zero bucket's row
    EXPECT_NE(out.find("< " + std::to_string(resolution) + " ns "), std::string::npos) << out;
  }
}

TEST_F(RuntimeTest, WallTimeOfASleep) {
  RunBoth({prog_, "sleep", "2000", "5"}, "fp_test_sleep_us");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  const auto* wall = Find(recs, "fp_test_sleep_us", wire::METRIC_WALL_TIME_NS);
  ASSERT_NE(wall, nullptr);
  EXPECT_EQ(wall->count(), 5u);
  // At least the 2 ms asked for; a shared machine may add, never remove.
  EXPECT_GE(wall->min(), 2000000u);
  EXPECT_LT(wall->min(), 2000000000u);
  // Calls that neither allocate nor do I/O are counted as one number on the
  // hot path and become zeros of every counter metric in the record.
  for (const wire::Metric m :
       {wire::METRIC_ALLOC_BYTES_INCLUSIVE, wire::METRIC_ALLOC_BYTES_EXCLUSIVE,
        wire::METRIC_ALLOC_COUNT, wire::METRIC_FILE_IO_BYTES, wire::METRIC_SOCKET_IO_BYTES}) {
    const auto* h = Find(recs, "fp_test_sleep_us", m);
    ASSERT_NE(h, nullptr) << m;
    EXPECT_EQ(h->count(), 5u) << m;
    EXPECT_EQ(h->zero_count(), 5u) << m;
    EXPECT_EQ(h->min(), 0u) << m;
    EXPECT_EQ(h->max(), 0u) << m;
  }
}

TEST_F(RuntimeTest, VdsoClockWhenTheTscWillNotDo) {
  // The fallback for CPUs without an invariant TSC, forced here.
  const std::string log = dir_.path() + "/debug.log";
  extra_env_ = {"FIELDPROF_CLOCK=vdso", "FIELDPROF_DEBUG=" + log};
  RunBoth({prog_, "sleep", "2000", "5"}, "fp_test_sleep_us");
  EXPECT_NE(ReadFile(log).find("clock: vDSO CLOCK_MONOTONIC"), std::string::npos) << ReadFile(log);
  const auto* wall = Find(Records(), "fp_test_sleep_us", wire::METRIC_WALL_TIME_NS);
  ASSERT_NE(wall, nullptr);
  EXPECT_EQ(wall->count(), 5u);
  EXPECT_GE(wall->min(), 2000000u);
  EXPECT_LT(wall->min(), 2000000000u);
  // The vDSO is called from the stub: floating-point arguments must survive.
  Result r = RunBoth({prog_, "fsum"}, "fp_test_fsum");
  EXPECT_EQ(r.out, "45.875\ndone fsum\n");
}

// Durations agree with CLOCK_MONOTONIC within 1% from a run's first call,
// however short the run. A test function spins for 1.5 us of
// CLOCK_MONOTONIC; it is measured in runs of 300 calls (~0.5 ms), of 130
// calls nested in another measured call (converted at once, not batched),
// and of 100,000 calls: with the machine's rate handed over in the
// settings, with the run's own estimate, and with the vDSO clock. The truth
// is each call's own span by CLOCK_MONOTONIC plus what a call takes beyond
// it (timed from outside on an unmeasured twin). Both sides are compared in
// the bucket where the calls are (1-2 us): a call preempted leaves it on
// both sides, so the comparison does not depend on the machine's load.
// (Before the start's clock reading was a system call, the vDSO's first use
// fell inside the rate's first span and short runs read 4-11% low.)
class ClockTest : public RuntimeTest {
 protected:
  static constexpr long kSpinNs = 1500;
  static constexpr int kBucket = 10;  // [1024, 2048) ns

  // Runs `calls` spins (`mode` outer or nested) with `env` added; returns
  // the recorded mean in kBucket over the true one, minus 1 (NaN and a
  // failure when either side has too few calls there).
  double Error(long calls, const std::string& mode, const std::vector<std::string>& env) {
    fs::remove_all(spool());
    const std::string truth_file = dir_.path() + "/truth";
    std::vector<std::string> e = Env("fp_test_spin_ns,fp_test_callback", 2);
    e.push_back("FIELDPROF_BUDGET=1000");
    e.insert(e.end(), env.begin(), env.end());
    Result r = RunCmd(
        {prog_, "spin", std::to_string(kSpinNs), std::to_string(calls), mode, truth_file}, e);
    EXPECT_EQ(r.exit_code, 7);
    std::ifstream in(truth_file);
    double beyond = 0;
    in >> beyond;
    double truth_sum = 0;
    uint64_t truth_n = 0;
    for (long span; in >> span;) {
      const double v = static_cast<double>(span) + beyond;
      if (BucketIndex(static_cast<uint64_t>(v)) != kBucket) continue;
      truth_sum += v;
      ++truth_n;
    }
    const std::vector<wire::RunRecord> recs = Records();
    const wire::Histogram* h = Find(recs, "fp_test_spin_ns", wire::METRIC_WALL_TIME_NS);
    EXPECT_NE(h, nullptr);
    if (h == nullptr) return std::nan("");
    EXPECT_EQ(h->count(), static_cast<uint64_t>(calls));
    const wire::Bucket* b = nullptr;
    for (const auto& bucket : h->buckets()) {
      if (bucket.index() == kBucket) b = &bucket;
    }
    // A run whose calls were mostly disturbed (preempted out of the
    // bucket on a busy machine) says too little: NaN, and the caller runs
    // it again. Half of them in the bucket on both sides is plenty.
    const uint64_t enough = static_cast<uint64_t>(calls) / 2;
    if (b == nullptr || b->sum_hi() != 0 || truth_n < enough || b->count() < enough) {
      return std::nan("");
    }
    const double recorded = static_cast<double>(b->sum_lo()) / static_cast<double>(b->count());
    return recorded / (truth_sum / static_cast<double>(truth_n)) - 1;
  }
};

TEST_F(ClockTest, DurationsAreRightFromTheFirstCall) {
  const std::optional<int64_t> hz = MeasureTscHz();
  const std::string log = dir_.path() + "/debug.log";
  struct Clock {
    std::string name;
    std::vector<std::string> env;
    std::string says;  // in the debug log
    double within;
  };
  // The vDSO clock's readings cost more and vary more than `rdtsc`: what a
  // measured call adds beyond the probe's typical cost is ~10 ns here (a
  // constant, not a rate: 0.4-0.9% of these calls). On the VM of 2026-11-23
  // one run in ten went past 1% (1.18% at most; 2.06% with the vDSO clock),
  // with this runtime and with the one before lab mode alike (2 and 3 of 30
  // interleaved runs): the bounds leave that room. A wrong rate is off by
  // several percent.
  std::vector<Clock> clocks = {
      {"the run's own rate", {}, "clock: TSC, its rate measured by this run", 0.015},
      {"the vDSO clock", {"FIELDPROF_CLOCK=vdso"}, "clock: vDSO CLOCK_MONOTONIC", 0.03}};
  if (hz.has_value()) {
    clocks.push_back({"the machine's rate",
                      {"FIELDPROF_TSC_HZ=" + std::to_string(*hz)},
                      "clock: TSC at the machine's rate, " + std::to_string(*hz) + " Hz",
                      0.015});
  }
  for (Clock& c : clocks) {
    c.env.push_back("FIELDPROF_DEBUG=" + log);
    for (const auto& [calls, mode, times] : {std::tuple<long, std::string, int>{300, "outer", 3},
                                             {130, "nested", 2},
                                             {100000, "outer", 1}}) {
      for (int i = 0; i < times; ++i) {
        // Up to four runs, the best of them: a neighbour on 2 cores can
        // push one run past the bound (1.77% in a CI run) or preempt most
        // of its calls out of the bucket (76% undisturbed under a -j2
        // test run); a wrong rate is off every time.
        double error = std::nan("");
        for (int attempt = 0; attempt < 4; ++attempt) {
          fs::remove(log);
          const double e = Error(calls, mode, c.env);
          EXPECT_NE(ReadFile(log).find(c.says), std::string::npos) << ReadFile(log);
          if (!std::isnan(e) && (std::isnan(error) || std::abs(e) < std::abs(error))) error = e;
          if (!std::isnan(error) && std::abs(error) < c.within) break;
        }
        EXPECT_FALSE(std::isnan(error))
            << c.name << ", " << calls << " " << mode
            << " calls: fewer than half of the calls undisturbed in four runs";
        EXPECT_LT(std::abs(error), c.within) << c.name << ", " << calls << " " << mode
                                             << " calls: recorded " << 100 * error << "% off";
      }
    }
  }
}

// The machine's rate is checked against each run's own clock: one that
// does not hold (a settings file from another machine) measures nothing
// and leaves no record, rather than wrong durations.
TEST_F(ClockTest, ARateTheRunRefutesLeavesNoRecord) {
  const std::optional<int64_t> hz = MeasureTscHz();
  if (!hz.has_value()) GTEST_SKIP() << "no invariant TSC: the runtime uses no rate here";
  const std::string log = dir_.path() + "/debug.log";
  std::vector<std::string> env = Env("fp_test_spin_ns", 1);
  env.insert(env.end(), {"FIELDPROF_TSC_HZ=" + std::to_string(*hz * 3 / 2),
                         "FIELDPROF_DEBUG=" + log, "FIELDPROF_BUDGET=1000"});
  Result r = RunCmd({prog_, "spin", "1500", "3000", "outer", dir_.path() + "/truth"}, env);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_NE(ReadFile(log).find("not measuring, no record"), std::string::npos) << ReadFile(log);
  EXPECT_TRUE(Records().empty());
  // The right rate, the same run: a record.
  env[env.size() - 3] = "FIELDPROF_TSC_HZ=" + std::to_string(*hz);
  r = RunCmd({prog_, "spin", "1500", "3000", "outer", dir_.path() + "/truth"}, env);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_NE(Find(Records(), "fp_test_spin_ns", wire::METRIC_WALL_TIME_NS), nullptr);
}

TEST_F(RuntimeTest, FileBytesWritten) {
  const std::string file = dir_.path() + "/out.bin";
  RunBoth({prog_, "write", file, "3000", "7"}, "fp_test_write");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  const auto* io = Find(recs, "fp_test_write", wire::METRIC_FILE_IO_BYTES);
  ASSERT_NE(io, nullptr);
  EXPECT_EQ(io->count(), 7u);
  EXPECT_EQ(io->sum_lo(), 7u * 3000);
  const auto* sock = Find(recs, "fp_test_write", wire::METRIC_SOCKET_IO_BYTES);
  ASSERT_NE(sock, nullptr);
  EXPECT_EQ(sock->sum_lo(), 0u);
  EXPECT_EQ(sock->zero_count(), 7u);  // recorded one by one: the calls did I/O
}

TEST_F(RuntimeTest, FloatingPointArgumentsAndResultsPassThrough) {
  Result r = RunBoth({prog_, "fsum"}, "fp_test_fsum");
  EXPECT_EQ(r.out, "45.875\ndone fsum\n");
  const auto* wall = Find(Records(), "fp_test_fsum", wire::METRIC_WALL_TIME_NS);
  ASSERT_NE(wall, nullptr);
  EXPECT_EQ(wall->count(), 1u);
}

// Thousands of calls of two APIs in turn, one returning a long double in
// %st0: every result is right (the program checks each against the same
// expression computed without a call), and every call is in the record
// though most durations wait in per-thread batches until the end.
TEST_F(RuntimeTest, FloatingPointResultsThroughBatchesAndBudgetChecks) {
  const std::vector<std::string> argv = {prog_, "fpmany", "5000"};
  Result plain = RunCmd(argv, {});
  std::vector<std::string> env = Env("fp_test_fsum,fp_test_lmul", 2);
  env.push_back("FIELDPROF_BUDGET=1000");  // checked every 1024 calls, never reached
  Result measured = RunCmd(argv, env);
  EXPECT_EQ(measured.exit_code, plain.exit_code);
  EXPECT_EQ(measured.out, plain.out);
  EXPECT_NE(measured.out.find("bad 0"), std::string::npos) << measured.out;
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  for (const char* api : {"fp_test_fsum", "fp_test_lmul"}) {
    const auto* wall = Find(recs, api, wire::METRIC_WALL_TIME_NS);
    ASSERT_NE(wall, nullptr) << api;
    EXPECT_EQ(wall->count(), 5000u) << api;
    const auto* alloc = Find(recs, api, wire::METRIC_ALLOC_COUNT);
    ASSERT_NE(alloc, nullptr) << api;
    EXPECT_EQ(alloc->count(), 5000u) << api;
  }
}

TEST_F(RuntimeTest, ExceptionsThroughAMeasuredCall) {
  Result r = RunBoth({prog_, "throw"}, "_Z13fp_test_throwi");
  EXPECT_EQ(r.out, "caught 2\ndone throw\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  // The 3 calls that returned are measured; the 2 that threw are abandoned.
  const auto* wall = Find(recs, "_Z13fp_test_throwi", wire::METRIC_WALL_TIME_NS);
  ASSERT_NE(wall, nullptr);
  EXPECT_EQ(wall->count(), 3u);
  EXPECT_EQ(recs[0].counters().calls_abandoned(), 2u);
}

TEST_F(RuntimeTest, RealDebianProgramsBehaveTheSame) {
  // Random choices (no force) in real programs, several seeds each.
  const std::vector<std::vector<std::string>> cmds = {
      {"/bin/sh", "-c", "echo hello | tr a-z A-Z"},
      {"/usr/bin/sort", "/etc/passwd"},
      {"/bin/ls", "-la", "/usr/share"},
      {"/usr/bin/python3", "-c",
       "import json,zlib; print(len(zlib.compress(json.dumps(list(range(5000))).encode())))"},
  };
  for (const auto& cmd : cmds) {
    if (!fs::exists(cmd[0])) continue;
    Result plain = RunCmd(cmd, {});
    for (int seed = 1; seed <= 4; ++seed) {
      std::vector<std::string> env = Env("", 2);
      env.push_back("FIELDPROF_SEED=" + std::to_string(seed));
      Result measured = RunCmd(cmd, env);
      EXPECT_EQ(measured.exit_code, plain.exit_code) << cmd[0] << " seed " << seed;
      EXPECT_EQ(measured.out, plain.out) << cmd[0] << " seed " << seed;
    }
  }
  EXPECT_FALSE(Records().empty());
}

TEST_F(RuntimeTest, NoSlotMeansNotMeasuredAndSaysSo) {
  std::vector<std::string> env = Env("fp_test_alloc");
  env.push_back("FIELDPROF_SLOTS=1");
  // Hold the only slot, as another instrumented program would.
  const int fd = HoldSlotZero();
  ASSERT_GE(fd, 0);
  Result r = RunCmd({prog_, "alloc", "100", "3"}, env);
  EXPECT_EQ(r.exit_code, 7);
  // Refused: no record, one more in the spool's counters.
  EXPECT_TRUE(Records().empty());
  StatusOr<RunCounts> counts = ReadRunCounters(spool());
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ((*counts)[kRunRefusedSlot], 1u);
  // Released (as when the holder exits or is killed): measured again.
  close(fd);
  Result again = RunCmd({prog_, "alloc", "100", "3"}, env);
  EXPECT_EQ(again.exit_code, 7);
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_NE(Find(recs, "fp_test_alloc", wire::METRIC_ALLOC_COUNT), nullptr);
  counts = ReadRunCounters(spool());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[kRunRefusedSlot], 1u);
  EXPECT_EQ((*counts)[kRunMeasuredNone], 0u);
}

// The counters file is rewritten in place; a longer old text (a damaged
// tail, or counts the agent took) is cut to the new one, and what was
// counted survives.
TEST_F(RuntimeTest, ACountersFileWithADamagedTailIsCutToTheCounts) {
  std::vector<std::string> env = Env("fp_test_alloc");
  env.push_back("FIELDPROF_SLOTS=1");
  const int fd = HoldSlotZero();
  ASSERT_GE(fd, 0);
  fs::create_directories(spool());
  const std::string counters = spool() + "/.counters";
  {
    std::ofstream out(counters);
    out << "refused_no_slot 4\nmeasured_nothing 2\n" << std::string(300, '#') << "\n";
  }
  EXPECT_EQ(RunCmd({prog_, "alloc", "100", "3"}, env).exit_code, 7);
  close(fd);
  std::ifstream in(counters);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find('#'), std::string::npos) << text;
  StatusOr<RunCounts> counts = ReadRunCounters(spool());
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ((*counts)[kRunRefusedSlot], 5u);
  EXPECT_EQ((*counts)[kRunMeasuredNone], 2u);
}

// Which APIs a run measures depends on which it calls, never on their
// cost: among the APIs a program calls, each is chosen equally often over
// seeds, and one it imports but never calls is never chosen. `some` calls
// eight of the test library's APIs and imports five more; with k = 1 and
// the test library alone allowed, every run must measure exactly one of the
// eight. Chi-square goodness of fit to uniform over 400 seeds (fixed, so
// the test is repeatable): 7 degrees of freedom, rejected at p < 0.001 above
// 24.32 (scipy.stats.chi2.isf(0.001, 7)).
TEST_F(RuntimeTest, TheChoiceIsUniformAmongTheApisCalled) {
  const std::string conf = dir_.path() + "/runtime.conf";
  // The test library is nobody's package: shared by the volunteer, it is
  // chosen at random like the system's code.
  {
    std::ofstream(conf) << "allow_modules = libfieldprof_testlib.so\n"
                        << "share_modules = libfieldprof_testlib.so\n";
  }
  const std::set<std::string> called = {"fp_test_alloc", "fp_test_sleep_us", "fp_test_fsum",
                                        "fp_test_lmul",  "fp_test_vsum",     "fp_test_many",
                                        "fp_test_big",   "fp_test_pair"};
  constexpr int kSeeds = 400;
  std::map<std::string, int> chosen;
  int without_data = 0;
  const std::string plain = RunCmd({prog_, "some"}, {}).out;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    std::vector<std::string> env = Env("", 1);
    env.push_back("FIELDPROF_SEED=" + std::to_string(seed));
    env.push_back("FIELDPROF_SETTINGS=" + conf);
    Result r = RunCmd({prog_, "some"}, env);
    ASSERT_EQ(r.exit_code, 7) << "seed " << seed;
    ASSERT_EQ(r.out, plain) << "seed " << seed;
    std::set<std::string> measured;
    for (const auto& rec : Records()) {
      for (const auto& one : rec.records()) measured.insert(one.key().symbol());
    }
    fs::remove_all(spool());
    if (measured.empty()) {
      ++without_data;
      continue;
    }
    ASSERT_EQ(measured.size(), 1u) << "seed " << seed;
    EXPECT_EQ(called.count(*measured.begin()), 1u)
        << "seed " << seed << " measured " << *measured.begin() << ", which is never called";
    ++chosen[*measured.begin()];
  }
  EXPECT_EQ(without_data, 0);
  const double expected = static_cast<double>(kSeeds - without_data) / called.size();
  double chi2 = 0;
  std::string table;
  for (const std::string& api : called) {
    const double d = chosen[api] - expected;
    chi2 += d * d / expected;
    table += api + " " + std::to_string(chosen[api]) + "; ";
  }
  EXPECT_LT(chi2, 24.32) << table;
}

// The agent's parser (common/settings/runtime_settings.cc) and the runtime's
// (agent/preload/runtime/front/decide.cc) take their names and ranges from one table,
// common/settings/settings_rules.h. For every setting, the last value it takes is
// taken by both (the run is measured) and the first it does not is refused
// by both (the run is not measured, and nothing else changes for it). The
// run forces fp_test_alloc, so a run that takes its settings measures it
// whatever its seed; tsc_hz takes this machine's rate (a rate the run's
// own clock contradicts is not measured, by design).
TEST_F(RuntimeTest, TheAgentAndTheRuntimeApplyTheSameSettingsRules) {
  const std::optional<int64_t> tsc_hz = MeasureTscHz();
  ASSERT_TRUE(tsc_hz.has_value());
  const std::string conf = dir_.path() + "/runtime.conf";
  const std::string slots = dir_.path() + "/slots";
  const std::string base =
      "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\n"
      "max_load_per_cpu = 1000\nslots = 64\nforce = fp_test_alloc\n"
      "spool_dir = " +
      spool() + "\nslot_dir = " + slots + "\n";
  const std::string list_head = "libfieldprof_testlib.so,";
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"consent", {"yes", "maybe"}},
      {"k", {"8", "9"}},
      {"slots", {"1024", "1025"}},
      {"max_load_per_cpu", {"1e+06", "1000001"}},
      {"overhead_budget", {"1000", "1000.5"}},
      {"sample_fraction", {"+1", "1.01"}},
      {"max_runs_per_minute", {"1000000", "1000001"}},
      {"spool_dir", {spool(), spool() + "/" + std::string(500, 'x')}},
      {"spool_cap_mib", {"1048576", "1048577"}},
      {"allow_modules",
       {list_head + std::string(1023 - list_head.size(), 'x'),
        list_head + std::string(1024 - list_head.size(), 'x')}},
      {"deny_modules", {std::string(1023, 'x'), std::string(1024, 'x')}},
      {"slot_dir", {slots, slots + "/" + std::string(500, 'x')}},
      {"force", {"fp_test_alloc", std::string(1024, 'x')}},
      {"tsc_hz", {std::to_string(*tsc_hz), std::to_string(FP_MIN_TSC_HZ - 1)}},
      {"seed", {"18446744073709551615", "18446744073709551616"}},
      {"points", {"libx.so:" + std::string(1015, 'x'), "libx.so:" + std::string(1016, 'x')}},
      {"live_dir", {dir_.path() + "/live", dir_.path() + "/" + std::string(511, 'x')}},
      {"stack_hz", {"1000", "1001"}},
      {"system_code", {testing::SystemCodeList(), "/" + std::string(511, 'x')}},
      {"share_modules", {std::string(1023, 'x'), std::string(1024, 'x')}},
  };
  for (const settings_rules::Rule& rule : settings_rules::kRules) {
    EXPECT_EQ(cases.count(rule.name), 1u) << "no case for the setting " << rule.name;
  }
  const std::string plain = RunCmd({prog_, "alloc", "100", "3"}, {}).out;
  for (const auto& [name, values] : cases) {
    for (const bool ok : {true, false}) {
      const std::string text = base + name + " = " + (ok ? values.first : values.second) + "\n";
      { std::ofstream(conf) << text; }
      EXPECT_EQ(ParseRuntimeSettings(text).ok(), ok) << name << (ok ? " taken" : " refused");
      const Result r = RunCmd(
          {prog_, "alloc", "100", "3"},
          {"FIELDPROF_SETTINGS=" + conf, "LD_PRELOAD=" + std::string(FIELDPROF_PRELOAD_LIB)});
      EXPECT_EQ(r.exit_code, 7) << name;
      EXPECT_EQ(r.out, plain) << name;
      const size_t records = fs::exists(spool()) ? Records().size() : 0;
      EXPECT_EQ(records > 0, ok) << name << " = "
                                 << (ok ? values.first : values.second).substr(0, 40) << ": "
                                 << records << " records";
      fs::remove_all(spool());
    }
  }
}

// Without consent, or not sampled, a field run leaves nothing behind: no
// spool, no slot or rate file, no counter; the program's output is its own.
TEST_F(RuntimeTest, ARunNotMeasuredLeavesNoTrace) {
  const std::string conf = dir_.path() + "/runtime.conf";
  const std::string plain = RunCmd({prog_, "alloc", "100", "3"}, {}).out;
  for (const std::string& first : {std::string("consent = no\nsample_fraction = 1\n"),
                                   std::string("consent = yes\nsample_fraction = 0\n")}) {
    {
      std::ofstream(conf) << first << "max_runs_per_minute = 0\nspool_dir = " << spool()
                          << "\nslot_dir = " << dir_.path() << "/slots\n";
    }
    const std::vector<std::string> env = {"FIELDPROF_SETTINGS=" + conf,
                                          "LD_PRELOAD=" + std::string(FIELDPROF_PRELOAD_LIB)};
    Result r = RunCmd({prog_, "alloc", "100", "3"}, env);
    EXPECT_EQ(r.exit_code, 7) << first;
    EXPECT_EQ(r.out, plain) << first;
    EXPECT_FALSE(fs::exists(spool())) << first;
    EXPECT_FALSE(fs::exists(dir_.path() + "/slots")) << first;
  }
  // The same file with consent and every run sampled: measured (the test
  // above would pass for a runtime that never measures).
  {
    std::ofstream(conf) << "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\n"
                        << "max_load_per_cpu = 1000\nspool_dir = " << spool()
                        << "\nslot_dir = " << dir_.path() << "/slots\n";
  }
  Result r =
      RunCmd({prog_, "alloc", "100", "3"},
             {"FIELDPROF_SETTINGS=" + conf, "LD_PRELOAD=" + std::string(FIELDPROF_PRELOAD_LIB)});
  EXPECT_EQ(r.out, plain);
  EXPECT_TRUE(fs::exists(dir_.path() + "/slots"));
  EXPECT_TRUE(fs::exists(spool()));
}

// `fieldprof optout` while a measured program still runs (the shell it
// was typed in, most often): the program writes no record when it ends,
// and makes no spool. The same run without the change leaves its record.
TEST_F(RuntimeTest, ConsentWithdrawnDuringARunLeavesNoRecord) {
  const std::string conf = dir_.path() + "/runtime.conf";
  const auto write_conf = [&](const char* consent) {
    std::ofstream(conf) << "consent = " << consent
                        << "\nsample_fraction = 1\nmax_runs_per_minute = 0\n"
                        << "max_load_per_cpu = 1000\nforce = fp_test_sleep_us\nspool_dir = "
                        << spool() << "\nslot_dir = " << dir_.path() << "/slots\n";
  };
  for (const bool withdraw : {false, true}) {
    write_conf("yes");
    fs::remove_all(spool());
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("FIELDPROF_SETTINGS", conf.c_str(), 1);
      setenv("LD_PRELOAD", FIELDPROF_PRELOAD_LIB, 1);
      // 40 sleeps of 50 ms.
      execl(prog_.c_str(), prog_.c_str(), "sleep", "50000", "40", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Asleep in main's loop: past the start, where the run was decided.
    const bool asleep = testing::WaitUntil(
        [&] {
          std::ifstream in("/proc/" + std::to_string(pid) + "/syscall");
          long nr = -1;
          in >> nr;
          return nr == 230 || nr == 35;  // clock_nanosleep, nanosleep
        },
        std::chrono::seconds(10));
    EXPECT_TRUE(asleep);
    if (withdraw) write_conf("no");
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << status;
    if (withdraw) {
      EXPECT_FALSE(fs::exists(spool())) << "a record, or the spool, after consent was withdrawn";
    } else {
      EXPECT_EQ(Records().size(), 1u) << "measured, consent standing";
    }
  }
}

// A run that calls none of its chosen APIs leaves no file: one more in the
// spool's counters instead.
TEST_F(RuntimeTest, ARunThatMeasuresNothingLeavesNoFileAndIsCounted) {
  for (int i = 1; i <= 3; ++i) {
    // fp_test_alloc chosen (alone), never called by `sleep`.
    Result r = RunCmd({prog_, "sleep", "0", "2"}, Env("fp_test_alloc"));
    EXPECT_EQ(r.exit_code, 7);
    EXPECT_TRUE(Records().empty());
    StatusOr<RunCounts> counts = ReadRunCounters(spool());
    ASSERT_TRUE(counts.ok()) << counts.status().ToString();
    EXPECT_EQ((*counts)[kRunMeasuredNone], static_cast<uint64_t>(i));
  }
  // The same API called: a record, and the count stays.
  ASSERT_EQ(RunCmd({prog_, "alloc", "100", "3"}, Env("fp_test_alloc")).exit_code, 7);
  EXPECT_EQ(Records().size(), 1u);
  StatusOr<RunCounts> counts = ReadRunCounters(spool());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[kRunMeasuredNone], 3u);
}

// The machine-wide rate cap under many programs starting at once, as a
// shell loop starts them: every run is either measured (a record) or
// counted as refused, none both, none lost; and no more are measured than
// the cap lets through in the time they took. A field run (consent from the
// settings file): `fieldprof run` (FIELDPROF_RUN) is not capped.
TEST_F(RuntimeTest, TheRateCapHoldsForManyProgramsStartingAtOnce) {
  const std::string conf = dir_.path() + "/runtime.conf";
  // 6 a minute: one run now (a burst of 1), the next 10 s later. A field
  // run takes nothing from FIELDPROF_* but the settings file's path.
  {
    std::ofstream(conf) << "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 6\n"
                        << "k = 1\nforce = fp_test_alloc\nslots = 64\nmax_load_per_cpu = 1000\n"
                        << "spool_dir = " << spool() << "\nslot_dir = " << dir_.path()
                        << "/slots\n";
  }
  std::vector<std::string> env = extra_env_;
  env.push_back("FIELDPROF_SETTINGS=" + conf);
  env.push_back("LD_PRELOAD=" + std::string(FIELDPROF_PRELOAD_LIB));
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {prog_, "alloc", "100", "3"});
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);

  constexpr int kRuns = 40;
  const auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  for (int i = 0; i < kRuns; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      execv(args[0], args.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << status;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto recs = Records();
  StatusOr<RunCounts> counts = ReadRunCounters(spool());
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  const uint64_t measured = recs.size();
  EXPECT_GE(measured, 1u);
  EXPECT_LE(measured, 1u + static_cast<uint64_t>(seconds / 10)) << seconds << " s";
  EXPECT_EQ(measured + (*counts)[kRunRefusedRate], static_cast<uint64_t>(kRuns));
  EXPECT_EQ((*counts)[kRunRefusedSlot] + (*counts)[kRunRefusedLoad] + (*counts)[kRunMeasuredNone],
            0u);
  for (const auto& r : recs)
    EXPECT_NE(Find({r}, "fp_test_alloc", wire::METRIC_ALLOC_COUNT), nullptr);
}

// The spool's cap holds when programs end at the same moment; the size
// kept in .usage is exact afterwards; and a count older than a minute is
// redone, so records removed meanwhile (uploaded) free their room.
TEST_F(RuntimeTest, TheSpoolCapHoldsForProgramsEndingAtOnce) {
  const std::string conf = dir_.path() + "/runtime.conf";
  { std::ofstream(conf) << "spool_cap_mib = 1\n"; }
  std::vector<std::string> env = Env("fp_test_alloc");
  env.push_back("FIELDPROF_SETTINGS=" + conf);
  ASSERT_EQ(RunCmd({prog_, "alloc", "100", "3"}, env).exit_code, 7);
  auto first = ListSpool(spool());
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  const uint64_t record = (*first)[0].bytes, cap = uint64_t{1} << 20;
  // Room left for three and a half records of that size.
  const uint64_t filler = cap - record - (7 * record) / 2;
  {
    std::ofstream f(spool() + "/run-1-1-00000000.fpr", std::ios::binary);
    f << std::string(filler, 'x');
  }
  fs::remove(spool() + "/.usage");
  std::string cmd = "for i in 1 2 3 4 5 6 7 8; do env";
  for (const std::string& e : env) cmd += " " + ShellQuote(e);
  cmd += " " + ShellQuote(prog_) + " alloc 100 3 >/dev/null & done; wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const auto total = [&] {
    uint64_t bytes = 0;
    size_t n = 0;
    const auto entries = ListSpool(spool());
    EXPECT_TRUE(entries.ok());
    for (const SpoolEntry& e : entries.ok() ? *entries : std::vector<SpoolEntry>{}) {
      bytes += e.bytes;
      ++n;
    }
    return std::pair{bytes, n};
  };
  // Records differ by some bytes (their durations differ), so how many of
  // the eight fit is not exact; but some did, some did not, the cap holds,
  // and less room than two records is left.
  auto [bytes, files] = total();
  EXPECT_LE(bytes, cap);
  EXPECT_GT(files, 2u) << "the first run, the filler, and none of the eight";
  EXPECT_LT(files, 2u + 8u) << "all eight fitted";
  EXPECT_LT(cap - bytes, 2 * record);
  const auto usage = [&] {
    unsigned long long b = 0;
    long long at = 0;
    std::istringstream(ReadFile(spool() + "/.usage")) >> b >> at;
    return std::pair<uint64_t, long long>{b, at};
  };
  EXPECT_EQ(usage().first, bytes);
  // The agent uploads and removes the filler; once the count is stale the
  // next run sees the room.
  fs::remove(spool() + "/run-1-1-00000000.fpr");
  { std::ofstream(spool() + "/.usage") << bytes << " " << usage().second - 61 << "\n"; }
  const size_t before = files - 1;
  ASSERT_EQ(RunCmd({prog_, "alloc", "100", "3"}, env).exit_code, 7);
  std::tie(bytes, files) = total();
  EXPECT_EQ(files, before + 1);
  EXPECT_EQ(usage().first, bytes);
}

TEST_F(RuntimeTest, AFullSpoolDiskLeavesNothingCorrupt) {
  // A 64 KiB tmpfs as the spool's disk, in a mount namespace of our own,
  // filled up; the program runs as ever and no partial record is left.
  // Then space is freed and the next run's record arrives whole.
  if (std::system("unshare -Urm true 2>/dev/null") != 0) {
    GTEST_SKIP() << "no user and mount namespaces here (unshare -Urm)";
  }
  const std::string d = dir_.path();
  fs::create_directories(d + "/full");
  fs::create_directories(d + "/copy_full");
  fs::create_directories(d + "/copy_free");
  const Result plain = RunCmd({prog_, "alloc", "5000", "40"}, {});
  std::string env;
  for (std::string e : Env("fp_test_alloc")) {
    if (e.rfind("FIELDPROF_SPOOL=", 0) == 0) e = "FIELDPROF_SPOOL=" + d + "/full/spool";
    env += " " + ShellQuote(e);
  }
  const std::string run = "env" + env + " " + ShellQuote(prog_) + " alloc 5000 40";
  const std::string script =
      "mount -t tmpfs -o size=64k none " + d + "/full && mkdir " + d + "/full/spool || exit 1; " +
      "dd if=/dev/zero of=" + d + "/full/filler bs=4k count=64 2>/dev/null || true; " + run +
      " > " + d + "/out_full; echo $? > " + d + "/rc_full; " + "cp -a " + d + "/full/spool/. " + d +
      "/copy_full/; rm " + d + "/full/filler; " + run + " > " + d + "/out_free; echo $? > " + d +
      "/rc_free; cp -a " + d + "/full/spool/. " + d + "/copy_free/";
  ASSERT_EQ(std::system(("unshare -Urm sh -c " + ShellQuote(script)).c_str()), 0);
  EXPECT_EQ(ReadFile(d + "/out_full"), plain.out);
  EXPECT_EQ(ReadFile(d + "/rc_full"), "7\n");
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(d + "/copy_full")) {
    if (e.path().filename() == ".usage") continue;  // the spool's size, not a record
    ADD_FAILURE() << "left on the full disk: " << e.path();
    ++left;
  }
  EXPECT_EQ(left, 0u);
  EXPECT_EQ(ReadFile(d + "/out_free"), plain.out);
  auto files = ListSpool(d + "/copy_free");
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 1u);
  auto rec = ReadRunRecord((*files)[0].path);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(Find({*rec}, "fp_test_alloc", wire::METRIC_ALLOC_BYTES_INCLUSIVE)->count(), 40u);
}

TEST_F(RuntimeTest, AKilledProcessFreesItsSlot) {
  // A measured program holds the only slot...
  std::vector<std::string> env = Env("fp_test_sleep_us");
  env.push_back("FIELDPROF_SLOTS=1");
  const std::string log = dir_.path() + "/holder.log";
  env.push_back("FIELDPROF_DEBUG=" + log);
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    for (const auto& e : env) putenv(strdup(e.c_str()));
    execl(prog_.c_str(), prog_.c_str(), "sleep", "100000", "200", static_cast<char*>(nullptr));
    _exit(127);
  }
  // ...once it has bound its API (after taking the slot)...
  bool bound = false;
  for (int i = 0; i < 500 && !bound; ++i) {
    bound = ReadFile(log).find("bound") != std::string::npos;
    if (!bound) usleep(10000);
  }
  ASSERT_TRUE(bound) << "the holder never started measuring";
  std::vector<std::string> env2 = Env("fp_test_alloc");
  env2.push_back("FIELDPROF_SLOTS=1");
  EXPECT_EQ(RunCmd({prog_, "alloc", "100", "3"}, env2).exit_code, 7);  // refused
  // ...and is killed: no chance to clean up, yet the slot is free again.
  kill(holder, SIGKILL);
  int st = 0;
  waitpid(holder, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(RunCmd({prog_, "alloc", "100", "3"}, env2).exit_code, 7);  // measured
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);  // the killed holder left none, the refused run none
  StatusOr<RunCounts> counts = ReadRunCounters(spool());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[kRunRefusedSlot], 1u);
  const auto* count = Find(recs, "fp_test_alloc", wire::METRIC_ALLOC_COUNT);
  ASSERT_NE(count, nullptr);
  EXPECT_EQ(count->count(), 3u);
}

// Host safety: real Debian programs nobody here wrote, each under many random
// choices of APIs, must give exactly the exit code and output of a run
// without fieldprof. Includes threaded programs (xz -T2, zstd -T2, sort
// --parallel) and shell pipelines, whose every process is instrumented.
TEST_F(RuntimeTest, HostSafetyManySeeds) {
  const std::string d = dir_.path();
  {
    std::ofstream data(d + "/data.txt");
    for (int i = 0; i < 20000; ++i) data << "line " << (i * 7919) % 10007 << " of the data\n";
  }
  const std::string sql =
      "create table t(k integer primary key, v text, n real);"
      "with recursive c(x) as (select 1 union all select x+1 from c where x<3000)"
      " insert into t select x, 'v' || (x % 97), x * 1.5 from c;"
      "create index tv on t(v);"
      "select v, count(*), sum(n) from t group by v order by v limit 5;"
      "select count(*) from t where v like 'v1%';";
  const std::vector<std::vector<std::string>> cmds = {
      {"/usr/bin/sqlite3", ":memory:", sql},
      {"/bin/sh", "-c", "gzip -c " + d + "/data.txt | gzip -dc | md5sum"},
      {"/bin/sh", "-c", "zstd -q -T2 -c " + d + "/data.txt | zstd -q -dc | sha256sum"},
      {"/bin/sh", "-c", "xz -T2 -c " + d + "/data.txt | xz -dc | wc -c"},
      {"/bin/sh", "-c", "bzip2 -c " + d + "/data.txt | bzip2 -dc | tail -n 2"},
      {"/usr/bin/sort", "--parallel=2", "-S", "1M", d + "/data.txt"},
      {"/bin/sh", "-c",
       "rm -rf " + d + "/repo && git init -q " + d + "/repo && cd " + d +
           "/repo && cp ../data.txt . && git add data.txt && "
           "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z "
           "git -c user.name=t -c user.email=t@example.org commit -qm first && "
           "git log --format='%H %s' && git cat-file -p 'HEAD^{tree}'"},
      {"/usr/bin/python3", "-c",
       "import hashlib,json,re; s=open('" + d +
           "/data.txt').read(); print(len(re.findall(r'of', s)), "
           "hashlib.sha1(json.dumps(sorted(set(s.split()))).encode()).hexdigest())"},
  };
  int runs = 0;
  for (const auto& cmd : cmds) {
    if (!fs::exists(cmd[0])) {
      ADD_FAILURE() << cmd[0] << " is missing: run deploy/install-deps.sh";
      continue;
    }
    Result plain = RunCmd(cmd, {});
    ASSERT_EQ(plain.exit_code, 0) << cmd.back();
    for (int seed = 1; seed <= 10; ++seed) {
      std::vector<std::string> env = Env("", 3);
      env.push_back("FIELDPROF_SEED=" + std::to_string(seed * 7777));
      Result measured = RunCmd(cmd, env);
      EXPECT_EQ(measured.exit_code, plain.exit_code) << cmd.back() << " seed " << seed;
      EXPECT_EQ(measured.out, plain.out) << cmd.back() << " seed " << seed;
      ++runs;
    }
  }
  EXPECT_EQ(runs, 80);
  // And they were measured: records with data from these programs.
  size_t with_data = 0;
  for (const auto& r : Records()) with_data += r.records_size() > 0;
  EXPECT_GT(with_data, 40u);
}

// A record holds keys, histograms and counters only: no program path,
// argument, environment, user or host name.
TEST_F(RuntimeTest, RecordsCarryNothingPrivate) {
  std::vector<std::string> env = Env("fp_test_write");
  env.push_back("FIELDPROF_TEST_SECRET=SecretEnvValue42");
  const std::string file = dir_.path() + "/SecretArgFile42";
  Result r = RunCmd({prog_, "write", file, "100", "3"}, env);
  EXPECT_EQ(r.exit_code, 7);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const char* user = getenv("USER");
  std::vector<std::string> secrets = {
      "SecretEnvValue42", "SecretArgFile42", dir_.path(), prog_, "fieldprof_testprog", host};
  if (user != nullptr && std::strlen(user) >= 3) secrets.push_back(user);
  int files = 0;
  for (const auto& e : fs::directory_iterator(spool())) {
    const std::string bytes = ReadFile(e.path());
    for (const auto& secret : secrets) {
      if (secret.empty()) continue;
      EXPECT_EQ(bytes.find(secret), std::string::npos) << secret << " in " << e.path();
    }
    if (e.path().extension() == ".fpr") {
      ++files;
    } else {
      EXPECT_EQ(e.path().filename(), ".usage");  // the spool's size: two numbers
    }
  }
  EXPECT_EQ(files, 1);
  EXPECT_NE(Find(Records(), "fp_test_write", wire::METRIC_FILE_IO_BYTES), nullptr);
}

// The hazards a generic wrapper must survive, each in a real process with
// the API forced, compared with an uninstrumented run. The overhead budget
// is lifted so that exact call counts can be checked.
class HazardTest : public RuntimeTest {
 protected:
  Result Run(const std::vector<std::string>& args, const std::string& force, int k = 1) {
    std::vector<std::string> argv = {prog_};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env = Env(force, k);
    env.push_back("FIELDPROF_BUDGET=1000");
    Result plain = RunCmd(argv, {});
    Result measured = RunCmd(argv, env);
    EXPECT_EQ(measured.exit_code, plain.exit_code) << args[0];
    EXPECT_EQ(measured.out, plain.out) << args[0];
    EXPECT_EQ(measured.exit_code, 7) << args[0];
    return measured;
  }
  // Calls of `symbol` (wall time histogram) summed over every record.
  uint64_t Calls(const std::vector<wire::RunRecord>& recs, const std::string& symbol) {
    uint64_t n = 0;
    for (const auto& r : recs) {
      for (const auto& rec : r.records()) {
        if (rec.key().symbol() == symbol && rec.key().metric() == wire::METRIC_WALL_TIME_NS) {
          n += rec.histogram().count();
        }
      }
    }
    return n;
  }
};

TEST_F(HazardTest, Recursion) {
  Result r = Run({"recurse", "50"}, "fp_test_recurse");
  EXPECT_EQ(r.out, "sum 1275\ndone recurse\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  // The outer levels are measured, nested; past the shadow stack's depth
  // (32) calls run unmeasured and are counted as dropped.
  EXPECT_EQ(Calls(recs, "fp_test_recurse"), 32u);
  EXPECT_EQ(recs[0].counters().calls_dropped(), 19u);
}

TEST_F(HazardTest, NestedCallsSplitBytesIntoInclusiveAndExclusive) {
  // fp_test_callback allocates 300 bytes itself and calls fp_test_alloc(5000),
  // measured too: before its own allocation in half of the calls (the
  // nested call is the first to move the counters), after it in the rest.
  Result r = Run({"nested", "10"}, "fp_test_callback,fp_test_alloc", 2);
  EXPECT_EQ(r.out, "done nested\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  const auto sum = [&](const char* symbol, wire::Metric m) -> uint64_t {
    const auto* h = Find(recs, symbol, m);
    if (h == nullptr) return ~uint64_t{0};
    EXPECT_EQ(h->count(), 10u) << symbol << " " << m;
    return h->sum_lo();
  };
  EXPECT_EQ(sum("fp_test_callback", wire::METRIC_ALLOC_BYTES_INCLUSIVE), 10u * 5300);
  EXPECT_EQ(sum("fp_test_callback", wire::METRIC_ALLOC_BYTES_EXCLUSIVE), 10u * 300);
  EXPECT_EQ(sum("fp_test_callback", wire::METRIC_ALLOC_COUNT), 10u * 2);
  EXPECT_EQ(sum("fp_test_alloc", wire::METRIC_ALLOC_BYTES_INCLUSIVE), 10u * 5000);
  EXPECT_EQ(sum("fp_test_alloc", wire::METRIC_ALLOC_BYTES_EXCLUSIVE), 10u * 5000);
  EXPECT_EQ(sum("fp_test_alloc", wire::METRIC_ALLOC_COUNT), 10u);
  const auto* bytes = Find(recs, "fp_test_callback", wire::METRIC_ALLOC_BYTES_EXCLUSIVE);
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(bytes->min(), 300u);
  EXPECT_EQ(bytes->max(), 300u);
}

TEST_F(HazardTest, VarargsAndStackArguments) {
  Result r = Run({"varargs"}, "fp_test_vsum,fp_test_many", 2);
  EXPECT_EQ(r.out, "55.750\n385\ndone varargs\n");
  auto recs = Records();
  EXPECT_EQ(Calls(recs, "fp_test_vsum"), 1u);
  EXPECT_EQ(Calls(recs, "fp_test_many"), 1u);
}

TEST_F(HazardTest, StructReturns) {
  Result r = Run({"structs"}, "fp_test_big,fp_test_pair", 2);
  EXPECT_EQ(r.out, "7 28 42 30 2.50\ndone structs\n");
  auto recs = Records();
  EXPECT_EQ(Calls(recs, "fp_test_big"), 1u);
  EXPECT_EQ(Calls(recs, "fp_test_pair"), 1u);
}

TEST_F(HazardTest, ThreadsCountEveryCall) {
  Run({"threads", "8", "5000"}, "fp_test_alloc");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  // Every call is either in the histogram or counted as dropped.
  EXPECT_EQ(Calls(recs, "fp_test_alloc") + recs[0].counters().calls_dropped(), 40000u);
  const auto* bytes = Find(recs, "fp_test_alloc", wire::METRIC_ALLOC_BYTES_INCLUSIVE);
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(bytes->sum_lo(), 64u * bytes->count());  // per-thread counters, no cross-talk
}

TEST_F(HazardTest, SignalHandlerCallsAMeasuredApi) {
  Result r = Run({"signal"}, "fp_test_alloc,fp_test_spin_us", 2);
  EXPECT_EQ(r.out, "signals handled\ndone signal\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_GT(Calls(recs, "fp_test_alloc"), 0u);
  EXPECT_GT(Calls(recs, "fp_test_spin_us"), 0u);
}

TEST_F(HazardTest, LongjmpOutOfAMeasuredCall) {
  Result r = Run({"longjmp"}, "fp_test_callback");
  EXPECT_EQ(r.out, "jumped 5\ndone longjmp\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  // The 5 calls that returned are measured; the 5 left by longjmp are not,
  // and the shadow stack did not grow with them.
  EXPECT_EQ(Calls(recs, "fp_test_callback"), 5u);
  EXPECT_EQ(recs[0].counters().calls_abandoned(), 5u);
}

TEST_F(HazardTest, ForkChildCarriesOn) {
  Result r = Run({"fork"}, "fp_test_alloc,fp_test_pair", 2);
  EXPECT_EQ(r.out, "child\nparent, child exit 0\ndone fork\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 2u);  // one per process, each with its own calls
  for (const char* api : {"fp_test_alloc", "fp_test_pair"}) {
    EXPECT_EQ(Calls({recs[0]}, api), 5u) << api;
    EXPECT_EQ(Calls({recs[1]}, api), 5u) << api;
  }
}

TEST_F(HazardTest, ForkInsideAMeasuredCall) {
  Result r = Run({"forkin"}, "fp_test_callback");
  EXPECT_EQ(r.out, "child returned\nparent returned, child exit 0\ndone forkin\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 2u);
  // Both processes returned through the stub; the parent measured both of
  // its calls and the child its second one (the first began before fork).
  EXPECT_EQ(Calls(recs, "fp_test_callback"), 4u);
}

TEST_F(HazardTest, ReturnsTwiceFunctionsAreNeverWrapped) {
  // vfork's child would return through the stub on its parent's stack: it
  // is refused even when forced (so are setjmp, getcontext, dlopen, dlsym).
  // waitpid, forced beside it, is what the parent surely measures: left to
  // the random choice among the few APIs it calls, one run in a few
  // hundred measured none and left no record.
  Result r = Run({"vfork"}, "vfork,waitpid", 2);
  EXPECT_EQ(r.out, "vforked 3\ndone vfork\n");
  auto recs = Records();
  EXPECT_EQ(Calls(recs, "vfork"), 0u);
  EXPECT_EQ(Calls(recs, "waitpid"), 3u);
  // The parent's record, and at most one per /bin/true; a vfork child
  // shares its parent's memory, so its exec writes none.
  EXPECT_GE(recs.size(), 1u);
  EXPECT_LE(recs.size(), 4u);
  for (const auto& r : recs) EXPECT_GT(r.counters().calls_measured(), 0u);
}

TEST_F(HazardTest, ExecReplacesTheProgram) {
  Result r = Run({"exec"}, "fp_test_alloc");
  EXPECT_EQ(r.out, "done alloc\n");
  auto recs = Records();
  // Each image leaves its own record: the old one's is written before the
  // exec (1 call), the new one's at its exit (3 calls).
  ASSERT_EQ(recs.size(), 2u);
  std::vector<uint64_t> calls;
  for (const auto& rec : recs) calls.push_back(Calls({rec}, "fp_test_alloc"));
  std::sort(calls.begin(), calls.end());
  EXPECT_EQ(calls, (std::vector<uint64_t>{1, 3}));
}

TEST_F(HazardTest, FailedExecCountsEveryCallOnce) {
  Result r = Run({"execfail"}, "fp_test_alloc");
  EXPECT_EQ(r.out, "done execfail\n");
  auto recs = Records();
  // One record before the exec was tried, one at exit; no call in both.
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(Calls(recs, "fp_test_alloc"), 3u);
}

TEST_F(HazardTest, RepeatedFailedExecsLeaveNoEmptyRecords) {
  // Like a shell trying each PATH entry: 5 failed execs in a row, nothing
  // measured in between, then one call and a normal exit.
  Result r = Run({"execfail5"}, "fp_test_alloc");
  EXPECT_EQ(r.out, "done execfail5\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 2u);  // before the first attempt; at exit
  EXPECT_EQ(Calls(recs, "fp_test_alloc"), 2u);
}

TEST_F(HazardTest, UnderscoreExitLeavesARecord) {
  Result r = Run({"_exit"}, "fp_test_alloc");
  EXPECT_EQ(r.out, "done _exit\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(Calls(recs, "fp_test_alloc"), 2u);
}

TEST_F(HazardTest, OverheadBudgetStopsMeasuringAndSaysSo) {
  // 2,000,000 calls of a function that takes a few ns: measuring them all
  // would cost several times the run, far past a 1% budget. Once it is
  // spent the callers' GOT entries point at the function itself, also in a
  // BIND_NOW + RELRO program whose GOT is read-only by then.
  for (const std::string& prog : {prog_, std::string(FIELDPROF_TESTPROG_NOW)}) {
    fs::remove_all(spool());
    const std::vector<std::string> argv = {prog, "many", "2000000"};
    Result plain = RunCmd(argv, {});
    std::vector<std::string> env = Env("fp_test_pair");
    const std::string log = dir_.path() + "/budget.log";
    fs::remove(log);
    env.push_back("FIELDPROF_BUDGET=0.01");
    env.push_back("FIELDPROF_DEBUG=" + log);
    Result measured = RunCmd(argv, env);
    EXPECT_EQ(measured.exit_code, plain.exit_code) << prog;
    EXPECT_EQ(measured.out, plain.out) << prog;
    auto recs = Records();
    ASSERT_EQ(recs.size(), 1u) << prog;
    const uint64_t calls = Calls(recs, "fp_test_pair");
    EXPECT_GE(calls, 1024u) << prog;     // measured until the first check past the budget
    EXPECT_LT(calls, 2000000u) << prog;  // and not after
    EXPECT_EQ(recs[0].counters().apis_truncated(), 1u) << prog;
    bool marked = false;
    for (const auto& rec : recs[0].records()) marked |= rec.truncated();
    EXPECT_TRUE(marked) << prog;
    EXPECT_NE(ReadFile(log).find("fp_test_pair stops measuring; 1 of its call sites now call it "
                                 "directly"),
              std::string::npos)
        << prog << "\n"
        << ReadFile(log);
  }
}

TEST_F(HazardTest, DlopenDlcloseAndOpenAgain) {
  Result r = Run({"dlopen", FIELDPROF_TESTLIB2}, "libfieldprof_testlib2.so:fp_test2_work");
  EXPECT_EQ(r.out.substr(r.out.size() - 12), "done dlopen\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  // Found through dlsym, measured in both openings; the record is written
  // after the library was closed.
  EXPECT_EQ(Calls(recs, "fp_test2_work"), 6u);
  for (const auto& rec : recs[0].records()) {
    EXPECT_EQ(rec.key().module(), "libfieldprof_testlib2.so");
  }
}

// dl_iterate_phdr lists a library as soon as dlopen has mapped it, while
// that dlopen may still be relocating it in another thread. The binder
// must not trap such a library yet: making its RELRO pages read-only again
// under the dynamic linker crashed the program (half the runs of 3,000
// openings did, before the binder waited for relocation to end). Each
// opening is still measured once done.
TEST_F(HazardTest, ADlopenInOneThreadWhileAnotherLooksUp) {
  for (int round = 0; round < 3; ++round) {
    Result r = Run({"dlrace", FIELDPROF_TESTLIB_RELRO, "200"},
                   "libfieldprof_testlib_relro.so:fp_relro_len,strlen", 2);
    EXPECT_EQ(r.out, "dlrace 1800\ndone dlrace\n") << round;
    auto recs = Records();
    ASSERT_EQ(recs.size(), static_cast<size_t>(round + 1));
    EXPECT_EQ(Calls({recs.back()}, "fp_relro_len"), 200u) << round;
  }
}

// A library opened, closed and opened again, its new load one page below
// the old one (a page held at the old top pushes it down): the old place
// is covered by the new load. Its API is measured in both loads, reached
// through dlsym or through the PLT of a plugin that brought the library
// with it (there the new load need only be elsewhere). Another build of
// the module under the same name, opened the same way, is not: the slot's
// key names one build.
// The layout depends on where the kernel put things (address space
// randomization): a run that did not get it (testprog exits 9) is run
// again, plain and measured each at most 5 times, the spool emptied.
TEST_F(HazardTest, AReopenedLibraryOverItsOldPlaceIsMeasured) {
  const std::string force = "libfieldprof_testlib_relro.so:fp_relro_len";
  const auto run = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {prog_};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env = Env(force);
    env.push_back("FIELDPROF_BUDGET=1000");
    Result plain, measured;
    for (int i = 0; i < 5 && (i == 0 || plain.exit_code == 9); ++i) plain = RunCmd(argv, {});
    for (int i = 0; i < 5 && (i == 0 || measured.exit_code == 9); ++i) {
      fs::remove_all(spool());
      measured = RunCmd(argv, env);
    }
    EXPECT_EQ(plain.exit_code, 7) << args[0] << ": 9 is a layout not had in 5 runs";
    EXPECT_EQ(measured.exit_code, 7) << args[0] << ": 9 is a layout not had in 5 runs";
    EXPECT_EQ(measured.out, plain.out) << args[0];
    return measured;
  };
  for (const auto& [mode, lib, fn] :
       {std::tuple{"reopenover", FIELDPROF_TESTLIB_RELRO, "fp_relro_len"},
        std::tuple{"reopenmoved", FIELDPROF_TESTLIB_PLUGIN, "fp_plugin_len"}}) {
    Result r = run({mode, lib, fn});
    EXPECT_EQ(r.out, std::string("reopen 34\ndone ") + mode + "\n") << fn;
    auto recs = Records();
    ASSERT_EQ(recs.size(), 1u) << fn;
    EXPECT_EQ(Calls(recs, "fp_relro_len"), 4u) << fn;
  }

  // The same library with one byte of its build id changed.
  const std::string other =
      dir_.path() + "/other/" + fs::path(FIELDPROF_TESTLIB_RELRO).filename().string();
  fs::create_directories(fs::path(other).parent_path());
  std::string bytes = ReadFile(FIELDPROF_TESTLIB_RELRO);
  const std::string note("\x04\0\0\0\x14\0\0\0\x03\0\0\0GNU\0", 16);
  const size_t at = bytes.find(note);
  ASSERT_NE(at, std::string::npos);
  bytes[at + note.size()] ^= 1;
  std::ofstream(other, std::ios::binary) << bytes;
  fs::permissions(other, fs::perms::owner_all);
  Result r = run({"reopenover", FIELDPROF_TESTLIB_RELRO, "fp_relro_len", other});
  EXPECT_EQ(r.out, "reopen 34\ndone reopenover\n");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(Calls(recs, "fp_relro_len"), 2u);
  for (const auto& rec : recs[0].records()) {
    EXPECT_EQ(rec.key().module(), "libfieldprof_testlib_relro.so");
  }
}

// Module names in keys are file names (common/wire/key_rules.h): a library
// loaded from a deep path with no soname is named by its file name only;
// a soname that is a path by its last part; a file name no key may hold
// leaves the library unmeasured, and the program runs on unharmed.
TEST_F(HazardTest, ModuleNamesAreFileNamesNeverPaths) {
  const std::string deep = dir_.path() + "/home/alice/My Projects/build";
  fs::create_directories(deep);
  fs::copy_file(FIELDPROF_TESTLIB2_NOSONAME, deep + "/libsecret.so");
  Result r = Run({"dlopen", deep + "/libsecret.so"}, "fp_test2_work");
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(Calls(recs, "fp_test2_work"), 6u);
  for (const auto& rec : recs[0].records()) EXPECT_EQ(rec.key().module(), "libsecret.so");

  fs::remove_all(spool());
  Run({"dlopen", FIELDPROF_TESTLIB2_PATHSONAME}, "fp_test2_work");
  recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(Calls(recs, "fp_test2_work"), 6u);
  for (const auto& rec : recs[0].records()) EXPECT_EQ(rec.key().module(), "libalice.so.1");

  fs::remove_all(spool());
  fs::copy_file(FIELDPROF_TESTLIB2_NOSONAME, deep + "/alice secret.so");
  Run({"dlopen", deep + "/alice secret.so"}, "fp_test2_work");
  EXPECT_TRUE(Records().empty());  // measured nothing: no record at all
}

// The program's own exports are named "main" unless the executable
// belongs to the system (python3's, below).
TEST_F(HazardTest, AUsersProgramsOwnExportsAreNamedMain) {
  Result r = Run({"mainexport", FIELDPROF_TESTLIB2}, "fp_test_main_export");
  EXPECT_NE(r.out.find("main 3675"), std::string::npos) << r.out;
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(Calls(recs, "fp_test_main_export"), 50u);
  for (const auto& rec : recs[0].records()) EXPECT_EQ(rec.key().module(), "main");
}

// What the dynamic linker defines is keyed by its soname, and an IFUNC that
// chose a vDSO function by the library that defines the name: "unknown"
// only for what truly has no object. (The vDSO's address test once caught
// ld.so, mapped a few pages after it, so both were "unknown".)
TEST_F(HazardTest, TheDynamicLinkersAndVdsoBackedApisHaveTheirModules) {
  Result r = Run({"clock", "40"}, "time,gettimeofday", 2);
  EXPECT_NE(r.out.find("clock late 0"), std::string::npos) << r.out;
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  std::map<std::string, std::string> module_of;
  for (const auto& rec : recs[0].records()) module_of[rec.key().symbol()] = rec.key().module();
  EXPECT_EQ(module_of["time"], "libc.so.6");
  EXPECT_EQ(module_of["gettimeofday"], "libc.so.6");
  EXPECT_EQ(Calls(recs, "time"), 40u);
  EXPECT_EQ(Calls(recs, "gettimeofday"), 40u);
  // date's first malloc sets up the allocator, which asks ld.so for its
  // tunables through libc's PLT. Through the front that first malloc is
  // dlopen's, as it loads the runtime: before anything is bound, so
  // nothing of it is measured (late_interpose.h).
#ifdef FIELDPROF_VIA_FRONT
  return;
#endif
  fs::remove_all(spool());
  const std::vector<std::string> date = {"/usr/bin/date", "+%Y"};
  Result plain = RunCmd(date, {});
  Result measured = RunCmd(date, Env("__tunable_get_val"));
  EXPECT_EQ(measured.out, plain.out);
  recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  ASSERT_GT(recs[0].records_size(), 0);
  for (const auto& rec : recs[0].records()) {
    EXPECT_EQ(rec.key().module(), "ld-linux-x86-64.so.2") << rec.key().symbol();
    EXPECT_NE(rec.key().module_version(), "unknown");  // its build id
  }
}

TEST_F(HazardTest, ASystemProgramsOwnExportsAreNamedAfterIt) {
  const fs::path python = fs::canonical("/usr/bin/python3");  // python3.11 on Debian 12
  const std::vector<std::string> argv = {
      "/usr/bin/python3", "-c", "import json\nfor i in range(200): json.loads('[1, 2, \"x\"]')"};
  Result plain = RunCmd(argv, {});
  Result measured = RunCmd(argv, Env("PyList_Append"));  // called by _json
  EXPECT_EQ(measured.exit_code, plain.exit_code);
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(Calls(recs, "PyList_Append"), 600u);  // 3 items, 200 times
  for (const auto& rec : recs[0].records()) {
    EXPECT_EQ(rec.key().module(), python.filename().string());
  }
}

// The command line around the runtime: fieldprof run and fieldprof spool.
TEST_F(RuntimeTest, FieldprofRunAndSpoolCommands) {
  const std::string cli = FIELDPROF_CLI;
  const std::vector<std::string> env = {"FIELDPROF_SLOT_DIR=" + dir_.path() + "/slots"};
  Result plain = RunCmd({prog_, "alloc", "300", "12"}, {});
  Result run = RunCmd({cli, "run", "--spool", spool(), "--apis", "1", "--seed", "5", "--force",
                       "fp_test_alloc", "--max_load", "1000", "--", prog_, "alloc", "300", "12"},
                      env);
  EXPECT_EQ(run.exit_code, plain.exit_code);
  EXPECT_EQ(run.out, plain.out);
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  const auto* bytes = Find(recs, "fp_test_alloc", wire::METRIC_ALLOC_BYTES_INCLUSIVE);
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(bytes->count(), 12u);

  Result ls = RunCmd({cli, "spool", "ls", "--spool", spool()}, {});
  EXPECT_EQ(ls.exit_code, 0);
  EXPECT_NE(ls.out.find("libfieldprof_testlib.so:fp_test_alloc"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("1 record,"), std::string::npos) << ls.out;
  Result show = RunCmd({cli, "spool", "show", "--spool", spool(), "--histograms"}, {});
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("alloc_bytes_inclusive  calls 12"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("256 B .. 511 B"), std::string::npos) << show.out;
  // The spool directory itself named as the file: its records, the same.
  Result by_dir = RunCmd({cli, "spool", "show", spool(), "--histograms"}, {});
  EXPECT_EQ(by_dir.exit_code, 0);
  EXPECT_EQ(by_dir.out, show.out);
  Result json = RunCmd({cli, "spool", "show", "--json", "--spool", spool()}, {});
  EXPECT_NE(json.out.find("\"symbol\": \"fp_test_alloc\""), std::string::npos) << json.out;

  // --show keeps stdout and the exit code, and prints the record on stderr.
  Result shown = RunCmd({cli, "run", "--spool", spool(), "--force", "fp_test_alloc", "--show",
                         "--max_load", "1000", prog_, "alloc", "300", "2"},
                        env);
  EXPECT_EQ(shown.exit_code, 7);
  EXPECT_EQ(shown.out, "done alloc\n");
  // Errors: a command that does not exist, bad options, a corrupt record.
  EXPECT_EQ(RunCmd({cli, "run", "--", dir_.path() + "/no-such-program"}, {}).exit_code, 127);
  EXPECT_EQ(RunCmd({cli, "run", "--apis", "99", "--", "true"}, {}).exit_code, 2);
  EXPECT_EQ(RunCmd({cli, "run"}, {}).exit_code, 2);
  {
    std::ofstream bad(spool() + "/run-1-1-deadbeef.fpr");
    bad << "not a record";
  }
  EXPECT_EQ(RunCmd({cli, "spool", "ls", "--spool", spool()}, {}).exit_code, 1);
}

}  // namespace
}  // namespace fieldprof
