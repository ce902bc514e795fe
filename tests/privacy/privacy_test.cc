// The privacy suite (docs/privacy.md): a careful volunteer's machine and a
// privacy reviewer's eye. Each case puts a name that was never anyone
// else's where a real machine would have one (a library in /usr/lib that
// no package holds, a private build over Debian's zlib, an in-house
// package, a plugin in the user's home, ...), runs a real program under
// the runtime (`fieldprof run`, every API it calls a candidate), the real
// agent and the real aggregator (k = 1, so that anything sent would be
// published), and greps every byte that leaves for it: the sealed batches
// (the agent's outbox, as they go on the wire), the aggregator's files and
// log, every read endpoint, and the published snapshot. Each case also
// checks that something was sent (Debian's own libraries), so that a run
// that measured nothing cannot pass.
//
// Cases that need root (a library under /usr/lib or /usr/local, a mount
// namespace for a file replaced under a package or an in-house package
// installed with dpkg) run as CI runs them, put their files in temporary
// directories and remove them. Not as root, they are skipped, and say so.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/net/https_client.h"
#include "common/settings/agent_state.h"
#include "common/spool/batcher.h"
#include "common/spool/spool.h"
#include "common/spool/spool_sealer.h"
#include "common/system/exported_symbols.h"
#include "common/wire/platform.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

namespace fs = std::filesystem;
using testing::AggregatorProcess;
using testing::FreePort;
using testing::RunCommand;
using testing::TempDir;

constexpr char kAdminToken[] = "privacy-suite-admin-token-0123456789";
const std::string kSources = FIELDPROF_SOURCE_DIR "/tests/privacy/";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every regular file's bytes under `dir`.
std::string AllBytes(const std::string& dir) {
  std::string out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out += Slurp(e.path());
  }
  return out;
}

