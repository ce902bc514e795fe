// The spool sealer (common/spool/spool_sealer.h) over a real outbox and spool on
// disk: a day's stack records are summed into as few batches as they fill,
// and every record reaches a sealed batch exactly once, whatever the
// passes, ages and batch sizes.
#include "common/spool/spool_sealer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/base/durable_file.h"
#include "common/spool/outbox.h"
#include "common/spool/spool.h"
#include "common/statistics/histogram.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int64_t kDayMs = int64_t{24} * 3600 * 1000;
constexpr int64_t kT0 = 1795000000000;

Platform TestPlatform() {
  Platform p;
  p.os = wire::OS_LINUX;
  p.arch = wire::ARCH_X86_64;
  p.cpu_vendor = wire::CPU_VENDOR_AMD;
  p.cpu_family = 25;
  return p;
}

struct Sum {
  uint64_t count = 0, sum = 0, runs = 0;
  bool operator==(const Sum&) const = default;
};

// An agent's directories and the passes it makes, as agent/daemon/agent.cc does.
class Machine {
 public:
  Machine()
      : outbox_(dir_.File("outbox"), dir_.File("quarantine"), dir_.File("held")),
        spool_(dir_.File("spool")) {
    EXPECT_TRUE(outbox_.Init().ok());
    fs::create_directories(spool_);
  }

  // Run `i`: two API records out of `apis`, and `stacks` stack records out
  // of `distinct` stacks; ends at `ended_ms`.
  void AddRun(int i, int stacks, int distinct, int64_t ended_ms, std::mt19937_64& rng,
              int apis = 2) {
    wire::RunRecord run;
    run.set_schema_version(kSchemaVersion);
    PlatformToWire(TestPlatform(), run.mutable_platform());
    auto add = [&](const std::string& symbol, wire::Metric m, uint64_t scale) {
      wire::Record* r = run.add_records();
      r->mutable_key()->set_module("libsqlite3.so.0");
      r->mutable_key()->set_module_version("3.40.1-2_0123456789abcdef");
      r->mutable_key()->set_symbol(symbol);
      r->mutable_key()->set_metric(m);
      Histogram h;
      const int n = 1 + static_cast<int>(rng() % 20);
      for (int k = 0; k < n; ++k) h.Record(1 + rng() % scale);
      HistogramToWire(h, r->mutable_histogram());
      r->set_runs(1);
      Sum& s = want_[symbol + "/" + std::to_string(m)];
      s.count += h.count();
      s.sum += h.sum();
      ++s.runs;
    };
    add("api" + std::to_string(i % apis), wire::METRIC_WALL_TIME_NS, 100000);
    add("api" + std::to_string((i + 1) % apis), wire::METRIC_ALLOC_BYTES_INCLUSIVE, 100000);
    std::set<int> chosen;
    while (static_cast<int>(chosen.size()) < std::min(stacks, distinct)) {
      chosen.insert(static_cast<int>(rng() % distinct));
    }
    for (int k : chosen) {
      add("sqlite3_step;sqlite3VdbeExec;+" + std::to_string(0x1000 + 16 * k),
          wire::METRIC_STACK_CPU_NS, 50000000);
    }
    run.set_ended_unix_ms(ended_ms);
    char name[64];
    std::snprintf(name, sizeof name, "run-%013lld-%06d.fpr", static_cast<long long>(ended_ms), i);
    ASSERT_TRUE(WriteFileDurably(spool_ + "/" + name, run.SerializeAsString()).ok());
  }

