// The points SDK (agent/include/fieldprof/points.h): real C and
// C++ programs built with the header.
// - Disarmed, they run as without it, and call nothing: a recorder
//   preloaded beside them hears no point; under the field runtime,
//   measuring or not, their output and exit status are unchanged.
// - Each point is a USDT probe with a semaphore, as readelf shows it, so
//   perf, bpftrace and systemtap find them.
// - Armed (the semaphore raised, as a tracer or the runtime does), each
//   point calls whatever loaded object defines fieldprof_point_hit, with
//   its site, kind and value; with none loaded, it calls nothing.
// - In a run the field runtime measures, it arms the points itself (the
//   module's note) and its record holds one histogram per (module, tag,
//   from, to) and per scope, metric point_ns; tags and names that break
//   the key rules (a path, free text) never reach the record.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/base/durable_file.h"
#include "common/proto/fieldprof.pb.h"
#include "common/spool/spool.h"
#include "gtest/gtest.h"
#include "tests/support/system_code.h"

namespace fieldprof {
namespace {

const std::string kProg = FIELDPROF_POINTSPROG;
const std::string kProgC = FIELDPROF_POINTSPROG_C;
const std::string kHook = FIELDPROF_POINTS_HOOK;
const std::string kRuntime = FIELDPROF_RUNTIME_LIB;
const std::string kLabProg = FIELDPROF_LABPROG;
const std::string kInModule = FIELDPROF_INMODULE;
const std::string kTestLib2 = FIELDPROF_TESTLIB2;
const std::string kBusyLib = FIELDPROF_BUSYLIB;
const std::string kPlugin = FIELDPROF_POINTSPLUGIN;
const std::string kCtorPlugin = FIELDPROF_CTORPLUGIN;
const std::string kFront = FIELDPROF_FRONT_LIB;

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
// without it (measured, the runtime arms their points and records them).
TEST(PointsTest, UnderTheFieldRuntimeProgramsRunUnchanged) {
  char dir[] = "/tmp/fieldprof-points-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir;
  for (const auto& [name, conf] :
       {std::pair{"off", "consent = no\n"},
        std::pair{"measured",
                  "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\nmax_load_per_cpu = "
                  "1000\n"}}) {
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

// Writes measured-run settings under `dir`; returns the file.
// The test's own programs and libraries are nobody's package: shared by
// the volunteer (share_modules), their points and APIs are named in the
// field as the system's code is (`share`: false, none of them is).
std::string MeasuredSettings(const std::string& dir, bool share = true) {
  const std::string path = dir + (share ? "/measured.conf" : "/unshared.conf");
  std::string shared;
  for (const std::string& f :
       {kProg, kProgC, kLabProg, kInModule, kTestLib2, kBusyLib, kPlugin, kCtorPlugin,
        std::string("libfieldprof_labb.so"), std::string("p_cc"), std::string("p_c_gcc"),
        std::string("p_c_clang")}) {
    shared += (shared.empty() ? "" : ",") + std::filesystem::path(f).filename().string();
  }
  std::ofstream(path)
      << "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\nmax_load_per_cpu = 1000\n"
      << "spool_dir = " << dir << "/spool\nslot_dir = " << dir << "/slots\n"
      << "system_code = " << testing::SystemCodeList() << "\n"
      << (share ? "share_modules = " + shared + "\n" : "");
  return path;
}

// The point_ns records of every run record in `spool`, by symbol: their
// count, and the module and runs; each record file also passes the
// agent's validation.
struct PointSeries {
  uint64_t count = 0, runs = 0;
  uint64_t sum_ns = 0;  // of the durations (the low 64 bits)
  std::string module;
};
std::map<std::string, PointSeries> PointRecords(const std::string& spool) {
  std::map<std::string, PointSeries> out;
  for (const auto& e : std::filesystem::directory_iterator(spool)) {
    if (e.path().extension() != ".fpr") continue;
    auto run = ReadRunRecord(e.path().string());
    EXPECT_TRUE(run.ok()) << run.status().ToString();
    if (!run.ok()) continue;
    for (const wire::Record& r : run->records()) {
      if (r.key().metric() != wire::METRIC_POINT_NS) continue;
      PointSeries& s = out[r.key().symbol()];
      s.count += r.histogram().count();
      s.sum_ns += r.histogram().sum_lo();
      s.runs += r.runs();
      s.module = r.key().module();
    }
  }
  return out;
}

// A directory of its own with settings that measure every run and name
// `points` ("": none; k = 1, no overhead budget to speak of), removed at the end:
// measured runs of a command, what the runtime said, and what it recorded.
class PointsSettingsDir {
 public:
  explicit PointsSettingsDir(const std::string& points) {
    char dir[] = "/tmp/fieldprof-points-test-XXXXXX";
    if (mkdtemp(dir) != nullptr) dir_ = dir;
    settings_ = MeasuredSettings(dir_);
    std::ofstream(settings_, std::ios::app)
        << "k = 1\noverhead_budget = 1000\npoints = " << points << "\n";
  }
  ~PointsSettingsDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PointsSettingsDir(const PointsSettingsDir&) = delete;
  PointsSettingsDir& operator=(const PointsSettingsDir&) = delete;

  // `cmd` under the runtime, its stdout in *out; its exit status.
  int Run(const std::string& cmd, std::string* out) const {
    return Shell("FIELDPROF_DEBUG=" + dir_ + "/debug.log FIELDPROF_SETTINGS=" + settings_ +
                     " LD_PRELOAD=" + kRuntime + " " + cmd,
                 out);
  }
  // The debug log of every run so far.
  std::string Said() const {
    std::ifstream log(dir_ + "/debug.log");
    return std::string((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  }
  std::map<std::string, PointSeries> Series() const { return PointRecords(dir_ + "/spool"); }

 private:
  std::string dir_, settings_;
};

TEST(PointsTest, AMeasuredRunSumsItsPointsIntoTheRecord) {
  char dir[] = "/tmp/fieldprof-points-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir, settings = MeasuredSettings(d);
  std::string out;
  // C++: N rounds of load, the parse scope, parsed(i).
  ASSERT_EQ(Shell("FIELDPROF_SETTINGS=" + settings + " LD_PRELOAD=" + kRuntime + " " + kProg +
                      " 1000 --bad",
                  &out),
            0);
  auto series = PointRecords(d + "/spool");
  ASSERT_EQ(series.size(), 3u) << "the path and the free text were refused";
  EXPECT_EQ(series["startup$load$parsed"].count, 1000u);
  EXPECT_EQ(series["startup$parsed$load"].count, 999u);
  EXPECT_EQ(series["startup$parse"].count, 1000u);
  for (const auto& [symbol, s] : series) {
    // A user's own program, shared by its file name, is named by it.
    EXPECT_EQ(s.module, std::filesystem::path(kProg).filename().string()) << symbol;
    EXPECT_EQ(s.runs, 1u) << symbol;
  }
  // Not shared, its points stay on the machine: the run measures, and its
  // record holds none of them (the tags are the program's own words).
  std::filesystem::remove_all(d + "/spool");
  const std::string unshared = MeasuredSettings(d, /*share=*/false);
  ASSERT_EQ(Shell("FIELDPROF_SETTINGS=" + unshared + " LD_PRELOAD=" + kRuntime + " " + kProg +
                      " 1000 --bad",
                  &out),
            0);
  std::filesystem::create_directories(d + "/spool");
  EXPECT_TRUE(PointRecords(d + "/spool").empty());
  for (const auto& e : std::filesystem::directory_iterator(d + "/spool")) {
    if (e.path().extension() != ".fpr") continue;
    StatusOr<std::string> bytes = ReadWholeFile(e.path().string());
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(bytes->find("startup"), std::string::npos) << e.path();
  }
  // C: begin/end pairs and a point.
  std::filesystem::remove_all(d + "/spool");
  ASSERT_EQ(
      Shell("FIELDPROF_SETTINGS=" + settings + " LD_PRELOAD=" + kRuntime + " " + kProgC + " 500",
            &out),
      0);
  series = PointRecords(d + "/spool");
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series["request$handle"].count, 500u);
  EXPECT_EQ(series["request$done$done"].count, 499u);
  std::filesystem::remove_all(d);
}

// Threads passing points at once, more of them than have a table of their
// own (256: the rest share one under the lock): every scope is counted
// once, on its own thread, and one tag's points across the threads chain
// into one series. Broken, a table shared without care loses or doubles
// counts. The tables past the first 16 are mapped as threads need them:
// only the 44 threads past 256 share (before, with 16 tables and no more,
// 284 of 300 shared the lock, and a point cost those threads several times
// as much). The durations are real ones though no API's call came before
// the points to take the clock's rate (before: all 0 ns in most runs).
TEST(PointsTest, ThreadsPassingPointsAtOnceAreEachCountedOnce) {
  const PointsSettingsDir dir("");
  constexpr int kThreads = 300, kRounds = 2000;
  const std::string cmd =
      kProg + " " + std::to_string(kRounds) + " --threads " + std::to_string(kThreads);
  std::string plain, out;
  ASSERT_EQ(Shell(cmd, &plain), 0);
  ASSERT_EQ(dir.Run(cmd, &out), 0);
  EXPECT_EQ(out, plain);
  auto series = dir.Series();
  EXPECT_EQ(series.size(), 3u);
  EXPECT_EQ(series["threads$thread"].count, uint64_t{kThreads});
  EXPECT_EQ(series["threads$work"].count, uint64_t{kThreads} * kRounds);
  EXPECT_EQ(series["threads$step$step"].count, uint64_t{kThreads} * kRounds - 1);
  for (const auto& [symbol, s] : series) EXPECT_EQ(s.runs, 1u) << symbol;
  // Each thread's scope holds its work scopes.
  EXPECT_GT(series["threads$work"].sum_ns, 0u);
  EXPECT_GE(series["threads$thread"].sum_ns, series["threads$work"].sum_ns);
  EXPECT_NE(dir.Said().find("300 threads passed points, 44 of them in the shared table"),
            std::string::npos)
      << dir.Said();
}

// Threads that start one after the other, more of them than there are
// tables (256): each takes the table of a thread that has ended, and none
// is left to the shared one under the lock. Broken (tables never given
// back), the 257th thread on shares it: "44 of them".
TEST(PointsTest, AThreadThatEndsGivesItsTableToTheNext) {
  const PointsSettingsDir dir("");
  std::string out;
  ASSERT_EQ(dir.Run(kProg + " 100 --threads-in-turn 300", &out), 0);
  auto series = dir.Series();
  EXPECT_EQ(series["threads$thread"].count, 300u);
  EXPECT_EQ(series["threads$work"].count, 30000u);
  EXPECT_EQ(series["threads$step$step"].count, 29999u);
  EXPECT_NE(dir.Said().find("points: 300 threads passed points, 0 of them in the shared table"),
            std::string::npos)
      << dir.Said();
}

// The header as programs build with it: C from C99 and C++ from C++11 on,
// with GCC and clang, the warnings careful projects turn on made errors,
// the header on the include path as a project's own (-I: no system
// header's leniency); and two scopes on one line (a macro's). The C++
// program, run measured, has each of them as a series of its own. Before:
// clang's -Wpedantic stopped every point (<sys/sdt.h>'s macros), g++'s
// -Wold-style-cast stopped them in C++, and two scopes on a line were one
// variable defined twice.
TEST(PointsTest, TheHeaderBuildsWithoutAWarningAndScopesOnOneLineAreTwo) {
  const PointsSettingsDir dir("");
  const std::string src =
      std::filesystem::temp_directory_path() / ("fieldprof-header-" + std::to_string(getpid()));
  std::filesystem::create_directories(src);
  // C with GCC and clang has FP_SCOPE too (the cleanup attribute): two on
  // one line, ended on a return and on a continue.
  std::ofstream(src + "/p.c")
      << "#include <fieldprof/points.h>\n"
         "#define TWO_SCOPES FP_SCOPE(\"c\", \"outer\"); FP_SCOPE_V(\"c\", \"inner\", x)\n"
         "static int Work(int x) {\n"
         "  TWO_SCOPES;\n"
         "  if (x % 2) return x * 3;\n"
         "  return x + 1;\n"
         "}\n"
         "int main(int argc, char** argv) {\n"
         "  int i;\n"
         "  long s = 0;\n"
         "  (void)argv;\n"
         "  FP_POINT(\"hdr\", \"start\");\n"
         "  for (i = 0; i < 3; ++i) {\n"
         "    FP_BEGIN(\"hdr\", \"round\");\n"
         "    FP_END(\"hdr\", \"round\");\n"
         "  }\n"
         "  FP_POINT_V(\"hdr\", \"end\", i);\n"
         "  for (i = 0; i < 100; ++i) {\n"
         "    FP_SCOPE(\"c\", \"loop\");\n"
         "    if (i == 50) continue;\n"
         "    s += Work(i + argc);\n"
         "  }\n"
         "  return s == 0;\n"
         "}\n";
  std::ofstream(src + "/p.cc")
      << "#include <fieldprof/points.h>\n"
         "#define TWO_SCOPES FP_SCOPE(\"hdr\", \"outer\"); FP_SCOPE_V(\"hdr\", \"inner\", x)\n"
         "static int Work(int x) {\n"
         "  TWO_SCOPES;\n"
         "  return x * 3 + 1;\n"
         "}\n"
         "int main(int argc, char**) {\n"
         "  long s = 0;\n"
         "  for (int i = 0; i < 100; ++i) {\n"
         "    FP_POINT_V(\"hdr\", \"tick\", i);\n"
         "    s += Work(i + argc);\n"
         "  }\n"
         "  return s == 0;\n"
         "}\n";
  const std::string warn = " -Wall -Wextra -Wpedantic -Werror -I" FIELDPROF_POINTS_INCLUDE " ";
  const std::string warn_cc = warn + "-Wshadow -Wold-style-cast -Wconversion -Wsign-conversion ";
  std::string out;
  for (const char* cc : {"gcc", "clang"}) {
    for (const char* std : {"c99", "c11", "c17", "gnu99"}) {
      EXPECT_EQ(
          Shell(std::string(cc) + " -std=" + std + warn + "-o " + src + "/p_c " + src + "/p.c 2>&1",
                &out),
          0)
          << cc << " -std=" << std << "\n"
          << out;
    }
  }
  for (const char* cxx : {"g++", "clang++"}) {
    for (const char* std : {"c++11", "c++14", "c++17", "c++20"}) {
      EXPECT_EQ(Shell(std::string(cxx) + " -std=" + std + warn_cc + "-o " + src + "/p_cc " + src +
                          "/p.cc 2>&1",
                      &out),
                0)
          << cxx << " -std=" << std << "\n"
          << out;
    }
  }
  ASSERT_EQ(dir.Run(src + "/p_cc", &out), 0);
  auto series = dir.Series();
  EXPECT_EQ(series["hdr$outer"].count, 100u);
  EXPECT_EQ(series["hdr$inner"].count, 100u);
  EXPECT_EQ(series["hdr$tick$tick"].count, 99u);
  // The C program as GCC and as clang build it: each scope ended on every
  // way out, once a begin (99 calls of Work, 100 rounds of the loop).
  for (const char* cc : {"gcc", "clang"}) {
    ASSERT_EQ(Shell(std::string(cc) + " -std=c99" + warn + "-O2 -o " + src + "/p_c_" + cc + " " +
                        src + "/p.c 2>&1",
                    &out),
              0)
        << out;
    ASSERT_EQ(dir.Run(src + "/p_c_" + cc, &out), 0) << out;
  }
  series = dir.Series();
  EXPECT_EQ(series["c$outer"].count, 2 * 99u);
  EXPECT_EQ(series["c$inner"].count, 2 * 99u);
  EXPECT_EQ(series["c$loop"].count, 2 * 100u);
  EXPECT_EQ(series["hdr$round"].count, 2 * 3u);
  // Inner ends before outer: its time is within outer's.
  EXPECT_LT(series["c$inner"].sum_ns, series["c$outer"].sum_ns);
  std::filesystem::remove_all(src);
}

// A fork child records only what it passes itself; its parent's points,
// and a scope the parent had begun, stay the parent's. Broken (the child
// keeping the parent's counts or tables), "fork$parent" is counted twice.
TEST(PointsTest, AForkChildRecordsOnlyItsOwnPoints) {
  const PointsSettingsDir dir("");
  std::string out;
  ASSERT_EQ(dir.Run(kProg + " 1000 --fork", &out), 0);
  EXPECT_NE(out.find("child "), std::string::npos) << out;
  EXPECT_NE(out.find("parent "), std::string::npos) << out;
  auto series = dir.Series();
  EXPECT_EQ(series.size(), 3u);
  EXPECT_EQ(series["fork$parent"].count, 2000u);
  EXPECT_EQ(series["fork$parent"].runs, 1u);
  EXPECT_EQ(series["fork$child"].count, 500u);
  EXPECT_EQ(series["fork$child"].runs, 1u);
  // Ended in both; begun in the parent only, so counted there alone.
  EXPECT_EQ(series["fork$around"].count, 1u);
}

// A program without points of its own opens a plugin that has some, finds
// its function with dlsym(handle, ...), calls it and closes it, twice;
// the runtime is loaded as an install loads it, by the front. The
// plugin's points are in the record, under its module, though it was
// closed before the record was written. Before: none. The plugin's
// fieldprof_point_hit stayed null (a module looked into only through
// dlsym(handle) was not pointed at the runtime loaded late), and a
// closed module's series were dropped.
TEST(PointsTest, APluginsPointsCountThoughItIsClosedBeforeTheRecord) {
  char dir[] = "/tmp/fieldprof-points-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir, settings = MeasuredSettings(d);
  const std::string cmd = kInModule + " --dlopen " + kPlugin + " 1000";
  std::string plain, out;
  ASSERT_EQ(Shell(cmd, &plain), 0);
  ASSERT_EQ(Shell("FIELDPROF_SETTINGS=" + settings + " LD_PRELOAD=" + kFront + " " + cmd, &out), 0);
  EXPECT_EQ(out, plain);
  auto series = PointRecords(d + "/spool");
  ASSERT_EQ(series.size(), 2u) << out;
  EXPECT_EQ(series["plugin$work"].count, 2000u);
  EXPECT_EQ(series["plugin$tick$tick"].count, 1999u);
  for (const auto& [symbol, s] : series) {
    EXPECT_EQ(s.module, "libfieldprof_pointsplugin.so") << symbol;
    EXPECT_EQ(s.runs, 1u) << symbol;
  }
  std::filesystem::remove_all(d);
}

// A plugin whose constructor passes a scope around 20 ms of work and whose
// static object's destructor passes a point, opened, called and closed,
// under the front as an install loads the runtime: the points its
// constructor and destructor pass are counted under its module, as those
// of its calls are. Opened twice, and once: the series that only its last
// closing ends (tick -> unload) is named while the plugin is still there.
// Before: the runtime looked at the plugin only at the program's next
// dlsym, after its constructor had passed its points unarmed; and a series
// first ended by the points of a plugin's last closing was recorded
// without its module (named before the dlclose, which runs the
// destructors).
TEST(PointsTest, APluginsConstructorAndDestructorPointsCount) {
  for (const int times : {2, 1}) {
    SCOPED_TRACE(times);
    char dir[] = "/tmp/fieldprof-points-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string d = dir, settings = MeasuredSettings(d);
    const std::string cmd = "FIELDPROF_TEST_LOAD_MS=20 " + kInModule + " --dlopen " + kCtorPlugin +
                            " 100" + (times == 1 ? " --once" : "");
    std::string plain, out;
    ASSERT_EQ(Shell(cmd, &plain), 0);
    ASSERT_EQ(Shell("FIELDPROF_SETTINGS=" + settings + " LD_PRELOAD=" + kFront + " " + cmd, &out),
              0);
    EXPECT_EQ(out, plain);
    const auto series = PointRecords(d + "/spool");
    const auto count = [&series](const char* symbol) {
      const auto s = series.find(symbol);
      return s != series.end() ? s->second.count : 0u;
    };
    // Each time: the load scope, tick 100 times, unload as it is closed.
    const uint64_t n = static_cast<uint64_t>(times);
    EXPECT_EQ(count("plugin$load"), n) << out;
    EXPECT_EQ(count("plugin$tick$tick"), 99 * n);
    EXPECT_EQ(count("plugin$tick$unload"), n);
    EXPECT_EQ(count("plugin$unload$tick"), n - 1);
    EXPECT_EQ(series.size(), times == 1 ? 3u : 4u);
    for (const auto& [symbol, s] : series) {
      EXPECT_EQ(s.module, "libfieldprof_ctorplugin.so") << symbol;
      EXPECT_EQ(s.runs, 1u) << symbol;
      if (symbol == "plugin$load") {
        EXPECT_GE(s.sum_ns, n * 20'000'000u);
      }
    }
    std::filesystem::remove_all(d);
  }
}

// The API records (metric wall time) of every run record in `spool`:
// calls by "module:symbol".
std::map<std::string, uint64_t> ApiCalls(const std::string& spool) {
  std::map<std::string, uint64_t> out;
  for (const auto& e : std::filesystem::directory_iterator(spool)) {
    if (e.path().extension() != ".fpr") continue;
    auto run = ReadRunRecord(e.path().string());
    if (!run.ok()) continue;
    for (const wire::Record& r : run->records()) {
      if (r.key().metric() != wire::METRIC_WALL_TIME_NS) continue;
      out[r.key().module() + ":" + r.key().symbol()] += r.histogram().count();
    }
  }
  return out;
}

// Points placed by configuration (`points = MODULE:FUNCTION, ...` in the
// settings, or FIELDPROF_POINTS in an explicit run as `fieldprof run
// --points` sets it): each named function is timed in every measured run,
// on top of the k chosen at random, and its durations are a scope of the
// module's tag. The lab program calls labb_checksum N times and labb_hash
// 2N times (from the other lab library); entries without a module, or
// naming no function, are left out and change nothing else.
TEST(PointsTest, FunctionsTheSettingsNameAreTimedAsPoints) {
  char dir[] = "/tmp/fieldprof-points-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir, settings = MeasuredSettings(d);
  std::ofstream(settings, std::ios::app)
      << "k = 1\npoints = libfieldprof_labb.so:labb_checksum, labb_stage, "
         "libfieldprof_labb.so:labb_hash,libfieldprof_labb.so:no_such\n";
  std::string plain, out;
  ASSERT_EQ(Shell(kLabProg + " 400", &plain), 0);
  // As `fieldprof run` sets it: no load cap (a busy machine would refuse).
  const std::string run_explicit = "FIELDPROF_RUN=1 FIELDPROF_MAX_LOAD=1000000 FIELDPROF_K=1 " +
                                   testing::SystemCodeEnv() + " FIELDPROF_SPOOL=" + d +
                                   "/spool FIELDPROF_SLOT_DIR=" + d +
                                   "/slots FIELDPROF_POINTS=libfieldprof_labb.so:labb_checksum,"
                                   "libfieldprof_labb.so:labb_hash ";
  for (const std::string& how :
       {"FIELDPROF_DEBUG=" + d + "/debug.log FIELDPROF_SETTINGS=" + settings + " ",
        "FIELDPROF_SETTINGS=/nonexistent " + run_explicit}) {
    std::filesystem::remove_all(d + "/spool");
    ASSERT_EQ(Shell(how + "LD_PRELOAD=" + kRuntime + " " + kLabProg + " 400", &out), 0) << how;
    EXPECT_EQ(out, plain) << how;
    auto series = PointRecords(d + "/spool");
    ASSERT_EQ(series.size(), 2u) << how;
    EXPECT_EQ(series["libfieldprof_labb.so$labb_checksum"].count, 400u) << how;
    EXPECT_EQ(series["libfieldprof_labb.so$labb_hash"].count, 800u) << how;
    for (const auto& [symbol, s] : series) {
      EXPECT_EQ(s.module, "libfieldprof_labb.so") << symbol;
      EXPECT_EQ(s.runs, 1u) << symbol;
    }
    // Each is an API of the record too, and k = 1 still chose one more.
    const auto apis = ApiCalls(d + "/spool");
    EXPECT_EQ(apis.at("libfieldprof_labb.so:labb_checksum"), 400u) << how;
    EXPECT_EQ(apis.at("libfieldprof_labb.so:labb_hash"), 800u) << how;
    EXPECT_EQ(apis.size(), 3u) << how;
  }
  std::ifstream log(d + "/debug.log");
  const std::string said((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(said.find("points: 'labb_stage' is not MODULE:FUNCTION, left out"), std::string::npos)
      << said;
  std::filesystem::remove_all(d);
}

// A function the program calls inside itself has no import to bind: a
// `points` entry moves its entry instead, so every call is timed, nested
// ones too (fib calls itself through a pointer: 1,210 calls for 100
// rounds). The program may be named by its file name or by its key
// module, main; a function too short to move is said so in the debug log,
// and a run without the runtime prints the same.
TEST(PointsTest, FunctionsInsideTheProgramTheSettingsNameSeeEveryCall) {
  char dir[] = "/tmp/fieldprof-points-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  // Not shared: the program is "main" in its keys (they stay on the machine).
  const std::string d = dir, settings = MeasuredSettings(d, /*share=*/false);
  std::ofstream(settings, std::ios::app)
      << "k = 1\noverhead_budget = 1000\npoints = fieldprof_inmodule:load_config, main:fib, "
         "fieldprof_inmodule:bump, fieldprof_inmodule:tiny\n";
  auto first_lines = [](const std::string& out) {  // the last is the program's own timing
    return out.substr(0, out.find("load_config_median_ns"));
  };
  std::string plain, out;
  ASSERT_EQ(Shell(kInModule + " 100", &plain), 0);
  ASSERT_EQ(Shell("FIELDPROF_DEBUG=" + d + "/debug.log FIELDPROF_SETTINGS=" + settings +
                      " LD_PRELOAD=" + kRuntime + " " + kInModule + " 100",
                  &out),
            0);
  EXPECT_EQ(first_lines(out), first_lines(plain));
  EXPECT_NE(plain.find("fib_calls 1210\n"), std::string::npos) << plain;
  auto series = PointRecords(d + "/spool");
  EXPECT_EQ(series["main$load_config"].count, 100u);
  EXPECT_EQ(series["main$fib"].count, 1210u);
  EXPECT_EQ(series["main$bump"].count, 100u);
  EXPECT_EQ(series.count("main$tiny"), 0u);
  for (const auto& [symbol, s] : series) EXPECT_EQ(s.module, "main") << symbol;
  const auto apis = ApiCalls(d + "/spool");
  EXPECT_EQ(apis.at("main:load_config"), 100u);
  EXPECT_EQ(apis.at("main:fib"), 1210u);
  std::ifstream log(d + "/debug.log");
  const std::string said((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(said.find("points: fieldprof_inmodule:load_config: every call"), std::string::npos)
      << said;
  EXPECT_NE(said.find("points: main:fib: every call"), std::string::npos) << said;
  EXPECT_NE(said.find("points: fieldprof_inmodule:tiny: calls from other modules only: shorter"),
            std::string::npos)
      << said;
  // Past its overhead budget a moved entry goes straight on to the
  // function: fewer fib calls timed, and the program unharmed.
  std::filesystem::remove_all(d + "/spool");
  std::ofstream(settings, std::ios::app) << "overhead_budget = 0.0001\n";
  ASSERT_EQ(
      Shell("FIELDPROF_SETTINGS=" + settings + " LD_PRELOAD=" + kRuntime + " " + kInModule + " 100",
            &out),
      0);
  EXPECT_EQ(first_lines(out), first_lines(plain));
  series = PointRecords(d + "/spool");
  EXPECT_GT(series["main$fib"].count, 0u);
  EXPECT_LT(series["main$fib"].count, 1210u);
  std::filesystem::remove_all(d);
}

// The settings that name testlib2's functions: its static fp_test2_inner,
// which it calls directly; its exported fp_test2_twice, which it calls
// through its own PLT; its static fp_test2_callback, which it calls only
// through a pointer; and fp_test2_pushy (called directly) and
// fp_test2_pushy_export (through its own PLT), whose first instruction is
// one byte.
constexpr char kTestLib2Points[] =
    "libfieldprof_testlib2.so:fp_test2_inner, libfieldprof_testlib2.so:fp_test2_twice, "
    "libfieldprof_testlib2.so:fp_test2_callback, libfieldprof_testlib2.so:fp_test2_pushy, "
    "libfieldprof_testlib2.so:fp_test2_pushy_export";

// fieldprof_inmodule --dlopen testlib2 300 (with `more` arguments) under
// the runtime with kTestLib2Points: the program prints what it prints
// alone, and all 600 calls of each of its functions over the two opens
// are timed, under the library's module.
void EveryCallOfTwoOpensTimed(const PointsSettingsDir& d, const std::string& more) {
  const std::string cmd = kInModule + " --dlopen " + kTestLib2 + " 300" + more;
  std::string plain, out;
  ASSERT_EQ(Shell(cmd, &plain), 0);
  ASSERT_EQ(d.Run(cmd, &out), 0);
  EXPECT_EQ(out, plain);
  const auto series = d.Series();
  for (const char* f : {"fp_test2_inner", "fp_test2_twice", "fp_test2_callback", "fp_test2_pushy",
                        "fp_test2_pushy_export"}) {
    const std::string key = std::string("libfieldprof_testlib2.so$") + f;
    ASSERT_EQ(series.count(key), 1u) << key << "\n" << out;
    EXPECT_EQ(series.at(key).count, 600u) << key;
    EXPECT_EQ(series.at(key).module, "libfieldprof_testlib2.so") << key;
  }
}

// A library whose functions the settings name, opened, closed and opened
// again: each function's entry is moved in each copy, so every call the
// library makes to it is timed, in both.
TEST(PointsTest, ALibraryOpenedAgainHasItsFunctionMovedAgain) {
  const PointsSettingsDir d(kTestLib2Points);
  EveryCallOfTwoOpensTimed(d, "");
  const std::string said = d.Said();
  EXPECT_NE(said.find("points: libfieldprof_testlib2.so:fp_test2_inner: every call"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("points: libfieldprof_testlib2.so:fp_test2_inner: every call: moved again"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("a second thread"), std::string::npos) << said;
}

// The same library opened while a second thread runs. Functions whose
// first instruction is 2 bytes or more have their entries moved through
// the padding beside them, so every call is timed, through a pointer too.
// The entries of those whose first instruction is one byte stay: the
// library's direct call to one and its own PLT entry for the other are
// re-aimed at the APIs' slots instead. Every call is still timed, in both
// copies, and the caller computes what it computes without fieldprof.
// (The busylib test below has a caller that keeps values in registers the
// callee leaves alone: GCC's -fipa-ra.)
TEST(PointsTest, WithASecondThreadRunningEntriesMoveOrCallsAreReAimed) {
  const PointsSettingsDir d(kTestLib2Points);
  EveryCallOfTwoOpensTimed(d, " --thread");
  const std::string said = d.Said();
  const auto twice = [&said](const std::string& line) {
    const size_t first = said.find(line);
    EXPECT_NE(first, std::string::npos) << line << "\n" << said;
    if (first != std::string::npos) {
      EXPECT_NE(said.find(line, first + 1), std::string::npos)
          << "the copy opened again: " << line << "\n"
          << said;
    }
  };
  for (const char* f : {"fp_test2_inner", "fp_test2_twice", "fp_test2_callback"}) {
    const std::string moved = std::string("points: libfieldprof_testlib2.so:") + f + ": every call";
    EXPECT_NE(said.find(moved + ": moved while a second thread ran"), std::string::npos) << said;
    EXPECT_NE(said.find(moved + ": moved again"), std::string::npos) << said;
  }
  twice(
      "points: libfieldprof_testlib2.so:fp_test2_pushy: calls from other modules and 1 direct "
      "calls in its own: a second thread runs, so its entry stays (its first instruction is "
      "shorter than the 2-byte jump");
  twice(
      "points: libfieldprof_testlib2.so:fp_test2_pushy_export: calls from other modules and 0 "
      "direct calls in its own, and its calls through its own PLT: a second thread runs");
}

// A library whose own thread is calling the functions when the runtime
// first looks at it: busy_leaf's entry is moved and the call to busy_push
// (first instruction one byte) re-aimed under that thread's feet. Every
// round the thread computes stays right, the process ends normally, and
// the calls after the change are timed; 30 runs, each a new race.
TEST(PointsTest, AnEntryMovedOrACallReAimedWhileAThreadRunsThroughItStaysRight) {
  const PointsSettingsDir d("libfieldprof_busylib.so:busy_leaf, libfieldprof_busylib.so:busy_push");
  constexpr int kRuns = 30;
  for (int run = 0; run < kRuns; ++run) {
    std::string out;
    ASSERT_EQ(d.Run(kInModule + " --busy " + kBusyLib + " 200 2>/dev/null", &out), 0)
        << "run " << run;
    ASSERT_EQ(out, "busy wrong 0\n") << "run " << run;
  }
  const auto series = d.Series();
  for (const char* f : {"busy_leaf", "busy_push"}) {
    const std::string key = std::string("libfieldprof_busylib.so$") + f;
    ASSERT_EQ(series.count(key), 1u) << key;
    EXPECT_EQ(series.at(key).runs, static_cast<uint64_t>(kRuns)) << key;
    // at least the rounds after busy_join began
    EXPECT_GE(series.at(key).count, kRuns * 200u * 100u) << key;
  }
  const std::string said = d.Said();
  EXPECT_NE(said.find("points: libfieldprof_busylib.so:busy_leaf: every call: moved while a second "
                      "thread ran"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("points: libfieldprof_busylib.so:busy_push: calls from other modules and 1 "
                      "direct calls in its own"),
            std::string::npos)
      << said;
}

// The agent's door: a run record whose point series has a path for a tag,
// or a part that is no point name, is refused when the agent reads it (and
// the aggregator's door refuses the same in a batch: server_test.cc).
TEST(PointsTest, TheAgentRefusesAPointSeriesWithAPathOrFreeText) {
  char dir[] = "/tmp/fieldprof-points-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir, settings = MeasuredSettings(d);
  std::string out;
  ASSERT_EQ(
      Shell("FIELDPROF_SETTINGS=" + settings + " LD_PRELOAD=" + kRuntime + " " + kProg + " 10",
            &out),
      0);
  std::string good;
  for (const auto& e : std::filesystem::directory_iterator(d + "/spool")) {
    if (e.path().extension() == ".fpr") good = e.path().string();
  }
  ASSERT_FALSE(good.empty());
  auto run = ReadRunRecord(good);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  for (const char* symbol :
       {"/home/alice/notes$load", "startup$alice wrote this", "startup$load$parsed$more"}) {
    wire::RunRecord bad = *run;
    for (wire::Record& r : *bad.mutable_records()) {
      if (r.key().metric() == wire::METRIC_POINT_NS) r.mutable_key()->set_symbol(symbol);
    }
    const std::string path = d + "/spool/bad.fpr";
    std::ofstream(path, std::ios::binary) << bad.SerializeAsString();
    auto read = ReadRunRecord(path);
    EXPECT_FALSE(read.ok()) << symbol;
  }
  std::filesystem::remove_all(d);
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