std::string Raw(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// A directory that exists only for the test: made under `parent` (as root:
// /usr/lib, /usr/local/lib), removed with everything in it at the end.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& parent) {
    std::string t = parent + "/fieldprof-privacy-XXXXXX";
    if (mkdtemp(t.data()) != nullptr) {
      path_ = t;
      chmod(path_.c_str(), 0755);
    }
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class PrivacyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeCert(dir_.path()));
    std::ofstream(dir_.File("admin.token")) << kAdminToken << "\n";
    ASSERT_EQ(RunCommand(std::string(FIELDPROF_SOURCE_DIR) + "/deploy/make-signing-key.sh " +
                             dir_.File("keys") + " 2>&1",
                         &log_),
              0)
        << log_;
    agg_ = std::make_unique<AggregatorProcess>(
        dir_, FreePort(),
        std::vector<std::string>{"--signing_key", dir_.File("keys/snapshot-signing.key"),
                                 "--snapshot_dir", dir_.File("published"), "--admin_token_file",
                                 dir_.File("admin.token"), "--fragment_count", "4",
                                 "--fragments_per_cycle", "4"});
    agg_->Start();
  }

  static bool Root() { return geteuid() == 0; }

  // Compiles C `sources` (files of tests/privacy) with `flags` into `out`.
  void Compile(const std::vector<std::string>& sources, const std::string& out,
               const std::string& flags) {
    std::string cmd = "cc -O1 -g -fno-omit-frame-pointer -Wl,--build-id -o '" + out + "'";
    for (const std::string& s : sources) cmd += " '" + kSources + s + "'";
    ASSERT_EQ(RunCommand(cmd + " " + flags + " 2>&1", &log_), 0) << cmd << "\n" << log_;
  }
  // The secret library as `dir`/libzq_secret.so.1, and the program linked
  // to it there, as dir_/zq_secret_prog.
  void BuildLibAndProgram(const std::string& dir) {
    Compile({"secret_lib.c"}, dir + "/libzq_secret.so.1",
            "-shared -fPIC -Wl,-soname,libzq_secret.so.1");
    ASSERT_EQ(RunCommand("ln -sf libzq_secret.so.1 '" + dir + "/libzq_secret.so'", &log_), 0);
    Compile({"secret_prog.c"}, Prog(), "-L'" + dir + "' -Wl,-rpath,'" + dir + "' -lzq_secret -lz");
  }
  std::string Prog() const { return dir_.File("zq_secret_prog"); }
  // A private build named as Debian's SQLite in dir_/fake, and the program
  // that calls it (built against it: found as libsqlite3.so.0 at run time).
  void BuildFakeSqliteAndProgram() {
    fs::create_directories(dir_.File("fake"));
    Compile({"fake_sqlite.c"}, dir_.File("fake/libsqlite3.so.0"),
            "-shared -fPIC -Wl,-soname,libsqlite3.so.0");
    ASSERT_EQ(RunCommand("ln -sf libsqlite3.so.0 " + dir_.File("fake/libsqlite3.so"), &log_), 0);
    Compile({"secret_prog.c"}, Prog(),
            "-DZQ_NO_LIB -DZQ_SQLITE -L" + dir_.File("fake") + " -lsqlite3 -lz");
  }

  // The command line that runs `cmd` measured as `fieldprof run` does, its
  // stacks sampled 300 times a CPU second, eight APIs chosen at random
  // among those it calls (the secret ones among them, were they allowed),
  // seed `seed`.
  std::string RunLine(const std::string& cmd, int seed, const std::string& env = "",
                      const std::string& flags = "") const {
    return "env FIELDPROF_STACK_HZ=300 " + env + " " + FIELDPROF_CLI_BIN +
           " run --max_load 1000000 --apis 8 --seed " + std::to_string(seed) + " --spool " +
           dir_.File("spool") + " " + flags + " -- " + cmd + " > /dev/null";
  }
  void RunMeasured(const std::string& cmd, const std::string& env = "") {
    for (int seed = 1; seed <= 3; ++seed) {
      ASSERT_EQ(RunCommand(RunLine(cmd, seed, env) + " 2>&1", &log_), 0) << cmd << "\n" << log_;
    }
  }
  // One agent pass that seals the spool against a port where nothing
  // listens (the batches stay in the outbox, as they go on the wire).
  std::string SealLine() const {
    return std::string(FIELDPROF_AGENT_BIN) + " --once --flush --server 127.0.0.1 --port " +
           std::to_string(FreePort()) + " --ca_file " + dir_.File("cert.pem") + " --spool " +
           dir_.File("spool") + " --state_dir " + dir_.File("state") +
           " --runtime_settings '' --snapshot_key '' --timeout_ms 500 > /dev/null 2>&1";
  }
  std::string PendingLine() const {
    return std::string(FIELDPROF_CLI_BIN) + " status --pending --state_dir " + dir_.File("state") +
           " --spool " + dir_.File("spool") + " --runtime_settings " + dir_.File("none.conf") +
           " > " + dir_.File("pending.txt") + " 2>&1";
  }
  void Seal() {
    RunCommand(SealLine(), &log_);  // exits 3: batches left waiting
  }
  // Sends what the outbox holds, publishes the snapshot: then everything
  // that left this machine, as bytes.
  std::string Left() {
    std::string left = AllBytes(dir_.File("state/outbox"));
    EXPECT_NE(left.find("libc.so.6"), std::string::npos)
        << "nothing of the system's was sealed: the case measured nothing";
    EXPECT_EQ(RunCommand(std::string(FIELDPROF_AGENT_BIN) + " --once --server 127.0.0.1 --port " +
                             std::to_string(agg_->port()) + " --ca_file " + dir_.File("cert.pem") +
                             " --spool " + dir_.File("spool") + " --state_dir " +
                             dir_.File("state") + " --runtime_settings '' --snapshot_key '' 2>&1",
                         &log_),
              0)
        << log_;
    agg_->WaitApplied();
    HttpsClient c(agg_->Options());
    auto get = [&](const std::string& path) {
      auto r = c.Get(path);
      EXPECT_TRUE(r.ok()) << path;
      return r.ok() ? r->body : std::string();
    };
    auto p = c.Request("POST", "/v1/admin/publish?all=1", "", "",
                       {{"Authorization", std::string("Bearer ") + kAdminToken}});
    EXPECT_TRUE(p.ok() && p->status == 200) << (p.ok() ? p->body : p.status().ToString());
    const std::string apis = get("/v1/apis?limit=100000");
    EXPECT_NE(apis.find("libc.so.6"), std::string::npos) << "nothing of the system's published";
    const std::string metrics = get("/metrics");
    EXPECT_NE(metrics.find("fieldprof_ingest_stage_seconds_count{stage=\"write\"}"),
              std::string::npos)
        << "the batches' stage times were not in the /metrics answer grepped";
    left += apis + get("/v1/modules") + get("/v1/recent") + metrics;
    std::set<std::string> modules;
    const nlohmann::json j = nlohmann::json::parse(apis, nullptr, false);
    if (j.is_object()) {
      for (const auto& a : j["apis"]) modules.insert(a["module"].get<std::string>());
    }
    for (const std::string& m : modules) {
      left += get("/v1/module?module=" + m) + get("/v1/stacks?module=" + m + "&limit=100000") +
              get("/v1/stacks?module=" + m + "&format=folded&limit=100000") +
              get("/v1/report?module=" + m) + get("/v1/points?module=" + m);
    }
    left += get("/v1/snapshot/manifest");
    for (int f = 0; f < 4; ++f) left += get("/v1/snapshot/fragments/" + std::to_string(f));
    left += AllBytes(dir_.File("db")) + AllBytes(dir_.File("published")) +
            Slurp(dir_.File("aggregator.log"));
    return left;
  }
  // No byte of `left` names any of `secrets` (text; a build id also as
  // its raw bytes).
  static void ExpectNone(const std::string& left, const std::vector<std::string>& secrets) {
    for (const std::string& s : secrets) {
      ASSERT_FALSE(s.empty());
      EXPECT_EQ(left.find(s), std::string::npos) << s << " left the machine";
      if (s.size() == 40 && s.find_first_not_of("0123456789abcdef") == std::string::npos) {
        EXPECT_EQ(left.find(Raw(s)), std::string::npos) << s << " (raw) left the machine";
        EXPECT_EQ(left.find(s.substr(0, 16)), std::string::npos) << s << " (key digits)";
      }
    }
  }
  // The libc stacks the spool's batches hold: where qsort calls back.
  bool LibcStackMarked(const std::string& left, const std::string& mark) const {
    return left.find(mark) != std::string::npos;
  }

  TempDir dir_;
  std::unique_ptr<AggregatorProcess> agg_;
  std::string log_;
};

