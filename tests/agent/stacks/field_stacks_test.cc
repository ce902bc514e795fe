// Field stacks end to end (docs/field-stacks.md): a real program under the
// real runtime, the real agent with this machine's dpkg database, the real
// aggregator over TLS on loopback.
//
// The privacy test: the program's own functions and an unpackaged
// library's have names with "fp_zz_secret" in them; after its runs none of
// those names, nor the files' names, is in the spool, the outbox (the
// batches' bytes as they go on the wire), the aggregator's files, its
// published fragments or any answer; and every stack that leaves is a
// packaged module's. Then exactness: what /v1/stacks answers is what the
// spool held.
#include "common/stacks/field_stacks.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <link.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/daemon/agent.h"
#include "agent/daemon/live_harvest.h"
#include "agent/daemon/live_stacks.h"
#include "agent/preload/runtime/records/live_layout.h"
#include "common/net/https_client.h"
#include "common/spool/spool.h"
#include "common/system/exported_symbols.h"
#include "common/wire/key_rules.h"
#include "common/wire/platform.h"
#include "common/wire/wire.h"
#include "tests/support/agent_config.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"

namespace fieldprof::agent {
namespace {

namespace fs = std::filesystem;
using testing::AggregatorProcess;
using testing::FreePort;
using testing::TempDir;

constexpr char kSecret[] = "fp_zz_secret";
constexpr char kToken[] = "stacks-admin-token-0123456789";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every file under `dir` that holds `needle` (bytes).
std::vector<std::string> FilesHolding(const std::string& dir, const std::string& needle) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && Slurp(e.path()).find(needle) != std::string::npos) {
      out.push_back(e.path().string());
    }
  }
  return out;
}

class FieldStacksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeCert(dir_.path()));
    std::ofstream(dir_.File("admin.token")) << kToken << "\n";
    const std::string cmd = std::string(FIELDPROF_SOURCE_DIR) + "/deploy/make-signing-key.sh " +
                            dir_.File("keys") + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    // Live files on tmpfs, as the runtime keeps them by default: a page
    // read there is allocated (a test below counts them).
    char shm[] = "/dev/shm/fieldprof-stacks-test-XXXXXX";
    ASSERT_NE(mkdtemp(shm), nullptr);
    live_dir_ = shm;
  }
  void TearDown() override {
    std::error_code ec;
    if (!live_dir_.empty()) fs::remove_all(live_dir_, ec);
  }

  // The program under `fieldprof run`, for about `cpu_ms` of CPU time,
  // sampled `hz` times a CPU second, with room for every API it calls to
  // be chosen at random: the secret library's export among them, which
  // the runtime must pass over (only the system's modules are chosen
  // unless named). Seed 1 took it in 7 seeds of 8 without that rule.
  void RunProgram(int cpu_ms, int hz) const {
    const std::string cmd = "env FIELDPROF_STACK_HZ=" + std::to_string(hz) + " " +
                            FIELDPROF_CLI_BIN + " run --max_load 1000 --apis 8 --seed 1 --spool " +
                            dir_.File("spool") + " -- " + FIELDPROF_STACK_PROG + " " +
                            std::to_string(cpu_ms) + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  // The program under `fieldprof run` as RunProgram runs it, its live file
  // in this test's directory, ended as `how` says (stack_prog.cc); returns
  // the pid of `fieldprof run`.
  pid_t StartProgram(int cpu_ms, int hz, const std::string& how) const {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("FIELDPROF_STACK_HZ", std::to_string(hz).c_str(), 1);
      setenv("FIELDPROF_LIVE_DIR", live_dir_.c_str(), 1);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      const std::string ms = std::to_string(cpu_ms), go = dir_.File("go");
      execl(FIELDPROF_CLI_BIN, "fieldprof", "run", "--max_load", "1000", "--apis", "8", "--seed",
            "1", "--spool", dir_.File("spool").c_str(), "--", FIELDPROF_STACK_PROG, ms.c_str(),
            how.c_str(), go.c_str(), nullptr);
      _exit(127);
    }
    return pid;
  }

  // One look of the agent at the live files (every live run due).
  LiveHarvestResult Harvest() const {
    LiveHarvestConfig c;
    c.live_dir = live_dir_;
    c.spool_dir = dir_.File("spool");
    c.state_dir = dir_.File("state");
    c.interval_s = 0;
    c.platform = DetectPlatform();
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    auto r = HarvestLive(c, std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : LiveHarvestResult();
  }

  std::vector<wire::RunRecord> SpoolRuns() const {
    std::vector<wire::RunRecord> runs;
    auto files = ListSpool(dir_.File("spool"));
    EXPECT_TRUE(files.ok());
    for (const SpoolEntry& e : *files) {
      auto run = ReadRunRecord(e.path);
      EXPECT_TRUE(run.ok()) << run.status().ToString();
      if (run.ok()) runs.push_back(*run);
    }
    return runs;
  }

  AgentConfig Config(uint16_t port) const { return testing::LoopbackAgentConfig(dir_, port); }

  std::vector<std::string> AggregatorArgs() const {
    return {"--signing_key",         dir_.File("keys/snapshot-signing.key"),
            "--snapshot_dir",        dir_.File("published"),
            "--admin_token_file",    dir_.File("admin.token"),
            "--fragment_count",      "4",
            "--fragments_per_cycle", "4"};
  }

  // One agent pass that seals and uploads everything the spool holds.
  void UploadAll(AggregatorProcess& agg) const {
    Agent agent(Config(agg.port()));
    ASSERT_TRUE(agent.Init().ok());
    auto r = agent.Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok() && r->upload_status.ok()) << r->upload_status.ToString();
    ASSERT_EQ(r->batches_waiting, 0);
    agg.WaitApplied();
  }

  std::string Get(AggregatorProcess& agg, const std::string& path) const {
    HttpsClient c(agg.Options());
    auto r = c.Get(path);
    EXPECT_TRUE(r.ok() && r->status == 200) << path << ": " << (r.ok() ? r->body : "");
    return r.ok() ? r->body : "";
  }

  TempDir dir_;
  std::string live_dir_;
};

