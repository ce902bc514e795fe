// Every measured run counts: a run ended by a signal, or still
// going on, reaches the aggregator through its live file
// (agent/preload/runtime/records/live_layout.h, agent/daemon/live_harvest.h), with exactly the
// calls it completed, counted once, whatever the agent does again.
//
// Real parts: tests/agent/daemon/live_prog.cc under `fieldprof run` (the runtime),
// the agent binary, and the aggregator over TLS on loopback. The program
// calls fp_test_alloc(16), one malloc of 16 bytes a call, so the calls
// completed are known exactly: alloc_bytes_inclusive sums to 16 a call,
// alloc_count to 1 a call, and every metric counts them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/daemon/live_harvest.h"
#include "common/spool/spool.h"
#include "common/wire/wire.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"

namespace fieldprof::agent {
namespace {

namespace fs = std::filesystem;
using testing::AggregatorProcess;
using testing::FreePort;
using testing::TempDir;
using testing::WaitUntil;

class LiveTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(testing::MakeCert(dir_.path())); }

  // The program measured (every call: one API forced, no overhead budget),
  // its live file in this test's directory. Returns its pid.
  pid_t Start(long calls, const std::string& end) {
    const pid_t pid = fork();
    if (pid == 0) {
      const rlimit no_core{0, 0};
      setrlimit(RLIMIT_CORE, &no_core);
      setenv("FIELDPROF_LIVE_DIR", dir_.File("live").c_str(), 1);
      setenv("FIELDPROF_SLOT_DIR", dir_.File("slots").c_str(), 1);
      const std::string n = std::to_string(calls), status = dir_.File("status");
      execl(FIELDPROF_CLI_BIN, "fieldprof", "run", "--spool", dir_.File("spool").c_str(), "--force",
            "fp_test_alloc", "--apis", "1", "--budget", "1000", "--max_load", "1000000", "--",
            FIELDPROF_LIVEPROG, n.c_str(), end.c_str(), status.c_str(), nullptr);
      _exit(127);
    }
    return pid;
  }
  int Wait(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
  }
  // One agent pass (upload, flush; every live run due).
  std::string Agent(uint16_t port) {
    std::string out;
    const std::string cmd = std::string(FIELDPROF_AGENT_BIN) +
                            " --once --flush --server 127.0.0.1 --port " + std::to_string(port) +
                            " --ca_file " + dir_.File("cert.pem") + " --spool " +
                            dir_.File("spool") + " --state_dir " + dir_.File("state") +
                            " --runtime_settings '' --live_dir " + dir_.File("live") +
                            " --live_interval_s 0 --share_modules libfieldprof_testlib.so 2>&1";
    const int rc = testing::RunCommand(cmd, &out);
    EXPECT_EQ(rc, 0) << out;
    return out;
  }
  // fp_test_alloc's series of `metric` on the aggregator (all time).
  nlohmann::json Series(AggregatorProcess& agg, const std::string& metric) {
    agg.WaitApplied();
    HttpsClient c(agg.Options());
    StatusOr<HttpReply> r =
        c.Get("/v1/api?module=libfieldprof_testlib.so&symbol=fp_test_alloc&metric=" + metric);
    EXPECT_TRUE(r.ok());
    if (!r.ok() || r->status != 200) return nlohmann::json::object({{"runs", 0}, {"calls", 0}});
    return nlohmann::json::parse(r->body);
  }
  // The aggregator holds `calls` calls of `runs` runs, each exactly 16
  // bytes and one allocation.
  void ExpectHolds(AggregatorProcess& agg, uint64_t calls, uint64_t runs, const std::string& at) {
    const nlohmann::json bytes = Series(agg, "alloc_bytes_inclusive");
    EXPECT_EQ(bytes.value("runs", 0), runs) << at << ": " << bytes.dump().substr(0, 400);
    ASSERT_TRUE(bytes.contains("stats")) << at;
    EXPECT_EQ(bytes["stats"]["count"], calls) << at;
    EXPECT_EQ(bytes["histogram"]["sum"], std::to_string(16 * calls)) << at;
    const nlohmann::json count = Series(agg, "alloc_count");
    EXPECT_EQ(count["histogram"]["sum"], std::to_string(calls)) << at;
    const nlohmann::json time = Series(agg, "wall_time_ns");
    EXPECT_EQ(time["stats"]["count"], calls) << at;
    EXPECT_EQ(time.value("runs", 0), runs) << at;
  }
  size_t LiveFiles() {
    size_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_.File("live"), ec)) {
      n += e.path().extension() == ".fplive";
    }
    return n;
  }

  TempDir dir_;
};

