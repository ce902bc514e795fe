// fieldprof record end to end: the real binary and sampler on
// a program with known phases, each time range naming its phase; stacks
// whole through Debian's sqlite3 (no frame pointers); a killed program
// still leaves its samples; the command's output and status unchanged.
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"
#include "tests/tools/snapshot_fixture.h"

namespace fieldprof {
namespace {

using testing::RunCommand;
using testing::TempDir;

const std::string kCli = FIELDPROF_CLI_BIN;
const std::string kPhases = FIELDPROF_PHASES;
const std::string kPointWork = FIELDPROF_POINTWORK;
const std::string kPointsPlugin = FIELDPROF_POINTSPLUGIN;
const std::string kWaits = FIELDPROF_WAITS;
const std::string kSampler = FIELDPROF_SAMPLER_LIB;

// `record show FILE --collapsed` (and `more` options): each stack with a
// ';' at both ends (";_start;...;spin;"), so that a frame is found whole
// as ";name;", and its samples.
std::vector<std::pair<std::string, uint64_t>> Collapsed(const std::string& file,
                                                        const std::string& more = "") {
  std::string out;
  EXPECT_EQ(RunCommand(kCli + " record show " + file + " --collapsed" + more, &out), 0);
  std::vector<std::pair<std::string, uint64_t>> stacks;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t sp = line.rfind(' ');
    EXPECT_NE(sp, std::string::npos) << line;
    if (sp == std::string::npos) continue;
    stacks.emplace_back(";" + line.substr(0, sp) + ";", std::stoull(line.substr(sp + 1)));
  }
  return stacks;
}

// Samples per phase in [from, to] seconds: collapsed stacks summed by the
// phase function on them ("" when neither).
std::map<std::string, uint64_t> Phases(const std::string& file, double from, double to) {
  std::map<std::string, uint64_t> by;
  for (const auto& [stack, n] :
       Collapsed(file, " --from " + std::to_string(from) + " --to " + std::to_string(to))) {
    by[stack.find(";phase_a;") != std::string::npos   ? "a"
       : stack.find(";phase_b;") != std::string::npos ? "b"
                                                      : ""] += n;
  }
  return by;
}

double Share(std::map<std::string, uint64_t> m, const std::string& k) {
  uint64_t all = 0;
  for (const auto& [name, n] : m) all += n;
  return all == 0 ? 0 : static_cast<double>(m[k]) / static_cast<double>(all);
}

TEST(RecordTest, EachRangeNamesItsPhase) {
  TempDir dir;
  const std::string file = dir.File("ph.fprec");
  std::string out;
  // The program's output and exit status are its own.
  EXPECT_EQ(RunCommand(kCli + " record -o " + file + " -- " + kPhases + " 2>/dev/null", &out), 3);
  EXPECT_EQ(out, "phases done\n");
  // As a Chrome trace: every B has its E on the same thread, in order.
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --chrome_trace", &out), 0);
  const nlohmann::json trace = nlohmann::json::parse(out);
  std::map<int, std::vector<std::string>> open;
  double first_a = -1, first_b = -1, last = 0;
  int slices = 0;
  for (const auto& e : trace["traceEvents"]) {
    auto& stack = open[e["tid"].get<int>()];
    last = std::max(last, e["ts"].get<double>());
    if (e["ph"] == "B") {
      stack.push_back(e["name"]);
      if (e["name"] == "phase_a" && first_a < 0) first_a = e["ts"].get<double>();
      if (e["name"] == "phase_b" && first_b < 0) first_b = e["ts"].get<double>();
    } else {
      ASSERT_FALSE(stack.empty());
      EXPECT_EQ(stack.back(), e["name"].get<std::string>());
      stack.pop_back();
      ++slices;
    }
  }
  for (const auto& [tid, stack] : open) EXPECT_TRUE(stack.empty()) << tid;
  EXPECT_GT(slices, 4);
  // On the recording's own clock (microseconds from its start): the program
  // starts before it has run its own length, and phase_a comes first.
  ASSERT_GE(first_a, 0);
  EXPECT_LT(first_a, last - first_a);
  EXPECT_LT(first_a, first_b);
  // Inside each phase, away from its edges, counted from where the first
  // one began: how long the program took to start (longer on a busy
  // machine) moves every phase alike.
  const double t0 = first_a / 1e6;
  auto first = Phases(file, t0 + 0.03, t0 + 0.17), second = Phases(file, t0 + 0.23, t0 + 0.37),
       both = Phases(file, t0 + 0.43, t0 + 0.57);
  EXPECT_GT(Share(first, "a"), 0.9) << first["a"] << " " << first["b"];
  EXPECT_GT(Share(second, "b"), 0.9) << second["a"] << " " << second["b"];
  // Two threads on two cores: about half each.
  EXPECT_GT(Share(both, "a"), 0.3) << both["a"] << " " << both["b"];
  EXPECT_GT(Share(both, "b"), 0.3) << both["a"] << " " << both["b"];
  // The text report: the call tree through main to the phases, and a bound.
  ASSERT_EQ(RunCommand(kCli + " record show " + file, &out), 0);
  EXPECT_NE(out.find("main"), std::string::npos) << out;
  EXPECT_NE(out.find("phase_a"), std::string::npos) << out;
  EXPECT_NE(out.find("samples in [0.000 s"), std::string::npos) << out;
  // Not a terminal: no colour. With --color always, the lab's heat colours
  // by self share: the spinning leaf of the first phase is the hottest
  // (red, 256-colour 196), main with no self time the coldest (blue, 21).
  EXPECT_EQ(out.find('\033'), std::string::npos);
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --from " + std::to_string(t0 + 0.03) +
                           " --to " + std::to_string(t0 + 0.17) + " --color always",
                       &out),
            0);
  auto colour_of = [&](const std::string& name) {
    const size_t at = out.find(" " + name + "\033[0m");
    const size_t esc = out.rfind("\033[38;5;", at);
    return at == std::string::npos || esc == std::string::npos
               ? std::string()
               : out.substr(esc + 7, out.find('m', esc) - esc - 7);
  };
  EXPECT_EQ(colour_of("spin"), "196") << out;
  EXPECT_EQ(colour_of("main"), "21") << out;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --color purple 2>&1", &out), 2);
  EXPECT_NE(out.find("--color is auto, always or never"), std::string::npos) << out;
  // --exact: the same samples, all attributed.
  std::string exact, collapsed;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --exact", &exact), 0);
  EXPECT_EQ(exact.find("bound:"), std::string::npos) << exact;
}

// The runtime's hazard programs (threads, signals, longjmp, fork, vfork,
// exec, exceptions, _exit) under the sampler: the same output and status.
TEST(RecordTest, ProgramsBehaveTheSameUnderRecord) {
  TempDir dir;
  const std::string prog = FIELDPROF_TESTPROG;
  for (const std::string args : {"threads 4 2000", "signal", "longjmp", "fork", "vfork", "exec",
                                 "throw", "_exit", "recurse 5", "fpmany 100"}) {
    std::string plain, recorded;
    const int plain_rc = RunCommand(prog + " " + args + " 2>/dev/null", &plain);
    const int rc = RunCommand(
        kCli + " record -o " + dir.File("h.fprec") + " -- " + prog + " " + args + " 2>/dev/null",
        &recorded);
    EXPECT_EQ(rc, plain_rc) << args;
    EXPECT_EQ(recorded, plain) << args;
  }
}

// libc's own loading under the sampler: iconv_open loads a converter
// module and iconv_close unloads another, inside libc, where no wrapper
// sees them. A sample there that unwound walked the loaded objects while
// one was half unmapped, or waited on the dynamic linker's lock its own
// thread was taking: before, the program crashed (SIGSEGV) in 10 runs of
// 10 of 50,000 rounds at the default rate. Now such samples are skipped.
TEST(RecordTest, LibcsOwnLoadingIsSampledWithoutHarm) {
  TempDir dir;
  const std::string file = dir.File("iconv.fprec");
  std::string out;
  // (A hang fails by ctest's limit on each test, not by a clock of our own:
  // the work is bounded, its time is the machine's.)
  ASSERT_EQ(
      RunCommand(kCli + " record -o " + file + " -- " + kPhases + " iconv 50000 2>/dev/null", &out),
      0)
      << out;
  EXPECT_EQ(out, "converted 50000\n");
  std::string tree;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --collapsed", &tree), 0);
  EXPECT_NE(tree.find("convert_loop;iconv_open"), std::string::npos) << tree.substr(0, 2000);
  EXPECT_NE(tree.find("convert_loop;iconv_close"), std::string::npos) << tree.substr(0, 2000);
}

// A plugin that works 300 ms in its constructor as it is opened (twice):
// that time is in the tree, under dlopen, as perf would show it, down to
// the vDSO's clock. The sampler skips only the stretches where the dynamic
// linker changes its list of loaded objects, which the lock it holds then
// shows. Before: all of dlopen was skipped, and the constructor's work was
// not there.
TEST(RecordTest, APluginsConstructorIsSampledUnderDlopen) {
  TempDir dir;
  const std::string file = dir.File("plugin.fprec");
  std::string out;
  ASSERT_EQ(RunCommand("FIELDPROF_TEST_LOAD_MS=300 " + kCli + " record -o " + file + " -- " +
                           FIELDPROF_INMODULE + " --dlopen " + FIELDPROF_CTORPLUGIN + " 10" +
                           " 2>/dev/null",
                       &out),
            0)
      << out;
  EXPECT_EQ(out, "dlopen 20\n");
  uint64_t all = 0, in_load = 0, in_vdso_clock = 0, unnamed_vdso = 0;
  for (const auto& [stack, n] : Collapsed(file)) {
    all += n;
    if (stack.find(";dlopen;") != std::string::npos &&
        stack.find(";plugin_start;plugin_load;") != std::string::npos) {
      in_load += n;
    }
    in_vdso_clock += stack.find(";clock_gettime;__vdso_clock_gettime;") != std::string::npos;
    unnamed_vdso += stack.find("vdso.so.1+") != std::string::npos;
  }
  // 600 ms of the run's CPU time, at 999 Hz: about 600 samples of about 640.
  EXPECT_GT(in_load, all / 2) << in_load << " of " << all;
  // plugin_load reads the clock in the vDSO, which has no file: its frames
  // are named from the image the kernel maps (before: linux-vdso.so.1+0xb46).
  EXPECT_GT(in_vdso_clock, 0u);
  EXPECT_EQ(unnamed_vdso, 0u);
}

// The sampler's signals are SIGTRAPs where the kernel has perf's sigtrap
// (the cheapest way to a sample): the program's own SIGTRAP handling is
// untouched, and the samples are there.
TEST(RecordTest, TheProgramsSigtrapStaysItsOwn) {
  TempDir dir;
  const std::string prog = FIELDPROF_TESTPROG;
  for (const std::string how : {"handler", "signal", "ignore", "default"}) {
    std::string plain, recorded, log;
    const int plain_rc = RunCommand(prog + " sigtrap " + how + " 2>/dev/null", &plain);
    const int rc = RunCommand(kCli + " record -o " + dir.File("t.fprec") + " -- " + prog +
                                  " sigtrap " + how + " 2>" + dir.File("log"),
                              &recorded);
    EXPECT_EQ(rc, plain_rc) << how;
    EXPECT_EQ(recorded, plain) << how;
    EXPECT_EQ(plain_rc == 128 + SIGTRAP, how == "default") << how;  // death by SIGTRAP
    ASSERT_EQ(RunCommand("cat " + dir.File("log"), &log), 0);
    const size_t at = log.find("written: ");
    ASSERT_NE(at, std::string::npos) << log;
    // Samples were taken while the program had its own SIGTRAP: the spins
    // run by the clock, so a loaded machine gives fewer (the default case
    // dies after the first 0.15 s).
    EXPECT_GT(std::stol(log.substr(at + 9)), 20) << how << ": " << log;
  }
}