// The CPU time of the spool's stack records of `module`, and their stacks.
uint64_t SpoolStackNs(const std::vector<wire::RunRecord>& runs, const std::string& module,
                      std::set<std::string>* stacks) {
  uint64_t ns = 0;
  for (const wire::RunRecord& run : runs) {
    for (const wire::Record& r : run.records()) {
      if (r.key().metric() != wire::METRIC_STACK_CPU_NS || r.key().module() != module) continue;
      ns += r.histogram().sum_lo();
      stacks->insert(r.key().symbol());
    }
  }
  return ns;
}

TEST_F(FieldStacksTest, NoPrivateFrameLeavesAndThePublishedSumsAreTheSpools) {
  RunProgram(/*cpu_ms=*/700, /*hz=*/200);
  RunProgram(/*cpu_ms=*/700, /*hz=*/200);
  const std::vector<wire::RunRecord> runs = SpoolRuns();
  ASSERT_EQ(runs.size(), 2u);
  // The spool: stacks of packaged modules only, nothing secret in any byte.
  EXPECT_EQ(FilesHolding(dir_.File("spool"), kSecret), std::vector<std::string>{});
  EXPECT_EQ(FilesHolding(dir_.File("spool"), "fpsecret"), std::vector<std::string>{});
  std::set<std::string> modules;
  bool program_marked = false;
  for (const wire::RunRecord& run : runs) {
    for (const wire::Record& r : run.records()) {
      if (r.key().metric() != wire::METRIC_STACK_CPU_NS) continue;
      modules.insert(r.key().module());
      const std::vector<std::string> frames = SplitStack(r.key().symbol());
      program_marked = program_marked || frames.back() == "[program]";
      for (size_t i = 0; i + 1 < frames.size(); ++i) EXPECT_FALSE(IsStackMark(frames[i]));
    }
  }
  EXPECT_TRUE(modules.contains("libz.so.1"));
  EXPECT_FALSE(modules.contains("libfpsecret.so"));
  EXPECT_FALSE(modules.contains("main"));
  for (const std::string& m : modules) {
    EXPECT_TRUE(fs::exists("/lib/x86_64-linux-gnu/" + m) || fs::exists("/lib64/" + m)) << m;
  }
  EXPECT_TRUE(program_marked);  // qsort's comparator: the program's frames, one mark
  std::set<std::string> libz_stacks;
  const uint64_t libz_ns = SpoolStackNs(runs, "libz.so.1", &libz_stacks);
  ASSERT_GT(libz_ns, 0u);

  // The outbox: the batches' bytes, as they go on the wire (the aggregator
  // is down: they wait there).
  {
    Agent agent(Config(FreePort()));
    ASSERT_TRUE(agent.Init().ok());
    auto r = agent.Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->batches_waiting, 1);
  }
  EXPECT_EQ(FilesHolding(dir_.File("state"), kSecret), std::vector<std::string>{});
  EXPECT_EQ(FilesHolding(dir_.File("state"), "fpsecret"), std::vector<std::string>{});

  AggregatorProcess agg(dir_, FreePort(), AggregatorArgs());
  agg.Start();
  ASSERT_NO_FATAL_FAILURE(UploadAll(agg));
  {
    HttpsClient c(agg.Options());
    auto r = c.Request("POST", "/v1/admin/publish", "", "",
                       {{"Authorization", std::string("Bearer ") + kToken}});
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  }
  // Every answer, and every file the aggregator keeps or publishes.
  std::string answers = Get(agg, "/v1/apis?limit=100000") + Get(agg, "/v1/modules");
  for (const std::string& m : modules) {
    answers += Get(agg, "/v1/module?module=" + m) + Get(agg, "/v1/stacks?module=" + m) +
               Get(agg, "/v1/stacks?module=" + m + "&format=folded") +
               Get(agg, "/v1/report?module=" + m);
  }
  EXPECT_EQ(answers.find(kSecret), std::string::npos);
  EXPECT_EQ(answers.find("fpsecret"), std::string::npos);
  EXPECT_EQ(FilesHolding(dir_.File("db"), kSecret), std::vector<std::string>{});
  EXPECT_EQ(FilesHolding(dir_.File("published"), kSecret), std::vector<std::string>{});
  ASSERT_FALSE(FilesHolding(dir_.File("published"), "libz.so.1").empty());  // stacks are there

  // Exactness: libz's stacks as published are the spool's, to the ns, each
  // under zlib's package version.
  const nlohmann::json s = nlohmann::json::parse(Get(agg, "/v1/stacks?module=libz.so.1"));
  EXPECT_EQ(s["total_ns"].get<uint64_t>(), libz_ns);
  EXPECT_EQ(s["stacks_total"].get<size_t>(), libz_stacks.size());
  ASSERT_EQ(s["versions"].size(), 1u);
  EXPECT_NE(s["versions"][0].get<std::string>().find('_'), std::string::npos);  // package_buildid
  std::set<std::string> roots;
  for (const auto& st : s["stacks"]) roots.insert(st["frames"][0].get<std::string>());
  EXPECT_TRUE(roots.contains("compress2")) << s.dump();
}