  // One pass; returns how many batches it sealed.
  int Pass(bool flush, int64_t now_ms, size_t batch_bytes, int64_t* deadline = nullptr) {
    int sealed = 0;
    EXPECT_TRUE(outbox_.Recover(spool_).ok());
    SpoolSealer s(batch_bytes, TestPlatform(), [&](SealStep& step) {
      char id[17];
      std::snprintf(id, sizeof id, "batch-%010d", next_id_++);
      const wire::Batch b = step.batch->Seal(id, now_ms, *step.runs);
      EXPECT_TRUE(ValidateBatch(b).ok()) << ValidateBatch(b).ToString();
      if (!larger_held_) {
        EXPECT_LE(b.ByteSizeLong(), batch_bytes);
      }
      ++sealed;
      return outbox_.Seal(OutboxName(now_ms, id), b.SerializeAsString(), spool_, *step.consumed,
                          step.held);
    });
    StatusOr<std::vector<std::string>> held = ListHeld(outbox_.held_dir());
    EXPECT_TRUE(held.ok());
    for (const std::string& name : *held) {
      StatusOr<wire::Batch> h = ReadHeld(outbox_.held_dir() + "/" + name);
      EXPECT_TRUE(h.ok()) << h.status().ToString();
      EXPECT_TRUE(s.AddHeld(name, *h).ok());
    }
    StatusOr<std::vector<SpoolEntry>> files = ListSpool(spool_);
    EXPECT_TRUE(files.ok());
    for (const SpoolEntry& e : *files) {
      StatusOr<wire::RunRecord> run = ReadRunRecord(e.path);
      EXPECT_TRUE(run.ok()) << run.status().ToString();
      EXPECT_TRUE(s.Add(e.name, *run).ok());
    }
    EXPECT_TRUE(s.Finish(flush, now_ms, kDayMs).ok());
    if (deadline != nullptr) *deadline = s.deadline_unix_ms();
    return sealed;
  }

  // Every sealed batch, summed; `stack_batches[symbol]` counts the
  // batches a stack's record is in.
  std::map<std::string, Sum> Sealed(std::map<std::string, int>* stack_batches = nullptr) const {
    std::map<std::string, Sum> got;
    StatusOr<std::vector<OutboxEntry>> list = outbox_.List();
    EXPECT_TRUE(list.ok());
    for (const OutboxEntry& e : *list) {
      wire::Batch b;
      EXPECT_TRUE(b.ParseFromString(*ReadWholeFile(e.path)));
      for (const wire::Record& r : b.records()) {
        Sum& s = got[r.key().symbol() + "/" + std::to_string(r.key().metric())];
        const Histogram h = HistogramFromWire(r.histogram());
        s.count += h.count();
        s.sum += h.sum();
        s.runs += r.runs();
        if (stack_batches != nullptr && r.key().metric() == wire::METRIC_STACK_CPU_NS) {
          ++(*stack_batches)[r.key().symbol()];
        }
      }
    }
    return got;
  }

  size_t Count(const std::string& dir) const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
    return n;
  }
  size_t SpoolFiles() const { return Count(spool_); }
  size_t HeldFiles() const { return Count(outbox_.held_dir()); }
  size_t Batches() const { return outbox_.List()->size(); }

  const std::map<std::string, Sum>& want() const { return want_; }
  bool larger_held_ = false;  // a held file larger than the batch size is sealed as it is
  TempDir dir_;
  Outbox outbox_;
  std::string spool_;

 private:
  std::map<std::string, Sum> want_;
  int next_id_ = 0;
};