// The pid of the process in group `pgid` running `exe`'s file name, or 0.
pid_t FindInGroup(pid_t pgid, const std::string& exe) {
  const std::string name = std::filesystem::path(exe).filename().string().substr(0, 15);
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = testing::ProcFile(std::stoi(pid), "stat");
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    long ppid = 0, group = 0;
    rest >> state >> ppid >> group;
    if (group == pgid && stat.substr(open + 1, close - open - 1) == name) return std::stoi(pid);
  }
  return 0;
}

// CPU time (user + system, in clock ticks) of `pid` so far; 0 once it has
// ended and been reaped.
long CpuTicks(pid_t pid) {
  const std::string stat = testing::ProcFile(pid, "stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

// A statically linked program: nothing preloaded can enter it, but the
// default sampler works from outside, so its samples are in
// the recording, main's among them. The sampler in the program
// (--clock task) records nothing, which record says; either way the exit
// status is the program's ("nothing was recorded" is a message, not the
// program's failure).
TEST(RecordTest, AStaticProgramIsSampledFromOutsideAndItsExitStatusIsItsOwn) {
  TempDir dir;
  for (const std::string code : {"0", "3"}) {
    std::string out;
    const std::string file = dir.File("s" + code + ".fprec");
    int rc = testing::RunCommand(
        kCli + " record -o " + file + " -- " + FIELDPROF_STATICPROG + " " + code + " 2>&1", &out);
    EXPECT_EQ(rc, std::stoi(code)) << out;
    EXPECT_NE(out.find("from outside"), std::string::npos) << out;
    uint64_t all = 0, in_main = 0;
    for (const auto& [stack, n] : Collapsed(file, "")) {
      all += n;
      if (stack.find(";main;") != std::string::npos) in_main += n;
    }
    EXPECT_GT(all, 5u) << out;
    EXPECT_GT(in_main, all * 9 / 10) << out;
    rc = testing::RunCommand(kCli + " record --clock task -o " + dir.File("t.fprec") + " -- " +
                                 FIELDPROF_STATICPROG + " " + code + " 2>&1",
                             &out);
    EXPECT_EQ(rc, std::stoi(code)) << out;
    EXPECT_NE(out.find("no process was recorded"), std::string::npos) << out;
    EXPECT_NE(out.find("exit status is the program's"), std::string::npos) << out;
  }
}

// A process that ran and was never sampled (user time only, as without
// privileges, and a sleep that spends well under 1 ms of it) is recorded,
// with no samples, and its recording is read like any other.
TEST(RecordTest, AProcessNeverSampledIsStillRecorded) {
  TempDir dir;
  const std::string file = dir.File("sleep.fprec");
  std::string out;
  ASSERT_EQ(
      testing::RunCommand(
          kCli + " record --all_user --idle=false -o " + file + " -- /bin/sleep 0.01 2>&1", &out),
      0)
      << out;
  EXPECT_NE(out.find("user CPU time, perf task-clock from outside"), std::string::npos) << out;
  EXPECT_NE(out.find(" 1 process,"), std::string::npos) << out;
  ASSERT_EQ(testing::RunCommand(kCli + " record show " + file + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("/bin/sleep 0.01"), std::string::npos) << out;
  ASSERT_EQ(testing::RunCommand(kCli + " tree show " + file + " --off_cpu 2>&1", &out), 1) << out;
  EXPECT_NE(out.find("recorded without idle transitions"), std::string::npos) << out;
}

// Ctrl-C at a terminal (SIGINT to the foreground group) stops the program;
// fieldprof record still writes what it sampled, and exits as the program
// did (130).
TEST(RecordTest, CtrlCStopsTheProgramAndTheRecordingIsWritten) {
  TempDir dir;
  const std::string file = dir.File("int.fprec");
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    execl(kCli.c_str(), "fieldprof", "record", "-o", file.c_str(), "--", kPhases.c_str(), nullptr);
    _exit(127);
  }
  setpgid(pid, pid);
  pid_t prog = 0;
  ASSERT_TRUE(testing::WaitUntil([&] { return (prog = FindInGroup(pid, kPhases)) != 0; }));
  // Into its first phase (0.1 s of CPU), then Ctrl-C.
  ASSERT_TRUE(
      testing::WaitUntil([&] { return CpuTicks(prog) * 1000 / sysconf(_SC_CLK_TCK) >= 100; }));
  ASSERT_EQ(kill(-pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "fieldprof record was ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  auto first = Phases(file, 0.0, 0.1);
  EXPECT_GT(Share(first, "a"), 0.9) << first["a"] << " " << first["b"];
}

TEST(RecordTest, StacksAreWholeThroughDebiansSqlite) {
  TempDir dir;
  const std::string file = dir.File("sq.fprec");
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " record -o " + file + " -- sqlite3 :memory: < " +
                           std::string(FIELDPROF_SOURCE_DIR) +
                           "/deploy/workloads/sqlite-bench.sql > /dev/null 2>&1",
                       &out),
            0);
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --collapsed", &out), 0);
  // From the C library's start through sqlite3_step into the VDBE and the
  // B-tree: a frame-pointer walk stops at the first of these frames.
  bool through = false;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t step = line.find(";sqlite3_step;");
    if (line.rfind("__libc_start_main", 0) != std::string::npos ||
        line.find(";__libc_start_main;") != std::string::npos) {
      through |= step != std::string::npos &&
                 line.find(";sqlite3VdbeExec;", step) != std::string::npos &&
                 line.find(";sqlite3Btree", step) != std::string::npos;
    }
  }
  EXPECT_TRUE(through) << out.substr(0, 4000);
}

// fieldprof record as a user without privileges would run it (the tests
// run as root; perf_event_paranoid is 2 here): `nobody`, in a directory it
// may write.
std::string Unprivileged(const TempDir& dir) {
  chmod(dir.path().c_str(), 0777);
  return geteuid() == 0 ? "setpriv --reuid=nobody --regid=nogroup --clear-groups " : "";
}

// The first number after `key` in `text`, or -1.
long long NumberAfter(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + key.size()));
}

// Off-CPU microseconds per collapsed stack of `show --idle --collapsed`.
std::map<std::string, long long> IdleStacks(const std::string& file) {
  std::string out;
  EXPECT_EQ(RunCommand(kCli + " record show " + file + " --idle --collapsed", &out), 0);
  std::map<std::string, long long> by;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t sp = line.rfind(' ');
    by[line.substr(0, sp)] = std::stoll(line.substr(sp + 1));
  }
  return by;
}

// The static program's 20 sleeps of 1 ms (FIELDPROF_STATICPROG 0 20),
// recorded in `file`: each a wait at main;SleepOneMs, each with its stack.
// `out`: what recorded it, for the messages.
void ExpectTwentySleepsEachAWait(const std::string& file, const std::string& out) {
  long long sleeping_us = 0;
  for (const auto& [stack, us] : IdleStacks(file)) {
    if (stack.find("main;SleepOneMs;") != std::string::npos) sleeping_us += us;
  }
  EXPECT_GE(sleeping_us, 20 * 1000) << out;
  std::string shown;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --idle --min_percent 0", &shown), 0);
  EXPECT_GE(NumberAfter(shown, "to-idle (a thread began to wait), "), 20) << shown;
  EXPECT_EQ(NumberAfter(shown, "not waits); "), 0) << shown;  // each with its stack
}

// The off-CPU time of the stacks that end in `leaf` under `caller`.
long long OffCpuAt(const std::map<std::string, long long>& stacks, const std::string& caller,
                   const std::string& leaf) {
  long long us = 0;
  for (const auto& [stack, n] : stacks) {
    const std::string tail = caller + ";" + leaf;
    if (stack.size() >= tail.size() &&
        stack.compare(stack.size() - tail.size(), tail.size(), tail) == 0) {
      us += n;
    }
  }
  return us;
}

// Idle transitions, without privileges: a sleeper waits in
// nanosleep, a pipe reader in read; each wait is counted once, with its
// off-CPU time.
TEST(RecordTest, IdleTransitionsShowTheCallThatWaited) {
  TempDir dir;
  const std::string as = Unprivileged(dir);
  const std::string sleeper = dir.File("sleep.fprec"), reader = dir.File("pipe.fprec");
  std::string out;
  ASSERT_EQ(
      RunCommand(as + kCli + " record -o " + sleeper + " -- " + kWaits + " sleeper 100 2>&1", &out),
      0)
      << out;
  EXPECT_NE(out.find("sleeper: 100 sleeps"), std::string::npos) << out;
  EXPECT_NE(out.find("idle transitions"), std::string::npos) << out;
  auto stacks = IdleStacks(sleeper);
  // 100 sleeps of at least 1 ms each.
  EXPECT_GE(OffCpuAt(stacks, "main;(anonymous namespace)::SleepAWhile()", "nanosleep"), 100000)
      << out;
  ASSERT_EQ(RunCommand(kCli + " record show " + sleeper + " --idle --min_percent 0", &out), 0);
  EXPECT_GE(NumberAfter(out, "idle transitions: "), 100) << out;
  EXPECT_NE(out.find("what ran on a CPU next is unknown"), std::string::npos) << out;

  ASSERT_EQ(
      RunCommand(as + kCli + " record -o " + reader + " -- " + kWaits + " pipe 100 2>&1", &out), 0)
      << out;
  stacks = IdleStacks(reader);
  EXPECT_GE(OffCpuAt(stacks, "main;(anonymous namespace)::ReadMessages()", "read"), 50000) << out;
  EXPECT_GE(
      OffCpuAt(stacks, "(anonymous namespace)::Writer(void*);(anonymous namespace)::SleepAWhile()",
               "nanosleep"),
      100000);
  // The sampler's own frames are no part of the program's stacks.
  for (const auto& [stack, us] : stacks) EXPECT_EQ(stack.find("StartWithTimer"), std::string::npos);
  // Off with --idle=false.
  ASSERT_EQ(
      RunCommand(kCli + " record --idle=false -o " + reader + " -- " + kWaits +
                     " pipe 10 >/dev/null 2>&1 && " + kCli + " record show " + reader + " --idle",
                 &out),
      0);
  EXPECT_NE(out.find("no idle transitions"), std::string::npos) << out;
}

