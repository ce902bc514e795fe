// The host-safety suite: real programs that own their signals,
// their descriptors, their system calls or their processes, each run plain
// and then under fieldprof record with every clock, under the field
// runtime (fieldprof run) and under the points recorder: the output and
// exit status must be the plain run's, and each recording must hold data
// (samples, or for a sampler that stepped aside, idle transitions; a run
// record where the program calls malloc). No process may be left running
// once the command has ended.
//
// Chromium headless (with and without its sandbox), a Go program both
// linked against libc (cgo) and static, node with JIT code (named from
// its perf map), python3 with threads, a C program that installs its
// SIGTRAP and SIGPROF handlers by the raw system call, one whose SIGPROF
// handler ends it at a signal it did not cause, and a program under
// a seccomp filter that kills it at any system call it did not expect, and
// one that forks while another of its threads holds the dynamic linker's
// lock.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

using testing::RunCommand;
using testing::TempDir;

const std::string kCli = FIELDPROF_CLI_BIN;
const std::string kSource = std::string(FIELDPROF_SOURCE_DIR) + "/tests/tools/record/hostprogs/";

struct Host {
  std::string name;
  std::string command;  // run by sh -c in the test's directory
  // What the output must contain (the rest may differ run to run, as
  // Chromium's log lines do); empty: the whole of stdout must be equal.
  std::string must_show;
  bool in_process = true;  // whether the in-process clocks may sample it
  std::string aside_says;  // when not: what record says of it
  // Whether `fieldprof run` must leave a run record: the program's
  // processes call enough library APIs that some of the chosen ones are
  // surely among them (Chromium's dozens of processes).
  bool run_record = false;
};

// Every clock `fieldprof record` offers.
const std::vector<std::string> kClocks = {"", "--clock task", "--clock timer", "--wall --hz 199"};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

long long NumberBefore(const std::string& text, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("(\\d+) " + key))) return -1;
  return std::stoll(m[1]);
}

// Processes whose command line holds `marker`, other than zombies.
int Running(const std::string& marker) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = Slurp(e.path() / "stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') continue;
    std::string cmd = Slurp(e.path() / "cmdline");
    for (char& c : cmd) c = c == 0 ? ' ' : c;
    if (cmd.find(marker) != std::string::npos) ++n;
  }
  return n;
}

class HostSafetyTest : public ::testing::Test {
 protected:
  // Runs `h` plain, then recorded with each clock; checks as above.
  void Check(const Host& h) {
    std::string plain_out;
    const int plain =
        RunCommand("cd " + dir_.path() + " && " + h.command + " 2>/dev/null", &plain_out);
    if (!h.must_show.empty()) {
      ASSERT_NE(plain_out.find(h.must_show), std::string::npos) << h.name << ": " << plain_out;
    }
    for (const std::string& clock : kClocks) {
      SCOPED_TRACE(h.name + " under fieldprof record " + clock);
      const std::string file = dir_.File(h.name + ".fprec");
      std::filesystem::remove(file);
      const std::string log = dir_.File("record.log");
      std::string out;
      // Under a user's usual limit of 1024 descriptors (soft and hard):
      // unwinding a browser's 30 processes must not run out of them.
      const int rc =
          RunCommand("cd " + dir_.path() + " && ulimit -n 1024 && " + kCli + " record " + clock +
                         " -o " + file + " -- sh -c '" + h.command + "' 2>" + log,
                     &out);
      const std::string said = Slurp(log);
      EXPECT_EQ(rc, plain) << said;
      if (h.must_show.empty()) {
        EXPECT_EQ(out, plain_out) << said;
      } else {
        EXPECT_NE(out.find(h.must_show), std::string::npos) << out << said;
      }
      const long long samples = NumberBefore(said, "samples \\(");
      const long long idle = NumberBefore(said, "idle transitions");
      const bool outside = clock.empty();
      if (outside || h.in_process) {
        EXPECT_GT(samples, 0) << said;
      } else {
        EXPECT_GT(std::max(0LL, samples) + std::max(0LL, idle), 0) << said;
        if (!h.aside_says.empty()) {
          EXPECT_NE(said.find(h.aside_says), std::string::npos) << said;
        }
      }
    }
    CheckOtherLibraries(h, plain, plain_out);
  }