// Door 2 and 3: a root-owned library in /usr/lib that no package holds (in-
// house software installed by `make install`, a vendor's driver). It is not
// chosen at random, not named in API records, and where libc's qsort calls
// back into it, libc's stacks end in [unpackaged], not in its name.
TEST_F(PrivacyTest, ALibraryNoPackageHoldsInUsrLibIsNeverNamed) {
  if (!Root()) GTEST_SKIP() << "needs root (a library under /usr/lib), as CI runs";
  ScratchDir lib("/usr/lib");
  ASSERT_FALSE(lib.path().empty());
  ASSERT_NO_FATAL_FAILURE(BuildLibAndProgram(lib.path()));
  RunMeasured(Prog() + " 60");
  // The secret library ran, and the spool holds libc's stacks that called it.
  const std::string spool = AllBytes(dir_.File("spool"));
  EXPECT_NE(spool.find("[unpackaged]"), std::string::npos) << "qsort's callback: a mark";
  Seal();
  const std::string left = Left();
  EXPECT_TRUE(LibcStackMarked(left, "qsort"));
  ExpectNone(left, {"zq_secret", "fieldprof-privacy",
                    FileBuildId(lib.path() + "/libzq_secret.so.1"), FileBuildId(Prog())});
  ExpectNone(spool, {"zq_secret", "fieldprof-privacy"});
}

// Door 4: Debian's SQLite replaced by a private build of the same name (a
// `make install --prefix=/usr`, a copied-over .so, a dpkg divert): in a
// mount namespace of its own, the private build is bound over the file
// libsqlite3-0 installed. The runtime never chooses it; measured anyway
// (a user's --force), its records stay with the agent, and `status
// --pending` says why. Its build id and its own names never leave.
TEST_F(PrivacyTest, APackagedFileReplacedByAPrivateBuildIsNotNamed) {
  if (!Root()) GTEST_SKIP() << "needs root (a mount namespace), as CI runs";
  ASSERT_NO_FATAL_FAILURE(BuildFakeSqliteAndProgram());
  const std::string real = fs::canonical("/usr/lib/x86_64-linux-gnu/libsqlite3.so.0").string();
  const std::string script =
      "mount --bind " + dir_.File("fake/libsqlite3.so.0") + " " + real + " && " +
      RunLine(Prog() + " 40", 1) + " && " + RunLine(Prog() + " 40", 2) + " && " +
      RunLine(Prog() + " 40", 3, "", "--force libsqlite3.so.0:sqlite3_libversion_number") + " && " +
      PendingLine() + " && { " + SealLine() + " ; true; }";
  ASSERT_EQ(
      RunCommand("unshare --mount --propagation private sh -c \"" + script + "\" 2>&1", &log_), 0)
      << log_;
  const std::string pending = Slurp(dir_.File("pending.txt"));
  EXPECT_NE(pending.find("libsqlite3.so.0"), std::string::npos) << pending;
  EXPECT_NE(pending.find("not the build its package installed (package libsqlite3-0"),
            std::string::npos)
      << pending;
  const std::string left = Left();
  ExpectNone(left, {"zq_secret", FileBuildId(dir_.File("fake/libsqlite3.so.0"))});
  EXPECT_EQ(left.find("libsqlite3"), std::string::npos) << "no record of the private build";
}

