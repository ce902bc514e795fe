// fieldprof-agent's parts and passes: batch building, the outbox's crash
// recovery, and uploads to the real aggregator binary over TLS on loopback
// (round trip, aggregator down then up, a refused batch, a wrong
// certificate), and the agent binary SIGKILLed at every step of sealing and
// uploading, and the aggregator killed under it: every record exactly once.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "agent/daemon/agent.h"
#include "common/base/durable_file.h"
#include "common/crypto/upload_tokens.h"
#include "common/settings/runtime_settings.h"
#include "common/settings/tsc_rate.h"
#include "common/spool/batcher.h"
#include "common/spool/outbox.h"
#include "common/spool/run_counters.h"
#include "common/spool/spool.h"
#include "common/spool/spool_sealer.h"
#include "common/system/exported_symbols.h"
#include "common/system/system_code.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"
#include "tests/support/agent_config.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"
#include "tests/support/tls_stub_server.h"
#include "tools/loadgen/api_query.h"

namespace fieldprof::agent {
namespace {

namespace fs = std::filesystem;
using testing::AggregatorProcess;
using testing::FreePort;
using testing::StubReply;
using testing::TempDir;
using testing::TlsStubServer;

Platform ThisPlatform() {
  Platform p;
  p.os = wire::OS_LINUX;
  p.arch = wire::ARCH_X86_64;
  p.cpu_vendor = wire::CPU_VENDOR_INTEL;
  p.cpu_family = 6;
  return p;
}

// A run record as the runtime writes it: one record per (symbol, metric).
wire::RunRecord MakeRun(const std::vector<std::string>& symbols, std::mt19937_64& rng,
                        int64_t ended_ms = 1795000000000) {
  wire::RunRecord run;
  run.set_schema_version(kSchemaVersion);
  PlatformToWire(ThisPlatform(), run.mutable_platform());
  for (const std::string& sym : symbols) {
    for (wire::Metric m : {wire::METRIC_WALL_TIME_NS, wire::METRIC_ALLOC_BYTES_INCLUSIVE}) {
      wire::Record* r = run.add_records();
      r->mutable_key()->set_module("libtest.so.1");
      r->mutable_key()->set_module_version("0123456789abcdef");
      r->mutable_key()->set_symbol(sym);
      r->mutable_key()->set_metric(m);
      Histogram h;
      const int n = 1 + static_cast<int>(rng() % 50);
      for (int i = 0; i < n; ++i) h.Record(rng() % 100000);
      HistogramToWire(h, r->mutable_histogram());
      r->set_runs(1);
    }
  }
  run.mutable_counters()->set_calls_measured(1);
  run.set_ended_unix_ms(ended_ms);
  return run;
}

// Written as the runtime writes records: under a temporary name, then
// renamed, so the daemon (woken by inotify) never reads half a record.
void WriteRun(const std::string& spool, const wire::RunRecord& run, int n) {
  fs::create_directories(spool);
  const std::string name =
      "run-" + std::to_string(1795000000000 + n) + "-" + std::to_string(n) + "-0.fpr";
  { std::ofstream(spool + "/.tmp-" + name, std::ios::binary) << run.SerializeAsString(); }
  fs::rename(spool + "/.tmp-" + name, spool + "/" + name);
}

// ---------------------------------------------------------------- batching

TEST(BatchBuilderTest, SumsRecordsWithTheSameKey) {
  std::mt19937_64 rng(1);
  const wire::RunRecord a = MakeRun({"f", "g"}, rng), b = MakeRun({"f"}, rng);
  BatchBuilder builder(kDefaultBatchBytes, ThisPlatform());
  ASSERT_TRUE(builder.TryAdd(a));
  ASSERT_TRUE(builder.TryAdd(b));
  const size_t predicted = builder.encoded_bytes();
  const wire::Batch batch = builder.Seal(std::string(16, 'x'), 1, {});
  EXPECT_TRUE(builder.empty());
  EXPECT_LE(batch.ByteSizeLong(), predicted);
  EXPECT_TRUE(ValidateBatch(batch).ok());
  ASSERT_EQ(batch.records_size(), 4);  // f and g, two metrics each
  for (const wire::Record& r : batch.records()) {
    EXPECT_FALSE(r.key().has_platform());  // the batch's platform applies
    Histogram want;
    uint64_t runs = 0;
    for (const wire::RunRecord* run : {&a, &b}) {
      for (const wire::Record& x : run->records()) {
        if (x.key().symbol() == r.key().symbol() && x.key().metric() == r.key().metric()) {
          want.Merge(HistogramFromWire(x.histogram()));
          ++runs;
        }
      }
    }
    EXPECT_EQ(HistogramFromWire(r.histogram()), want) << r.key().symbol();
    EXPECT_EQ(r.runs(), runs);
  }
}

TEST(BatchBuilderTest, BatchesStayUnderTheSizeLimit) {
  std::mt19937_64 rng(2);
  BatchBuilder builder(kDefaultBatchBytes, ThisPlatform());
  std::vector<wire::Batch> batches;
  uint64_t records_in = 0;
  for (int i = 0; i < 3000; ++i) {
    const wire::RunRecord run =
        MakeRun({"sym_" + std::to_string(i), "shared_" + std::to_string(i % 7)}, rng);
    records_in += run.records_size();
    if (!builder.TryAdd(run)) {
      batches.push_back(builder.Seal(testing::IdOf(batches.size()), 1, {}));
      ASSERT_TRUE(builder.TryAdd(run));
    }
  }
  batches.push_back(builder.Seal(testing::IdOf(batches.size()), 1, {}));
  ASSERT_GE(batches.size(), 3u);
  uint64_t runs_out = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    const size_t bytes = batches[i].ByteSizeLong();
    EXPECT_LE(bytes, kDefaultBatchBytes) << "batch " << i;
    if (i + 1 < batches.size()) {
      EXPECT_GE(bytes, kDefaultBatchBytes * 9 / 10) << "batch " << i;
    }
    EXPECT_TRUE(ValidateBatch(batches[i]).ok());
    for (const wire::Record& r : batches[i].records()) runs_out += r.runs();
  }
  EXPECT_EQ(runs_out, records_in);  // every record in exactly one batch
}

TEST(BatchBuilderTest, ARunLargerThanTheLimitGetsABatchOfItsOwn) {
  std::mt19937_64 rng(3);
  std::vector<std::string> many;
  for (int i = 0; i < 40; ++i) many.push_back("big_" + std::to_string(i));
  BatchBuilder builder(4096, ThisPlatform());
  ASSERT_TRUE(builder.TryAdd(MakeRun({"small"}, rng)));
  const wire::RunRecord big = MakeRun(many, rng);
  EXPECT_FALSE(builder.TryAdd(big));
  builder.Seal(testing::IdOf(1), 1, {});
  ASSERT_TRUE(builder.TryAdd(big));  // alone, over the limit
  EXPECT_GT(builder.Seal(testing::IdOf(2), 1, {}).ByteSizeLong(), 4096u);
}

// ---------------------------------------------------------------- outbox

TEST(OutboxTest, RecoveryFinishesOrUndoesAnInterruptedSeal) {
  TempDir dir;
  const std::string spool = dir.File("spool"), box = dir.File("outbox");
  fs::create_directories(spool);
  for (const char* f : {"a.fpr", "b.fpr", "c.fpr"}) std::ofstream(spool + "/" + f) << "x";
  Outbox outbox(box, dir.File("quarantine"));
  ASSERT_TRUE(outbox.Init().ok());
  // Cut short after step 2: the batch exists, a.fpr was not deleted yet.
  ASSERT_TRUE(WriteFileDurably(box + "/0000000000001-aa.consumed", "a.fpr\n").ok());
  ASSERT_TRUE(WriteFileDurably(box + "/0000000000001-aa.batch", "batch").ok());
  // Cut short after step 1: no batch, so b.fpr must stay.
  ASSERT_TRUE(WriteFileDurably(box + "/0000000000002-bb.consumed", "b.fpr\n").ok());
  // A temporary file of a write that never finished.
  std::ofstream(box + "/0000000000003-cc.batch.tmp-1") << "partial";
  ASSERT_TRUE(outbox.Recover(spool).ok());
  EXPECT_FALSE(fs::exists(spool + "/a.fpr"));
  EXPECT_TRUE(fs::exists(spool + "/b.fpr"));
  EXPECT_TRUE(fs::exists(spool + "/c.fpr"));
  auto list = outbox.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "0000000000001-aa");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(box)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u);  // only the batch
}

// ---------------------------------------------------------------- passes

class AgentPassTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(testing::MakeCert(dir_.path())); }

  // Runs sqlite3 with the runtime preloaded the way a volunteer's session
  // has it (settings file `conf`, no `fieldprof run`); returns the
  // runtime's debug log.
  std::string RunUnderSettings(const std::string& conf) const {
    const std::string log = dir_.File("runtime.log");
    const std::string cmd = "env FIELDPROF_SETTINGS=" + conf + " FIELDPROF_DEBUG=" + log +
                            " LD_PRELOAD=" FIELDPROF_RUNTIME_LIB
                            " sqlite3 :memory: 'select 1' > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  AgentConfig Config(uint16_t port) const { return testing::LoopbackAgentConfig(dir_, port); }

  // Writes `n` spool files over `symbols`, and returns what they sum to.
  std::map<std::string, std::pair<Histogram, uint64_t>> FillSpool(int n, int symbols,
                                                                  int first = 0) {
    std::mt19937_64 rng(first + 7);
    std::map<std::string, std::pair<Histogram, uint64_t>> sums;
    for (int i = first; i < first + n; ++i) {
      const wire::RunRecord run = MakeRun({"s" + std::to_string(i % symbols)}, rng);
      for (const wire::Record& r : run.records()) {
        auto& [h, runs] = sums[r.key().symbol() + "/" + std::to_string(r.key().metric())];
        h.Merge(HistogramFromWire(r.histogram()));
        ++runs;
      }
      WriteRun(dir_.File("spool"), run, i);
    }
    return sums;
  }

  // Every series on the aggregator equals `sums` (added to `earlier`).
  void ExpectStored(AggregatorProcess& agg,
                    const std::map<std::string, std::pair<Histogram, uint64_t>>& sums) {
    agg.WaitApplied();
    HttpsClient c(agg.Options());
    for (const auto& [name, want] : sums) {
      ApiKey key;
      key.module = "libtest.so.1";
      key.module_version = "0123456789abcdef";
      key.symbol = name.substr(0, name.find('/'));
      key.metric = static_cast<wire::Metric>(std::stoi(name.substr(name.find('/') + 1)));
      key.platform = ThisPlatformOfAgent();
      auto got = tools::FetchSeries(c, key);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(got->count, want.first.count()) << name;
      EXPECT_EQ(got->sum, want.first.sum()) << name;
      EXPECT_EQ(got->runs, want.second) << name;
    }
  }
  // The records carry the spool's platform; the agent's own goes on the batch.
  static Platform ThisPlatformOfAgent() { return ThisPlatform(); }

  // A pass against a server whose certificate `ca_file` must not accept:
  // the upload fails saying so, and the sealed batch stays.
  void ExpectCertificateRefused(uint16_t port, const std::string& ca_file) {
    AgentConfig c = Config(port);
    c.ca_file = ca_file;
    FillSpool(5, 2);
    Agent agent(c);
    ASSERT_TRUE(agent.Init().ok());
    auto r = agent.Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->upload_status.ok());
    EXPECT_NE(r->upload_status.message().find("certificate"), std::string::npos)
        << r->upload_status.ToString();
    EXPECT_EQ(r->batches_waiting, 1);
  }

  // What `fieldprof status` prints for this test's agent.
  std::string StatusText(const std::string& flags = "") const {
    const std::string cmd = std::string(FIELDPROF_CLI_BIN) + " status " + flags + " --state_dir " +
                            dir_.File("state") + " --spool " + dir_.File("spool") +
                            " --runtime_settings " + dir_.File("none.conf") + " > " +
                            dir_.File("status.txt");
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    std::ifstream in(dir_.File("status.txt"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  size_t SpoolFiles() const {
    auto l = ListSpool(dir_.File("spool"));
    return l.ok() ? l->size() : 0;
  }

  TempDir dir_;
};

// The agent sends only with the user's consent: with the settings file
// missing, or saying `consent = no` (fieldprof optout), a pass seals,
// sends and asks for nothing; the spool waits. With consent, it all goes.
TEST_F(AgentPassTest, WithoutConsentNothingIsSealedOrSent) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  const auto sums = FillSpool(20, 3);
  const std::string conf = dir_.File("runtime.conf");
  AgentConfig c = Config(agg.port());
  c.runtime_settings = conf;
  c.settings_interval_s = 0;
  Agent agent(c);
  ASSERT_TRUE(agent.Init().ok());
  for (const char* text : {"", "consent = no\n"}) {
    if (*text) std::ofstream(conf) << text;
    auto r = agent.Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->consent) << text;
    EXPECT_EQ(r->batches_sealed, 0) << text;
    EXPECT_EQ(r->batches_uploaded, 0) << text;
    EXPECT_EQ(SpoolFiles(), 20u) << text;
    EXPECT_EQ(agent.state().settings_checked_unix_ms, 0) << "the server was asked: " << text;
  }
  EXPECT_FALSE(fs::exists(dir_.File("state/outbox")) && !fs::is_empty(dir_.File("state/outbox")));
  std::ofstream(conf) << "consent = yes\n";
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->consent);
  EXPECT_EQ(r->batches_uploaded, 1);
  EXPECT_EQ(SpoolFiles(), 0u);
  ExpectStored(agg, sums);
}

// fieldprof optin and optout: a user takes part only where the machine's
// answer is yes; optin keeps the rest of their settings; optout says no,
// removes the spool, the outbox and the cache, and the agent sends nothing.
TEST_F(AgentPassTest, OptinNeedsTheMachinesYesAndOptoutLeavesNothing) {
  const std::string conf = dir_.File("config/runtime.conf"), machine = dir_.File("volunteer.conf");
  auto cli = [&](const std::string& args) {
    const std::string cmd = std::string(FIELDPROF_CLI_BIN) + " " + args + " --runtime_settings " +
                            conf + " --machine_conf " + machine + " > " + dir_.File("out.txt") +
                            " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(dir_.File("out.txt"));
    return std::make_pair(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1,
                          std::string(std::istreambuf_iterator<char>(in), {}));
  };
  // No machine answer, then a no: refused, nothing written.
  auto [rc, out] = cli("optin");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("does not take part"), std::string::npos) << out;
  std::ofstream(machine) << "# from debconf\nparticipate = no\n";
  std::tie(rc, out) = cli("optin");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("its answer is no"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(conf));
  // Yes: consent, the user's other settings kept.
  std::ofstream(machine) << "participate = yes\n";
  fs::create_directories(dir_.File("config"));
  std::ofstream(conf) << "consent = no\nk = 3\nspool_dir = " << dir_.File("spool")
                      << "\nlive_dir = " << dir_.File("live") << "\n";
  std::tie(rc, out) = cli("optin");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("fieldprof status --pending"), std::string::npos) << out;
  auto s = ReadRuntimeSettings(conf);
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_TRUE((*s)->consent);
  EXPECT_EQ((*s)->fleet.k, 3);
  EXPECT_EQ((*s)->spool_dir, dir_.File("spool"));

  // Records, a sealed batch and a cache, then optout.
  FillSpool(10, 2);
  AgentConfig c = Config(FreePort());
  c.runtime_settings = conf;
  {
    Agent agent(c);
    ASSERT_TRUE(agent.Init().ok());
    ASSERT_TRUE(agent.Pass(/*flush=*/true, /*upload=*/false).ok());
  }
  FillSpool(5, 2, 100);
  fs::create_directories(dir_.File("cache"));
  std::ofstream(dir_.File("cache/manifest")) << "x";
  // A measured run's counts in its live file (what a run still going on,
  // or killed, leaves).
  fs::create_directories(dir_.File("live"));
  std::ofstream(dir_.File("live/run-123-456.fplive")) << "counts";
  std::tie(rc, out) = cli("optout --state_dir " + c.state_dir + " --cache " + dir_.File("cache"));
  EXPECT_EQ(rc, 0) << out;
  s = ReadRuntimeSettings(conf);
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_FALSE((*s)->consent);
  EXPECT_EQ((*s)->fleet.k, 3);
  for (const std::string& gone : {dir_.File("spool"), c.state_dir, dir_.File("cache"),
                                  dir_.File("live/run-123-456.fplive")}) {
    EXPECT_FALSE(fs::exists(gone)) << gone << "\n" << out;
  }
  EXPECT_NE(out.find("removed the counts of 1 measured runs"), std::string::npos) << out;
  // A program run afterwards (the runtime reads the same file) and an agent
  // pass: nothing recorded, nothing sealed.
  const std::string log = RunUnderSettings(conf);
  EXPECT_EQ(log.find("measuring this run"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir_.File("spool")) && !fs::is_empty(dir_.File("spool")));
  Agent agent(c);
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->consent);
  EXPECT_EQ(r->batches_sealed, 0);
}

// `fieldprof status --pending` shows, before anything is sent, exactly the
// batches the agent sends next: what the spool's runs become (records,
// histograms, counters), and the outbox's sealed batches byte for byte.
TEST_F(AgentPassTest, StatusPendingShowsExactlyWhatIsSentNext) {
  auto batches = [this](const std::string& json) {
    std::vector<std::pair<std::string, wire::Batch>> out;
    const nlohmann::json answer = nlohmann::json::parse(json);
    for (const nlohmann::json& b : answer.at("batches")) {
      const std::string one = b.at("batch").dump();
      wire::Batch batch;
      EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(one, &batch).ok()) << one;
      out.emplace_back(b.at("from").get<std::string>(), batch);
    }
    return out;
  };
  EXPECT_NE(StatusText("--pending").find("nothing: the outbox and the spool are empty"),
            std::string::npos);
  FillSpool(30, 4);
  AgentConfig c = Config(FreePort());
  {
    // A pass that seals nothing (the records are young): the agent's
    // state now says which modules it shares, as status reads it.
    c.max_age_s = 365 * 86400;
    Agent young(c);
    ASSERT_TRUE(young.Init().ok());
    ASSERT_TRUE(young.Pass(/*flush=*/false, /*upload=*/false).ok());
    c.max_age_s = Config(0).max_age_s;
  }
  const auto before = batches(StatusText("--pending --json"));
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].first, "spool");
  EXPECT_GT(before[0].second.records_size(), 0);
  EXPECT_EQ(SpoolFiles(), 30u) << "status must not consume the spool";

  // The agent seals the spool (no aggregator: nothing leaves).
  Agent agent(c);
  ASSERT_TRUE(agent.Init().ok());
  ASSERT_TRUE(agent.Pass(/*flush=*/true, /*upload=*/false).ok());
  Outbox outbox(OutboxDirOf(c.state_dir), QuarantineDirOf(c.state_dir));
  auto sealed = outbox.List();
  ASSERT_TRUE(sealed.ok());
  ASSERT_EQ(sealed->size(), 1u);
  wire::Batch in_outbox;
  {
    std::ifstream in((*sealed)[0].path, std::ios::binary);
    ASSERT_TRUE(in_outbox.ParseFromIstream(&in));
  }
  // The same batch but for its id and seal time, and today's machine key
  // (drawn as it was sealed: the state had none before).
  wire::Batch shown = before[0].second;
  EXPECT_TRUE(shown.machine_key().empty());
  EXPECT_EQ(in_outbox.machine_key().size(), kMachineKeyBytes);
  shown.set_batch_id(in_outbox.batch_id());
  shown.set_created_unix_ms(in_outbox.created_unix_ms());
  shown.set_machine_key(in_outbox.machine_key());
  EXPECT_EQ(shown.SerializeAsString(), in_outbox.SerializeAsString());
  // Now it is in the outbox: shown as it is, id and all.
  const auto after = batches(StatusText("--pending --json"));
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].first, "outbox");
  EXPECT_EQ(after[0].second.SerializeAsString(), in_outbox.SerializeAsString());
  const std::string text = StatusText("--pending");
  EXPECT_NE(text.find("libtest.so.1 s0 "), std::string::npos) << text;
  EXPECT_NE(text.find("sent as it is"), std::string::npos) << text;
}

TEST_F(AgentPassTest, RoundTripStoresExactlyTheSumsOfTheRecords) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  const auto sums = FillSpool(400, 25);
  Agent agent(Config(agg.port()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->upload_status.ok()) << r->upload_status.ToString();
  EXPECT_EQ(r->runs_read, 400);
  EXPECT_GE(r->batches_sealed, 1);
  EXPECT_EQ(r->batches_uploaded, r->batches_sealed);
  EXPECT_EQ(r->batches_waiting, 0);
  EXPECT_EQ(SpoolFiles(), 0u);
  ExpectStored(agg, sums);
  auto state = ReadAgentState(Config(0).status_path());
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->last_upload_result, "ok");
  EXPECT_EQ(state->batches_uploaded, r->batches_uploaded);
}