  // The same program under the field runtime (fieldprof run, no load cap)
  // and the points recorder: output and exit status the plain run's; run
  // records where they are sure; the points recorder says the program
  // passed no point (none of them has any).
  void CheckOtherLibraries(const Host& h, int plain, const std::string& plain_out) {
    const std::string spool = dir_.File("spool-" + h.name);
    std::filesystem::create_directories(spool);
    const std::vector<std::pair<std::string, std::string>> wrappers = {
        {"fieldprof run", kCli + " run --spool " + spool + " --max_load 1000 --"},
        {"fieldprof points record",
         kCli + " points record -o " + dir_.File(h.name + ".points") + " --"},
    };
    for (const auto& [what, wrapper] : wrappers) {
      SCOPED_TRACE(h.name + " under " + what);
      const std::string log = dir_.File("other.log");
      std::string out;
      const int rc =
          RunCommand("cd " + dir_.path() + " && " + wrapper + " " + h.command + " 2>" + log, &out);
      const std::string said = Slurp(log);
      EXPECT_EQ(rc, plain) << said;
      if (what == "fieldprof points record") {
        EXPECT_NE(said.find("no point was recorded"), std::string::npos) << said;
      }
      if (h.must_show.empty()) {
        EXPECT_EQ(out, plain_out) << said;
      } else {
        EXPECT_NE(out.find(h.must_show), std::string::npos) << out << said;
      }
    }
    int records = 0;
    for (const auto& e : std::filesystem::directory_iterator(spool)) {
      records += e.path().extension() == ".fpr" ? 1 : 0;
    }
    if (h.run_record) {
      EXPECT_GT(records, 0) << h.name << ": no run record in " << spool;
    }
  }

  TempDir dir_;
};

TEST_F(HostSafetyTest, ChromiumHeadlessWithoutItsSandbox) {
  const std::string marker = "fieldprof-host-test-" + std::to_string(getpid());
  Check({"chromium",
         "chromium --headless --no-sandbox --disable-gpu --user-data-dir=" + dir_.File(marker) +
             " --dump-dom \"data:text/html,<p id=x>hello</p>\"",
         "<p id=\"x\">hello</p>", true, "", /*run_record=*/true});
  // Chromium's crashpad handlers may outlive it, as they do plain; nothing
  // of the browser's own may spin on.
  EXPECT_TRUE(testing::WaitUntil([&] {
    int n = 0;
    for (const char* type : {"--type=zygote", "--type=renderer", "--type=gpu"}) {
      n += Running(marker) > 0 && Running(type) > 0 ? 1 : 0;
    }
    return n == 0;
  }));
}

TEST_F(HostSafetyTest, ChromiumHeadlessInItsSandbox) {
  // The sandbox refuses root: as nobody, in a directory of its own (as a
  // user, as that user).
  const std::string home = dir_.File("home");
  std::filesystem::create_directory(home);
  const bool root = geteuid() == 0;
  if (root) {
    ASSERT_EQ(chown(home.c_str(), 65534, 65534), 0);
  }
  ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);
  std::string out;
  const std::string as_nobody =
      std::string(root ? "setpriv --reuid=nobody --regid=nogroup --clear-groups " : "") +
      "env HOME=" + home + " XDG_CONFIG_HOME=" + home + " XDG_CACHE_HOME=" + home + " ";
  const std::string page =
      " --headless --disable-gpu --dump-dom \"data:text/html,<p id=x>hello</p>\"";
  if (RunCommand("cd " + home + " && " + as_nobody + "chromium" + page + " 2>/dev/null", &out) !=
          0 ||
      out.find("hello") == std::string::npos) {
    GTEST_SKIP() << "Chromium's sandbox does not run here plain either: " << out;
  }
  for (const std::string& clock : kClocks) {
    SCOPED_TRACE(clock);
    const std::string log = dir_.File("sandbox.log");
    const int rc = RunCommand("cd " + home + " && " + as_nobody + kCli + " record " + clock +
                                  " -o " + home + "/c.fprec -- chromium" + page + " 2>" + log,
                              &out);
    const std::string said = Slurp(log);
    EXPECT_EQ(rc, 0) << said;
    EXPECT_NE(out.find("<p id=\"x\">hello</p>"), std::string::npos) << said;
    EXPECT_EQ(said.find("No usable sandbox"), std::string::npos) << said;
    EXPECT_GT(NumberBefore(said, "samples \\("), 0) << said;
  }
}