// Door 5: an in-house package (a company's own repository, or built here)
// installed with the real dpkg, in a mount namespace over a copy of dpkg's
// database: the package is installed, its file unchanged, but it is not
// from a known archive. The runtime never chooses it; forced, the agent
// keeps its records. Its module, functions and build id never leave.
TEST_F(PrivacyTest, AnInHousePackageIsNotTheSystemsCode) {
  if (!Root()) GTEST_SKIP() << "needs root (dpkg, a mount namespace), as CI runs";
  ScratchDir lib("/usr/lib");
  ASSERT_FALSE(lib.path().empty());
  // The package: the secret library where it installs it.
  const std::string root = dir_.File("deb");
  fs::create_directories(root + "/DEBIAN");
  fs::create_directories(root + lib.path());
  Compile({"secret_lib.c"}, root + lib.path() + "/libzq_secret.so.1",
          "-shared -fPIC -Wl,-soname,libzq_secret.so.1");
  std::ofstream(root + "/DEBIAN/control")
      << "Package: acme-zq-internal\nVersion: 1.0-1\nArchitecture: amd64\n"
         "Maintainer: Acme <it@acme.example>\nDescription: in-house library\n";
  ASSERT_EQ(RunCommand("dpkg-deb --root-owner-group --build " + root + " " + dir_.File("acme.deb") +
                           " 2>&1",
                       &log_),
            0)
      << log_;
  // The program links to where the package puts the library.
  fs::create_directories(dir_.File("link"));
  fs::copy_file(root + lib.path() + "/libzq_secret.so.1", dir_.File("link/libzq_secret.so"));
  Compile({"secret_prog.c"}, Prog(),
          "-L'" + dir_.File("link") + "' -Wl,-rpath,'" + lib.path() + "' -lzq_secret -lz");
  ASSERT_EQ(RunCommand("cp -a /var/lib/dpkg " + dir_.File("dpkg") + " && mkdir -p " +
                           dir_.File("cache") + " /var/cache/fieldprof",
                       &log_),
            0);
  const std::string script =
      "mount --bind " + dir_.File("dpkg") + " /var/lib/dpkg && mount --bind " + dir_.File("cache") +
      " /var/cache/fieldprof && dpkg -i " + dir_.File("acme.deb") + " > " + dir_.File("dpkg.log") +
      " 2>&1 && " + RunLine(Prog() + " 40", 1) + " && " + RunLine(Prog() + " 40", 2) + " && " +
      RunLine(Prog() + " 40", 3, "", "--force zq_secret_work") + " && " + PendingLine() + " && { " +
      SealLine() + " ; true; }";
  ASSERT_EQ(
      RunCommand("unshare --mount --propagation private sh -c \"" + script + "\" 2>&1", &log_), 0)
      << log_ << Slurp(dir_.File("dpkg.log"));
  const std::string pending = Slurp(dir_.File("pending.txt"));
  EXPECT_NE(pending.find("libzq_secret.so.1"), std::string::npos) << pending;
  EXPECT_NE(pending.find("not in a known archive (package acme-zq-internal 1.0-1)"),
            std::string::npos)
      << pending;
  // The machine's own dpkg database never knew the package.
  std::string out;
  EXPECT_NE(RunCommand("dpkg -s acme-zq-internal > /dev/null 2>&1", &out), 0);
  const std::string left = Left();
  ExpectNone(left, {"zq_secret", "acme", "fieldprof-privacy",
                    FileBuildId(root + lib.path() + "/libzq_secret.so.1")});
}