// A module installed by a Debian package is uploaded under that package's
// version (with its build id's first 16 digits), as dpkg-query tells it;
// one no package holds stays on the machine (docs/privacy.md).
TEST_F(AgentPassTest, ModulesFromPackagesAreUploadedUnderTheirVersions) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  std::mt19937_64 rng(9);
  wire::RunRecord run = MakeRun({"deflate"}, rng);
  const std::string libz = fs::canonical("/lib/x86_64-linux-gnu/libz.so.1").string();
  const std::string build_id = FileBuildId(libz);
  ASSERT_EQ(build_id.size(), 40u);
  for (wire::Record& r : *run.mutable_records()) {
    r.mutable_key()->set_module("libz.so.1");
    r.mutable_key()->set_module_version(build_id);
  }
  wire::RunRecord own = run;
  for (wire::Record& r : *own.mutable_records()) r.mutable_key()->set_module("libmine.so.1");
  WriteRun(dir_.File("spool"), run, 1);
  WriteRun(dir_.File("spool"), own, 2);
  Agent agent(Config(agg.port()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok() && r->upload_status.ok()) << r->upload_status.ToString();
  agg.WaitApplied();
  std::string version;
  {
    FILE* p = popen("dpkg-query -W -f='${Version}' zlib1g:amd64", "r");
    ASSERT_NE(p, nullptr);
    char buf[256];
    version.assign(buf, fread(buf, 1, sizeof buf, p));
    pclose(p);
  }
  ASSERT_FALSE(version.empty());
  HttpsClient c(agg.Options());
  ApiKey key;
  key.module = "libz.so.1";
  key.module_version = version + "_" + build_id.substr(0, 16);
  key.symbol = "deflate";
  key.metric = wire::METRIC_WALL_TIME_NS;
  key.platform = ThisPlatformOfAgent();
  auto got = tools::FetchSeries(c, key);
  ASSERT_TRUE(got.ok()) << key.module_version << ": " << got.status().ToString();
  EXPECT_EQ(got->count, run.records(0).histogram().count());
  // libz's build under another name is not what the package holds: it
  // stayed on the machine, under any version.
  EXPECT_EQ(r->records_kept_home, own.records_size());
  auto list = c.Get("/v1/apis?module=libmine.so.1");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->body.find("libmine"), std::string::npos) << list->body;
  auto all = c.Get("/v1/apis");
  ASSERT_TRUE(all.ok());
  EXPECT_NE(all->body.find("libz.so.1"), std::string::npos) << all->body;
}

TEST_F(AgentPassTest, YoungSmallBatchesWaitUnlessFlushed) {
  const auto sums = FillSpool(10, 3);
  AgentConfig c = Config(FreePort());
  c.max_age_s = 365 * 86400;  // the records are "young" for a year
  Agent agent(c);
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/false, /*upload=*/false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_sealed, 0);
  EXPECT_EQ(SpoolFiles(), 10u);
  EXPECT_GT(agent.seal_deadline_unix_ms(), 0);
  r = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_sealed, 1);
  EXPECT_EQ(SpoolFiles(), 0u);
}

TEST_F(AgentPassTest, AggregatorDownThenUpLosesAndDoublesNothing) {
  const uint16_t port = FreePort();
  const auto sums = FillSpool(120, 10);
  Agent agent(Config(port));
  ASSERT_TRUE(agent.Init().ok());
  // Down: the batch is sealed and waits; the state says why.
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->upload_status.ok());
  EXPECT_EQ(r->batches_waiting, 1);
  EXPECT_EQ(agent.state().last_upload_result.rfind("unreachable", 0), 0u)
      << agent.state().last_upload_result;
  EXPECT_GT(agent.next_attempt_unix_ms(), 0);
  // Still down, a second attempt: the same batch still waits.
  r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_waiting, 1);
  EXPECT_EQ(agent.state().failures, 2);
  // Up: it goes, once.
  AggregatorProcess agg(dir_, port);
  agg.Start();
  r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->upload_status.ok()) << r->upload_status.ToString();
  EXPECT_EQ(r->batches_uploaded, 1);
  EXPECT_EQ(r->batches_waiting, 0);
  EXPECT_EQ(agent.state().failures, 0);
  ExpectStored(agg, sums);
}

TEST_F(AgentPassTest, ARefusedBatchIsQuarantinedAndNeverRetried) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  Agent agent(Config(agg.port()));
  ASSERT_TRUE(agent.Init().ok());
  // A batch the aggregator will refuse (not a batch at all), as if the
  // outbox file had been damaged.
  ASSERT_TRUE(WriteFileDurably(Config(0).outbox_dir() + "/0000000000001-00.batch",
                               "this is not a protobuf batch")
                  .ok());
  const auto sums = FillSpool(30, 5);
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_quarantined, 1);
  EXPECT_EQ(r->batches_uploaded, 1);  // the good batch behind it still went
  EXPECT_EQ(r->batches_waiting, 0);
  const std::string q = Config(0).quarantine_dir();
  EXPECT_TRUE(fs::exists(q + "/0000000000001-00.batch"));
  std::ifstream reason(q + "/0000000000001-00.reason");
  std::string line;
  std::getline(reason, line);
  EXPECT_EQ(line.rfind("HTTP 400", 0), 0u) << line;
  EXPECT_NE(line.find("refused what the batch holds"), std::string::npos) << line;
  r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_quarantined, 0);
  ExpectStored(agg, sums);
  // fieldprof status says what was set aside and why, in words.
  const std::string status = StatusText();
  EXPECT_NE(status.find("set aside:      1 batch the aggregator refused for what it holds; never "
                        "sent again"),
            std::string::npos)
      << status;
  EXPECT_NE(status.find("the latest: " + line), std::string::npos) << status;
}

TEST_F(AgentPassTest, AWrongCertificateIsRefusedAndTheDataKept) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  TempDir other;
  ASSERT_TRUE(testing::MakeCert(other.path()));  // a CA that did not sign the server's
  ExpectCertificateRefused(agg.port(), other.File("cert.pem"));
}

// The packaged pair on one machine: the aggregator package makes a
// self-signed certificate; an agent with no --ca_file trusts it for a
// server on loopback (by address or as localhost), and only there.
TEST_F(AgentPassTest, TheLocalAggregatorsCertificateIsTrustedOnLoopback) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.8.9.10"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("2001:db8::1"));
  EXPECT_FALSE(IsLoopbackHost("fieldprof.example"));
  EXPECT_FALSE(IsLoopbackHost("localhost.example"));
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  // Not given: the system store alone does not know the certificate.
  AgentConfig c = Config(agg.port());
  c.ca_file.clear();
  c.loopback_ca_file.clear();
  FillSpool(5, 2);
  {
    Agent agent(c);
    ASSERT_TRUE(agent.Init().ok());
    auto r = agent.Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok());
    EXPECT_NE(r->upload_status.message().find("certificate"), std::string::npos)
        << r->upload_status.ToString();
    EXPECT_EQ(r->batches_waiting, 1);
  }
  // Given as the package's: taken, by address and by name.
  c.loopback_ca_file = dir_.File("cert.pem");
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    c.server_host = host;
    FillSpool(5, 2, 5);
    Agent agent(c);
    ASSERT_TRUE(agent.Init().ok());
    auto r = agent.Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->upload_status.ok()) << host << ": " << r->upload_status.ToString();
    EXPECT_EQ(r->batches_waiting, 0) << host;
  }
}

TEST_F(AgentPassTest, ACertificateForAnotherHostIsRefused) {
  // A certificate the agent trusts (it is its own CA file) but issued to
  // another name: the chain verifies, the host name does not.
  TempDir other;
  ASSERT_EQ(
      std::system(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                   "-nodes -days 2 -subj /CN=elsewhere.invalid -addext "
                   "subjectAltName=DNS:elsewhere.invalid -keyout " +
                   other.File("key.pem") + " -out " + other.File("cert.pem") + " >/dev/null 2>&1")
                      .c_str()),
      0);
  TlsStubServer stub(other.File("cert.pem"), other.File("key.pem"),
                     [](const std::string&, const std::string&) {
                       return StubReply{200, "{}", {}};
                     });
  ExpectCertificateRefused(stub.port(), other.File("cert.pem"));
  EXPECT_EQ(stub.requests(), 0);  // not a byte of a request was sent
}

TEST_F(AgentPassTest, RecordsPastTheMaximumAgeAreSealedWithoutFlush) {
  // MakeRun's records ended on 2026-11-18: days past the default 24 h.
  FillSpool(10, 3);
  Agent agent(Config(FreePort()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/false, /*upload=*/false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_sealed, 1);
  EXPECT_EQ(SpoolFiles(), 0u);
  EXPECT_EQ(agent.seal_deadline_unix_ms(), 0);
}

TEST_F(AgentPassTest, ACorruptSpoolFileIsSetAsideAndCounted) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  const auto sums = FillSpool(10, 2);
  std::ofstream(dir_.File("spool") + "/run-1795000000999-1-0.fpr") << "garbage";
  Agent agent(Config(agg.port()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->runs_bad, 1);
  EXPECT_EQ(r->runs_read, 10);
  EXPECT_TRUE(fs::exists(Config(0).quarantine_dir() + "/spool-run-1795000000999-1-0.fpr"));
  EXPECT_EQ(SpoolFiles(), 0u);
  ExpectStored(agg, sums);
}

// A run whose key strings could carry personal data (a path as module)
// never leaves the machine: set aside with the rule that refused it,
// counted, and reported by the status the agent keeps.
TEST_F(AgentPassTest, ARunWithAPathForAModuleIsSetAsideAndCounted) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  const auto sums = FillSpool(4, 2);
  std::mt19937_64 rng(3);
  wire::RunRecord bad = MakeRun({"secret_api"}, rng);
  bad.mutable_records(1)->mutable_key()->set_module("/home/alice/libsecret.so");
  WriteRun(dir_.File("spool"), bad, 999);
  Agent agent(Config(agg.port()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->runs_bad, 1);
  EXPECT_EQ(r->runs_read, 4);
  const std::string kept = Config(0).quarantine_dir() + "/spool-run-1795000000999-999-0.fpr";
  EXPECT_TRUE(fs::exists(kept));
  std::ifstream reason(kept + ".reason");
  const std::string why(std::istreambuf_iterator<char>(reason), {});
  EXPECT_NE(why.find("module_name"), std::string::npos) << why;
  EXPECT_EQ(SpoolFiles(), 0u);
  ExpectStored(agg, sums);  // the good runs, all of them
  // `fieldprof status` shows it.
  const std::string out = StatusText();
  EXPECT_NE(out.find("set aside:      1 run record in the spool that did not read"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("is not a file name"), std::string::npos) << out;
}

// A full disk under the spool and the outbox (a real 4 MiB tmpfs): the
// pass that cannot seal fails saying so and consumes nothing; once space
// returns the next pass sends every record, exactly once.
TEST_F(AgentPassTest, AFullDiskFailsThePassAndLosesNoRecord) {
  const std::string fs = dir_.File("fs");
  fs::create_directories(fs);
  testing::SmallDisk disk(fs, "4m");
  if (!disk.ok()) GTEST_SKIP() << disk.why();
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  AgentConfig c = Config(agg.port());
  c.spool_dir = fs + "/spool";
  c.state_dir = fs + "/state";
  std::mt19937_64 rng(11);
  std::map<std::string, std::pair<Histogram, uint64_t>> sums;
  for (int i = 0; i < 10; ++i) {
    const wire::RunRecord run = MakeRun({"s" + std::to_string(i % 3)}, rng);
    for (const wire::Record& r : run.records()) {
      auto& [h, runs] = sums[r.key().symbol() + "/" + std::to_string(r.key().metric())];
      h.Merge(HistogramFromWire(r.histogram()));
      ++runs;
    }
    WriteRun(c.spool_dir, run, i);
  }
  Agent agent(c);
  ASSERT_TRUE(agent.Init().ok());
  {  // fill the disk
    std::ofstream f(fs + "/filler", std::ios::binary);
    const std::string chunk(64 << 10, 'x');
    while (f.write(chunk.data(), static_cast<std::streamsize>(chunk.size()))) {
    }
  }
  auto full = agent.Pass(/*flush=*/true);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kNoSpace) << full.status().ToString();
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(c.spool_dir)) left += e.path().extension() == ".fpr";
  EXPECT_EQ(left, 10u);
  fs::remove(fs + "/filler");
  auto again = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->runs_read, 10);
  EXPECT_GE(again->batches_uploaded, 1);
  ExpectStored(agg, sums);
}

