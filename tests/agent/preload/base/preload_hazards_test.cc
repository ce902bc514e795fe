// One hazard suite for every library fieldprof preloads into other
// programs: the field runtime (fieldprof run), the in-process sampler
// (fieldprof record with each in-process clock) and the points recorder
// with the runtime beside it (fieldprof points record --at), and alone
// with its automatic points (--auto). Each runs the
// same hazard programs (threads, signals, longjmp, fork, fork inside a
// measured call, vfork, every exec variant one image after another, a
// failed exec, _exit and _Exit, dlopen while another thread looks names up)
// and must leave their output and exit status as a plain run has them,
// and its own file whole: the commands that read it succeed.
#include <algorithm>
#include <filesystem>
#include <fstream>
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
const std::string kProg = FIELDPROF_TESTPROG;

struct Hazard {
  std::string name;
  std::string args;     // testprog's
  bool calls_measured;  // calls fp_test_alloc, the API measured and placed
};

const std::vector<Hazard> kHazards = {
    {"threads", "threads 4 3000", true},
    {"signals", "signal", true},
    {"longjmp", "longjmp", false},
    {"fork", "fork", true},
    {"fork inside a measured call", "forkin", false},
    {"vfork then exec", "vfork", false},
    {"every exec variant", "execvariants 0", true},
    {"a failed exec", "execfail", true},
    {"_exit", "_exit", true},
    {"dlopen while another thread looks up", "dlrace " FIELDPROF_TESTLIB_RELRO " 100", false},
    {"dlopen, dlclose, dlopen", "dlopen " FIELDPROF_TESTLIB2, false},
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A preloaded library as a user reaches it: the command that runs a
// program under it, and the check that what it wrote reads whole.
struct Library {
  std::string name;
  std::string wrapper;  // the command before the program's; OUT is the file or directory
  std::string reader;   // reads OUT; must succeed
};

class PreloadHazardTest : public ::testing::TestWithParam<Library> {
 protected:
  std::string Expand(std::string s, const std::string& out) {
    for (size_t at; (at = s.find("OUT")) != std::string::npos;) s.replace(at, 3, out);
    return s;
  }
  TempDir dir_;
};

TEST_P(PreloadHazardTest, EveryHazardKeepsOutputStatusAndAWholeFile) {
  const Library& lib = GetParam();
  for (const Hazard& h : kHazards) {
    SCOPED_TRACE(lib.name + ", " + h.name);
    std::string plain_out;
    const int plain = RunCommand(kProg + " " + h.args + " 2>/dev/null", &plain_out);
    ASSERT_EQ(plain, 7) << plain_out;
    const std::string out_path = dir_.File(lib.name + "-" + h.args.substr(0, h.args.find(' ')));
    const std::string log = dir_.File("log");
    std::string out;
    const int rc = RunCommand("cd " + dir_.path() + " && " + Expand(lib.wrapper, out_path) + " " +
                                  kProg + " " + h.args + " 2>" + log,
                              &out);
    const std::string said = Slurp(log);
    EXPECT_EQ(rc, plain) << said;
    EXPECT_EQ(out, plain_out) << said;
    // What the library wrote reads whole. A program that passed no point
    // leaves the points recorder nothing to read, and says so.
    if (lib.name == "points-recorder" && !h.calls_measured) {
      EXPECT_NE(said.find("no point was recorded"), std::string::npos) << said;
      continue;
    }
    std::string read;
    const int read_rc = RunCommand(Expand(lib.reader, out_path) + " 2>&1", &read);
    EXPECT_EQ(read_rc, 0) << read << said;
    if (lib.name == "points-auto") {  // every process has its start and main
      EXPECT_NE(read.find("start -> main"), std::string::npos) << read.substr(0, 3000);
    } else if (h.calls_measured && lib.name.rfind("sampler", 0) != 0) {
      EXPECT_NE(read.find("fp_test_alloc"), std::string::npos) << read.substr(0, 3000);
    }
  }
}

// What each preloaded library exports is its ABI and its wrappers of the
// C library's calls: never a C++ symbol (a template instantiation the
// program's own libraries could bind to), never a GNU-unique one.
TEST(PreloadedExportsTest, NoLibraryExportsACxxSymbol) {
  for (const char* lib : {FIELDPROF_RUNTIME_LIB, FIELDPROF_FRONT_LIB, FIELDPROF_SAMPLER_LIB,
                          FIELDPROF_RECORDER_LIB}) {
    std::string out;
    ASSERT_EQ(testing::RunCommand(std::string("nm -D --defined-only ") + lib, &out), 0) << lib;
    size_t symbols = 0;
    for (size_t at = 0; at < out.size();) {
      const size_t end = std::min(out.find('\n', at), out.size());
      const std::string line = out.substr(at, end - at);
      at = end + 1;
      if (line.empty()) continue;
      ++symbols;
      const std::string name = line.substr(line.rfind(' ') + 1);
      EXPECT_NE(name.rfind("_Z", 0), 0u) << lib << " exports " << name;
      EXPECT_EQ(line.find(" u "), std::string::npos) << lib << " exports a unique " << name;
    }
    EXPECT_GT(symbols, 0u) << lib;
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryPreloadedLibrary, PreloadHazardTest,
    ::testing::Values(
        Library{"runtime",
                kCli + " run --spool OUT --max_load 1000 --budget 1000 --force fp_test_alloc --",
                kCli + " spool show --spool OUT"},
        Library{"sampler-task", kCli + " record --clock task -o OUT.fprec --",
                kCli + " record show OUT.fprec"},
        Library{"sampler-timer", kCli + " record --clock timer -o OUT.fprec --",
                kCli + " record show OUT.fprec"},
        Library{"sampler-wall", kCli + " record --wall --hz 499 -o OUT.fprec --",
                kCli + " record show OUT.fprec"},
        Library{"points-recorder",
                kCli + " points record --at libfieldprof_testlib.so:fp_test_alloc -o OUT --",
                kCli + " points show OUT --calls"},
        // The recorder's own points: its wrappers of __libc_start_main,
        // pthread_create and exit in every process.
        Library{"points-auto", kCli + " points record --auto -o OUT --",
                kCli + " points show OUT"}),
    [](const ::testing::TestParamInfo<Library>& p) {
      std::string n = p.param.name;
      for (char& c : n) c = c == '-' ? '_' : c;
      return n;
    });

}  // namespace
}  // namespace fieldprof