// A local recording read beside the field's profile of the same library
// (fieldprof tree ... --field_module): the recording's samples folded as
// the field folds them name what the field names (zlib's exported
// functions, "+offset", where the time left zlib) and nothing else: not
// the program's functions the recording itself names, not an unpackaged
// library's. The same program run in the field and recorded locally gives
// the same zlib stacks, so `tree sub` of the two reads as one tree.
TEST_F(FieldStacksTest, ALocalRecordingReadsBesideTheFieldsProfile) {
  AggregatorProcess agg(dir_, FreePort(), AggregatorArgs());
  agg.Start();
  for (int i = 0; i < 3; ++i) RunProgram(300, 200);
  ASSERT_NO_FATAL_FAILURE(UploadAll(agg));
  std::ofstream(dir_.File("field.folded"))
      << Get(agg, "/v1/stacks?module=libz.so.1&format=folded&limit=100000");
  const std::string cli = FIELDPROF_CLI_BIN;
  const std::string rec = dir_.File("local.fprec");
  ASSERT_EQ(std::system((cli + " record -o " + rec + " -- " + FIELDPROF_STACK_PROG +
                         " 300 > /dev/null 2> " + dir_.File("record.log"))
                            .c_str()),
            0)
      << Slurp(dir_.File("record.log"));
  auto run = [&](const std::string& args) {
    const std::string out = dir_.File("tree.out");
    const int rc = std::system((cli + " tree " + args + " > " + out + " 2>&1").c_str());
    EXPECT_EQ(rc, 0) << args << "\n" << Slurp(out);
    return Slurp(out);
  };
  // The recording names the program's own functions; its field view does not.
  ASSERT_NE(run("show --collapsed " + rec).find(kSecret), std::string::npos);
  const std::string view = run("show --collapsed --metric time --field_module libz.so.1 " + rec);
  EXPECT_EQ(view.find(kSecret), std::string::npos) << view;
  EXPECT_EQ(view.find("fpsecret"), std::string::npos) << view;
  // Folded stacks, each frame one the field can send.
  std::map<std::string, uint64_t> local, field;
  auto parse = [](const std::string& text, std::map<std::string, uint64_t>* out) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      const size_t sp = line.rfind(' ');
      if (sp == std::string::npos || line.empty()) continue;
      (*out)[line.substr(0, sp)] += std::stoull(line.substr(sp + 1));
    }
  };
  parse(view, &local);
  parse(Slurp(dir_.File("field.folded")), &field);
  ASSERT_FALSE(local.empty()) << view;
  ASSERT_FALSE(field.empty());
  for (const auto& [stack, ns] : local) {
    EXPECT_TRUE(key_rules::StackSymbolOk(stack.data(), stack.size())) << stack;
  }
  // Where zlib's time goes, by its named frames (the innermost "+offset" is
  // an instruction, which two runs need not share): the local run's named
  // paths are the field's, nearly all of its time in paths the field has.
  auto named = [](const std::string& stack) {
    std::string out;
    std::istringstream frames(stack);
    std::string f;
    while (std::getline(frames, f, ';')) {
      if (f[0] == '+') break;
      out += (out.empty() ? "" : ";") + f;
    }
    return out;
  };
  std::set<std::string> field_paths;
  for (const auto& [stack, ns] : field) field_paths.insert(named(stack));
  uint64_t total = 0, shared = 0;
  for (const auto& [stack, ns] : local) {
    total += ns;
    if (field_paths.contains(named(stack))) shared += ns;
  }
  EXPECT_GE(static_cast<double>(shared), 0.9 * static_cast<double>(total))
      << shared << " of " << total << " ns\n"
      << view;
  EXPECT_TRUE(field_paths.contains("compress2;deflate")) << Slurp(dir_.File("field.folded"));
  // The two read as one tree: the field's against the local run.
  const std::string sub = run("sub " + rec + " --base " + dir_.File("field.folded") +
                              " --field_module libz.so.1 --metric time --normalize total "
                              "--min_percent 0");
  EXPECT_NE(sub.find("compress2"), std::string::npos) << sub;
  EXPECT_EQ(sub.find(kSecret), std::string::npos) << sub;
  // Where libc's qsort calls the program's comparator, the program is a
  // mark, never a name.
  const std::string libc = run("show --collapsed --field_module libc.so.6 " + rec);
  EXPECT_NE(libc.find(";[program] "), std::string::npos) << libc;
  EXPECT_EQ(libc.find(kSecret), std::string::npos) << libc;
  // A module the program never had, or one no package installed (the
  // secret library): said, with the recording's packaged modules.
  auto refused = [&](const std::string& module, const std::string& file) {
    const std::string out = dir_.File("refused.out");
    EXPECT_NE(std::system(
                  (cli + " tree show --field_module " + module + " " + file + " > " + out + " 2>&1")
                      .c_str()),
              0)
        << module;
    return Slurp(out);
  };
  EXPECT_NE(refused("libcrypto.so.3", rec).find("libz.so.1"), std::string::npos);
  // --debug_dir names the +offsets from the debug file of the build the
  // program ran (zlib's, by its build id); without it, it says so.
  const std::string libz_id =
      FileBuildId(fs::canonical("/lib/x86_64-linux-gnu/libz.so.1").string());
  const std::string no_debug = dir_.File("no-debug.out");
  EXPECT_NE(std::system((cli + " tree show --field_module libz.so.1 --debug_dir " +
                         dir_.File("nothing") + " " + rec + " > " + no_debug + " 2>&1")
                            .c_str()),
            0);
  EXPECT_NE(Slurp(no_debug).find("no debug file for build " + libz_id), std::string::npos)
      << Slurp(no_debug);
  EXPECT_NE(refused("libfpsecret.so", rec).find("libz.so.1"), std::string::npos);
  // A packaged program (python3) is the program, never a kept module.
  const std::string py = dir_.File("python.fprec");
  ASSERT_EQ(std::system((cli + " record -o " + py +
                         " -- /usr/bin/python3 -c 'import zlib\nfor i in range(40): "
                         "zlib.compress(bytes(range(256)) * 4000, 9)' > /dev/null 2>&1")
                            .c_str()),
            0);
  const std::string modules = refused("none.so", py);
  EXPECT_NE(modules.find("libz.so.1"), std::string::npos) << modules;
  EXPECT_EQ(modules.find("python3"), std::string::npos) << modules;
}