// A record write that never finished (its program killed between creating
// the temporary file and renaming it) is removed once it is over an hour
// old; a young one, maybe still being written, is left; records go on.
TEST_F(AgentPassTest, AStaleUnfinishedRecordWriteIsRemoved) {
  FillSpool(2, 1);
  const std::string old_tmp = dir_.File("spool") + "/.tmp-1795000000000-7-0000abcd";
  const std::string young_tmp = dir_.File("spool") + "/.tmp-1795000000001-8-0000abce";
  std::ofstream(old_tmp) << "half a record";
  std::ofstream(young_tmp) << "half a record";
  fs::last_write_time(old_tmp, fs::file_time_type::clock::now() - std::chrono::hours(2));
  Agent agent(Config(FreePort()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stale_temporaries_removed, 1);
  EXPECT_FALSE(fs::exists(old_tmp));
  EXPECT_TRUE(fs::exists(young_tmp));
  EXPECT_EQ(r->runs_read, 2);
  EXPECT_EQ(r->runs_bad, 0);
}

TEST_F(AgentPassTest, ADamagedStateFileIsResetNotFatal) {
  fs::create_directories(dir_.File("state"));
  std::ofstream(Config(0).status_path()) << "failures = many\n";
  FillSpool(3, 1);
  Agent agent(Config(FreePort()));
  ASSERT_TRUE(agent.Init().ok());
  EXPECT_EQ(agent.state().last_upload_result.rfind("state file was damaged and reset", 0), 0u)
      << agent.state().last_upload_result;
  auto r = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_sealed, 1);                            // and the agent goes on working
  EXPECT_TRUE(ReadAgentState(Config(0).status_path()).ok());  // rewritten whole
}

TEST_F(AgentPassTest, OneAgentPerStateDirectory) {
  Agent a(Config(FreePort())), b(Config(FreePort()));
  ASSERT_TRUE(a.Init().ok());
  const Status s = b.Init();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

// ---------------------------------------------------------------- settings and faults

TEST_F(AgentPassTest, FleetSettingsReachTheRuntimeAndConsentStaysLocal) {
  AggregatorProcess agg(dir_, FreePort(),
                        {"--fleet_k", "5", "--fleet_deny_modules", "libz.so.1",
                         "--fleet_sample_fraction", "1", "--fleet_max_runs_per_minute", "0",
                         // a loaded test machine must not make the run below refuse
                         "--fleet_max_load_per_cpu", "1000"});
  agg.Start();
  const std::string conf = dir_.File("config/runtime.conf");
  fs::create_directories(dir_.File("config"));
  std::ofstream(conf) << "consent = yes\nk = 2\nspool_dir = " << dir_.File("spool")
                      << "\nslot_dir = " << dir_.File("slots") << "\nmax_load_per_cpu = 1000\n";
  AgentConfig c = Config(agg.port());
  c.runtime_settings = conf;
  c.settings_interval_s = 0;
  Agent agent(c);
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(agent.state().settings_result, "ok");
  auto got = ReadRuntimeSettings(conf);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  const RuntimeSettings& s = **got;
  EXPECT_TRUE(s.consent);                            // local: kept
  EXPECT_EQ(s.spool_dir, dir_.File("spool"));        // local: kept
  EXPECT_EQ(s.fleet.k, 5);                           // from the aggregator
  EXPECT_EQ(s.fleet.deny_modules, "libz.so.1");      // from the aggregator
  EXPECT_DOUBLE_EQ(s.fleet.max_load_per_cpu, 1000);  // from the aggregator
  EXPECT_DOUBLE_EQ(s.fleet.sample_fraction, 1.0);    // from the aggregator
  EXPECT_EQ(s.fleet.max_runs_per_minute, 0);         // from the aggregator
  EXPECT_EQ(s.version, agent.state().settings_version);
  EXPECT_FALSE(s.version.empty());

  // The runtime reads the file: a program started with it (no `fieldprof
  // run`, just the preload a volunteer's session has) measures with k = 5
  // and libz denied, and leaves its record in the spool the file names.
  const std::string decided = RunUnderSettings(conf);
  EXPECT_NE(decided.find("measuring this run: k=5, overhead budget 0.01, sample fraction 1, "
                         "at most 0 runs a minute, allow '', deny 'libz.so.1'"),
            std::string::npos)
      << decided;
  auto files = ListSpool(dir_.File("spool"));
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 1u);
}

// The agent hands the runtime this machine's TSC rate (tsc_hz), so that
// every measured run converts its durations right from its first call; it
// writes it into a settings file that exists, never creates one, and the
// runtime then says it uses it.
TEST_F(AgentPassTest, TheMachinesClockRateReachesTheRuntime) {
  if (!HasInvariantTsc()) GTEST_SKIP() << "no invariant TSC: the runtime needs no rate here";
  const std::string conf = dir_.File("config/runtime.conf");
  AgentConfig c = Config(FreePort());
  c.runtime_settings = conf;
  {
    Agent agent(c);
    ASSERT_TRUE(agent.Init().ok());
    ASSERT_TRUE(agent.Pass(/*flush=*/true, /*upload=*/false).ok());
    EXPECT_FALSE(fs::exists(conf)) << "the settings file is the user's to create";
  }
  fs::create_directories(dir_.File("config"));
  std::ofstream(conf) << "consent = yes\nk = 1\nsample_fraction = 1\nmax_runs_per_minute = 0\n"
                      << "spool_dir = " << dir_.File("spool")
                      << "\nslot_dir = " << dir_.File("slots") << "\nmax_load_per_cpu = 1000\n";
  Agent agent(c);
  ASSERT_TRUE(agent.Init().ok());
  ASSERT_TRUE(agent.Pass(/*flush=*/true, /*upload=*/false).ok());
  auto got = ReadRuntimeSettings(conf);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  const std::optional<int64_t> hz = MeasureTscHz();
  ASSERT_TRUE(hz.has_value());
  EXPECT_TRUE(SameTscRate((*got)->tsc_hz, *hz)) << (*got)->tsc_hz << " against " << *hz;
  EXPECT_TRUE((*got)->consent);  // the rest kept
  EXPECT_EQ((*got)->fleet.k, 1);

  const std::string said = RunUnderSettings(conf);
  EXPECT_NE(said.find("clock: TSC at the machine's rate, " + std::to_string((*got)->tsc_hz)),
            std::string::npos)
      << said;
}

TEST_F(AgentPassTest, ADamagedSettingsAnswerIsIgnored) {
  // With this machine's rate and its list of the system's code in it, the
  // agent has nothing of its own to write either
  // (TheMachinesClockRateReachesTheRuntime).
  const std::optional<int64_t> hz = MeasureTscHz();
  const std::string good_conf = "consent = yes\nk = 3\n" +
                                (hz ? "tsc_hz = " + std::to_string(*hz) + "\n" : "") +
                                "system_code = " + SystemCode().BuildIdListPath() + "\n";
  for (const std::string& body :
       {std::string("{not json"), std::string(R"({"k": 99, "slots": 6})"),
        FleetSettingsToJson(FleetSettings{}, true).replace(12, 4, "dead")}) {
    TlsStubServer stub(dir_.File("cert.pem"), dir_.File("key.pem"),
                       [&](const std::string&, const std::string& target) {
                         if (target == "/v1/config") return StubReply{200, body, {}};
                         return StubReply{200, "{}", {}};
                       });
    const std::string conf = dir_.File("runtime.conf");
    std::ofstream(conf) << good_conf;
    AgentConfig c = Config(stub.port());
    c.runtime_settings = conf;
    c.settings_interval_s = 0;
    c.state_dir = dir_.File("state-" + std::to_string(stub.port()));
    Agent agent(c);
    ASSERT_TRUE(agent.Init().ok());
    ASSERT_TRUE(agent.Pass(/*flush=*/false).ok());
    EXPECT_EQ(agent.state().settings_result.rfind("refused: ", 0), 0u)
        << body << " -> " << agent.state().settings_result;
    std::ifstream in(conf);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), good_conf) << body;
  }
}