// Sampled from outside, a process's own file holds only its idle
// transitions: the sampler makes it when the process first has one, and a
// process that never waits (most of a build's) leaves none; making a file
// was most of what the sampler cost a short process. Sampled in the
// program, every process has its file. The recording still says idle
// transitions were recorded when no process waited, or none could.
TEST(RecordTest, AProcessThatNeverWaitsLeavesNoFileOfItsOwn) {
  TempDir dir;
  std::filesystem::create_directory(dir.File("elsewhere"));
  const auto raw_files = [&](const std::string& env, const std::string& cmd) {
    std::filesystem::remove_all(dir.File("raw"));
    std::filesystem::create_directory(dir.File("raw"));
    std::string out;
    EXPECT_EQ(RunCommand("cd " + dir.path() + " && env FIELDPROF_RECORD_DIR=" + dir.File("raw") +
                             " " + env + " LD_PRELOAD=" + kSampler + " " + cmd + " 2>&1",
                         &out),
              0)
        << out;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir.File("raw"))) {
      names.push_back(e.path().filename().string());
    }
    return names;
  };
  // 20 runs of /bin/true from sh: 23 processes (sh, the trues, seq and
  // its subshell). A process switched off its CPU on a busy machine has a
  // record to keep, so not all go without a file; most do.
  const std::string twenty = "sh -c 'for i in $(seq 20); do /bin/true; done'";
  EXPECT_LT(raw_files("FIELDPROF_RECORD_SAMPLES=0", twenty).size(), 20u);
  // A process that waits has its file, and its waits are in it.
  std::vector<std::string> files =
      raw_files("FIELDPROF_RECORD_SAMPLES=0", kWaits + " sleeper 5 >/dev/null");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].rfind("rec-", 0), 0u) << files[0];
  // In the program: a file for every process, waits or not.
  EXPECT_GE(raw_files("FIELDPROF_RECORD_SAMPLES=1", twenty).size(), 21u);
  // Through record, the waits taken in the program (as without
  // privileges), a static program (nothing is preloaded into it, so it
  // never has a file of its own): the idle report says there was no wait
  // to show, not that waits were not recorded.
  const std::string file = dir.File("static.fprec");
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " record --idle_from program -o " + file + " -- " +
                           FIELDPROF_STATICPROG + " 0 2>&1",
                       &out),
            0)
      << out;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --idle 2>&1", &out), 0) << out;
  EXPECT_EQ(out.find("no idle transitions"), std::string::npos) << out;
  // Recorded to a bare name in the current directory, a program that
  // changes its directory before it waits (make -C) still has its waits.
  ASSERT_EQ(RunCommand("cd " + dir.path() + " && " + kCli +
                           " record --idle_from program -o cd.fprec -- sh -c 'cd " +
                           "elsewhere && exec " + kWaits + " sleeper 5' >/dev/null 2>&1 && " +
                           kCli + " record show cd.fprec --idle --min_percent 0",
                       &out),
            0)
      << out;
  EXPECT_GE(NumberAfter(out, "idle transitions: "), 5) << out;
  EXPECT_TRUE(std::filesystem::is_empty(dir.File("elsewhere")));
}