// Every address of a library's code is named by the agent's reading of
// its file (a killed run's frames) as the runtime names it in the process
// (dladdr, stack_fold.cc FrameName): the exported symbol whose extent holds
// it, or none (then both give "+offset").
TEST(ExportedSymbolsTest, EveryAddressIsNamedAsTheRuntimeNamesIt) {
  for (const char* lib : {"libz.so.1", "libc.so.6"}) {
    void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) h = dlopen(lib, RTLD_NOW);
    ASSERT_NE(h, nullptr) << lib;
    link_map* map = nullptr;
    ASSERT_EQ(dlinfo(h, RTLD_DI_LINKMAP, &map), 0);
    const std::string path = map->l_name;
    ExportedSymbols syms;
    ASSERT_TRUE(syms.Load(path, FileBuildId(path))) << path;
    EXPECT_FALSE(ExportedSymbols().Load(path, std::string(40, '0')));  // another build
    // Not a regular file (a damaged note): refused, never waited on.
    TempDir dir;
    ASSERT_EQ(mkfifo(dir.File("fifo").c_str(), 0600), 0);
    EXPECT_FALSE(ExportedSymbols().Load(dir.File("fifo"), FileBuildId(path)));
    // The executable segment's addresses, every 7th byte.
    struct Text {
      uintptr_t base = 0, lo = 0, hi = 0;
    } text;
    text.base = map->l_addr;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* arg) {
          auto* t = static_cast<Text*>(arg);
          if (info->dlpi_addr != t->base) return 0;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
              t->lo = t->base + ph.p_vaddr;
              t->hi = t->lo + ph.p_memsz;
            }
          }
          return 1;
        },
        &text);
    ASSERT_LT(text.lo, text.hi) << lib;
    size_t named = 0, checked = 0;
    for (uintptr_t a = text.lo; a < text.hi; a += 7) {
      Dl_info info{};
      void* entry = nullptr;
      std::string want;
      if (dladdr1(reinterpret_cast<void*>(a), &info, &entry, RTLD_DL_SYMENT) != 0 &&
          info.dli_sname != nullptr && entry != nullptr) {
        const auto* sym = static_cast<const ElfW(Sym)*>(entry);
        const auto s = reinterpret_cast<uintptr_t>(info.dli_saddr);
        if (sym->st_size > 0 && a >= s && a - s < sym->st_size) want = info.dli_sname;
      }
      const std::string* got = syms.At(a - text.base);
      ASSERT_EQ(got != nullptr ? *got : "", want) << lib << " +" << std::hex << a - text.base;
      named += !want.empty();
      ++checked;
    }
    EXPECT_GT(named, checked / 10) << lib;  // most of a library's code is its exports'
  }
}