// Whatever answers may send any bytes: a refusal's message reaches the
// volunteer's terminal (fieldprof status) as plain text, one line.
TEST_F(AgentPassTest, ARefusalsMessageIsShownAsTextOnly) {
  TlsStubServer stub(
      dir_.File("cert.pem"), dir_.File("key.pem"), [](const std::string&, const std::string&) {
        return StubReply{
            400,
            R"({"error":"InvalidArgument","message":"\u001b]0;owned\u0007\u001b[31mred\nline"})",
            {}};
      });
  FillSpool(3, 1);
  Agent agent(Config(stub.port()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_quarantined, 1);
  const std::string out = StatusText();
  EXPECT_NE(out.find("the latest: HTTP 400 from 127.0.0.1: the aggregator refused what the "
                     "batch holds: ?]0;owned??[31mred line"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  EXPECT_EQ(out.find('\x07'), std::string::npos);
}

TEST_F(AgentPassTest, A503WithRetryAfterIsWaitedOut) {
  TlsStubServer stub(
      dir_.File("cert.pem"), dir_.File("key.pem"), [](const std::string&, const std::string&) {
        return StubReply{503, R"({"error":"Unavailable"})", {{"Retry-After", "120"}}};
      });
  FillSpool(10, 2);
  Agent agent(Config(stub.port()));
  ASSERT_TRUE(agent.Init().ok());
  const auto before = std::chrono::system_clock::now();
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->upload_status.ok());
  EXPECT_NE(r->upload_status.message().find("503"), std::string::npos);
  EXPECT_EQ(r->batches_waiting, 1);
  EXPECT_EQ(agent.state().last_upload_result, "HTTP 503");
  const int64_t earliest =
      std::chrono::duration_cast<std::chrono::milliseconds>(before.time_since_epoch()).count() +
      120000;
  EXPECT_GE(agent.next_attempt_unix_ms(), earliest);  // Retry-After beats the 10 ms backoff

  // What `fieldprof status` makes of it.
  const std::string out = StatusText();
  EXPECT_NE(out.find("consent:        not given"), std::string::npos) << out;
  EXPECT_NE(out.find("spool:          0 records"), std::string::npos) << out;
  EXPECT_NE(out.find("outbox:         1 batches"), std::string::npos) << out;
  EXPECT_NE(out.find("s ago: HTTP 503"), std::string::npos) << out;
  EXPECT_NE(out.find("next attempt:   in 2 min (after 1 failures)"), std::string::npos) << out;
}

// The real aggregator with a per-source limit of one batch a minute: the
// second batch gets 429, stays in the outbox, and the agent waits out the
// Retry-After (60 s) instead of its own 10 ms backoff.
TEST_F(AgentPassTest, A429FromTheSourceLimitIsWaitedOut) {
  AggregatorProcess agg(dir_, FreePort(),
                        {"--source_batches_per_minute", "1", "--source_burst", "1"});
  agg.Start();
  FillSpool(5, 2);
  Agent agent(Config(agg.port()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_uploaded, 1) << r->upload_status.ToString();
  FillSpool(5, 2, /*first=*/5);
  const auto before = std::chrono::system_clock::now();
  r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_uploaded, 0);
  EXPECT_EQ(r->batches_waiting, 1);
  EXPECT_NE(r->upload_status.message().find("HTTP 429 (Retry-After 60 s)"), std::string::npos)
      << r->upload_status.ToString();
  EXPECT_EQ(agent.state().last_upload_result, "HTTP 429");
  EXPECT_GE(
      agent.next_attempt_unix_ms(),
      std::chrono::duration_cast<std::chrono::milliseconds>(before.time_since_epoch()).count() +
          59000);
  EXPECT_EQ(agent.state().batches_quarantined, 0);
}

// Batches sealed on one day carry one machine key, kept in the state
// across agent restarts; once the day is over a new random key is drawn.
// k means k machines (docs/privacy.md): one machine that sends a series
// every day for 30 days (a new day key each day, as the agent draws them)
// is one machine, and at k = 5 the series stays unpublished; five machines
// that send it on one day publish it, counted as five. Before, each day key
// counted: the first machine alone published at its fifth day.
TEST_F(AgentPassTest, OneMachineForThirtyDaysIsOneAndFiveMachinesOnOneDayAreFive) {
  AggregatorProcess agg(dir_, FreePort(), {"--k_anonymity", "5"});
  agg.Start();
  auto pass = [&](AgentConfig c) {
    Agent agent(c);
    ASSERT_TRUE(agent.Init().ok());
    auto r = agent.Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok() && r->upload_status.ok()) << r->upload_status.ToString();
  };
  AgentConfig one = Config(agg.port());
  std::set<std::string> keys;
  for (int day = 0; day < 30; ++day) {
    FillSpool(2, 1, 2 * day);
    if (day > 0) {  // the state says the key is yesterday's: a new one
      StatusOr<AgentState> state = ReadAgentState(StatusPathOf(one.state_dir));
      ASSERT_TRUE(state.ok());
      keys.insert(state->machine_key);
      state->machine_key_day -= 1;
      ASSERT_TRUE(WriteFileDurably(StatusPathOf(one.state_dir), FormatAgentState(*state)).ok());
    }
    pass(one);
  }
  EXPECT_EQ(keys.size(), 29u) << "a day key a day";
  agg.WaitApplied();
  HttpsClient c(agg.Options());
  auto listed = [&] {
    StatusOr<HttpReply> r = c.Get("/v1/apis?module=libtest.so.1");
    EXPECT_TRUE(r.ok() && r->status == 200);
    return nlohmann::json::parse(r.ok() ? r->body : "{}");
  };
  nlohmann::json apis = listed();
  EXPECT_TRUE(apis["apis"].empty()) << apis.dump().substr(0, 500);
  EXPECT_EQ(apis["withheld"]["series"], 2) << apis.dump().substr(0, 500);  // s0's two metrics
  EXPECT_EQ(apis["withheld"]["machines"], 1) << apis.dump().substr(0, 500);
  // Four more machines, on one day: five in all.
  for (int m = 1; m <= 4; ++m) {
    AgentConfig other = one;
    other.spool_dir = dir_.File("spool-" + std::to_string(m));
    other.state_dir = dir_.File("state-" + std::to_string(m));
    std::mt19937_64 rng(m);
    WriteRun(other.spool_dir, MakeRun({"s0"}, rng), 1);
    pass(other);
  }
  agg.WaitApplied();
  apis = listed();
  ASSERT_EQ(apis["apis"].size(), 2u) << apis.dump().substr(0, 500);
  for (const nlohmann::json& a : apis["apis"]) {
    EXPECT_EQ(a["machines"], 5) << a.dump();
    EXPECT_EQ(a["runs"], 64) << a.dump();  // two runs a day for 30 days, one of each other
  }
}

TEST_F(AgentPassTest, OneMachineKeyADayAndANewOneTheNextDay) {
  AgentConfig c = Config(FreePort());
  auto seal = [&](int first) {
    FillSpool(5, 2, first);
    Agent agent(c);
    ASSERT_TRUE(agent.Init().ok());
    ASSERT_TRUE(agent.Pass(/*flush=*/true, /*upload=*/false).ok());
  };
  auto keys = [&] {
    Outbox outbox(OutboxDirOf(c.state_dir), QuarantineDirOf(c.state_dir));
    std::set<std::string> out;
    const StatusOr<std::vector<OutboxEntry>> sealed = outbox.List();
    EXPECT_TRUE(sealed.ok());
    if (!sealed.ok()) return out;
    for (const OutboxEntry& e : *sealed) {
      wire::Batch b;
      std::ifstream in(e.path, std::ios::binary);
      EXPECT_TRUE(b.ParseFromIstream(&in));
      EXPECT_EQ(b.machine_key().size(), kMachineKeyBytes);
      out.insert(b.machine_key());
    }
    return out;
  };
  seal(0);
  seal(5);
  ASSERT_EQ(keys().size(), 1u) << "two batches of one day, two agents: one key";
  StatusOr<AgentState> state = ReadAgentState(StatusPathOf(c.state_dir));
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->machine_key, HexEncode(*keys().begin()));
  // The state says the key is yesterday's: the next batch has a new one.
  state->machine_key_day -= 1;
  ASSERT_TRUE(WriteFileDurably(StatusPathOf(c.state_dir), FormatAgentState(*state)).ok());
  seal(10);
  EXPECT_EQ(keys().size(), 2u);
}