// A library of the same name as Debian's found first through
// LD_LIBRARY_PATH, from the user's own directory: not chosen, not named.
TEST_F(PrivacyTest, ASameNameLibraryThroughLdLibraryPathIsNotNamed) {
  ASSERT_NO_FATAL_FAILURE(BuildFakeSqliteAndProgram());
  RunMeasured(Prog() + " 40", "LD_LIBRARY_PATH=" + dir_.File("fake"));
  Seal();
  const std::string left = Left();
  ExpectNone(left, {"zq_secret", FileBuildId(dir_.File("fake/libsqlite3.so.0"))});
  EXPECT_EQ(left.find("libsqlite3"), std::string::npos) << "no record of the private build";
}

// A library under /usr/local (root's, but no package's place): not named.
TEST_F(PrivacyTest, ALibraryUnderUsrLocalIsNeverNamed) {
  if (!Root()) GTEST_SKIP() << "needs root (a library under /usr/local), as CI runs";
  fs::create_directories("/usr/local/lib");
  ScratchDir lib("/usr/local/lib");
  ASSERT_FALSE(lib.path().empty());
  ASSERT_NO_FATAL_FAILURE(BuildLibAndProgram(lib.path()));
  RunMeasured(Prog() + " 40");
  Seal();
  ExpectNone(Left(),
             {"zq_secret", "fieldprof-privacy", FileBuildId(lib.path() + "/libzq_secret.so.1")});
}