// Ended by each signal, or killed: the run's calls all reach the
// aggregator, once, however often the agent passes again. Ended normally:
// the runtime's own record, as before, and its live file is gone.
TEST_F(LiveTest, ARunEndedByAnySignalReachesTheAggregatorOnce) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  struct Case {
    std::string end;
    int signal;  // how the program ends (0: exit 0)
    long calls;
  };
  const std::vector<Case> cases = {{"exit", 0, 3001},       {"int", SIGINT, 2002},
                                   {"term", SIGTERM, 1503}, {"hup", SIGHUP, 1004},
                                   {"kill", SIGKILL, 2505}, {"abort", SIGABRT, 1206},
                                   {"segv", SIGSEGV, 1707}};
  uint64_t calls = 0, runs = 0;
  for (const Case& c : cases) {
    std::error_code ec;
    fs::remove(dir_.File("status"), ec);
    const pid_t pid = Start(c.calls, c.end);
    if (c.end == "kill") {
      ASSERT_TRUE(
          WaitUntil([&] { return fs::exists(dir_.File("status")); }, std::chrono::seconds(120)));
      // Alive: nothing of it is due to anyone yet but by its interval.
      EXPECT_EQ(LiveFiles(), 1u);
      kill(pid, SIGKILL);
    }
    const int st = Wait(pid);
    if (c.signal == 0) {
      ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << c.end << ": " << st;
      EXPECT_EQ(LiveFiles(), 0u) << "a run that ended normally removes its live file";
    } else {
      ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == c.signal) << c.end << ": " << st;
      EXPECT_EQ(LiveFiles(), 1u) << c.end << ": the killed run's counts stay in its file";
    }
    calls += static_cast<uint64_t>(c.calls);
    ++runs;
    const std::string out = Agent(agg.port());
    EXPECT_EQ(LiveFiles(), 0u) << c.end << ": " << out;
    ExpectHolds(agg, calls, runs, c.end);
    // Again: nothing more.
    Agent(agg.port());
    ExpectHolds(agg, calls, runs, c.end + ", after another pass");
  }
}

// A program that closes every descriptor past stderr (as daemons do) takes
// the live file's away: the runtime never locks, allocates into or closes
// the file the program opens under that number, and the run is reported
// once, by its record.
TEST_F(LiveTest, AProgramThatClosesEveryDescriptorIsReportedOnceAndUntouched) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  constexpr long kCalls = 1500;
  const int st = Wait(Start(kCalls, "closefds"));
  ASSERT_TRUE(WIFEXITED(st)) << st;
  EXPECT_EQ(WEXITSTATUS(st), 0) << "5 or 7: the runtime touched the program's own file";
  Agent(agg.port());
  ExpectHolds(agg, 2 * kCalls, 1, "after the run");
  Agent(agg.port());
  ExpectHolds(agg, 2 * kCalls, 1, "after another pass");
  EXPECT_EQ(LiveFiles(), 0u);
}

// A run that goes on is reported in parts, one an interval (every pass
// here): each part reaches the aggregator as it comes, the run counts
// once, and the parts sum to what a normal exit writes.
TEST_F(LiveTest, ALongRunIsReportedInPartsThatSumToTheWholeRun) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  constexpr long kCalls = 2000;
  const pid_t pid = Start(kCalls, "rounds");
  for (int round = 1; round <= 3; ++round) {
    bool gone = false;
    ASSERT_TRUE(WaitUntil(
        [&] {
          std::ifstream in(dir_.File("status"));
          std::string s;
          gone = waitpid(pid, nullptr, WNOHANG) == pid;
          return gone || ((in >> s) && s == std::to_string(round));
        },
        std::chrono::seconds(120)));
    ASSERT_FALSE(gone) << "the program ended before round " << round;
    const std::string out = Agent(agg.port());
    EXPECT_NE(out.find("live runs: 1 parts written"), std::string::npos) << out;
    ExpectHolds(agg, static_cast<uint64_t>(round) * kCalls, 1, "round " + std::to_string(round));
    std::ofstream(dir_.File("status.go" + std::to_string(round))) << "go\n";
  }
  const int st = Wait(pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  // Ended after parts were reported: the runtime left the rest (none) to
  // the agent, which removes the file; the whole run is three parts.
  EXPECT_EQ(LiveFiles(), 1u);
  Agent(agg.port());
  EXPECT_EQ(LiveFiles(), 0u);
  ExpectHolds(agg, 3 * kCalls, 1, "after the run ended");
  // The same calls in one run that exits: the same sums, as one more run.
  const pid_t whole = Start(3 * kCalls, "exit");
  ASSERT_TRUE(WIFEXITED(Wait(whole)));
  Agent(agg.port());
  ExpectHolds(agg, 6 * kCalls, 2, "beside a whole run");
}