TEST_F(HostSafetyTest, GoLinkedAgainstLibcAndStatic) {
  std::string out;
  const std::string env = "GOCACHE=" + dir_.File("gocache") + " GO111MODULE=off GOFLAGS= ";
  ASSERT_EQ(RunCommand("cd " + dir_.path() + " && " + env + "CGO_ENABLED=1 go build -o go-cgo " +
                           kSource + "gohost.go 2>&1 && " + env +
                           "CGO_ENABLED=0 go build -o go-static " + kSource + "gohost.go 2>&1",
                       &out),
            0)
      << out;
  Check({"go-cgo", "./go-cgo", "", /*in_process=*/false, "steps aside", false});
  // Static: nothing preloaded enters it; only the default samples it.
  Check({"go-static", "./go-static", "", /*in_process=*/false, "", false});
  // From outside, Go's own frames are whole: the hashing under its
  // goroutine.
  const std::string file = dir_.File("go.fprec");
  ASSERT_EQ(
      RunCommand(kCli + " record -o " + file + " -- " + dir_.File("go-static") + " 2>&1", &out), 0)
      << out;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --collapsed", &out), 0);
  EXPECT_NE(out.find("crypto/sha256.(*digest).Write;crypto/sha256.block"), std::string::npos)
      << out;
}

TEST_F(HostSafetyTest, NodeWithJitCodeNamedFromItsPerfMap) {
  Check({"node", "node " + kSource + "jit.js", "", true, "", false});
  const std::string file = dir_.File("jit.fprec");
  std::string out;
  // (In the test's directory: node leaves its isolate-*-v8.log files there.)
  ASSERT_EQ(RunCommand("cd " + dir_.path() + " && " + kCli + " record -o " + file +
                           " -- node --perf-basic-prof " + kSource + "jit.js 2>&1",
                       &out),
            0)
      << out;
  ASSERT_EQ(RunCommand(kCli + " record show " + file + " --collapsed", &out), 0);
  // V8 names its optimised code "LazyCompile:*hotLoop ..." (or Function:)
  // in the map; without the map it would be a bare address.
  EXPECT_NE(out.find("hotLoop"), std::string::npos) << out.substr(0, 3000);
  // node maps its own text a second time, high up: its frames in the
  // executable are still named from its symbols.
  EXPECT_NE(out.find(";node::Start("), std::string::npos) << out.substr(0, 3000);
}

TEST_F(HostSafetyTest, Python3WithThreads) {
  Check({"python3", "/usr/bin/python3 " + kSource + "threads.py", "", true, "", false});
}

TEST_F(HostSafetyTest, AProgramThatOwnsSigtrapAndSigprofByTheRawSystemCall) {
  // In the program, its raw SIGURG handler takes the samples' signals
  // (harmlessly), which record says: only the default, from outside,
  // samples it.
  Check({"raw-signals", FIELDPROF_RAW_SIGNALS, "traps 3, profiling timer fired", false,
         "own SIGURG handler", false});
}

// A program whose own SIGPROF handler ends it at any SIGPROF it did not
// cause, as Chromium's crash reporter takes SIGPROF for a termination (a
// sample's signal reaching it there, in the middle of a fork, once left
// the reporter's handler waiting on its allocator's lock for good). The
// samples' SIGPROFs never reach it; its own ITIMER_PROF and raise() do.
TEST_F(HostSafetyTest, AProgramWhoseOwnSigprofHandlerEndsItAtAForeignOne) {
  Check({"sigprof-own", FIELDPROF_SIGPROF_OWN, "raised 3, saw 3; profiling timer fired", true, "",
         false});
}