// Stack records wait in the agent's held file to be summed over a day. A
// module the volunteer shared while its stacks were held, and no longer
// shares when they are sealed, is dropped from them at that seal: held
// records pass the door again every time (the same path as a module whose
// package changed, or a file an older agent held).
TEST_F(PrivacyTest, AStackHeldWhileAModuleWasSharedPassesTheDoorAgain) {
  fs::create_directories(dir_.File("lib"));
  ASSERT_NO_FATAL_FAILURE(BuildLibAndProgram(dir_.File("lib")));
  for (int seed = 1; seed <= 3; ++seed) {
    const std::string run = RunLine(Prog() + " 40", seed, "", "--share libzq_secret.so.1");
    ASSERT_EQ(RunCommand(run + " 2>&1", &log_), 0) << log_;
  }
  // Their stacks held as a pass made them while the module was shared (its
  // API records went up then, and the runs left the spool).
  BatchBuilder held(kMaxBatchBytes, DetectPlatform());
  StatusOr<std::vector<SpoolEntry>> runs = ListSpool(dir_.File("spool"));
  ASSERT_TRUE(runs.ok() && !runs->empty());
  for (const SpoolEntry& e : *runs) {
    StatusOr<wire::RunRecord> r = ReadRunRecord(e.path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(held.TryAdd(SplitRun(*r, /*stacks=*/true)));
    fs::remove(e.path);
  }
  const std::string bytes = held.Held().SerializeAsString();
  ASSERT_NE(bytes.find("zq_secret"), std::string::npos)
      << "the held stacks name the shared module: the case holds what it tests";
  fs::create_directories(HeldDirOf(dir_.File("state")));
  std::ofstream(HeldDirOf(dir_.File("state")) + "/stacks-1000-0123abcd.held", std::ios::binary)
      << bytes;
  // Sharing withdrawn; one more run, then everything is sealed.
  ASSERT_EQ(RunCommand(RunLine(Prog() + " 40", 4) + " 2>&1", &log_), 0) << log_;
  Seal();
  EXPECT_TRUE(AllBytes(HeldDirOf(dir_.File("state"))).empty()) << "flushed: nothing is held";
  EXPECT_TRUE(AllBytes(dir_.File("state/quarantine")).empty()) << "the held file was read";
  ExpectNone(Left(), {"zq_secret", FileBuildId(dir_.File("lib/libzq_secret.so.1"))});
}

// The program's own code, linked -rdynamic so that its functions are
// exported, and a plugin it opens from the user's home that calls back
// into them; libc's qsort calling the program's comparator. None of the
// program's or the plugin's names leaves; libc's stacks end in [program].
TEST_F(PrivacyTest, AProgramsOwnExportsAndPluginsAndCallbacksAreNeverNamed) {
  fs::create_directories(dir_.File("home/plugins"));
  const std::string plugin = dir_.File("home/plugins/libzq_secret_plugin.so");
  Compile({"secret_plugin.c"}, plugin, "-shared -fPIC");
  Compile({"secret_prog.c"}, Prog(), "-DZQ_NO_LIB -rdynamic -ldl -lz");
  RunMeasured(Prog() + " 40 " + plugin);
  Seal();
  const std::string left = Left();
  EXPECT_NE(left.find("[program]"), std::string::npos) << "qsort's callback: a mark";
  ExpectNone(left, {"zq_secret", "plugins", FileBuildId(Prog()), FileBuildId(plugin)});
}

// A run killed before it writes its record: the agent folds its counts and
// stacks from its live file. Nothing secret is in the live file, nor in
// what leaves.
TEST_F(PrivacyTest, AKilledRunFoldedFromItsLiveFileNamesNothingPrivate) {
  fs::create_directories(dir_.File("lib"));
  ASSERT_NO_FATAL_FAILURE(BuildLibAndProgram(dir_.File("lib")));
  const std::string live = dir_.File("live");
  for (int seed = 1; seed <= 2; ++seed) {
    // The run kills itself (SIGKILL): no record.
    RunCommand(RunLine(Prog() + " 40 - kill", seed, "FIELDPROF_LIVE_DIR=" + live) + " 2>&1", &log_);
  }
  const std::string live_bytes = AllBytes(live);
  EXPECT_FALSE(live_bytes.empty()) << "the killed runs left their live files";
  ExpectNone(live_bytes, {"zq_secret"});
  // The agent's pass reads the live files (as a daemon's does) and seals.
  RunCommand(SealLine() + " --live_dir " + live + " --live_interval_s 0", &log_);
  ExpectNone(Left(), {"zq_secret", FileBuildId(dir_.File("lib/libzq_secret.so.1"))});
}

// Code made at run time (JIT): frames in anonymous memory, named only by a
// perf map the program writes for profilers. Nothing of it leaves.
TEST_F(PrivacyTest, JitCodeAndItsPerfMapNameNothing) {
  std::ofstream(dir_.File("jit.c")) << R"(
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>
int main(void) {
  /* mov $N, %ecx; 1: dec %ecx; jnz 1b; ret */
  static const unsigned char code[] = {0xb9, 0x00, 0x00, 0x00, 0x01, 0xff, 0xc9, 0x75, 0xfc, 0xc3};
  void* p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memcpy(p, code, sizeof code);
  char map[64];
  snprintf(map, sizeof map, "/tmp/perf-%d.map", getpid());
  FILE* f = fopen(map, "w");
  fprintf(f, "%lx 10 zq_secret_jit_fn\n", (unsigned long)p);
  fclose(f);
  unsigned char in[4096] = {1}, out[8192];
  for (int i = 0; i < 20; ++i) {
    ((void (*)(void))p)();
    uLongf n = sizeof out;
    compress2(out, &n, in, sizeof in, 6);
  }
  unlink(map);
  puts("done");
  return 0;
}
)";
  ASSERT_EQ(RunCommand("cc -O1 -o " + Prog() + " " + dir_.File("jit.c") + " -lz 2>&1", &log_), 0)
      << log_;
  RunMeasured(Prog());
  Seal();
  ExpectNone(Left(), {"zq_secret", "perf-"});
}

// Instrumentation points of a user's own program (<fieldprof/points.h>):
// measured runs arm them, but their tags are the program's own words and
// stay on the machine unless the volunteer shares the program.
TEST_F(PrivacyTest, AUsersOwnPointsStayOnTheMachine) {
  std::ofstream(dir_.File("points.c")) << R"(
#include <fieldprof/points.h>
#include <stdio.h>
#include <zlib.h>
int main(void) {
  unsigned char in[4096] = {1}, out[8192];
  for (int i = 0; i < 200; ++i) {
    FP_BEGIN("zq_secret_tag", "zq_secret_step");
    uLongf n = sizeof out;
    compress2(out, &n, in, sizeof in, 6);
    FP_END("zq_secret_tag", "zq_secret_step");
  }
  puts("done");
  return 0;
}
)";
  ASSERT_EQ(RunCommand("cc -O1 -I" FIELDPROF_POINTS_INCLUDE " -o " + Prog() + " " +
                           dir_.File("points.c") + " -lz 2>&1",
                       &log_),
            0)
      << log_;
  RunMeasured(Prog());
  ExpectNone(AllBytes(dir_.File("spool")), {"zq_secret"});
  Seal();
  ExpectNone(Left(), {"zq_secret"});
}

}  // namespace
}  // namespace fieldprof