// A live file made by hand, as a killed run (or a damaged file) leaves it:
// entries not whole, depths out of range and a module count past the
// table are passed over; a run's stacks are capped at what its own record
// would hold, the dearest kept.
TEST(LiveStacksTest, AHandMadeLiveFileFoldsWithinARunsBounds) {
  void* h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  link_map* map = nullptr;
  ASSERT_EQ(dlinfo(h, RTLD_DI_LINKMAP, &map), 0);
  auto samples = std::make_unique<rt::LiveSamples>();
  rt::LiveModule& m = samples->modules[0];
  m.base = map->l_addr;
  m.lo = map->l_addr + 0x28000;  // libc's code, far enough from its headers
  m.hi = m.lo + 0x150000;
  m.kind = rt::kLiveModuleKept;
  std::snprintf(m.module, sizeof m.module, "libc.so.6");
  std::snprintf(m.build_id, sizeof m.build_id, "%s", FileBuildId(map->l_name).c_str());
  // No path: every frame is "+offset", one stack per address.
  samples->nmodules = 100000;   // beyond the table: read as its size
  std::vector<uint64_t> whole;  // the entries' ns that count
  for (uint32_t k = 0; k < 600; ++k) {
    rt::StackEntry& e = samples->table.e[k];
    e.state = k % 7 == 0 ? 1 : 2;    // being written: passed over
    e.depth = k % 11 == 0 ? 99 : 1;  // out of range: passed over
    e.ns = 1000 + k;
    e.ips[0] = m.lo + 0x100 + 0x400 * uint64_t{k};  // inside the module
    if (e.state == 2 && e.depth == 1) whole.push_back(e.ns);
  }
  samples->table.samples = 600;
  TempDir dir;
  const std::string path = dir.File("run.fplive");
  {
    std::ofstream out(path, std::ios::binary);
    out.seekp(static_cast<std::streamoff>(rt::kLiveSamplesOffset));
    out.write(reinterpret_cast<const char*>(samples.get()), sizeof(rt::LiveSamples));
  }
  const int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  LiveStacks got;
  ASSERT_TRUE(ReadLiveStacks(fd, &got));
  close(fd);
  EXPECT_FALSE(got.folded);
  EXPECT_EQ(got.samples, 600u);
  ASSERT_EQ(got.stacks.size(), static_cast<size_t>(stack_folding::kMaxRunStacks));
  EXPECT_EQ(got.not_kept, whole.size() - got.stacks.size());
  // The dearest, and nothing that was passed over.
  std::sort(whole.rbegin(), whole.rend());
  whole.resize(got.stacks.size());
  std::vector<uint64_t> kept;
  for (const LiveStack& st : got.stacks) {
    EXPECT_EQ(st.module, "libc.so.6");
    EXPECT_EQ(st.stack[0], '+') << st.stack;
    EXPECT_TRUE(key_rules::StackSymbolOk(st.stack.data(), st.stack.size())) << st.stack;
    kept.push_back(st.ns);
  }
  EXPECT_EQ(kept, whole);
  // With the runtime's mark, nothing is read.
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    const uint32_t folded = 1;
    io.seekp(
        static_cast<std::streamoff>(rt::kLiveSamplesOffset + offsetof(rt::LiveSamples, folded)));
    io.write(reinterpret_cast<const char*>(&folded), sizeof folded);
  }
  const int fd2 = open(path.c_str(), O_RDONLY);
  LiveStacks none;
  ASSERT_TRUE(ReadLiveStacks(fd2, &none));
  close(fd2);
  EXPECT_TRUE(none.folded);
  EXPECT_TRUE(none.stacks.empty());
}