// A busy morning: passes every few dozen runs fill small batches with API
// records; the stacks of every run are held, one held file at a time, and
// go in one batch at the end of the day. Every series sums exactly.
TEST(SpoolSealerTest, ADaysStacksAreSummedOnceAcrossItsBatches) {
  Machine m;
  std::mt19937_64 rng(1);
  int i = 0, sealed = 0;
  for (int pass = 0; pass < 12; ++pass) {
    for (int k = 0; k < 50; ++k, ++i) m.AddRun(i, 3, 12, kT0 + i * 60000, rng, 600);
    sealed += m.Pass(/*flush=*/false, kT0 + i * 60000, 8192);
    // What was sealed left the spool; its stacks are in the one held file.
    EXPECT_LE(m.HeldFiles(), 1u) << pass;
    if (pass > 0) {
      EXPECT_EQ(m.HeldFiles(), 1u) << pass;
    }
  }
  ASSERT_GT(sealed, 12) << "the API records filled too few batches for the test to say much";
  std::map<std::string, int> in_batches;
  m.Sealed(&in_batches);
  EXPECT_TRUE(in_batches.empty()) << "stacks were sealed before the day ended";
  // The day ends (the oldest run is a day old): the held stacks are sealed.
  int64_t deadline = 0;
  m.Pass(/*flush=*/false, kT0 + kDayMs - 1, 8192, &deadline);
  EXPECT_EQ(deadline, kT0 + kDayMs);
  EXPECT_EQ(m.HeldFiles(), 1u);
  m.Pass(/*flush=*/false, kT0 + kDayMs, 8192, &deadline);
  EXPECT_EQ(m.HeldFiles(), 0u);
  EXPECT_EQ(m.SpoolFiles(), 0u) << "the last runs go with the held stacks";
  EXPECT_EQ(deadline, 0);
  in_batches.clear();
  EXPECT_EQ(m.Sealed(&in_batches), m.want());
  ASSERT_EQ(in_batches.size(), 12u);
  for (const auto& [stack, batches] : in_batches) EXPECT_EQ(batches, 1) << stack;
}

// More distinct stacks than a batch holds: the held records are sealed on
// their own each time they fill one, and still sum exactly.
TEST(SpoolSealerTest, HeldStacksThatFillABatchAreSealedOnTheirOwn) {
  Machine m;
  std::mt19937_64 rng(2);
  int i = 0;
  for (int pass = 0; pass < 6; ++pass) {
    for (int k = 0; k < 40; ++k, ++i) m.AddRun(i, 6, 2000, kT0 + i * 1000, rng);
    m.Pass(/*flush=*/false, kT0 + i * 1000, 4096);
  }
  std::map<std::string, int> in_batches;
  m.Sealed(&in_batches);
  EXPECT_GT(in_batches.size(), 0u) << "held stacks never filled a batch";
  m.Pass(/*flush=*/true, kT0 + i * 1000, 4096);
  EXPECT_EQ(m.SpoolFiles() + m.HeldFiles(), 0u);
  EXPECT_EQ(m.Sealed(), m.want());
}

// A held file made under a larger batch size than today's: sealed as it
// is, the next records held afresh.
TEST(SpoolSealerTest, AHeldFileLargerThanTodaysBatchesIsSealedAsItIs) {
  Machine m;
  std::mt19937_64 rng(3);
  // API records from many symbols fill 16 KiB batches; the stacks held
  // grow past 2 KiB.
  for (int i = 0; i < 200; ++i) m.AddRun(i, 5, 30, kT0 + i, rng, 1000);
  ASSERT_GT(m.Pass(/*flush=*/false, kT0 + 1000, 16 * 1024), 0);
  ASSERT_EQ(m.HeldFiles(), 1u);
  const size_t held_bytes = fs::file_size(fs::directory_iterator(m.outbox_.held_dir())->path());
  ASSERT_GT(held_bytes, 2048u);
  std::map<std::string, int> in_batches;
  m.Sealed(&in_batches);
  ASSERT_TRUE(in_batches.empty());
  // The batch size falls to 2 KiB: the held file goes as it is, then the
  // next runs' stacks are held afresh.
  m.larger_held_ = true;
  for (int i = 0; i < 20; ++i) m.AddRun(2000 + i, 2, 30, kT0 + 4000 + i, rng);
  m.Pass(/*flush=*/false, kT0 + 5000, 2048);
  m.Sealed(&in_batches);
  EXPECT_FALSE(in_batches.empty());
  m.Pass(/*flush=*/true, kT0 + 6000, 2048);
  EXPECT_EQ(m.SpoolFiles() + m.HeldFiles(), 0u);
  EXPECT_EQ(m.Sealed(), m.want());
}