// Anonymous upload tokens end to end, with the real aggregator: the agent
// gets a request's worth (proof checked) and spends one a batch, the batch
// id being the token's input; the aggregator refuses a batch without one,
// a forged one, one of a wrong epoch; a token spent twice applies once;
// token requests are limited per source.
TEST_F(AgentPassTest, EveryBatchSpendsOneAnonymousToken) {
  { std::ofstream(dir_.File("token.secret"), std::ios::binary) << std::string(40, 's') << "\n"; }
  { std::ofstream(dir_.File("admin.token")) << "tokens-test-admin-token-0123456789\n"; }
  ASSERT_EQ(std::system(("'" FIELDPROF_SOURCE_DIR "/deploy/make-signing-key.sh' '" + dir_.path() +
                         "' >/dev/null 2>&1")
                            .c_str()),
            0);
  AggregatorProcess agg(
      dir_, FreePort(),
      {"--token_secret_file", dir_.File("token.secret"), "--tokens_per_request", "8",
       "--source_token_requests_per_day", "4", "--signing_key", dir_.File("snapshot-signing.key"),
       "--admin_token_file", dir_.File("admin.token")});
  agg.Start();
  HttpsClient c(agg.Options());
  // The signed manifest lists the key GET /v1/tokens serves, and the next
  // epoch's: what agents pin.
  StatusOr<HttpReply> published =
      c.Request("POST", "/v1/admin/publish?all=1", "", "",
                {{"Authorization", "Bearer tokens-test-admin-token-0123456789"}});
  ASSERT_TRUE(published.ok() && published->status == 200);
  StatusOr<HttpReply> manifest_reply = c.Get("/v1/snapshot/manifest");
  wire::SignedManifest signed_manifest;
  wire::Manifest manifest;
  ASSERT_TRUE(manifest_reply.ok() && signed_manifest.ParseFromString(manifest_reply->body) &&
              manifest.ParseFromString(signed_manifest.manifest()));
  StatusOr<HttpReply> info = c.Get("/v1/tokens");
  ASSERT_TRUE(info.ok() && info->status == 200);
  const nlohmann::json served = nlohmann::json::parse(info->body);
  ASSERT_EQ(manifest.token_keys_size(), 2);
  EXPECT_EQ(manifest.token_keys(0).epoch(), served["epoch"].get<int64_t>());
  EXPECT_EQ(HexEncode(manifest.token_keys(0).public_key()), served["public_key"]);
  EXPECT_EQ(manifest.token_keys(1).epoch(), served["epoch"].get<int64_t>() + 1);
  auto post = [&](const wire::Batch& b) {
    StatusOr<HttpReply> r = c.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
    EXPECT_TRUE(r.ok());
    return r.ok() ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string());
  };
  // No token: refused with the rule.
  auto [status, body] = post(testing::SimpleBatch(testing::IdOf(1), "libz.so.1", "deflate", 10));
  EXPECT_EQ(status, 400);
  EXPECT_NE(body.find("token_missing"), std::string::npos) << body;

  // The agent asks, gets 8, spends one.
  FillSpool(5, 2);
  Agent agent(Config(agg.port()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batches_uploaded, 1)
      << r->upload_status.ToString() << " / " << r->seal_status.ToString() << " / "
      << agent.state().tokens_result;
  EXPECT_EQ(agent.state().tokens_required, 1);
  std::ifstream in(dir_.File("state/tokens"));
  StatusOr<std::vector<UploadToken>> left =
      ParseTokens(std::string(std::istreambuf_iterator<char>(in), {}));
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 7u);

  // A token's output on another batch id, and the right one but for an
  // epoch that is not its own.
  const UploadToken& t0 = (*left)[0];
  const UploadToken& t1 = (*left)[1];
  wire::Batch forged = testing::SimpleBatch(t0.input, "libz.so.1", "deflate", 10);
  forged.set_token(t1.output);
  forged.set_token_epoch(t1.epoch);
  std::tie(status, body) = post(forged);
  EXPECT_EQ(status, 400);
  EXPECT_NE(body.find("token_invalid"), std::string::npos) << body;
  forged.set_token(t0.output);
  forged.set_token_epoch(t0.epoch - 5);
  std::tie(status, body) = post(forged);
  EXPECT_NE(body.find("token_epoch"), std::string::npos) << body;
  // The right token: taken once, then a second batch on it is the first.
  wire::Batch first = testing::SimpleBatch(t0.input, "libz.so.1", "deflate", 10);
  first.set_token(t0.output);
  first.set_token_epoch(t0.epoch);
  std::tie(status, body) = post(first);
  EXPECT_EQ(status, 200) << body;
  EXPECT_NE(body.find("\"duplicate\":false"), std::string::npos) << body;
  wire::Batch again = testing::SimpleBatch(t0.input, "libz.so.1", "inflate", 999);
  again.set_token(t0.output);
  again.set_token_epoch(t0.epoch);
  std::tie(status, body) = post(again);
  EXPECT_EQ(status, 200) << body;
  EXPECT_NE(body.find("\"duplicate\":true"), std::string::npos) << "a token spends once: " << body;

  // A damaged token file stops no pass: it goes, the records wait, and the
  // next pass with the aggregator reachable gets tokens again.
  { std::ofstream(dir_.File("state/tokens")) << "1 not-hex not-hex\n"; }
  FillSpool(5, 2, /*first=*/5);
  auto damaged = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(damaged.ok()) << damaged.status().ToString();
  EXPECT_EQ(damaged->batches_sealed, 0);
  EXPECT_NE(damaged->seal_status.message().find("damaged"), std::string::npos)
      << damaged->seal_status.ToString();

  // Token requests per source: 4 a day, a burst of 1; the agent made one.
  wire::TokenRequest request;
  StatusOr<TokenRequestState> st = MakeTokenRequest(2);
  ASSERT_TRUE(st.ok());
  StatusOr<HttpReply> more =
      c.Post("/v1/tokens", "application/x-protobuf", st->request.SerializeAsString());
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->status, 429) << more->body;
  EXPECT_GT(more->retry_after_seconds, 3600);
}

// The aggregator's flags for upload tokens, with this test's secret.
std::vector<std::string> TokenFlags(const TempDir& dir) {
  { std::ofstream(dir.File("token.secret"), std::ios::binary) << std::string(40, 't') << "\n"; }
  return {"--token_secret_file",
          dir.File("token.secret"),
          "--tokens_per_request",
          "8",
          "--source_token_requests_per_day",
          "100"};
}

// The batches in the outbox (their .batch files), parsed.
std::vector<std::pair<std::string, wire::Batch>> OutboxBatches(const std::string& dir) {
  std::vector<std::pair<std::string, wire::Batch>> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".batch") continue;
    std::ifstream in(e.path(), std::ios::binary);
    wire::Batch b;
    EXPECT_TRUE(b.ParseFromString(std::string(std::istreambuf_iterator<char>(in), {})));
    out.emplace_back(e.path().string(), std::move(b));
  }
  return out;
}

size_t FilesIn(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

// A new volunteer's first pass finds the aggregator down: the agent has no
// token and does not know one is asked, so it seals a batch without one.
// When the aggregator (which asks for tokens) is back, that batch is
// refused for its token alone: the agent gets tokens, gives the batch one
// and a new id, and it is counted once. Nothing is set aside.
TEST_F(AgentPassTest, ABatchSealedWithNoTokenInStockIsCountedOnce) {
  const uint16_t port = FreePort();
  const auto sums = FillSpool(60, 10);
  Agent agent(Config(port));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batches_sealed, 1);
  EXPECT_FALSE(r->upload_status.ok());
  std::vector<std::pair<std::string, wire::Batch>> sealed =
      OutboxBatches(Config(port).outbox_dir());
  ASSERT_EQ(sealed.size(), 1u);
  EXPECT_TRUE(sealed[0].second.token().empty()) << "the case this test is about";

  AggregatorProcess agg(dir_, port, TokenFlags(dir_));
  agg.Start();
  r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->upload_status.ok()) << r->upload_status.ToString();
  EXPECT_EQ(r->batches_restamped, 1);
  EXPECT_EQ(r->batches_uploaded, 1);
  EXPECT_EQ(r->batches_quarantined, 0);
  EXPECT_EQ(r->batches_waiting, 0);
  EXPECT_EQ(FilesIn(Config(port).quarantine_dir()), 0u);
  EXPECT_EQ(agent.state().tokens_required, 1);
  ExpectStored(agg, sums);
  // Only the fresh id was counted: the first one, sent again by hand with
  // no token, is still refused.
  HttpsClient c(agg.Options());
  StatusOr<HttpReply> again =
      c.Post("/v1/batches", "application/x-protobuf", sealed[0].second.SerializeAsString());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 400) << again->body;
  EXPECT_NE(again->body.find("token_missing"), std::string::npos) << again->body;
  const std::string status = StatusText();
  EXPECT_EQ(status.find("set aside"), std::string::npos) << status;
  EXPECT_NE(status.find("last upload:"), std::string::npos) << status;
}

// Tokens that stopped being good while their batches waited: one of an
// epoch the aggregator no longer takes, one its key does not take (the
// operator's secret changed). Each batch gets a fresh token and counts
// once; the agent's stock of tokens from the old key is replaced.
TEST_F(AgentPassTest, ABatchWhoseTokenIsRefusedGetsAFreshOneAndCountsOnce) {
  AggregatorProcess agg(dir_, FreePort(), TokenFlags(dir_));
  agg.Start();
  auto sums = FillSpool(10, 3);
  Agent agent(Config(agg.port()));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);  // gets tokens, spends one
  ASSERT_TRUE(r.ok() && r->batches_uploaded == 1) << agent.state().tokens_result;
  // Two batches sealed with tokens from the stock, then spoiled.
  for (auto& [k, v] : FillSpool(10, 3, 10)) {
    sums[k].first.Merge(v.first);
    sums[k].second += v.second;
  }
  r = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(r.ok() && r->batches_sealed == 1);
  for (auto& [k, v] : FillSpool(10, 3, 20)) {
    sums[k].first.Merge(v.first);
    sums[k].second += v.second;
  }
  r = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(r.ok() && r->batches_sealed == 1);
  std::vector<std::pair<std::string, wire::Batch>> sealed = OutboxBatches(Config(0).outbox_dir());
  ASSERT_EQ(sealed.size(), 2u);
  sealed[0].second.set_token_epoch(sealed[0].second.token_epoch() - 5);  // expired
  std::string token = sealed[1].second.token();
  token[3] ^= 0x40;
  sealed[1].second.set_token(token);  // not the key's output
  for (const auto& [path, b] : sealed) {
    ASSERT_TRUE(WriteFileDurably(path, b.SerializeAsString()).ok());
  }
  r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->upload_status.ok()) << r->upload_status.ToString();
  EXPECT_EQ(r->batches_restamped, 2);
  EXPECT_EQ(r->batches_uploaded, 2);
  EXPECT_EQ(r->batches_quarantined, 0);
  EXPECT_EQ(FilesIn(Config(0).outbox_dir()), 0u);
  EXPECT_EQ(FilesIn(Config(0).quarantine_dir()), 0u);
  ExpectStored(agg, sums);
}

// A batch the aggregator already counted, sent again once it asks for
// tokens (its answer lost, then the setting changed): the aggregator
// answers it as a duplicate, and the agent does not send it again under a
// fresh token. Counted once.
TEST_F(AgentPassTest, ABatchCountedBeforeTokensWereAskedIsNotCountedTwice) {
  const uint16_t port = FreePort();
  const auto sums = FillSpool(30, 6);
  Agent agent(Config(port));
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(r.ok() && r->batches_sealed == 1);
  std::vector<std::pair<std::string, wire::Batch>> sealed =
      OutboxBatches(Config(port).outbox_dir());
  ASSERT_EQ(sealed.size(), 1u);
  {
    // Taken by an aggregator that asks no token; its answer never came back.
    AggregatorProcess open(dir_, port);
    open.Start();
    HttpsClient c(open.Options());
    StatusOr<HttpReply> sent =
        c.Post("/v1/batches", "application/x-protobuf", sealed[0].second.SerializeAsString());
    ASSERT_TRUE(sent.ok() && sent->status == 200) << (sent.ok() ? sent->body : "");
    open.WaitApplied();
    open.Kill();
  }
  AggregatorProcess agg(dir_, port, TokenFlags(dir_));
  agg.Start();
  r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->upload_status.ok()) << r->upload_status.ToString();
  EXPECT_EQ(r->batches_uploaded, 1);
  EXPECT_EQ(r->batches_restamped, 0) << "a counted batch took a new id";
  EXPECT_EQ(FilesIn(Config(port).outbox_dir()), 0u);
  ExpectStored(agg, sums);
}

TEST_F(AgentPassTest, AStalledServerTimesOutAndKeepsTheBatch) {
  TlsStubServer stub(dir_.File("cert.pem"), dir_.File("key.pem"),
                     [](const std::string&, const std::string&) {
                       StubReply r;
                       r.stall = std::chrono::milliseconds(3000);
                       return r;
                     });
  FillSpool(10, 2);
  AgentConfig c = Config(stub.port());
  c.timeout_ms = 300;
  Agent agent(c);
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->upload_status.ok());
  EXPECT_EQ(r->batches_waiting, 1);
  EXPECT_EQ(agent.state().last_upload_result.rfind("unreachable", 0), 0u)
      << agent.state().last_upload_result;
  EXPECT_GE(stub.requests(), 1);
}