// A run killed by a signal never writes its record: its stacks are folded
// by the agent from the run's live file, as the runtime would have folded
// them, with nothing private in them, and reach the aggregator exactly;
// those of a library opened after the start too.
TEST_F(FieldStacksTest, AKilledRunsStacksAreFoldedFromItsLiveFile) {
  for (int i = 0; i < 2; ++i) {
    int st = 0;
    ASSERT_EQ(waitpid(StartProgram(/*cpu_ms=*/700, /*hz=*/200, "kill"), &st, 0) > 0, true);
    ASSERT_FALSE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the program was to be killed";
  }
  // And python3 hashing through OpenSSL's libcrypto, which it loads with
  // dlopen (its _hashlib module) after the run began, before its first
  // sample at the default rate; then a child it forks hashes too (the
  // parent's notes of its libraries are the child's).
  {
    const std::string cmd = "env FIELDPROF_STACK_HZ=20 FIELDPROF_LIVE_DIR=" + live_dir_ + " " +
                            FIELDPROF_CLI_BIN + " run --max_load 1000 --apis 8 --seed 1 --spool " +
                            dir_.File("spool") +
                            " -- /usr/bin/python3 -c 'import hashlib, os, time\n"
                            "def spin(s):\n"
                            "  b, t = bytes(1 << 20), time.process_time()\n"
                            "  while time.process_time() - t < s: hashlib.sha256(b).digest()\n"
                            "spin(0.4)\n"
                            "pid = os.fork()\n"
                            "if pid == 0:\n  spin(0.5)\n  os.kill(os.getpid(), 9)\n"
                            "os.waitpid(pid, 0)\nos.kill(os.getpid(), 9)' > /dev/null 2>&1";
    EXPECT_NE(std::system(cmd.c_str()), 0);
  }
  EXPECT_TRUE(SpoolRuns().empty());  // no record: the runs were killed
  // The live files name no module whose frames are not kept (the
  // unpackaged library is only a range of addresses there).
  EXPECT_EQ(FilesHolding(live_dir_, "fpsecret"), std::vector<std::string>{});
  const LiveHarvestResult h = Harvest();
  EXPECT_EQ(h.runs_ended, 4);
  EXPECT_GT(h.stacks_folded, 0);
  const std::vector<wire::RunRecord> runs = SpoolRuns();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(FilesHolding(dir_.File("spool"), kSecret), std::vector<std::string>{});
  EXPECT_EQ(FilesHolding(dir_.File("spool"), "fpsecret"), std::vector<std::string>{});
  EXPECT_EQ(FilesHolding(dir_.File("state"), kSecret), std::vector<std::string>{});
  std::set<std::string> modules;
  bool program_marked = false;
  for (const wire::RunRecord& run : runs) {
    EXPECT_TRUE(run.last_part());
    for (const wire::Record& r : run.records()) {
      if (r.key().metric() != wire::METRIC_STACK_CPU_NS) continue;
      modules.insert(r.key().module());
      EXPECT_EQ(r.runs(), 1u);
      const std::vector<std::string> frames = SplitStack(r.key().symbol());
      program_marked = program_marked || frames.back() == "[program]";
      for (size_t i = 0; i + 1 < frames.size(); ++i) EXPECT_FALSE(IsStackMark(frames[i]));
    }
  }
  EXPECT_TRUE(modules.contains("libz.so.1"));
  EXPECT_TRUE(modules.contains("libcrypto.so.3"));  // opened after the start
  EXPECT_FALSE(modules.contains("libfpsecret.so"));
  EXPECT_FALSE(modules.contains("main"));
  for (const std::string& m : modules) {
    // A system library, or a Python extension module of Debian's.
    std::string out;
    EXPECT_TRUE(fs::exists("/lib/x86_64-linux-gnu/" + m) || fs::exists("/lib64/" + m) ||
                testing::RunCommand("ls /usr/lib/python3*/lib-dynload/" + m, &out) == 0)
        << m;
  }
  EXPECT_TRUE(program_marked);  // qsort's comparator
  std::set<std::string> crypto_stacks;
  ASSERT_GT(SpoolStackNs(runs, "libcrypto.so.3", &crypto_stacks), 0u);
  bool crypto_named = false;  // an exported function, named from the file
  for (const std::string& st : crypto_stacks) crypto_named = crypto_named || st[0] != '+';
  EXPECT_TRUE(crypto_named);
  int crypto_runs = 0;  // the parent's and the child's
  for (const wire::RunRecord& run : runs) {
    std::set<std::string> ignored;
    crypto_runs += SpoolStackNs({run}, "libcrypto.so.3", &ignored) > 0;
  }
  EXPECT_EQ(crypto_runs, 2);
  std::set<std::string> libz_stacks;
  const uint64_t libz_ns = SpoolStackNs(runs, "libz.so.1", &libz_stacks);
  ASSERT_GT(libz_ns, 0u);

  AggregatorProcess agg(dir_, FreePort(), AggregatorArgs());
  agg.Start();
  ASSERT_NO_FATAL_FAILURE(UploadAll(agg));
  const nlohmann::json s = nlohmann::json::parse(Get(agg, "/v1/stacks?module=libz.so.1"));
  EXPECT_EQ(s["total_ns"].get<uint64_t>(), libz_ns);
  EXPECT_EQ(s["stacks_total"].get<size_t>(), libz_stacks.size());
  std::set<std::string> roots;
  for (const auto& st : s["stacks"]) roots.insert(st["frames"][0].get<std::string>());
  EXPECT_TRUE(roots.contains("compress2")) << s.dump();  // named from libz's file
  const std::string answers = Get(agg, "/v1/stacks?module=libc.so.6&format=folded") + s.dump();
  EXPECT_EQ(answers.find(kSecret), std::string::npos);
}

// A run the agent reported in parts while it went on, and which then
// ended by itself: the runtime folds its stacks into a record of their own
// and says so in the live file; the agent's last part holds none of them.
TEST_F(FieldStacksTest, ARunReportedInPartsHasItsStacksCountedOnce) {
  const pid_t pid = StartProgram(/*cpu_ms=*/500, /*hz=*/200, "wait");
  struct Ender {  // a failed assertion leaves no program waiting
    pid_t pid;
    ~Ender() {
      if (pid > 0) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
    }
  } ender{pid};
  ASSERT_TRUE(testing::WaitUntil([&] { return fs::exists(dir_.File("go.ready")); },
                                 std::chrono::seconds(120)));
  const LiveHarvestResult first = Harvest();
  ASSERT_EQ(first.parts_written, 1);  // its calls so far: part 1
  std::ofstream(dir_.File("go")) << "go\n";
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ender.pid = 0;
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  // Its live file, left for the agent: the runtime read back only the
  // pages its samples wrote (a read of any other would have allocated
  // it, or on a full tmpfs raised SIGBUS), not the whole table.
  std::vector<fs::path> live;
  for (const auto& e : fs::directory_iterator(live_dir_)) live.push_back(e.path());
  ASSERT_EQ(live.size(), 1u);
  struct stat lst {};
  ASSERT_EQ(stat(live[0].c_str(), &lst), 0);
  EXPECT_LT(static_cast<uint64_t>(lst.st_blocks) * 512, uint64_t{1} << 20);
  const LiveHarvestResult last = Harvest();
  EXPECT_EQ(last.runs_ended, 1);
  EXPECT_EQ(last.stacks_folded, 0);
  int stack_records = 0, stacks_only = 0;
  for (const wire::RunRecord& run : SpoolRuns()) {
    for (const wire::Record& r : run.records()) {
      if (r.key().metric() != wire::METRIC_STACK_CPU_NS) continue;
      ++stack_records;
      stacks_only += run.part() == 0x7fffffff;  // the runtime's (spool_encode.h kStacksOnlyPart)
    }
  }
  EXPECT_GT(stack_records, 0);
  EXPECT_EQ(stacks_only, stack_records);
}