// The outbox's seal moves the held records with the batch, all or nothing:
// a seal cut short before its batch leaves the old held file and the spool
// as they were; after it, the new held file and no spool file.
TEST(SpoolSealerTest, AnInterruptedSealKeepsEachStackInOnePlace) {
  TempDir dir;
  const std::string spool = dir.File("spool"), box = dir.File("outbox"), held = dir.File("held");
  Outbox outbox(box, dir.File("quarantine"), held);
  ASSERT_TRUE(outbox.Init().ok());
  fs::create_directories(spool);
  for (const char* f : {"a.fpr", "b.fpr"}) std::ofstream(spool + "/" + f) << "x";
  for (const char* f :
       {"stacks-1-old.held", "stacks-2-new.held", "stacks-3-old.held", "stacks-4-new.held"}) {
    std::ofstream(held + "/" + f) << "x";
  }
  // Cut short after the batch: the spool file and the taken held file go.
  ASSERT_TRUE(WriteFileDurably(box + "/0000000000001-aa.consumed",
                               "a.fpr\nheld-taken stacks-1-old.held\nheld-made stacks-2-new.held\n")
                  .ok());
  ASSERT_TRUE(WriteFileDurably(box + "/0000000000001-aa.batch", "batch").ok());
  // Cut short before its batch: the made held file goes, the rest stays.
  ASSERT_TRUE(WriteFileDurably(box + "/0000000000002-bb.consumed",
                               "b.fpr\nheld-taken stacks-3-old.held\nheld-made stacks-4-new.held\n")
                  .ok());
  std::ofstream(held + "/stacks-5-x.held.tmp-7") << "partial";
  // A damaged list naming files outside the directories touches nothing.
  ASSERT_TRUE(WriteFileDurably(box + "/0000000000003-cc.consumed",
                               "held-made ../spool/b.fpr\nheld-made ..\n")
                  .ok());
  ASSERT_TRUE(outbox.Recover(spool).ok());
  EXPECT_FALSE(fs::exists(spool + "/a.fpr"));
  EXPECT_TRUE(fs::exists(spool + "/b.fpr"));
  EXPECT_FALSE(fs::exists(held + "/stacks-1-old.held"));
  EXPECT_TRUE(fs::exists(held + "/stacks-2-new.held"));
  EXPECT_TRUE(fs::exists(held + "/stacks-3-old.held"));
  EXPECT_FALSE(fs::exists(held + "/stacks-4-new.held"));
  EXPECT_FALSE(fs::exists(held + "/stacks-5-x.held.tmp-7"));
  StatusOr<std::vector<std::string>> listed = ListHeld(held);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, (std::vector<std::string>{"stacks-2-new.held", "stacks-3-old.held"}));
}

// A held file that is not one reads as an error naming it, never as records.
TEST(SpoolSealerTest, ADamagedHeldFileIsRefused) {
  TempDir dir;
  std::ofstream(dir.File("garbage.held")) << "not a batch";
  EXPECT_FALSE(ReadHeld(dir.File("garbage.held")).ok());
  wire::Batch b;
  b.set_schema_version(kSchemaVersion);
  PlatformToWire(TestPlatform(), b.mutable_client_platform());
  wire::Record* r = b.add_records();
  r->mutable_key()->set_module("libz.so.1");
  r->mutable_key()->set_module_version("1");
  r->mutable_key()->set_symbol("deflate");
  r->mutable_key()->set_metric(wire::METRIC_WALL_TIME_NS);
  HistogramToWire(Histogram(), r->mutable_histogram());
  ASSERT_TRUE(WriteFileDurably(dir.File("api.held"), b.SerializeAsString()).ok());
  StatusOr<wire::Batch> read = ReadHeld(dir.File("api.held"));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("not a stack"), std::string::npos)
      << read.status().ToString();
  fs::create_directory(dir.File("dir.held"));
  EXPECT_FALSE(ReadHeld(dir.File("dir.held")).ok());
}

}  // namespace
}  // namespace fieldprof