// With privileges (root here), the waits are taken from outside, beside
// the samples: the kernel's switch records and, at each switch off the
// CPU, the thread's registers and user stack. Nothing is preloaded into
// the program for them, so a static program's waits are recorded too.
// Without privileges, --idle_from perf is a clear error (auto takes them
// in the program: the other tests here that run unprivileged).
TEST(RecordTest, WithPrivilegesWaitsAreTakenFromOutside) {
  if (geteuid() != 0) GTEST_SKIP() << "the kernel's context-switch samples need root here";
  TempDir dir;
  std::string out;
  // Nothing of the sampler in the program; with --idle_from program, it is.
  ASSERT_EQ(
      RunCommand(kCli + " record -o " + dir.File("maps.fprec") + " -- cat /proc/self/maps 2>&1",
                 &out),
      0)
      << out;
  EXPECT_NE(out.find("libc.so"), std::string::npos) << out;
  EXPECT_EQ(out.find("libfieldprof-sampler"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(kCli + " record --idle_from program -o " + dir.File("maps.fprec") +
                           " -- cat /proc/self/maps 2>&1",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("libfieldprof-sampler"), std::string::npos) << out;
  // A static program's 20 sleeps of 1 ms, each a wait at its own stack.
  const std::string file = dir.File("static.fprec");
  ASSERT_EQ(
      RunCommand(kCli + " record -o " + file + " -- " + FIELDPROF_STATICPROG + " 0 20 2>&1", &out),
      0)
      << out;
  ExpectTwentySleepsEachAWait(file, out);
  // Asked for where it cannot be had (unprivileged, perf_event_paranoid
  // above 1: kernel events refused, or all of perf_event at 3, Debian's
  // default), or with what cannot carry it.
  const std::string as = Unprivileged(dir);
  std::ifstream paranoid_file("/proc/sys/kernel/perf_event_paranoid");
  int paranoid = 2;
  paranoid_file >> paranoid;
  const int code =
      RunCommand(as + kCli + " record --idle_from perf -o " + file + " -- /bin/true 2>&1", &out);
  if (paranoid >= 2) {
    EXPECT_EQ(code, 3) << out;
    EXPECT_EQ(out.rfind("fieldprof record: --idle_from perf: ", 0), 0u) << out;  // alone
    EXPECT_NE(out.find(paranoid == 2 ? "needs CAP_PERFMON" : "not available here"),
              std::string::npos)
        << out;
  } else {
    EXPECT_EQ(code, 0) << out;
  }
  EXPECT_NE(RunCommand(kCli + " record --idle_from perf --clock task -- /bin/true 2>&1", &out), 0);
  EXPECT_NE(out.find("needs --clock perf"), std::string::npos) << out;
  EXPECT_NE(RunCommand(kCli + " record --idle_from kernel -- /bin/true 2>&1", &out), 0);
  EXPECT_NE(out.find("--idle_from is auto, perf or program"), std::string::npos) << out;
}

// This process's cgroup2 group's directory (the cgroup2 mount joined with
// the "0::" line of /proc/self/cgroup), or "" without one.
std::string OwnCgroup2Dir() {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string mount;
  for (std::string line; mount.empty() && std::getline(mounts, line);) {
    const size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream f(line.substr(0, dash));
    std::string skip;
    f >> skip >> skip >> skip >> skip >> mount;
  }
  std::ifstream groups("/proc/self/cgroup");
  for (std::string line; !mount.empty() && std::getline(groups, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    std::string path = line.substr(3);
    while (!path.empty() && path.back() == '/') path.pop_back();
    return mount + path;
  }
  return "";
}

// The command in a cgroup of its own (command_cgroup.h): sampled and its
// waits taken there, the group gone afterwards, what it left running
// moved back out, a group a killed record left removed, and the events
// each process inherits with --cgroup off.
TEST(RecordTest, WithPrivilegesTheCommandIsRecordedInACgroupOfItsOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "making a cgroup needs root here";
  const std::string own = OwnCgroup2Dir();
  if (own.empty() || access(own.c_str(), W_OK) != 0) GTEST_SKIP() << "no writable cgroup2 group";
  // The kernel's perf_event controller on the cgroup2 hierarchy (a hybrid
  // system may bind it to a v1 one): hierarchy 0 in /proc/cgroups.
  std::ifstream controllers("/proc/cgroups");
  bool perf_on_v2 = false;
  for (std::string line; std::getline(controllers, line);) {
    std::istringstream f(line);
    std::string name;
    int hierarchy = -1;
    if (f >> name >> hierarchy && name == "perf_event") perf_on_v2 = hierarchy == 0;
  }
  if (!perf_on_v2) GTEST_SKIP() << "perf_event is not on the cgroup2 hierarchy";
  // Whole CPUs to be sampled (an event on a group is one): not in a
  // container that keeps them from root.
  perf_event_attr probe{};
  probe.size = sizeof probe;
  probe.type = PERF_TYPE_SOFTWARE;
  probe.config = PERF_COUNT_SW_DUMMY;
  probe.disabled = 1;
  const int probe_fd = static_cast<int>(
      syscall(SYS_perf_event_open, &probe, -1, sched_getcpu(), -1, static_cast<unsigned long>(0)));
  if (probe_fd < 0) GTEST_SKIP() << "CPU-wide perf_events refused: " << std::strerror(errno);
  close(probe_fd);
  TempDir dir;
  // Groups killed records left (their pids gone, nothing in them): one of
  // this pid namespace, removed by the next record; one of another,
  // whose pids say nothing here, left alone.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  char ns[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/pid", ns, sizeof ns - 1), 0);
  std::string pid_ns;
  for (const char* c = ns; *c != 0; ++c) {
    if (*c >= '0' && *c <= '9') pid_ns += *c;
  }
  const std::string stale =
      own + "/fieldprof-record-" + std::to_string(dead) + "-" + pid_ns + "-00000000";
  const std::string foreign = own + "/fieldprof-record-" + std::to_string(dead) + "-1-00000000";
  ASSERT_EQ(mkdir(stale.c_str(), 0755), 0) << stale << ": " << std::strerror(errno);
  ASSERT_EQ(mkdir(foreign.c_str(), 0755), 0) << foreign << ": " << std::strerror(errno);
  struct Removed {
    std::vector<std::string> dirs;
    ~Removed() {
      for (const std::string& d : dirs) rmdir(d.c_str());
    }
  } cleanup{{stale, foreign}};
  const std::string file = dir.File("group.fprec");
  const std::string left = dir.File("left.pid");
  std::string out;
  // The static program's 20 sleeps of 1 ms, short processes, and a
  // process left running when the command ends.
  ASSERT_EQ(RunCommand(kCli + " record --cgroup on -o " + file +
                           " -- sh -c 'grep ^0:: " + "/proc/self/cgroup; " + FIELDPROF_STATICPROG +
                           " 0 20; for i in 1 2 3 4 5 6 7 8; do /bin/true; done; " +
                           "sleep 60 >/dev/null 2>&1 & echo $! > " + left + "' 2>&1",
                       &out),
            0)
      << out;
  const std::regex group_line("0::(/[^\n]*)?/(fieldprof-record-[0-9]+-" + pid_ns +
                              "-[0-9a-f]{8})\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, group_line)) << out;
  const std::string group = own + "/" + m[2].str();
  EXPECT_NE(access(group.c_str(), F_OK), 0) << group << " was not removed";
  EXPECT_NE(access(stale.c_str(), F_OK), 0) << stale << " was not removed";
  EXPECT_EQ(access(foreign.c_str(), F_OK), 0) << foreign << " was removed";
  std::ifstream pid_file(left);
  pid_t sleeper = 0;
  pid_file >> sleeper;
  ASSERT_GT(sleeper, 0);
  const std::string groups = testing::ProcFile(sleeper, "cgroup");
  kill(sleeper, SIGKILL);
  EXPECT_NE(groups.find("0::"), std::string::npos) << "the process left behind is gone";
  EXPECT_EQ(groups.find("fieldprof-record-"), std::string::npos) << groups;
  // Every wait with its stack, as with inherited events.
  ExpectTwentySleepsEachAWait(file, out);
  // The short processes are there (sh and eight trues, each its own
  // image with the records of its exec), and the CPU time of a loop in
  // the shell: 20,000 rounds, sampled on the group as it runs.
  ASSERT_EQ(RunCommand(kCli + " record -o " + file + " --cgroup on -- sh -c 'for i in 1 2 3 4 " +
                           "5 6 7 8; do /bin/true; done; i=0; while [ $i -lt 20000 ]; do " +
                           "i=$((i + 1)); done' 2>&1",
                       &out),
            0)
      << out;
  std::smatch n;
  ASSERT_TRUE(std::regex_search(
      out, n, std::regex("written: ([0-9]+) samples .* over [0-9.]+ s, ([0-9]+) process")))
      << out;
  EXPECT_GE(std::stoi(n[1].str()), 5) << out;
  EXPECT_GE(std::stoi(n[2].str()), 9) << out;
  EXPECT_EQ(out.find("without a last flush"), std::string::npos) << out;  // no dead task's switch
  // The CPU-wide switch records a group's events get name the task on the
  // other side of each switch, anyone's: none of it reaches the raw
  // files. Copied while the command waits for a file to appear.
  const std::string stop = dir.File("stop");
  const std::string copies = dir.File("copies");
  ASSERT_EQ(mkdir(copies.c_str(), 0700), 0);
  ASSERT_EQ(RunCommand("cd " + dir.path() + " && (" + kCli +
                           " record --cgroup on -o z.fprec -- sh -c 'for i in $(seq 50); do "
                           "/bin/true; done; while [ ! -e " +
                           stop +
                           " ]; do sleep 0.01; done' >z.out 2>&1 &) && for i in $(seq 6000); do "
                           "[ -n \"$(find z.fprec.raw -name 'cpu*.perf' -size +8k 2>/dev/null)\" ] "
                           "&& break; sleep 0.01; done && cp z.fprec.raw/cpu*.perf " +
                           copies + " && touch " + stop +
                           " && for i in $(seq 6000); do [ -e z.fprec ] && break; sleep 0.01; done "
                           "&& [ -e z.fprec ]",
                       &out),
            0)
      << out;
  size_t cpu_wide = 0, named = 0;
  for (const auto& f : std::filesystem::directory_iterator(copies)) {
    std::ifstream in(f.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    for (size_t at = 0; at + 8 <= bytes.size();) {
      uint32_t type = 0;
      uint16_t size = 0;
      std::memcpy(&type, bytes.data() + at, 4);
      std::memcpy(&size, bytes.data() + at + 6, 2);
      if (size < 8 || at + size > bytes.size()) break;  // the copy's last record, cut
      if (type == PERF_RECORD_SWITCH_CPU_WIDE && size >= 16) {
        ++cpu_wide;
        uint64_t other = 0;  // next_prev_pid, next_prev_tid
        std::memcpy(&other, bytes.data() + at + 8, 8);
        named += other != 0 ? 1 : 0;
      }
      at += size;
    }
  }
  EXPECT_GT(cpu_wide, 0u);
  EXPECT_EQ(named, 0u) << "of " << cpu_wide << " CPU-wide switch records";
  // Without: the command stays in fieldprof record's own group.
  ASSERT_EQ(RunCommand(kCli + " record --cgroup off -o " + file + " -- grep ^0:: /proc/self/cgroup",
                       &out),
            0)
      << out;
  EXPECT_EQ(out.find("fieldprof-record-"), std::string::npos) << out;
  EXPECT_NE(out.find("0::"), std::string::npos) << out;
}

// Out of descriptors at any step of the start (a low `ulimit -n`), record
// says so and ends: its sampler's refusal used to leave the command's
// process waiting for good on a pipe it held both ends of.
TEST(RecordTest, OutOfDescriptorsIsAClearErrorNotAHang) {
  TempDir dir;
  const std::string file = dir.File("fd.fprec");
  int refused_by_sampler = 0;
  for (int n = 8; n <= 40; ++n) {
    std::filesystem::remove_all(file + ".raw");
    std::string out;
    // (The redirection first: sh keeps a copy of a descriptor it
    // redirects at 10 or above, past such a limit.)
    const int code = RunCommand("(ulimit -n " + std::to_string(n) + " && exec " + kCli +
                                    " record -o " + file + " -- " + kWaits + " sleeper 1) 2>&1",
                                &out);
    if (code == 0) break;  // enough from here on
    EXPECT_NE(out.find("Too many open files"), std::string::npos) << n << ": " << out;
    if (out.find("sampling from outside: ") != std::string::npos) ++refused_by_sampler;
  }
  EXPECT_GT(refused_by_sampler, 0) << "no limit made the sampler's start fail";
}

// A program of one thread stays one thread under record (glibc takes its
// locks without atomics only then, and sqlite3 takes millions): the
// sampler drains from the program's own thread until the program starts
// one. Its waits are all kept: 2,500 sleeps are 5,000 switch records, more
// than a thread's switch ring holds, drained as they come.
TEST(RecordTest, AOneThreadProgramStaysOneThreadAndKeepsEveryWait) {
  TempDir dir;
  const std::string as = Unprivileged(dir);
  const std::string file = dir.File("one.fprec");
  std::string out;
  ASSERT_EQ(
      RunCommand(as + kCli + " record -o " + file + " -- sh -c 'echo /proc/$$/task/*' 2>&1", &out),
      0)
      << out;
  size_t tasks = 0;
  for (size_t at = out.find("/task/"); at != std::string::npos; at = out.find("/task/", at + 1)) {
    ++tasks;
  }
  EXPECT_EQ(tasks, 1u) << out;
  // sh ends by _exit: its file is still whole.
  EXPECT_EQ(out.find("without a last flush"), std::string::npos) << out;

  ASSERT_EQ(
      RunCommand(as + kCli + " record -o " + file + " -- " + kWaits + " sleeper 2500 2>&1", &out),
      0)
      << out;
  std::string report;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --idle --min_percent 0", &report), 0);
  EXPECT_EQ(report.find("incomplete"), std::string::npos) << report;
  EXPECT_GE(NumberAfter(report, "to-idle (a thread began to wait), "), 2500) << report;
  EXPECT_GE(OffCpuAt(IdleStacks(file), "main;(anonymous namespace)::SleepAWhile()", "nanosleep"),
            2500 * 1000);
}

// With privileges (root here): CPU-wide switch records tell when a CPU
// truly went idle after a thread and left idle for it; each is charged to
// the stack the thread waited at. Without them, --cpu_wide on is a clear
// error and auto falls back to the threads' own records, saying so.
TEST(RecordTest, WithPrivilegesTheCpuWideRecordsShowWhenACpuWentIdle) {
  if (geteuid() != 0) GTEST_SKIP() << "CPU-wide switch records need root here";
  TempDir dir;
  const std::string file = dir.File("sleep.fprec");
  std::string out;
  // The machine's idle CPU time (USER_HZ ticks of 10 ms), to know whether
  // a CPU could go idle at all: on a loaded machine none does.
  auto idle_ticks = [] {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    long long user = 0, nice = 0, system = 0, idle = 0;
    stat >> cpu >> user >> nice >> system >> idle;
    return idle;
  };
  const long long idle_before = idle_ticks();
  ASSERT_EQ(
      RunCommand(kCli + " record --cpu_wide on -o " + file + " -- " + kWaits + " sleeper 100 2>&1",
                 &out),
      0)
      << out;
  const bool cpus_idled = idle_ticks() - idle_before >= 5;  // 50 ms
  EXPECT_NE(out.find("with CPU-wide idle"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --idle --min_percent 0", &out), 0);
  const long long went = NumberAfter(out, "a CPU went idle ");
  const long long left = NumberAfter(out, "and left idle ");
  // On this machine with little else to run, a CPU goes idle after most
  // of the sleeper's 100 waits. A thread can also leave a CPU idle where
  // no wait of it was recorded (before its ring opens, as it exits): the
  // report counts those apart, and they are few.
  const long long unmatched = std::max(0LL, NumberAfter(out, "records lost, "));
  if (cpus_idled) {
    EXPECT_GT(went, 10) << out;
    EXPECT_GT(left, 10) << out;
  }
  EXPECT_LE(went, NumberAfter(out, "idle transitions: ") + unmatched) << out;
  EXPECT_LE(unmatched * 10, went) << out;
  EXPECT_EQ(out.find("what ran on a CPU next is unknown"), std::string::npos) << out;
  // Charged to the sleep: the nanosleep line's cpu-idle column holds all
  // but those near no wait.
  std::istringstream lines(out);
  long long at_sleep = -1;
  for (std::string line; std::getline(lines, line);) {
    // The sleep's innermost frame: nanosleep as the sampler in the program
    // wraps it; from outside (the default here), libc's clock_nanosleep
    // under it.
    const auto ends_in = [&line](const std::string& end) {
      return line.size() > end.size() &&
             line.compare(line.size() - end.size(), end.size(), end) == 0;
    };
    if (ends_in(" nanosleep") || ends_in(" clock_nanosleep")) {
      long long to = 0, from = 0, cpu = 0;
      double off = 0;
      ASSERT_EQ(std::sscanf(line.c_str(), "%lld %lld %lf %lld", &to, &from, &off, &cpu), 4) << line;
      at_sleep = cpu;
    }
  }
  // (A CPU that goes idle as the program starts or exits is charged to the
  // frame it stood in then, not the sleep: on a busy machine one or two.)
  EXPECT_GE(at_sleep + unmatched + 2, went) << out;
  EXPECT_GE(at_sleep * 10, went * 9) << out;
  // Without the privileges.
  const std::string as = Unprivileged(dir);
  EXPECT_EQ(RunCommand(as + kCli + " record --cpu_wide on -o " + file + " -- /bin/true 2>&1", &out),
            3);
  EXPECT_NE(out.find("need CAP_PERFMON"), std::string::npos) << out;
  ASSERT_EQ(
      RunCommand(as + kCli + " record -o " + file + " -- " + kWaits +
                     " sleeper 5 >/dev/null 2>&1 && " + kCli + " record show " + file + " --idle",
                 &out),
      0);
  EXPECT_NE(out.find("what ran on a CPU next is unknown in this mode (CPU-wide records, which "
                     "know, need CAP_PERFMON"),
            std::string::npos)
      << out;
}

// A two-thread ping-pong over a mutex and a condition variable: each
// player's waits are at the lock calls in WaitForTurn, and their count is
// the kernel's own count of the thread's voluntary switches, but for
// switches the kernel's record marks as preemptions (see below). Both
// ways of taking the waits: in the program (without privileges) and from
// outside (root here).
void PingPongWaitsMatch(const std::string& as, const std::string& flags) {
  TempDir dir;
  if (!as.empty()) Unprivileged(dir);
  const std::string file = dir.File("pp.fprec");
  std::string out;
  ASSERT_EQ(RunCommand(as + kCli + " record " + flags + " -o " + file + " -- " + kWaits +
                           " pingpong 3000 2>&1",
                       &out),
            0)
      << out;
  // "switches TID VOLUNTARY INVOLUNTARY" per thread; the last is main's.
  // "started TID VOLUNTARY ..." per player: its count as its own code
  // began, switches a sampler in the program may not have seen (it begins
  // to watch a thread on the thread's way in).
  std::vector<std::pair<std::string, long long>> players;
  std::map<std::string, long long> started;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string word, tid;
    long long voluntary = 0;
    if (f >> word >> tid >> voluntary && word == "switches") players.emplace_back(tid, voluntary);
    if (word == "started") started[tid] = voluntary;
  }
  ASSERT_EQ(players.size(), 3u) << out;
  players.pop_back();  // main: it switched before the recording began
  ASSERT_EQ(started.size(), 2u) << out;
  // Records the kernel could not write (a full ring): each may be a
  // switch. Taken from outside, a stack is copied at each switch, and two
  // CPUs' worth of them can outrun the copier on a busy machine.
  long long lost = 0;
  if (const size_t at = out.find(" stacks dropped"); at != std::string::npos) {
    const size_t from = out.rfind(' ', at - 1) + 1;
    lost = std::stoll(out.substr(from, at - from));
  }
  for (const auto& [tid, voluntary] : players) {
    std::string report;
    ASSERT_EQ(RunCommand(kCli + " record show " + file + " --idle --thread " + tid, &report), 0);
    // The kernel counts a switch as voluntary when the thread went to
    // sleep; its switch record says "preempt" when, by then, a wakeup had
    // already put it back on the run queue (a race a ping-pong hits a few
    // times in 3,000). So the waits are the voluntary switches less at most
    // the recording's preemptions and, in the program, the switches before
    // the player's own code began (1 now and then: the sampler there may
    // not watch the thread yet; from outside it watches from its
    // creation). More only by a wait after the thread read its count:
    // outside any wrapped call in the program (its exit, once in a while);
    // from outside, where every wait has its stack, a wait or two on the
    // way to its end (storing its count, returning).
    const long long waits = NumberAfter(report, "idle transitions: ");
    const long long after = flags.empty() ? std::max(0LL, NumberAfter(report, "not waits); ")) : 3;
    // A switch record missing between two of the thread's others leaves
    // a wait without its end (or loses one), and the report counts it as
    // lost. From outside such gaps come with the kernel's losses: those it
    // told, and at most one a CPU's ring it never got to tell, at the end.
    // (In the program the count is the losses the kernel told of the
    // threads' own rings.)
    const long long missing = std::max(0LL, NumberAfter(report, "incomplete: "));
    if (!flags.empty()) {
      EXPECT_LE(missing, lost + std::thread::hardware_concurrency()) << report;
    }
    EXPECT_LE(std::abs(NumberAfter(report, "to-idle (a thread began to wait), ") - waits),
              lost + missing)
        << report;
    EXPECT_LE(waits, voluntary + after) << report;
    const long long unwatched = flags.empty() ? started.at(tid) : 0;  // from outside: all
    EXPECT_GE(waits, voluntary - unwatched - NumberAfter(report, "whole recording: ") - lost)
        << report;
    // (Most turns wait; on a loaded machine a player finds its turn
    // already come now and then.)
    EXPECT_GE(voluntary, 300) << "the players took turns by waiting";
  }
  // The players' waits at the lock calls: the innermost frames in the
  // program, libc's own under them from outside.
  const auto stacks = IdleStacks(file);
  long long at_locks = 0, all = 0;
  std::string elsewhere;
  for (const auto& [stack, us] : stacks) {
    // A player's waits before its turns (at the barrier, both players
    // made) and after them (ReadSwitches: opening /proc while the other
    // player exits) are not turns.
    if (stack.find("Player") == std::string::npos) continue;
    if (stack.find("ReadSwitches") != std::string::npos) continue;
    if (stack.find("Player(void*);pthread_barrier_wait") != std::string::npos) continue;
    all += us;
    // A wait in the lock taken before the turn's wait (contended now and
    // then): in the program, the sampler's wrapper, pthread_mutex_lock;
    // from outside, libc's own function, whose address it exports under
    // two names, named __pthread_mutex_lock (seen once in a CI run).
    if (stack.find("WaitForTurn(long);pthread_cond_wait") != std::string::npos ||
        stack.find("WaitForTurn(long);pthread_mutex_lock") != std::string::npos ||
        stack.find("WaitForTurn(long);__pthread_mutex_lock") != std::string::npos) {
      at_locks += us;
    } else {
      elsewhere += stack + " " + std::to_string(us) + "\n";
    }
  }
  EXPECT_GT(all, 0);
  EXPECT_EQ(at_locks, all) << "every player's wait is at a lock call; elsewhere:\n" << elsewhere;
}

TEST(RecordTest, PingPongWaitsMatchTheKernelsSwitchCounts) {
  TempDir dir;
  PingPongWaitsMatch(Unprivileged(dir), "");
  if (geteuid() == 0) PingPongWaitsMatch("", "--idle_from perf");
}

// With the task clock, samples come at the rate asked (999 a CPU second);
// per-thread CPU timers fire at most once per kernel tick.
TEST(RecordTest, TheTaskClockSamplesAtTheRateAsked) {
  TempDir dir;
  const std::string as = Unprivileged(dir);
  // The program spins until its thread has had 0.4 s of CPU: the work is
  // the same on a machine running tests side by side (the phases, which
  // spin by the wall clock, got under 0.1 s of CPU beside a crowd of 16
  // spinning threads). Bash's `times` says what it had, start and exit
  // included, and the samples are held to that.
  struct Run {
    std::string out;
    double cpu = 0;
    long long written = 0;
  };
  auto record = [&](const std::string& options, const std::string& name) {
    Run run;
    EXPECT_EQ(RunCommand(as + kCli + " record " + options + " -o " + dir.File(name) +
                             " -- bash -c '" + kPhases +
                             " cpu 0.4 >/dev/null; s=$?; times >&2; exit $s'" + " 2>&1 >/dev/null",
                         &run.out),
              0)
        << run.out;
    // The second line of `times`: the children's user and system time.
    std::smatch m;
    const std::regex times_lines(R"(\d+m[\d.]+s \d+m[\d.]+s\n(\d+)m([\d.]+)s (\d+)m([\d.]+)s)");
    if (std::regex_search(run.out, m, times_lines)) {
      run.cpu = std::stod(m[1]) * 60 + std::stod(m[2]) + std::stod(m[3]) * 60 + std::stod(m[4]);
    }
    run.written = NumberAfter(run.out, "written: ");
    std::printf("%s: %.3f s of CPU, %lld samples written\n", options.c_str(), run.cpu, run.written);
    return run;
  };
  const Run outside = record("", "o.fprec");
  const Run task = record("--clock task", "t.fprec");
  const Run timer = record("--clock timer", "u.fprec");
  EXPECT_NE(outside.out.find("perf task-clock from outside"), std::string::npos) << outside.out;
  EXPECT_NE(task.out.find("perf task-clock"), std::string::npos) << task.out;
  ASSERT_GT(outside.cpu, 0.1) << outside.out;
  EXPECT_GT(outside.written, 0.8 * outside.cpu * 999) << outside.out;
  EXPECT_NE(timer.out.find("timers"), std::string::npos) << timer.out;
  ASSERT_GT(task.cpu, 0.1) << task.out;
  ASSERT_GT(timer.cpu, 0.1) << timer.out;
  EXPECT_GT(task.written, 0.8 * task.cpu * 999) << task.out;
  EXPECT_LT(timer.written / timer.cpu, 0.8 * task.written / task.cpu) << timer.out;
  std::string out;
  EXPECT_EQ(RunCommand(kCli + " record --clock cycles -- true 2>&1", &out), 2);
  EXPECT_NE(out.find("--clock is perf, task or timer"), std::string::npos) << out;
}

// Many threads sampled fast: tens of megabytes of stacks pass through the
// sampler's ring of one mebibyte, its records of every length wrapping
// round it many times, while the writer drains it. Every stack must come
// out whole: each spinning sample is exactly `depth` calls of `deep` deep
// (a torn or misread record would show any other count). The work is
// bounded, not the time: the crowd spins for twice as long until 5,000
// spinning samples came out (2 CPUs x 1 s x 10,000 Hz, less what the start
// and the sampler take, on a quiet machine of this kind), so a busier or
// slower machine takes longer rather than failing.
TEST(RecordTest, ManyThreadsSampledFastKeepEveryStackWhole) {
  TempDir dir;
  const std::string file = dir.File("crowd.fprec");
  std::string out;
  uint64_t spinning = 0;
  for (double secs = 1.0; spinning <= 5000 && secs <= 16.0; secs *= 2) {
    ASSERT_EQ(RunCommand(kCli + " record --hz 10000 -o " + file + " -- " + kPhases +
                             " crowd 16 100 " + std::to_string(secs) + " 2>&1",
                         &out),
              0)
        << out;
    std::map<int, uint64_t> by_depth;  // spinning samples by calls of `deep`
    spinning = 0;
    for (const auto& [stack, n] : Collapsed(file)) {
      if (stack.find(";spin;") == std::string::npos) continue;
      int depth = 0;
      for (size_t at = stack.find(";deep;"); at != std::string::npos;
           at = stack.find(";deep;", at + 1)) {
        ++depth;
      }
      by_depth[depth] += n;
      spinning += n;
    }
    EXPECT_EQ(by_depth[100], spinning) << "every spinning stack is 100 calls deep";
  }
  EXPECT_GT(spinning, 5000u) << out;
}

// The cum% column of `function`'s row in `go tool pprof -top` output (0
// when it has none).
double CumPercent(const std::string& top, const std::string& function) {
  std::istringstream lines(top);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string flat, flat_pct, sum_pct, cum, cum_pct, name;
    if (f >> flat >> flat_pct >> sum_pct >> cum >> cum_pct >> name && name == function &&
        !cum_pct.empty() && cum_pct.back() == '%') {
      return std::stod(cum_pct);
    }
  }
  return 0;
}

// --wall samples threads off the CPU too: a sleeper that CPU time hardly
// sees is seen at the rate asked, in its sleep.
TEST(RecordTest, WallClockSamplesASleepingThread) {
  TempDir dir;
  const std::string file = dir.File("w.fprec");
  auto samples = [&](const std::string& mode, uint64_t* in_sleep) {
    std::string out;
    EXPECT_EQ(RunCommand(kCli + " record " + mode + " --hz 500 -o " + file + " -- " + kWaits +
                             " sleeper 200 2>&1",
                         &out),
              0)
        << out;
    if (!mode.empty()) {
      EXPECT_NE(out.find("(wall clock, 500 Hz)"), std::string::npos) << out;
    }
    EXPECT_EQ(RunCommand(kCli + " record show " + file + " --collapsed", &out), 0);
    uint64_t all = 0;
    *in_sleep = 0;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      const uint64_t n = std::stoull(line.substr(line.rfind(' ') + 1));
      all += n;
      if (line.find("SleepAWhile()") != std::string::npos) *in_sleep += n;
    }
    return all;
  };
  uint64_t cpu_sleep = 0, wall_sleep = 0;
  const uint64_t cpu = samples("", &cpu_sleep);
  const uint64_t wall = samples("--wall", &wall_sleep);
  // 200 sleeps of 1 ms (a signal may cut one short): some 0.2 s of wall
  // time, about 100 samples at 500 Hz; on the CPU, hardly any.
  EXPECT_GE(wall, 50u);
  EXPECT_GE(wall_sleep * 10, wall * 9) << wall_sleep << " of " << wall;
  EXPECT_LT(cpu * 4, wall) << cpu << " CPU samples, " << wall << " wall";
}

// --pprof: a gzipped profile.proto that Go's own pprof reads, written
// under a bare name into the current directory; with --idle, the waits
// and their off-CPU time.
TEST(RecordTest, PprofIsReadByGoToolPprof) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(RunCommand("command -v go", &out), 0)
      << "go tool pprof: ./deploy/install-deps.sh process";
  const std::string go = "HOME=" + dir.path() + " go tool pprof ";
  ASSERT_EQ(RunCommand(kCli + " record -o " + dir.File("ph.fprec") + " -- " + kPhases +
                           " >/dev/null 2>&1; cd " + dir.path() + " && " + kCli +
                           " record show ph.fprec --from 0.2 --to 0.4 --pprof b.pb.gz 2>&1",
                       &out),
            0)
      << out;
  ASSERT_EQ(RunCommand("cd " + dir.path() + " && " + go + "-top b.pb.gz 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("Type: cpu"), std::string::npos) << out;
  // The second phase's range: phase_b, and hardly any phase_a.
  EXPECT_GT(CumPercent(out, "phase_b"), 90) << out;
  EXPECT_LT(CumPercent(out, "phase_a"), 10) << out;
  ASSERT_EQ(
      RunCommand(kCli + " record -o " + dir.File("w.fprec") + " -- " + kWaits +
                     " pipe 50 >/dev/null 2>&1; " + kCli + " record show " + dir.File("w.fprec") +
                     " --idle --pprof " + dir.File("w.pb.gz") + " 2>/dev/null && " + go +
                     "-top -sample_index=off_cpu " + dir.File("w.pb.gz") + " 2>&1",
                 &out),
      0)
      << out;
  EXPECT_NE(out.find("Type: off_cpu"), std::string::npos) << out;
  EXPECT_NE(out.find(" read\n"), std::string::npos) << out;
  // (Taken from outside, as root here, the sleep's innermost frame is
  // libc's clock_nanosleep.)
  EXPECT_TRUE(out.find(" nanosleep\n") != std::string::npos ||
              out.find(" clock_nanosleep\n") != std::string::npos)
      << out;
}

// Per call path ("a;b;c") and each of its prefixes, the samples at or
// under it, from `record show --collapsed` (exact) over [from_ns, to_ns].
std::map<std::string, uint64_t> PathTotals(const std::string& file, uint64_t from_ns,
                                           uint64_t to_ns, const std::string& more = "") {
  char range[96];
  std::snprintf(range, sizeof range, " --from %.9f --to %.9f", from_ns / 1e9, to_ns / 1e9);
  std::string out;
  EXPECT_EQ(RunCommand(kCli + " record show " + file + " --collapsed" + range + more, &out), 0);
  std::map<std::string, uint64_t> by;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t sp = line.rfind(' ');
    const uint64_t n = std::stoull(line.substr(sp + 1));
    const std::string stack = line.substr(0, sp);
    for (size_t at = 0; at != std::string::npos;) {
      at = stack.find(';', at + 1);
      by[stack.substr(0, at)] += n;
    }
  }
  return by;
}

// fieldprof record killed while its command runs: what the samplers
// wrote so far stays beside the recording (NAME.fprec.raw), and the next
// `record show NAME.fprec` makes the recording from it; `record recover`
// does the same by name. While it runs, `record show` answers from what
// was written so far. A raw directory already there is not written over.
TEST(RecordTest, AKilledRecordIsRecoveredByTheNextShow) {
  TempDir dir;
  for (const std::string clock : {"", " --clock task"}) {
    SCOPED_TRACE(clock.empty() ? "perf" : clock);
    std::string out;
    // Killed once samples are on disk; the program runs on to its end.
    const std::string script =
        "cd " + dir.path() + " && rm -rf k.fprec k.fprec.raw out && (" + kCli + " record" + clock +
        " -o k.fprec -- " + kPhases +
        " >out 2>&1 & echo $! >rec.pid) && for i in $(seq 6000); do "
        "[ -n \"$(find k.fprec.raw -type f \\( -name 'cpu*.perf' -o -name 'rec-*.raw' \\) "
        "-size +16k 2>/dev/null)\" ] && break; sleep 0.01; done && "
        "kill -9 $(cat rec.pid) && for i in $(seq 6000); do grep -q 'phases done' out && break; "
        "sleep 0.01; done && grep -c 'phases done' out";
    ASSERT_EQ(RunCommand(script, &out), 0) << out;
    ASSERT_FALSE(std::filesystem::exists(dir.File("k.fprec")));
    ASSERT_TRUE(std::filesystem::is_directory(dir.File("k.fprec.raw")));
    ASSERT_EQ(RunCommand("cd " + dir.path() + " && " + kCli + " record show k.fprec 2>&1", &out), 0)
        << out;
    EXPECT_NE(out.find("recovered k.fprec from k.fprec.raw"), std::string::npos) << out;
    EXPECT_NE(out.find(" phase_a\n"), std::string::npos) << out;
    EXPECT_TRUE(std::filesystem::exists(dir.File("k.fprec")));
    EXPECT_FALSE(std::filesystem::exists(dir.File("k.fprec.raw")));
  }
  // While it runs: shown up to the samplers' last writes (from outside:
  // the rings unwound as they are), or from the time tree its follower
  // grows (sampled in the program), the recording left to finish. The
  // program spins until it is killed.
  for (const std::string clock : {"", " --clock task"}) {
    SCOPED_TRACE(clock.empty() ? "perf" : clock);
    std::string out;
    const std::string script =
        "cd " + dir.path() + " && rm -rf live.fprec live.fprec.raw && (" + kCli + " record" +
        clock + " -o live.fprec -- " + kPhases +
        " cpu 600 >/dev/null 2>&1 & echo $! >live.pid) && for i in $(seq 6000); do "
        "[ -n \"$(find live.fprec.raw -type f \\( -name 'cpu*.perf' -o -name 'rec-*.raw' \\) "
        "-size +16k 2>/dev/null)\" ] && break; sleep 0.01; done && " +
        kCli +
        " record show live.fprec 2>&1; pkill -KILL -P $(cat live.pid); for i in $(seq 6000); do "
        "kill -0 $(cat live.pid) 2>/dev/null || break; sleep 0.01; done";
    ASSERT_EQ(RunCommand(script, &out), 0) << out;
    EXPECT_NE(out.find("live.fprec is still being recorded"), std::string::npos) << out;
    EXPECT_NE(out.find(clock.empty() ? "shown up to the samplers' last writes"
                                     : "shown from its time tree as grown"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(" spin_cpu("), std::string::npos) << out;
    EXPECT_TRUE(std::filesystem::exists(dir.File("live.fprec")));
    EXPECT_FALSE(std::filesystem::exists(dir.File("live.fprec.raw")));
  }
  // By name, into another file; and a raw directory in the way.
  std::string out;
  std::filesystem::create_directory(dir.File("x.fprec.raw"));
  ASSERT_EQ(RunCommand(kCli + " record -o " + dir.File("x.fprec") + " -- true 2>&1", &out), 3);
  EXPECT_NE(out.find("fieldprof record recover " + dir.File("x.fprec.raw")), std::string::npos)
      << out;
  ASSERT_EQ(RunCommand(kCli + " record recover " + dir.File("x.fprec.raw") + " 2>&1", &out), 1);
  EXPECT_NE(out.find("is not what fieldprof record left"), std::string::npos) << out;
}

// Each sample carries the time it stands for, measured where it was
// taken: one program, one thread always on the CPU, gives the same total
// time under every clock, within 3% of its own CPU time; with --wall, of
// its own wall time. The timer clock fires at most once a kernel tick
// whatever --hz asks: counted as samples / hz, its total came out at a
// quarter of the truth.
TEST(RecordTest, EveryClockGivesTheProgramsOwnTime) {
  TempDir dir;
  for (const std::string clock : {"", " --clock task", " --clock timer", " --wall"}) {
    std::string out;
    const std::string file = dir.File("c.fprec");
    ASSERT_EQ(RunCommand(kCli + " record" + clock + " -o " + file + " -- " + kPhases +
                             " cpu 0.5 2>/dev/null",
                         &out),
              0)
        << clock << ": " << out;
    unsigned long long cpu_ns = 0, wall_ns = 0;
    ASSERT_EQ(std::sscanf(out.c_str(), "cpu_ns %llu wall_ns %llu", &cpu_ns, &wall_ns), 2) << out;
    ASSERT_EQ(RunCommand(kCli + " tree show " + file + " --json 2>/dev/null", &out), 0) << out;
    const nlohmann::json tree = nlohmann::json::parse(out);
    const double recorded = tree["root"]["total"]["time_ns"].get<double>();
    // Under --wall the thread's time also holds what the process did
    // before main and after the spin, a few milliseconds.
    const double truth = static_cast<double>(clock == " --wall" ? wall_ns : cpu_ns);
    EXPECT_NEAR(recorded, truth, 0.03 * truth + (clock == " --wall" ? 5e6 : 0))
        << "clock" << (clock.empty() ? " perf (default)" : clock) << ": " << recorded / 1e6
        << " ms recorded, " << truth / 1e6 << " ms measured by the program";
  }
}

// record show's shares are over every sample of the range, "other"
// included: a share is exact or short of the true one by at most the
// bound it states. With --thread, the range is counted exactly: the
// header's count is the thread's, and there is no bound.
TEST(RecordTest, SharesAndTheBoundAreOverTheRangesSamples) {
  TempDir dir;
  std::string out;
  const std::string file = dir.File("b.fprec");
  // Small leaves and lists that keep half a node's stacks: "other" holds
  // samples wherever the range merges whole nodes.
  ASSERT_EQ(RunCommand(kCli + " record --leaf_samples 8 --keep 0.5 -o " + file + " -- " + kPhases +
                           " >/dev/null 2>&1",
                       &out),
            3);
  const uint64_t from = 30'000'000, to = 400'000'000;
  char range[96];
  std::snprintf(range, sizeof range, " --from %.9f --to %.9f", from / 1e9, to / 1e9);
  const auto truth = PathTotals(file, from, to);
  uint64_t in_range = 0;
  for (const auto& [path, n] : truth) in_range += path.find(';') == std::string::npos ? n : 0;
  ASSERT_GT(in_range, 0u);
  ASSERT_EQ(RunCommand(kCli + " record show " + file + range + " --min_percent 0", &out), 0);
  EXPECT_NE(out.find(", " + std::to_string(in_range) + " samples in ["), std::string::npos)
      << in_range << "\n"
      << out;
  double bound_points = 0;
  if (const size_t b = out.find("bound: "); b != std::string::npos) {
    uint64_t other = 0, of = 0;
    ASSERT_EQ(std::sscanf(out.c_str() + b, "bound: %llu of these %llu samples",
                          reinterpret_cast<unsigned long long*>(&other),
                          reinterpret_cast<unsigned long long*>(&of)),
              2)
        << out;
    EXPECT_EQ(of, in_range);
    bound_points = 100.0 * static_cast<double>(other) / static_cast<double>(in_range);
    EXPECT_NE(out.find("[other: stacks not listed]"), std::string::npos) << out;
  }
  // The top lines and "other" make the whole range: 100%.
  const auto top_total = [](const std::string& text) {
    double total = 0;
    std::istringstream rows(text);
    for (std::string row; std::getline(rows, row);) {
      if (row.size() > 17 && row[row.size() - 1] != ' ' && row.find('%') == 6 &&
          row.find('%', 7) == 14 && row[16] != ' ') {
        total += std::stod(row.substr(0, 6));
      }
    }
    return total;
  };
  EXPECT_NEAR(top_total(out), 100.0, 0.1) << out;
  // --top 2: two stacks listed (two lines with self time), the rest one
  // "other" of exact size, and still 100%.
  {
    std::string top;
    ASSERT_EQ(RunCommand(kCli + " record show " + file + range + " --min_percent 0 --top 2", &top),
              0);
    EXPECT_NE(top.find("lists and --top 2 (none with more than"), std::string::npos) << top;
    EXPECT_NE(top.find("[other: stacks not listed]"), std::string::npos) << top;
    EXPECT_NEAR(top_total(top), 100.0, 0.1) << top;
    int with_self = 0;
    std::istringstream rows(top);
    for (std::string row; std::getline(rows, row);) {
      with_self += row.size() > 17 && row.find('%') == 6 && row.find('%', 7) == 14 &&
                   row.find("[other") == std::string::npos && std::stod(row.substr(8, 6)) > 0;
    }
    EXPECT_EQ(with_self, 2) << top;
  }
  // The first phase's share against its true share.
  const size_t line = out.find(" phase_a\n");
  ASSERT_NE(line, std::string::npos) << out;
  const double shown = std::stod(out.substr(out.rfind('\n', line) + 1, 7));
  uint64_t phase_a = 0;
  for (const auto& [path, n] : truth) {
    if (path.size() > 8 && path.compare(path.size() - 8, 8, ";phase_a") == 0) phase_a += n;
  }
  const double true_share = 100.0 * static_cast<double>(phase_a) / in_range;
  EXPECT_LE(shown, true_share + 0.01) << out;
  EXPECT_GE(shown + bound_points + 0.01, true_share) << out;
  // One thread: its own samples, exactly.
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --chrome_trace", &out), 0);
  const nlohmann::json trace = nlohmann::json::parse(out);
  const uint64_t tid = trace["traceEvents"][0]["tid"].get<uint64_t>();
  const std::string thread = " --thread " + std::to_string(tid);
  const auto mine = PathTotals(file, from, to, thread);
  uint64_t of_thread = 0;
  for (const auto& [path, n] : mine) of_thread += path.find(';') == std::string::npos ? n : 0;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + range + thread, &out), 0);
  EXPECT_NE(out.find(", " + std::to_string(of_thread) + " samples of thread " +
                     std::to_string(tid) + " in ["),
            std::string::npos)
      << of_thread << "\n"
      << out;
  EXPECT_NE(out.find("(" + std::to_string(in_range) + " of every thread)"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("bound:"), std::string::npos) << out;
}

// --html: the page in Debian's chromium. A range dragged on its timeline
// is answered from the time tree (nodes merged, not every sample scanned),
// and each frame it draws agrees with the CLI's exact count for the same
// range within the bound it states; with "exact" ticked, equal. A thread
// picked, a frame clicked to zoom, a search: as a user does them. The
// command line holds a hostile string, which the page shows as text.
TEST(RecordTest, ThePageAnswersARangeDraggedOnItsTimeline) {
  TempDir dir;
  std::string out;
  ASSERT_TRUE(testing::BrowserInstalled(FIELDPROF_SOURCE_DIR)) << testing::kBrowserMissing;
  const std::string file = dir.File("ph.fprec");
  // Small leaves, so a range of the first phase spans whole inner nodes.
  ASSERT_EQ(RunCommand(kCli + " record --leaf_samples 16 -o " + file + " -- " + kPhases +
                           " '</script><b>x</b>' >/dev/null 2>&1",
                       &out),
            3);
  // Written under a bare name into the current directory.
  ASSERT_EQ(
      RunCommand("cd " + dir.path() + " && " + kCli + " record show ph.fprec --html ph.html 2>&1",
                 &out),
      0)
      << out;
  EXPECT_NE(out.find("ph.html written"), std::string::npos) << out;
  const uint64_t from = 30'000'000, to = 170'000'000;
  ASSERT_EQ(RunCommand("node " + std::string(FIELDPROF_SOURCE_DIR) +
                           "/tests/tools/record/record_page.mjs " + dir.File("ph.html") + " " +
                           std::to_string(from) + " " + std::to_string(to) + " " +
                           FIELDPROF_BUILD_DIR + "/ui-screenshots",
                       &out),
            0)
      << out;
  const nlohmann::json page = nlohmann::json::parse(out.substr(out.find('{')));
  // The range the drag chose (to the pixel): about the one asked.
  const nlohmann::json& range = page["range"];
  const uint64_t r1 = range["from_ns"], r2 = range["to_ns"];
  EXPECT_NEAR(static_cast<double>(r1), from, 5e6);
  EXPECT_NEAR(static_cast<double>(r2), to, 5e6);
  // The page says which range it shows: "[29.54 ms, 169.47 ms]".
  double shown1 = 0, shown2 = 0;
  ASSERT_EQ(std::sscanf(page["range_text"].get<std::string>().c_str(), "[%lf ms, %lf ms]", &shown1,
                        &shown2),
            2)
      << page["range_text"];
  EXPECT_NEAR(shown1, r1 / 1e6, 0.006);
  EXPECT_NEAR(shown2, r2 / 1e6, 0.006);
  // Answered from the tree: inner nodes merged, fewer samples scanned
  // than the range holds.
  EXPECT_GT(range["merged"].get<uint64_t>(), 0u) << range.dump();
  EXPECT_LT(range["scanned"].get<uint64_t>(), range["samples"].get<uint64_t>()) << range.dump();
  // Each drawn frame within the stated bound of the CLI's exact count.
  auto check = [&](const nlohmann::json& st, const std::map<std::string, uint64_t>& want,
                   bool exact) {
    const uint64_t other = st["other"];
    if (exact) {
      EXPECT_EQ(other, 0u);
    }
    ASSERT_FALSE(st["frames"].empty());
    for (const auto& f : st["frames"]) {
      const std::string path = f["path"];
      const uint64_t got = f["total"];
      auto it = want.find(path);
      const uint64_t truth = it == want.end() ? 0 : it->second;
      if (exact) {
        EXPECT_EQ(got, truth) << path;
      } else {
        EXPECT_LE(got, truth) << path;
        EXPECT_LE(truth, got + other) << path;
      }
    }
  };
  const auto all = PathTotals(file, r1, r2);
  check(range, all, false);
  uint64_t in_range = 0;
  for (const auto& [path, n] : all) in_range += path.find(';') == std::string::npos ? n : 0;
  EXPECT_EQ(range["samples"].get<uint64_t>(), in_range);
  // The first phase's range is phase_a's.
  uint64_t phase_a = 0;
  for (const auto& f : range["frames"]) {
    const std::string path = f["path"];
    if (path.size() > 8 && path.compare(path.size() - 8, 8, ";phase_a") == 0)
      phase_a += f["total"].get<uint64_t>();
  }
  EXPECT_GT(static_cast<double>(phase_a), 0.9 * range["samples"].get<double>()) << range.dump();
  // One thread, then exact.
  const uint64_t tid = page["thread"]["tid"];
  ASSERT_GT(tid, 0u);
  const auto one = PathTotals(file, r1, r2, " --thread " + std::to_string(tid));
  check(page["thread"], one, false);
  check(page["exact"], one, true);
  // A click zooms: the frame spans the width, its callers above it.
  EXPECT_NEAR(page["zoom"]["focus_width"].get<double>(), page["zoom"]["width"].get<double>(), 2);
  EXPECT_GT(page["zoom"]["above"].get<int>(), 0);
  EXPECT_EQ(page["unzoomed_above"].get<int>(), 0);
  EXPECT_GT(page["search_marked"].get<int>(), 0);
  // The hostile argument is in the page only as escaped text.
  ASSERT_EQ(RunCommand("cat " + dir.File("ph.html"), &out), 0);
  EXPECT_EQ(out.find("</script><b>"), std::string::npos);
  EXPECT_NE(out.find("&lt;/script&gt;&lt;b&gt;"), std::string::npos);
}

// Traced and sampled time in one tree (tree merge): each scope's node
// totals its traced duration to the nanosecond, however its samples
// fell; an inner scope's time is taken out of its outer one's; inside
// each, the samples put the time where the known work is; the samples
// outside every scope keep their own time; nothing is counted twice.
TEST(RecordTest, TracedScopesAndSamplesMergeIntoOneTree) {
  TempDir dir;
  const std::string file = dir.File("pw.fprec");
  std::string out;
  ASSERT_EQ(
      RunCommand(kCli + " record -o " + file + " -- " + kPointWork + " >/dev/null 2>&1", &out), 0);
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --points --json", &out), 0) << out;
  std::map<std::string, int64_t> traced;
  for (const auto& seg : nlohmann::json::parse(out)) {
    traced[seg["segment"].get<std::string>()] = seg["total_ns"].get<int64_t>();
  }
  ASSERT_EQ(traced.size(), 4u) << out;
  ASSERT_EQ(RunCommand(kCli + " tree merge " + file + " --json 2>/dev/null", &out), 0) << out;
  const nlohmann::json tree = nlohmann::json::parse(out);
  const auto child = [](const nlohmann::json& node, const std::string& name) {
    for (const auto& c : node["children"]) {
      if (c["name"] == name) return c;
    }
    return nlohmann::json();
  };
  // The time under `node` whose path passes through `function`.
  const std::function<int64_t(const nlohmann::json&, const std::string&)> under =
      [&](const nlohmann::json& node, const std::string& function) -> int64_t {
    if (node["name"] == function) return node["total"]["time_ns"].get<int64_t>();
    int64_t sum = 0;
    for (const auto& c : node["children"]) sum += under(c, function);
    return sum;
  };
  const nlohmann::json& root = tree["root"];
  const nlohmann::json load = child(root, "[work:load]"), parse = child(root, "[work:parse]");
  ASSERT_FALSE(load.is_null()) << tree.dump(1);
  ASSERT_FALSE(parse.is_null()) << tree.dump(1);
  const nlohmann::json hash = child(load, "[work:hash]");
  ASSERT_FALSE(hash.is_null()) << load.dump(1);
  EXPECT_EQ(load["total"]["time_ns"].get<int64_t>(), traced["load (scope)"]);
  EXPECT_EQ(hash["total"]["time_ns"].get<int64_t>(), traced["hash (scope)"]);
  EXPECT_EQ(parse["total"]["time_ns"].get<int64_t>(), traced["parse (scope)"]);
  EXPECT_EQ(load["total"]["calls"].get<int64_t>(), 2);  // itself and hash
  EXPECT_EQ(parse["self"]["calls"].get<int64_t>(), 1);
  // Inside: load's own time (less hash) is load_copy's, hash's is
  // load_hash's, parse's is parse_tokens' (sampling puts a stray sample
  // or two elsewhere: at least 90%).
  const double own = static_cast<double>(traced["load (scope)"] - traced["hash (scope)"]);
  EXPECT_GT(static_cast<double>(under(load, "load_copy")), 0.9 * own) << load.dump(1);
  EXPECT_EQ(under(load, "load_hash"), under(hash, "load_hash"));
  EXPECT_GT(static_cast<double>(under(hash, "load_hash")), 0.9 * traced["hash (scope)"]);
  EXPECT_GT(static_cast<double>(under(parse, "parse_tokens")), 0.9 * traced["parse (scope)"]);
  // Outside every scope: idle_spin, 50 ms of CPU, in its sampled time.
  int64_t outside = 0;
  for (const auto& c : root["children"]) {
    if (c["name"].get<std::string>().rfind("[", 0) != 0) outside += under(c, "idle_spin");
  }
  EXPECT_NEAR(static_cast<double>(outside), 50e6, 10e6);
  // Nothing twice: the root is the scopes' durations and the rest's samples.
  int64_t sum = 0;
  for (const auto& c : root["children"]) sum += c["total"]["time_ns"].get<int64_t>();
  EXPECT_EQ(root["total"]["time_ns"].get<int64_t>(), sum);
  // Not a recording, or one with no points: said.
  ASSERT_EQ(RunCommand(kCli + " record --points=false -o " + dir.File("np.fprec") + " -- " +
                           kPointWork + " >/dev/null 2>&1",
                       &out),
            0);
  EXPECT_EQ(RunCommand(kCli + " tree merge " + dir.File("np.fprec") + " 2>&1", &out), 1);
  EXPECT_NE(out.find("passed no points"), std::string::npos) << out;
}

// The points on the page, in Debian's chromium: each occurrence drawn as
// a span above its thread's lane; clicking one selects its time range on
// its thread, and the flame graph then holds what `record show --during`
// counts for it, frame for frame.
TEST(RecordTest, APointsSpanClickedOnThePageShowsTheSamplesInsideIt) {
  TempDir dir;
  std::string out;
  ASSERT_TRUE(testing::BrowserInstalled(FIELDPROF_SOURCE_DIR)) << testing::kBrowserMissing;
  const std::string file = dir.File("pw.fprec");
  ASSERT_EQ(
      RunCommand(kCli + " record -o " + file + " -- " + kPointWork + " >/dev/null 2>&1", &out), 0);
  ASSERT_EQ(
      RunCommand(kCli + " record show " + file + " --html " + dir.File("pw.html") + " 2>&1", &out),
      0)
      << out;
  ASSERT_EQ(RunCommand("node " + std::string(FIELDPROF_SOURCE_DIR) +
                           "/tests/tools/record/record_points_page.mjs " + dir.File("pw.html") +
                           " 'work:load (scope)' " + FIELDPROF_BUILD_DIR + "/ui-screenshots",
                       &out),
            0)
      << out;
  const nlohmann::json page = nlohmann::json::parse(out.substr(out.find('{')));
  // Four spans: three scopes and the segment around them.
  EXPECT_EQ(page["spans"].size(), 4u) << page["spans"].dump();
  const nlohmann::json& span = page["span"];
  EXPECT_NE(page["tooltip"].get<std::string>().find("work:load (scope)"), std::string::npos);
  EXPECT_EQ(page["state"]["from_ns"], span["begin_ns"]);
  EXPECT_EQ(page["state"]["to_ns"], span["end_ns"]);
  EXPECT_EQ(page["state"]["tid"], span["tid"]);
  EXPECT_EQ(page["thread_picked"].get<std::string>(), std::to_string(span["tid"].get<uint64_t>()));
  const auto during = PathTotals(file, 0, 100e9, " --during work:load");
  ASSERT_FALSE(during.empty());
  std::map<std::string, uint64_t> drawn;
  for (const auto& f : page["state"]["frames"]) drawn[f["path"]] = f["total"];
  EXPECT_EQ(drawn, during);
}

TEST(RecordTest, AKilledProgramLeavesItsSamplesAndBadInputIsClear) {
  TempDir dir;
  const std::string file = dir.File("killed.fprec");
  std::string out;
  EXPECT_EQ(RunCommand(kCli + " record -o " + file + " -- " + kPhases + " kill 2>&1", &out),
            128 + 9)
      << out;
  auto first = Phases(file, 0.03, 0.17);
  EXPECT_GT(Share(first, "a"), 0.9);
  // Sampled in the program, a process killed keeps what its writer wrote,
  // and record says it ended without its last flush.
  EXPECT_EQ(
      RunCommand(kCli + " record --clock task -o " + file + " -- " + kPhases + " kill 2>&1", &out),
      128 + 9)
      << out;
  EXPECT_NE(out.find("some processes ended without a last flush"), std::string::npos) << out;
  first = Phases(file, 0.03, 0.17);
  EXPECT_GT(Share(first, "a"), 0.9);
  // Not a recording, no file, no command: clear errors.
  std::ofstream(dir.File("junk")) << "junk";
  EXPECT_EQ(RunCommand(kCli + " record show " + dir.File("junk") + " 2>&1", &out), 1);
  EXPECT_NE(out.find("not a fieldprof recording"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(kCli + " record show " + dir.File("none") + " 2>&1", &out), 1);
  EXPECT_EQ(RunCommand(kCli + " record 2>&1", &out), 2);
  EXPECT_NE(out.find("-- CMD"), std::string::npos) << out;
}

// The program's points on the samples' timeline, under the perf clock and
// the task clock: record show --points lists its two scopes and its
// segment with the durations the program's own clock read (within 1%);
// --during gives the samples inside a scope, exactly, and they are where
// its known work is: load's split 2:1 between load_hash and load_copy,
// parse's all in parse_tokens, and none of idle_spin (outside both).
// Points nobody wrote on the samples' timeline (--auto_points): the
// process's start and main entered, and main to its exit, which holds the
// program's samples; the program's own points beside them.
TEST(RecordTest, AutoPointsSplitTheRunWithoutTouchingTheCode) {
  TempDir dir;
  const std::string file = dir.File("auto.fprec");
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " record --auto_points -o " + file + " -- " + kPointWork +
                           " >/dev/null 2>&1",
                       &out),
            0);
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --points --json", &out), 0) << out;
  const nlohmann::json rows = nlohmann::json::parse(out);
  std::map<std::string, uint64_t> auto_count;
  bool own = false;
  for (const nlohmann::json& row : rows) {
    if (row["tag"] == "auto") auto_count[row["segment"]] = row["count"];
    own = own || row["tag"] == "work";
  }
  EXPECT_TRUE(own) << out;
  EXPECT_EQ(auto_count,
            (std::map<std::string, uint64_t>{{"start -> main", 1}, {"main -> exit", 1}}))
      << out;
  // Main to exit holds nearly every sample: before main only the loader
  // and the libraries' constructors ran.
  uint64_t all = 0, in_main = 0;
  for (const auto& [stack, n] : Collapsed(file)) all += n;
  for (const auto& [stack, n] : Collapsed(file, " --during 'auto:main -> exit'")) in_main += n;
  ASSERT_GT(all, 0u);
  EXPECT_GE(static_cast<double>(in_main), 0.8 * static_cast<double>(all))
      << in_main << " of " << all;
  // Without the flag, no automatic point.
  ASSERT_EQ(RunCommand(kCli + " record -o " + dir.File("own.fprec") + " -- " + kPointWork +
                           " >/dev/null 2>&1",
                       &out),
            0);
  ASSERT_EQ(RunCommand(kCli + " record show " + dir.File("own.fprec") + " --points --json", &out),
            0);
  const nlohmann::json plain = nlohmann::json::parse(out);
  for (const nlohmann::json& row : plain) EXPECT_NE(row["tag"], "auto") << out;
}

TEST(RecordTest, ThePointsAreOnTheSamplesTimeline) {
  TempDir dir;
  for (const std::string clock : {"", " --clock task"}) {
    SCOPED_TRACE(clock.empty() ? "perf" : clock);
    const std::string file = dir.File("pw.fprec");
    std::string out;
    ASSERT_EQ(
        RunCommand(kCli + " record" + clock + " -o " + file + " -- " + kPointWork + " 2>/dev/null",
                   &out),
        0)
        << out;
    long long load_ns = 0, parse_ns = 0, total_ns = 0;
    ASSERT_EQ(
        std::sscanf(out.c_str(), "load %lld parse %lld total %lld", &load_ns, &parse_ns, &total_ns),
        3)
        << out;
    ASSERT_EQ(RunCommand(kCli + " record show " + file + " --points", &out), 0) << out;
    const auto ms_of = [&](const std::string& segment) {
      const size_t at = out.find(segment);
      if (at == std::string::npos) return -1.0;
      double count = 0, total = 0;
      char unit[8] = {};
      std::sscanf(out.c_str() + at + segment.size(), " %lf %lf %7s", &count, &total, unit);
      return std::string(unit) == "s" ? total * 1e3 : std::string(unit) == "ms" ? total : -1.0;
    };
    EXPECT_NEAR(ms_of("load (scope)"), load_ns / 1e6, 0.01 * load_ns / 1e6 + 0.05) << out;
    EXPECT_NEAR(ms_of("parse (scope)"), parse_ns / 1e6, 0.01 * parse_ns / 1e6 + 0.05) << out;
    EXPECT_GT(ms_of("begin -> end"), (load_ns + parse_ns) / 1e6) << out;
    // Inside load: its two functions, 100 ms and 50 ms of CPU.
    ASSERT_EQ(RunCommand(kCli + " record show " + file + " --during work:load --collapsed", &out),
              0)
        << out;
    uint64_t hash = 0, copy = 0, other = 0;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      const uint64_t n = std::stoull(line.substr(line.rfind(' ') + 1));
      (line.find(";load_hash") != std::string::npos   ? hash
       : line.find(";load_copy") != std::string::npos ? copy
                                                      : other) += n;
    }
    const double all = static_cast<double>(hash + copy + other);
    EXPECT_GT(all, 0.8 * 0.150 * 999) << out;  // 150 ms of CPU at 999 Hz
    EXPECT_LT(all, 1.2 * 0.150 * 999) << out;
    EXPECT_NEAR(hash / all, 2.0 / 3, 0.12) << out;
    EXPECT_LT(other / all, 0.05) << out;
    ASSERT_EQ(RunCommand(kCli + " record show " + file + " --during work:parse --collapsed", &out),
              0);
    EXPECT_EQ(out.find("idle_spin"), std::string::npos) << out;
    EXPECT_EQ(out.find("load_"), std::string::npos) << out;
    EXPECT_NE(out.find(";parse_tokens"), std::string::npos) << out;
    // A name it does not have: the ones it has.
    ASSERT_EQ(RunCommand(kCli + " record show " + file + " --during work:nothing 2>&1", &out), 2);
    EXPECT_NE(out.find("work:parse (scope)"), std::string::npos) << out;
  }
  // --points=false: no recorder, no points.
  std::string out;
  const std::string file = dir.File("none.fprec");
  ASSERT_EQ(RunCommand(kCli + " record --points=false -o " + file + " -- " + kPointWork +
                           " >/dev/null 2>&1",
                       &out),
            0);
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --points", &out), 0);
  EXPECT_NE(out.find("passed no points"), std::string::npos) << out;
}

// The points recorder goes into the command's processes by default only
// when the command has points: its program (fieldprof_pointwork), or a
// library loaded with it at start (here a preloaded one). A shell around
// the program gets none, and record names the program whose points it
// saw unrecorded; --points loads it into every process, as before.
TEST(RecordTest, PointsAreRecordedWhereTheCommandHasThem) {
  TempDir dir;
  // Whether the recorder was loaded into a process the command started:
  // cat reads its own mappings.
  const auto loaded = [&](const std::string& flags, const std::string& env = "") {
    std::string out;
    EXPECT_EQ(RunCommand(env + kCli + " record" + flags + " -o " + dir.File("maps.fprec") +
                             " -- sh -c 'cat /proc/self/maps' 2>/dev/null",
                         &out),
              0)
        << out;
    return out.find("libfieldprof-points.so") != std::string::npos;
  };
  EXPECT_FALSE(loaded(""));
  EXPECT_TRUE(loaded(" --points"));
  EXPECT_FALSE(loaded(" --points=false", "LD_PRELOAD=" + kPointsPlugin + " "));
  EXPECT_TRUE(loaded("", "LD_PRELOAD=" + kPointsPlugin + " "));

  // The program's points behind a shell: not recorded, and said.
  const std::string file = dir.File("sh.fprec");
  std::string out;
  ASSERT_EQ(
      RunCommand(kCli + " record -o " + file + " -- sh -c '" + kPointWork + " >/dev/null' 2>&1",
                 &out),
      0);
  EXPECT_NE(out.find("fieldprof_pointwork has instrumentation points that were not recorded"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("--points records them"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --points", &out), 0);
  EXPECT_NE(out.find("passed no points"), std::string::npos) << out;
  // With --points they are, and nothing is said.
  ASSERT_EQ(RunCommand(kCli + " record --points -o " + file + " -- sh -c '" + kPointWork +
                           " >/dev/null' 2>&1",
                       &out),
            0);
  EXPECT_EQ(out.find("not recorded"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --points", &out), 0);
  EXPECT_NE(out.find("load (scope)"), std::string::npos) << out;
  // Nothing to say of a command whose processes have no points, nor of
  // one that loads the points recorder, which defines the name the modules
  // with points refer to.
  ASSERT_EQ(RunCommand(kCli + " record -o " + file + " -- sh -c 'ls >/dev/null' 2>&1", &out), 0);
  EXPECT_EQ(out.find("instrumentation points"), std::string::npos) << out;
  const std::string recorder =
      std::filesystem::path(kSampler).parent_path() / "libfieldprof-points.so";
  ASSERT_EQ(RunCommand(kCli + " record -o " + file + " -- sh -c 'LD_PRELOAD=" + recorder +
                           " /bin/true' 2>&1",
                       &out),
            0);
  EXPECT_EQ(out.find("instrumentation points"), std::string::npos) << out;
  // An ldd that never answers, asked of a program without points of its
  // own, is given up on at its deadline, and said: the program still runs
  // and is recorded.
  const std::string bin = dir.File("bin");
  std::filesystem::create_directory(bin);
  {
    std::ofstream ldd(bin + "/ldd");
    ldd << "#!/bin/sh\nexec sleep 600\n";
  }
  std::filesystem::permissions(bin + "/ldd", std::filesystem::perms::owner_all);
  ASSERT_EQ(RunCommand(
                "PATH=" + bin + ":$PATH " + kCli + " record -o " + file + " -- " + "/bin/true 2>&1",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("ldd /bin/true did not answer"), std::string::npos) << out;
  EXPECT_NE(out.find(" written: "), std::string::npos) << out;
}

}  // namespace
}  // namespace fieldprof