// ------------------------------------------------- a vendor's questions

// Stack records of one simulated machine's runs, in a batch of its own
// (its own day key, as 20 machines would send them).
wire::Batch MachineBatch(int machine, const std::string& version,
                         const std::vector<std::pair<std::string, double>>& stacks_ms, int runs,
                         std::mt19937_64& rng) {
  wire::Batch b =
      testing::SimpleBatch(testing::IdOf(1000 * machine + (version[0] == '2')), "x", "x", 1);
  b.clear_records();
  b.set_created_unix_ms(1795000000000);
  b.set_machine_key(std::string(15, 'm') + static_cast<char>(machine + (version[0] == '2') * 64));
  std::uniform_real_distribution<double> jitter(0.7, 1.3);
  for (const auto& [stack, ms] : stacks_ms) {
    wire::Record* r = b.add_records();
    r->mutable_key()->set_module("libfpslow.so.1");
    r->mutable_key()->set_module_version(version);
    r->mutable_key()->set_symbol(stack);
    r->mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
    Histogram h;
    for (int i = 0; i < runs; ++i) h.Record(static_cast<uint64_t>(ms * 1e6 * jitter(rng)));
    HistogramToWire(h, r->mutable_histogram());
    r->set_runs(static_cast<uint64_t>(runs));
    r->set_first_from_machine(true);  // the machine's first of each stack
  }
  return b;
}

// Two versions of a library, one with an internal function (+1200) made 3x
// slower, each run on 20 simulated machines: `fieldprof diff --versions
// --stacks` flags that function's stack and no other, through a real
// aggregator; `fieldprof stacks` reads them, as text, folded stacks that
// `fieldprof tree show` takes, and JSON.
TEST_F(FieldStacksTest, DiffVersionsFlagsTheFunctionThatGotSlowerAndNoOther) {
  AggregatorProcess agg(dir_, FreePort(), AggregatorArgs());
  agg.Start();
  const std::string v1 = "1.0-1_0123456789abcdef", v2 = "2.0-1_fedcba9876543210";
  std::mt19937_64 rng(68);
  HttpsClient c(agg.Options());
  for (int m = 1; m <= 20; ++m) {
    for (const auto& [version, slow_ms] : {std::pair{v1, 30.0}, std::pair{v2, 90.0}}) {
      const wire::Batch b = MachineBatch(m, version,
                                         {{"fpslow_api;+1100;+1200", slow_ms},
                                          {"fpslow_api;+1100", 20},
                                          {"fpslow_api;+1300;[libc.so.6]", 10},
                                          {"fpslow_other;+1400", 5}},
                                         /*runs=*/5, rng);
      auto r = c.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
      ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
    }
  }
  agg.WaitApplied();
  const std::string host = " --host 127.0.0.1:" + std::to_string(agg.port()) + " --ca " +
                           dir_.File("cert.pem") + " --module libfpslow.so.1";
  std::string out;
  ASSERT_EQ(testing::RunCommand(std::string(FIELDPROF_CLI_BIN) + " diff --stacks --format json" +
                                    host + " --versions " + v1 + "," + v2 + " --min_calls 10",
                                &out),
            0)
      << out;
  const nlohmann::json d = nlohmann::json::parse(out);
  ASSERT_EQ(d["stacks"].size(), 4u) << out;
  for (const auto& st : d["stacks"]) {
    const std::string frames = st["frames"].dump();
    const bool slow = frames == R"(["fpslow_api","+1100","+1200"])";
    EXPECT_EQ(st["verdict"], slow ? "slower" : "same") << frames << " " << st.dump();
    if (slow) {
      EXPECT_NEAR(st["change"].get<double>(), 2.0, 0.3);
    }
  }
  // The text says so too, and exits 1 with --fail_on_slower.
  EXPECT_EQ(
      testing::RunCommand(std::string(FIELDPROF_CLI_BIN) + " diff --stacks" + host +
                              " --versions " + v1 + "," + v2 + " --min_calls 10 --fail_on_slower",
                          &out),
      1);
  EXPECT_NE(out.find("slower"), std::string::npos) << out;
  EXPECT_NE(out.find("fpslow_api;+1100;+1200"), std::string::npos) << out;
  // One version's stacks as a tree, and as folded stacks the tree command reads.
  ASSERT_EQ(testing::RunCommand(
                std::string(FIELDPROF_CLI_BIN) + " stacks" + host + " --version " + v2, &out),
            0);
  EXPECT_NE(out.find("fpslow_api"), std::string::npos) << out;
  EXPECT_NE(out.find("+1200"), std::string::npos) << out;
  const std::string folded = dir_.File("v2.folded");
  ASSERT_EQ(testing::RunCommand(std::string(FIELDPROF_CLI_BIN) + " stacks" + host + " --version " +
                                    v2 + " -o " + folded + " && " + FIELDPROF_CLI_BIN +
                                    " tree show --json " + folded,
                                &out),
            0)
      << out;
  const nlohmann::json tree = nlohmann::json::parse(out);
  EXPECT_NE(tree.dump().find("+1200"), std::string::npos);
}