// What the agent kept of a run's reported parts is damaged (or gone)
// while the run goes on: it never reports those calls again. What was
// counted meanwhile is dropped (and said); later calls are reported.
TEST_F(LiveTest, ALostRecordOfWhatWasReportedNeverCountsACallTwice) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  constexpr long kCalls = 1000;
  const pid_t pid = Start(kCalls, "rounds");
  auto at_round = [&](int round) {
    bool gone = false;
    EXPECT_TRUE(WaitUntil(
        [&] {
          std::ifstream in(dir_.File("status"));
          std::string s;
          gone = waitpid(pid, nullptr, WNOHANG) == pid;
          return gone || ((in >> s) && s == std::to_string(round));
        },
        std::chrono::seconds(120)));
    EXPECT_FALSE(gone) << "the program ended before round " << round;
  };
  at_round(1);
  Agent(agg.port());
  ExpectHolds(agg, kCalls, 1, "part 1");
  for (const auto& e : fs::directory_iterator(dir_.File("state/live"))) {
    std::ofstream(e.path(), std::ios::trunc) << "damaged";
  }
  std::ofstream(dir_.File("status.go1")) << "go\n";
  at_round(2);
  const std::string out = Agent(agg.port());
  EXPECT_NE(out.find("calls read mid-update and dropped"), std::string::npos) << out;
  ExpectHolds(agg, kCalls, 1, "round 2: not reported (what was reported is unknown)");
  std::ofstream(dir_.File("status.go2")) << "go\n";
  at_round(3);
  Agent(agg.port());
  ExpectHolds(agg, 2 * kCalls, 1, "round 3: reported, once");
  std::ofstream(dir_.File("status.go3")) << "go\n";
  const int st = Wait(pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  Agent(agg.port());
  ExpectHolds(agg, 2 * kCalls, 1, "after the run ended");
  EXPECT_EQ(LiveFiles(), 0u);
}

// A reading taken in the middle of an update is never reported as if it
// were whole: its bucket waits for the next reading (or, at a killed run's
// last reading, is dropped and counted), so every part is valid and the
// parts sum exactly to what was counted.
TEST(HistogramPartTest, APartIsWhatWasCountedSinceAndTornBucketsWait) {
  Histogram first;
  for (uint64_t v : {3u, 5u, 700u, 0u}) first.Record(v);
  wire::Histogram reported, part;
  uint64_t dropped = 0;
  HistogramPart(first, &reported, false, &part, &dropped);
  EXPECT_EQ(HistogramFromWire(part), first);
  Histogram second = first;
  for (uint64_t v : {6u, 9000u}) second.Record(v);
  HistogramPart(second, &reported, false, &part, &dropped);
  Histogram want;
  want.Record(6);
  want.Record(9000);
  EXPECT_EQ(HistogramFromWire(part).count(), 2u);
  EXPECT_EQ(HistogramFromWire(part).sum(), want.sum());
  // The part's extremes: its lowest bucket's edge where the run's own min
  // (0) lies elsewhere, the run's max where it lies in its highest bucket.
  EXPECT_EQ(HistogramFromWire(part).min(), 4u);
  EXPECT_EQ(HistogramFromWire(part).max(), 9000u);
  // A torn reading: bucket 2's count moved, its sum not yet.
  wire::Histogram torn_wire;
  HistogramToWire(second, &torn_wire);
  Histogram third = second;
  third.Record(7);
  wire::Histogram third_wire;
  HistogramToWire(third, &third_wire);
  for (wire::Bucket& b : *third_wire.mutable_buckets()) {
    if (b.index() == 2) {
      b.set_sum_lo(b.sum_lo() - 7);  // the 7's count, not its value
    }
  }
  third_wire.set_sum_lo(third_wire.sum_lo() - 7);
  const Histogram torn = HistogramFromWire(third_wire);
  HistogramPart(torn, &reported, false, &part, &dropped);
  EXPECT_EQ(part.count(), 0u) << "the torn bucket waits";
  EXPECT_EQ(dropped, 0u);
  HistogramPart(third, &reported, false, &part, &dropped);
  EXPECT_EQ(HistogramFromWire(part).count(), 1u);
  EXPECT_EQ(HistogramFromWire(part).sum(), 7u);
  EXPECT_EQ(HistogramFromWire(reported), third);
  // At a last reading, a torn bucket's calls are dropped and counted.
  Histogram fourth = third;
  fourth.Record(4);
  fourth.Record(100);
  wire::Histogram fourth_wire;
  HistogramToWire(fourth, &fourth_wire);
  for (wire::Bucket& b : *fourth_wire.mutable_buckets()) {
    if (b.index() == 2) b.set_sum_lo(b.sum_lo() - 4);
  }
  fourth_wire.set_sum_lo(fourth_wire.sum_lo() - 4);
  HistogramPart(HistogramFromWire(fourth_wire), &reported, true, &part, &dropped);
  EXPECT_EQ(dropped, 1u);
  EXPECT_EQ(HistogramFromWire(part).count(), 1u);
  EXPECT_EQ(HistogramFromWire(part).sum(), 100u);
}

}  // namespace
}  // namespace fieldprof::agent