TEST_F(AgentPassTest, PastTheCapTheOldestGoesAndIsCounted) {
  // The aggregator is away; records keep coming; spool + outbox stay under
  // 20 KiB by dropping the oldest, and the next batch reports how many.
  AgentConfig c = Config(FreePort());
  c.batch_bytes = 8192;
  c.cap_bytes = 20 * 1024;
  auto agent = std::make_unique<Agent>(c);
  ASSERT_TRUE(agent->Init().ok());
  int64_t dropped = 0;
  for (int round = 0; round < 4; ++round) {
    FillSpool(60, 30, round * 60);
    auto r = agent->Pass(/*flush=*/true);
    ASSERT_TRUE(r.ok());
    dropped += r->records_dropped;
    uint64_t total = 0;
    for (const auto& e : fs::directory_iterator(c.outbox_dir())) total += e.file_size();
    EXPECT_LE(total, 20u * 1024) << "round " << round;
  }
  EXPECT_GT(dropped, 0);
  // No drop goes unreported: each is either in a surviving batch's counters
  // or still waiting in the state for the next batch.
  auto reported = [&] {
    int64_t n = 0;
    for (const auto& e : fs::directory_iterator(c.outbox_dir())) {
      std::ifstream in(e.path(), std::ios::binary);
      wire::Batch b;
      EXPECT_TRUE(b.ParseFromIstream(&in));
      n += static_cast<int64_t>(b.counters().records_dropped());
    }
    return n;
  };
  EXPECT_EQ(reported() + agent->state().records_dropped, dropped);

  // The next batch sealed carries what waits (a restarted agent: it is kept
  // in the state file), and the count starts again from zero.
  const int64_t waiting = agent->state().records_dropped;
  std::set<std::string> before;
  for (const auto& e : fs::directory_iterator(c.outbox_dir())) before.insert(e.path().string());
  agent.reset();
  c.cap_bytes = 0;
  agent = std::make_unique<Agent>(c);
  ASSERT_TRUE(agent->Init().ok());
  FillSpool(5, 5, 1000);
  ASSERT_TRUE(agent->Pass(/*flush=*/true, /*upload=*/false).ok());
  int carrying = 0;
  for (const auto& e : fs::directory_iterator(c.outbox_dir())) {
    if (before.count(e.path().string()) != 0) continue;
    std::ifstream in(e.path(), std::ios::binary);
    wire::Batch b;
    ASSERT_TRUE(b.ParseFromIstream(&in));
    EXPECT_EQ(static_cast<int64_t>(b.counters().records_dropped()), waiting);
    ++carrying;
  }
  EXPECT_EQ(carrying, 1);
  EXPECT_EQ(agent->state().records_dropped, 0);
  EXPECT_EQ(reported(), dropped);
}

// Runs the runtime counted instead of recording (the spool's .counters)
// reach the next sealed batch exactly once: kept in the agent's state while
// no batch is sealed, zeroed in the spool, then sent and forgotten.
TEST_F(AgentPassTest, RunCountersReachTheNextBatchExactlyOnce) {
  AgentConfig c = Config(FreePort());
  fs::create_directories(c.spool_dir);
  auto write_counters = [&](const std::string& text) {
    std::ofstream(c.spool_dir + "/" FP_COUNTERS_FILE) << text;
  };
  write_counters("refused_no_slot 2\nrefused_load 3\nrefused_rate_cap 5\nmeasured_nothing 7\n");
  Agent agent(c);
  ASSERT_TRUE(agent.Init().ok());
  auto r = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->runs_counted, 17);
  EXPECT_EQ(r->batches_sealed, 0);  // counts alone wait for records
  auto spool_counts = ReadRunCounters(c.spool_dir);
  ASSERT_TRUE(spool_counts.ok());
  EXPECT_EQ(*spool_counts, RunCounts{});
  auto state = ReadAgentState(c.status_path());
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->runs_refused_no_slot, 2);
  EXPECT_EQ(state->runs_refused_rate_cap, 5);
  EXPECT_EQ(state->runs_measured_nothing, 7);

  // More counted meanwhile, and records: one batch carries all of it.
  write_counters("refused_no_slot 0\nrefused_load 0\nrefused_rate_cap 1\nmeasured_nothing 0\n");
  FillSpool(3, 2);
  r = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->batches_sealed, 1);
  auto batches = [&] {
    std::vector<wire::Batch> out;
    for (const auto& e : fs::directory_iterator(c.outbox_dir())) {
      std::ifstream in(e.path(), std::ios::binary);
      out.emplace_back();
      EXPECT_TRUE(out.back().ParseFromIstream(&in));
    }
    return out;
  };
  std::vector<wire::Batch> sealed = batches();
  ASSERT_EQ(sealed.size(), 1u);
  EXPECT_EQ(sealed[0].counters().runs_refused_load_cap(), 5u);  // no slot + load
  EXPECT_EQ(sealed[0].counters().runs_refused_rate_cap(), 6u);
  EXPECT_EQ(sealed[0].counters().runs_measured_nothing(), 7u);
  EXPECT_EQ(sealed[0].counters().runs_instrumented(), 3u);
  EXPECT_EQ(agent.state().runs_refused_rate_cap, 0);
  EXPECT_EQ(agent.state().runs_measured_nothing, 0);

  // Nothing counted twice: the next batch reports none.
  FillSpool(2, 2, 100);
  ASSERT_TRUE(agent.Pass(/*flush=*/true, /*upload=*/false).ok());
  sealed = batches();
  ASSERT_EQ(sealed.size(), 2u);
  uint64_t rate = 0, nothing = 0;
  for (const wire::Batch& b : sealed) {
    rate += b.counters().runs_refused_rate_cap();
    nothing += b.counters().runs_measured_nothing();
  }
  EXPECT_EQ(rate, 6u);
  EXPECT_EQ(nothing, 7u);

  // A counters file the agent cannot use (a directory in its place) stops
  // neither the pass nor its records, and says why.
  fs::remove(c.spool_dir + "/" FP_COUNTERS_FILE);
  fs::create_directory(c.spool_dir + "/" FP_COUNTERS_FILE);
  FillSpool(2, 2, 200);
  r = agent.Pass(/*flush=*/true, /*upload=*/false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->counters_status.ok());
  EXPECT_EQ(r->batches_sealed, 1);
}

// ---------------------------------------------------------------- crashes

class AgentCrashTest : public AgentPassTest {
 protected:
  // The daemon's runs use this settings file: the user consented, and
  // shares the tests' synthetic module (LoopbackAgentConfig).
  void SetUp() override {
    AgentPassTest::SetUp();
    std::ofstream(dir_.File("runtime.conf")) << "consent = yes\nshare_modules = libtest.so.1\n";
  }