// A vendor names the +offset frames from its own debug file, found by
// build id under --debug_dir.
TEST_F(FieldStacksTest, DebugFilesNameTheFramesTheFieldCouldNot) {
  const std::string lib = fs::path(FIELDPROF_STACK_PROG).parent_path().string() + "/libfpsecret.so";
  const std::string id = FileBuildId(lib);
  ASSERT_EQ(id.size(), 40u);
  std::string nm;
  ASSERT_EQ(testing::RunCommand("nm " + lib + " | grep fp_zz_secret_lib_inner_mix", &nm), 0);
  const std::string offset =
      nm.substr(nm.find_first_not_of('0'), nm.find(' ') - nm.find_first_not_of('0'));
  fs::create_directories(dir_.File("debug/.build-id/" + id.substr(0, 2)));
  fs::copy_file(lib,
                dir_.File("debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug"));
  AggregatorProcess agg(dir_, FreePort(), AggregatorArgs());
  agg.Start();
  std::mt19937_64 rng(5);
  wire::Batch b = MachineBatch(1, "1.0", {}, 1, rng);
  wire::Record* r = b.add_records();
  r->mutable_key()->set_module("libfpsecret.so");
  r->mutable_key()->set_module_version("1.0-1_" + id.substr(0, 16));
  r->mutable_key()->set_symbol("fp_zz_secret_lib_squeeze;+" + offset);
  r->mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
  Histogram h;
  h.Record(50000000);
  HistogramToWire(h, r->mutable_histogram());
  r->set_runs(1);
  // And the API's own figures, for the vendor's report.
  wire::Record* api = b.add_records();
  *api = *r;
  api->mutable_key()->set_symbol("fp_zz_secret_lib_squeeze");
  api->mutable_key()->set_metric(wire::METRIC_WALL_TIME_NS);
  HttpsClient c(agg.Options());
  auto posted = c.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
  ASSERT_TRUE(posted.ok() && posted->status == 200) << (posted.ok() ? posted->body : "");
  agg.WaitApplied();
  const std::string cmd = std::string(FIELDPROF_CLI_BIN) +
                          " stacks --host 127.0.0.1:" + std::to_string(agg.port()) + " --ca " +
                          dir_.File("cert.pem") + " --module libfpsecret.so --format folded";
  std::string out;
  ASSERT_EQ(testing::RunCommand(cmd, &out), 0);
  EXPECT_EQ(out, "fp_zz_secret_lib_squeeze;+" + offset + " 50000000\n");
  ASSERT_EQ(testing::RunCommand(cmd + " --debug_dir " + dir_.File("debug"), &out), 0);
  // A static C++ function: its name as the debug file's symbol table has
  // it, demangled.
  EXPECT_EQ(out.rfind("fp_zz_secret_lib_squeeze;", 0), 0u) << out;
  EXPECT_NE(out.find("fp_zz_secret_lib_inner_mix"), std::string::npos) << out;
  EXPECT_EQ(out.find("+" + offset), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with(" 50000000\n")) << out;
  // The vendor's report page draws the same stacks, named the same way.
  const std::string page = dir_.File("report.html");
  ASSERT_EQ(testing::RunCommand(std::string(FIELDPROF_CLI_BIN) + " report --host 127.0.0.1:" +
                                    std::to_string(agg.port()) + " --ca " + dir_.File("cert.pem") +
                                    " --module libfpsecret.so -o " + page + " --debug_dir " +
                                    dir_.File("debug"),
                                &out),
            0);
  const std::string html = Slurp(page);
  EXPECT_NE(html.find("class=\"flame field-flame\""), std::string::npos);
  EXPECT_NE(html.find("fp_zz_secret_lib_inner_mix"), std::string::npos);
  EXPECT_EQ(html.find("+" + offset), std::string::npos);
  // Without the build's file it says so.
  EXPECT_EQ(testing::RunCommand(cmd + " --debug_dir " + dir_.File("nothing") + " 2>&1", &out), 1);
  EXPECT_NE(out.find("no debug file for build " + id.substr(0, 16)), std::string::npos) << out;
}

}  // namespace
}  // namespace fieldprof::agent
