// The points SDK (agent/include/fieldprof/points.h), issue #34: real C and
// C++ programs built with the header.
// - Disarmed, they run as without it, and call nothing: a recorder
//   preloaded beside them hears no point; under the field runtime,
//   measuring or not, their output and exit status are unchanged.
// - Each point is a USDT probe with a semaphore, as readelf shows it, so
//   perf, bpftrace and systemtap find them.
// - Armed (the semaphore raised, as a tracer or the runtime does), each
//   point calls whatever loaded object defines fieldprof_point_hit, with
//   its site, kind and value; with none loaded, it calls nothing.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <string>

#include "gtest/gtest.h"

namespace fieldprof {
namespace {

const std::string kProg = FIELDPROF_POINTSPROG;
const std::string kProgC = FIELDPROF_POINTSPROG_C;
const std::string kHook = FIELDPROF_POINTS_HOOK;
const std::string kRuntime = FIELDPROF_RUNTIME_LIB;

// Runs `cmd` with sh; its stdout (stderr too with "2>&1" in cmd) and exit code.
int Shell(const std::string& cmd, std::string* out) {
  out->clear();
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The C++ program: N rounds of FP_POINT, an FP_SCOPE, and FP_POINT_V(i).
// The C program: N rounds of FP_BEGIN/FP_END and FP_POINT_V(i).
TEST(PointsTest, DisarmedProgramsRunAsWithoutThemAndCallNothing) {
  for (const std::string& prog : {kProg, kProgC}) {
    std::string plain, hooked;
    ASSERT_EQ(Shell(prog + " 1000", &plain), 0) << prog;
    EXPECT_EQ(plain.rfind("sum ", 0), 0u) << plain;
    // The recorder is there, but nothing armed the points.
    ASSERT_EQ(Shell("LD_PRELOAD=" + kHook + " " + prog + " 1000 2>&1", &hooked), 0) << prog;
    EXPECT_NE(hooked.find(plain), std::string::npos) << hooked;
    EXPECT_NE(hooked.find("points-hook: point=0 begin=0 end=0 value_sum=0 first=-/-"),
              std::string::npos)
        << hooked;
  }
}

// Under the field runtime, measured or not, the programs behave as
// without it (the runtime does not arm points).
TEST(PointsTest, UnderTheFieldRuntimeProgramsRunUnchanged) {
  char dir[] = "/tmp/fieldprof-points-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir;
  for (const auto& [name, conf] :
       {std::pair{"off", "consent = no\n"},
        std::pair{"measured", "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\n"}}) {
    const std::string path = d + "/" + name + ".conf";
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fprintf(f, "%sspool_dir = %s/spool\nslot_dir = %s/slots\n", conf, dir, dir);
    fclose(f);
    for (const std::string& prog : {kProg, kProgC}) {
      std::string plain, under;
      const int plain_exit = Shell(prog + " 1000", &plain);
      ASSERT_EQ(plain_exit, 0);
      EXPECT_EQ(
          Shell("FIELDPROF_SETTINGS=" + path + " LD_PRELOAD=" + kRuntime + " " + prog + " 1000",
                &under),
          plain_exit)
          << name;
      EXPECT_EQ(under, plain) << name;
    }
  }
  std::string ignored;
  Shell("rm -rf " + d, &ignored);
}

TEST(PointsTest, ArmedPointsCallTheRecorderWithSiteKindAndValue) {
  constexpr long kRounds = 1000;
  const long value_sum = kRounds * (kRounds - 1) / 2;  // FP_POINT_V(i) for i < N
  std::string plain, armed;
  ASSERT_EQ(Shell(kProg + " 1000", &plain), 0);
  ASSERT_EQ(Shell("LD_PRELOAD=" + kHook + " " + kProg + " 1000 --arm 2>&1", &armed), 0);
  EXPECT_NE(armed.find(plain), std::string::npos) << armed;
  EXPECT_NE(armed.find("points-hook: point=2000 begin=1000 end=1000 value_sum=" +
                       std::to_string(value_sum) + " first=startup/load"),
            std::string::npos)
      << armed;
  ASSERT_EQ(Shell(kProgC + " 1000", &plain), 0);
  ASSERT_EQ(Shell("LD_PRELOAD=" + kHook + " " + kProgC + " 1000 --arm 2>&1", &armed), 0);
  EXPECT_NE(armed.find(plain), std::string::npos) << armed;
  EXPECT_NE(armed.find("points-hook: point=1000 begin=1000 end=1000 value_sum=" +
                       std::to_string(value_sum) + " first=request/handle"),
            std::string::npos)
      << armed;
}

TEST(PointsTest, ArmedWithoutARecorderCallsNothing) {
  for (const std::string& prog : {kProg, kProgC}) {
    std::string plain, armed;
    ASSERT_EQ(Shell(prog + " 1000", &plain), 0);
    ASSERT_EQ(Shell(prog + " 1000 --arm", &armed), 0) << prog;
    EXPECT_EQ(armed, plain);
  }
}

// readelf -n: one stapsdt note per probe site, provider fieldprof, name
// point, with the module's semaphore (a non-zero address).
TEST(PointsTest, EveryPointIsAUsdtProbeWithTheModulesSemaphore) {
  // At least one site per macro use: FP_POINT, FP_POINT_V and FP_SCOPE's
  // begin and end in C++; FP_BEGIN, FP_END, FP_POINT_V in C. (A compiler
  // may copy a site when it inlines or unrolls.)
  for (const auto& [prog, sites] : {std::pair{kProg, 4}, std::pair{kProgC, 3}}) {
    std::string notes;
    ASSERT_EQ(Shell("readelf -n " + prog, &notes), 0) << notes;
    size_t probes = 0, semaphores = 0;
    std::string semaphore;
    for (size_t at = 0; (at = notes.find("Provider: fieldprof", at)) != std::string::npos; ++at) {
      ++probes;
      const size_t name = notes.find("Name: point", at);
      const size_t sem = notes.find("Semaphore: ", at);
      ASSERT_NE(name, std::string::npos);
      ASSERT_NE(sem, std::string::npos);
      const std::string address = notes.substr(sem + 11, 18);
      if (address != "0x0000000000000000") ++semaphores;
      if (semaphore.empty()) semaphore = address;
      EXPECT_EQ(address, semaphore) << "one semaphore for the module";
    }
    EXPECT_GE(probes, static_cast<size_t>(sites)) << notes;
    EXPECT_EQ(semaphores, probes) << notes;
  }
}

}  // namespace
}  // namespace fieldprof