  // Runs the agent binary once (--once --flush, small batches so a pass
  // makes several). Returns the wait status.
  int RunAgent(uint16_t port, const std::string& crash_at = "", bool flush = true) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (!crash_at.empty()) setenv("FIELDPROF_AGENT_CRASH_AT", crash_at.c_str(), 1);
      const std::string log = dir_.File("agent.log");
      if (freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
      const std::string p = std::to_string(port), spool = dir_.File("spool"),
                        state = dir_.File("state"), ca = dir_.File("cert.pem"),
                        settings = dir_.File("runtime.conf");
      std::vector<const char*> argv = {
          "fieldprof-agent", "--once",       "--batch_bytes", "8192",        "--server",
          "127.0.0.1",       "--port",       p.c_str(),       "--ca_file",   ca.c_str(),
          "--spool",         spool.c_str(),  "--state_dir",   state.c_str(), "--runtime_settings",
          settings.c_str(),  "--timeout_ms", "5000"};
      if (flush) argv.push_back("--flush");
      argv.push_back(nullptr);
      execv(FIELDPROF_AGENT_BIN, const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  }
  // Runs the agent until a pass ends with nothing left to send.
  void DrainWithAgent(uint16_t port) {
    for (int i = 0; i < 5; ++i) {
      const int st = RunAgent(port);
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return;
    }
    FAIL() << "the agent did not drain the outbox; log:\n" << ReadLog();
  }
  std::string ReadLog() {
    std::ifstream in(dir_.File("agent.log"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

TEST_F(AgentCrashTest, KilledAtEveryStepCountsEveryRecordOnce) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  // Each round: new records, one pass killed at a step, then passes until
  // the outbox is empty. Afterwards the aggregator holds every record once.
  const std::vector<std::string> points = {
      "seal-listed",           "seal-batched",   "seal-spool-removing",
      "seal-spool-removing:7", "upload-sending", "upload-sending:3",
      "upload-acked",          "upload-acked:2", "seal-batched:3"};
  std::map<std::string, std::pair<Histogram, uint64_t>> all;
  int first = 0;
  for (const std::string& point : points) {
    for (auto& [k, v] : FillSpool(60, 30, first)) {
      all[k].first.Merge(v.first);
      all[k].second += v.second;
    }
    first += 60;
    const int st = RunAgent(agg.port(), point);
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        << point << ": the crash point was not reached (status " << st << ")\n"
        << ReadLog();
    DrainWithAgent(agg.port());
    EXPECT_EQ(SpoolFiles(), 0u) << point;
  }
  ExpectStored(agg, all);
}

// Stack records are held across batches for the day's batch (common/
// spool_sealer.h); each seal moves them to a new held file. Killed at
// every step of that, then drained: every stack is counted once, to the
// ns, as every API record is.
TEST_F(AgentCrashTest, KilledWhileItHoldsStacksCountsEveryStackOnce) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  // Stacks of zlib, whose package version dpkg gives (a module no package
  // holds has its stacks dropped).
  const std::string libz = fs::canonical("/lib/x86_64-linux-gnu/libz.so.1").string();
  const std::string build_id = FileBuildId(libz);
  ASSERT_EQ(build_id.size(), 40u);
  std::map<std::string, std::pair<Histogram, uint64_t>> apis;
  std::map<std::string, std::pair<uint64_t, uint64_t>> stacks;  // ns, runs
  std::mt19937_64 rng(77);
  int next = 0;
  auto fill = [&](int n) {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (int i = next; i < next + n; ++i) {
      // API records from 300 symbols fill 8 KiB batches in every round.
      wire::RunRecord run = MakeRun({"s" + std::to_string(i % 300)}, rng, now);
      for (const wire::Record& r : run.records()) {
        auto& [h, runs] = apis[r.key().symbol() + "/" + std::to_string(r.key().metric())];
        h.Merge(HistogramFromWire(r.histogram()));
        ++runs;
      }
      for (int k = 0; k < 3; ++k) {
        const std::string frames = "deflate;+" + std::to_string(1000 + (i * 7 + k) % 16);
        wire::Record* r = run.add_records();
        r->mutable_key()->set_module("libz.so.1");
        r->mutable_key()->set_module_version(build_id);
        r->mutable_key()->set_symbol(frames);
        r->mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
        Histogram h;
        h.Record(1000000 + rng() % 50000000);
        HistogramToWire(h, r->mutable_histogram());
        r->set_runs(1);
        stacks[frames].first += h.sum();
        ++stacks[frames].second;
      }
      WriteRun(dir_.File("spool"), run, i);
    }
    next += n;
  };
  const std::vector<std::string> points = {"seal-listed",         "seal-held",
                                           "seal-batched",        "seal-held-removed",
                                           "seal-held:2",         "seal-spool-removing:9",
                                           "seal-held-removed:2", "upload-acked"};
  for (const std::string& point : points) {
    fill(80);
    const int st = RunAgent(agg.port(), point, /*flush=*/false);
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        << point << ": the crash point was not reached (status " << st << ")\n"
        << ReadLog();
    // A pass that finishes, without flushing: the stacks stay held.
    const int again = RunAgent(agg.port(), "", /*flush=*/false);
    ASSERT_TRUE(WIFEXITED(again) && WEXITSTATUS(again) == 0) << point << "\n" << ReadLog();
    auto held = ListHeld(dir_.File("state/held"));
    ASSERT_TRUE(held.ok());
    EXPECT_EQ(held->size(), 1u) << point;
  }
  // fieldprof status says what is held, and its --pending shows it in the
  // batch a flush would seal.
  const std::string status = StatusText();
  EXPECT_NE(status.find("held stacks:    16 stack records"), std::string::npos) << status;
  EXPECT_NE(StatusText("--pending").find("libz.so.1 deflate;+1000"), std::string::npos);
  DrainWithAgent(agg.port());
  EXPECT_EQ(SpoolFiles(), 0u);
  EXPECT_EQ(ListHeld(dir_.File("state/held"))->size(), 0u);
  EXPECT_EQ(StatusText().find("held stacks:"), std::string::npos);
  ExpectStored(agg, apis);
  HttpsClient c(agg.Options());
  auto r = c.Get("/v1/stacks?module=libz.so.1&limit=100000");
  ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  const nlohmann::json answer = nlohmann::json::parse(r->body);
  std::map<std::string, std::pair<uint64_t, uint64_t>> got;
  for (const nlohmann::json& st : answer.at("stacks")) {
    std::string frames;
    for (const nlohmann::json& f : st.at("frames")) {
      frames += (frames.empty() ? "" : ";") + f.get<std::string>();
    }
    got[frames] = {st.at("ns").get<uint64_t>(), st.at("runs").get<uint64_t>()};
  }
  EXPECT_EQ(got, stacks);
}

TEST_F(AgentCrashTest, KilledAtRandomMomentsCountsEveryRecordOnce) {
  // Not at chosen points: whenever the kill lands (reading the spool,
  // mid-write, mid-request, between the 200 and the deletion).
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  std::map<std::string, std::pair<Histogram, uint64_t>> all;
  std::mt19937 rng(4242);
  // At least 8 rounds, and more (24 at most) until 3 kills have landed
  // inside a pass: where they land depends on this machine's speed.
  int killed = 0, rounds = 0;
  for (int round = 0; round < 24 && (round < 8 || killed < 3); ++round, ++rounds) {
    for (auto& [k, v] : FillSpool(150, 60, round * 150)) {
      all[k].first.Merge(v.first);
      all[k].second += v.second;
    }
    const pid_t agent = fork();
    if (agent == 0) {
      execl(FIELDPROF_AGENT_BIN, "fieldprof-agent", "--once", "--flush", "--batch_bytes", "8192",
            "--server", "127.0.0.1", "--port", std::to_string(agg.port()).c_str(), "--ca_file",
            dir_.File("cert.pem").c_str(), "--spool", dir_.File("spool").c_str(), "--state_dir",
            dir_.File("state").c_str(), "--runtime_settings", dir_.File("runtime.conf").c_str(),
            nullptr);
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 80000));
    kill(agent, SIGKILL);
    int st = 0;
    waitpid(agent, &st, 0);
    killed += WIFSIGNALED(st) ? 1 : 0;
  }
  DrainWithAgent(agg.port());
  EXPECT_GE(killed, 3) << "only " << killed << " of " << rounds
                       << " kills landed before their pass ended: the test proved little";
  ExpectStored(agg, all);
}

TEST_F(AgentCrashTest, TheDaemonUploadsWhatLandsInTheSpoolAndStopsOnSigterm) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  fs::create_directories(dir_.File("spool"));
  // The server as people write it in agent.conf: an address with its port.
  std::ofstream(dir_.File("agent.conf")) << "server = https://127.0.0.1:" << agg.port()
                                         << "/\nca_file = " << dir_.File("cert.pem") << "\n";
  const pid_t daemon = fork();
  if (daemon == 0) {
    const std::string log = dir_.File("agent.log");
    if (freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
    execl(FIELDPROF_AGENT_BIN, "fieldprof-agent", "--config", dir_.File("agent.conf").c_str(),
          "--max_age_s", "1", "--spool", dir_.File("spool").c_str(), "--state_dir",
          dir_.File("state").c_str(), "--runtime_settings", dir_.File("runtime.conf").c_str(),
          nullptr);
    _exit(127);
  }
  // Two waves of records, as programs would leave them; the daemon wakes on
  // each (inotify), and seals the small rest once it is 1 s old.
  std::map<std::string, std::pair<Histogram, uint64_t>> all;
  for (int wave = 0; wave < 2; ++wave) {
    for (auto& [k, v] : FillSpool(40, 10, wave * 40)) {
      all[k].first.Merge(v.first);
      all[k].second += v.second;
    }
    for (int i = 0; i < 300 && SpoolFiles() > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(SpoolFiles(), 0u) << "wave " << wave << "\n" << ReadLog();
  }
  for (int i = 0; i < 300; ++i) {  // and the outbox empties
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_.File("state/outbox")))
      n += e.is_regular_file();
    if (n == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(daemon, SIGTERM);
  int st = 0;
  waitpid(daemon, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << ReadLog();
  ExpectStored(agg, all);
}

// A SIGTERM that lands while a pass is under way stops the daemon as soon
// as that pass ends: it is not left pending until the next wake, which with
// nothing waiting is an hour away. The pass is held at the upload (SIGSTOP)
// while the signal is sent, then let go.
TEST_F(AgentCrashTest, ASigtermDuringAPassStopsTheDaemonWhenThePassEnds) {
  AggregatorProcess agg(dir_, FreePort());
  agg.Start();
  std::map<std::string, std::pair<Histogram, uint64_t>> all;
  for (auto& [k, v] : FillSpool(20, 5)) {
    all[k].first.Merge(v.first);
    all[k].second += v.second;
  }
  const pid_t daemon = fork();
  if (daemon == 0) {
    const std::string log = dir_.File("agent.log");
    if (freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
    setenv("FIELDPROF_AGENT_PAUSE_AT", "upload-sending", 1);
    execl(FIELDPROF_AGENT_BIN, "fieldprof-agent", "--max_age_s", "1", "--server", "127.0.0.1",
          "--port", std::to_string(agg.port()).c_str(), "--ca_file", dir_.File("cert.pem").c_str(),
          "--spool", dir_.File("spool").c_str(), "--state_dir", dir_.File("state").c_str(),
          "--runtime_settings", dir_.File("runtime.conf").c_str(), nullptr);
    _exit(127);
  }
  // The pass runs in a child of the daemon; find it stopped at the point.
  const std::string children =
      "/proc/" + std::to_string(daemon) + "/task/" + std::to_string(daemon) + "/children";
  pid_t pass = 0;
  int st = 0;
  for (int i = 0; i < 600 && pass == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(waitpid(daemon, &st, WNOHANG), 0) << "the daemon ended early\n" << ReadLog();
    pid_t child = 0;
    if (!(std::ifstream(children) >> child)) continue;
    const std::string stat = testing::ProcFile(child, "stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T') {
      pass = child;
    }
  }
  ASSERT_NE(pass, 0) << "no pass stopped at the upload\n" << ReadLog();
  ASSERT_EQ(kill(daemon, SIGTERM), 0);
  ASSERT_EQ(kill(pass, SIGCONT), 0);
  // A hang detector, not a speed bound: the pass ends in well under a
  // second; an hour's sleep would never end here.
  pid_t done = 0;
  for (int i = 0; i < 1200 && done == 0; ++i) {
    done = waitpid(daemon, &st, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (done == 0) {
    kill(daemon, SIGKILL);
    waitpid(daemon, &st, 0);
    FAIL() << "the daemon did not stop after the pass that was under way\n" << ReadLog();
  }
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << ReadLog();
  EXPECT_NE(ReadLog().find("stopping"), std::string::npos) << ReadLog();
  ExpectStored(agg, all);  // the pass that was let go finished its upload
}

TEST_F(AgentCrashTest, AggregatorKilledMidUploadCountsEveryRecordOnce) {
  const uint16_t port = FreePort();
  AggregatorProcess agg(dir_, port);
  std::map<std::string, std::pair<Histogram, uint64_t>> all;
  std::mt19937 rng(99);
  for (int round = 0; round < 4; ++round) {
    for (auto& [k, v] : FillSpool(300, 120, round * 300)) {
      all[k].first.Merge(v.first);
      all[k].second += v.second;
    }
    agg.Start();
    const pid_t agent = fork();
    if (agent == 0) {
      execl(FIELDPROF_AGENT_BIN, "fieldprof-agent", "--once", "--flush", "--batch_bytes", "8192",
            "--server", "127.0.0.1", "--port", std::to_string(port).c_str(), "--ca_file",
            dir_.File("cert.pem").c_str(), "--spool", dir_.File("spool").c_str(), "--state_dir",
            dir_.File("state").c_str(), "--runtime_settings", dir_.File("runtime.conf").c_str(),
            "--timeout_ms", "2000", nullptr);
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 60));
    agg.Kill();  // whatever was in flight: applied or not, acknowledged or not
    int st = 0;
    waitpid(agent, &st, 0);
    agg.Start();
    DrainWithAgent(port);
    agg.Kill();
  }
  agg.Start();
  ExpectStored(agg, all);
}

}  // namespace
}  // namespace fieldprof::agent