// libunwind checks that an address may be read by writing a byte of it
// into a pipe it opened at the lowest free numbers. A program that closes
// what it inherited and takes those numbers for its own pipes had bytes
// taken from them and put into them by the samples (Chromium's network
// service, restarted until the browser gave up): under every clock, before
// the unwinder's pipe became the sampler's own, high (unwinder_io.h).
TEST_F(HostSafetyTest, AProgramThatTakesTheLowDescriptorsForItsOwnPipes) {
  Check({"fd-reuse", FIELDPROF_FD_REUSE, "", true, "", false});
}

// Chromium's child of a fork puts every signal back to its default by the
// raw system call before it execs. A sample's signal whose default action
// ends the process (SIGPROF, which the sampler used before) killed every such child that
// took a while to its exec, under every in-process clock (under --wall,
// Chromium's network service, restarted until the browser gave up). The
// samples' SIGURG is ignored by default.
TEST_F(HostSafetyTest, ChildrenThatResetEverySignalBeforeTheirExec) {
  Check({"reset-before-exec", std::string(FIELDPROF_RESET_BEFORE_EXEC) + " 12",
         "12 children reset their signals and exec'ed", /*in_process=*/false, "", false});
}

// Chromium's browser forks while its other threads load and walk
// libraries, and its child calls dup2 before exec. A child that looks a
// definition up, or walks the loaded objects, waits on the dynamic
// linker's lock that the parent's other thread held at the fork: the
// program's own deadline (a minute a child) says which one hung. Each
// library fills its wrappers' definitions before a fork, and the
// sampler's child lists no modules while the lock is held for good. (In
// the program the samples are mostly skipped: its busy thread is in the
// dynamic linker, where nothing unwinds; idle transitions stand for them.)
TEST_F(HostSafetyTest, ChildrenForkedWhileTheLoaderIsBusyReachTheirExec) {
  Check({"fork-in-loader", std::string(FIELDPROF_FORK_IN_LOADER) + " 60",
         "60 children forked while the loader was busy, each exited", /*in_process=*/false, "",
         false});
}

// The same program with a point placed on dup2, taking its stack: each
// child passes it first thing after the fork, in a process whose dynamic
// linker lock another thread held at the fork. The runtime's binder (the
// call's first, trapped, pass) and the recorder's unwinder must both see
// that (fork_hooks.h) and not walk the loaded objects: before, a child
// hung in the binder's walk. Each child's point is kept, without its
// stack, and counted so.
TEST_F(HostSafetyTest, APointWithItsStackInAChildForkedWhileTheLoaderIsBusy) {
  constexpr int kChildren = 30;
  std::string out;
  const std::string dir = dir_.File("busy.points");
  ASSERT_EQ(RunCommand(kCli + " points record --stacks --at libc.so.6:dup2 -o " + dir + " -- " +
                           FIELDPROF_FORK_IN_LOADER + " " + std::to_string(kChildren) + " 2>&1",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find(std::to_string(kChildren) + " children forked while the loader was busy"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(std::to_string(2 * kChildren) + " events"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir + " --stacks 2>&1", &out), 0) << out;
  const size_t at = out.find("events went without their stack");
  ASSERT_NE(at, std::string::npos) << out;
  const size_t begin = out.rfind(' ', at - 2) + 1;
  const long stackless = std::stol(out.substr(begin, at - begin));
  EXPECT_GE(stackless, 1) << out;
  EXPECT_LE(stackless, kChildren) << out;
}

TEST_F(HostSafetyTest, AProgramUnderASeccompFilterThatKillsOnUnexpectedCalls) {
  // In the program, the sampler ends its file as the filter comes: its
  // samples stop there.
  Check({"seccomp", FIELDPROF_SECCOMP_PROG, "", /*in_process=*/false, "installed a seccomp filter",
         false});
  // The same filter by seccomp() through syscall(), as libseccomp does.
  Check({"seccomp-syscall", std::string(FIELDPROF_SECCOMP_PROG) + " syscall", "",
         /*in_process=*/false, "installed a seccomp filter", false});
}

}  // namespace
}  // namespace fieldprof
