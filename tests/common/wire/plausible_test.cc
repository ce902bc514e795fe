// The plausibility rules (common/wire/plausible.h): what one machine can have
// measured in a batch's window.
#include "common/wire/plausible.h"

#include <gtest/gtest.h>

#include <string>

#include "common/spool/batcher.h"
#include "common/wire/batch_view.h"
#include "common/wire/platform.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

using testing::IdOf;
using testing::SimpleBatch;

constexpr int64_t kSealed = 1700000000000;

// A batch of one wall-time record: `calls` calls of `ns` each from `runs`
// runs, sealed at kSealed, its runs started `window_ms` before.
wire::Batch Claim(uint64_t runs, uint64_t calls, uint64_t ns, int64_t window_ms) {
  wire::Batch b = SimpleBatch(IdOf(1), "libz.so.1", "deflate", ns, 1);
  Histogram h;
  h.RecordCopies(ns, calls);
  HistogramToWire(h, b.mutable_records(0)->mutable_histogram());
  b.mutable_records(0)->set_runs(runs);
  b.set_created_unix_ms(kSealed);
  if (window_ms >= 0) b.set_window_start_unix_ms(kSealed - window_ms);
  return b;
}

// The rule `b` breaks under `limits` ("" when none), after validation
// passed (the rules assume a valid batch).
std::string Broken(const wire::Batch& b, const PlausibleLimits& limits = {}) {
  BatchView v;
  Status d = DecodeBatchView(b.SerializeAsString(), &v);
  EXPECT_TRUE(d.ok()) << d.ToString();
  Status s = CheckPlausible(v, limits);
  return s.ok() ? "" : std::string(ValidationRule(s));
}

TEST(PlausibleTest, AnAgentsBatchPasses) {
  // Sealed by the agent's builder from two runs that ended a minute apart.
  BatchBuilder builder(kDefaultBatchBytes, DetectPlatform());
  for (int i = 0; i < 2; ++i) {
    wire::RunRecord run;
    run.set_schema_version(kSchemaVersion);
    *run.add_records() = Claim(1, 40, 900, 0).records(0);
    run.set_ended_unix_ms(kSealed - 60000 * (2 - i));
    run.mutable_counters()->set_run_ns(250000000);
    ASSERT_TRUE(builder.TryAdd(run));
  }
  EXPECT_EQ(builder.window_start_unix_ms(), kSealed - 120000 - 250 - 1);
  wire::Batch b = builder.Seal(IdOf(2), kSealed, {});
  EXPECT_EQ(b.window_start_unix_ms(), kSealed - 120000 - 250 - 1);
  EXPECT_EQ(Broken(b), "");
  // The same without a start (an older agent) counts as one minute.
  b.clear_window_start_unix_ms();
  EXPECT_EQ(Broken(b), "");
}

TEST(PlausibleTest, RunsAreBoundedByTheWindow) {
  PlausibleLimits l;
  l.runs_per_minute = 600;  // ten a second
  // A window of 10 s: 100 runs, and one for the rounding.
  EXPECT_EQ(Broken(Claim(101, 101, 1000, 10000), l), "");
  EXPECT_EQ(Broken(Claim(102, 102, 1000, 10000), l), "runs_per_window");
  // No start: one minute.
  EXPECT_EQ(Broken(Claim(601, 601, 1000, -1), l), "");
  EXPECT_EQ(Broken(Claim(602, 602, 1000, -1), l), "runs_per_window");
  // A window shorter than a second counts as one.
  EXPECT_EQ(Broken(Claim(11, 11, 1000, 0), l), "");
  EXPECT_EQ(Broken(Claim(12, 12, 1000, 0), l), "runs_per_window");
  // 0 turns the rules off.
  l.runs_per_minute = 0;
  EXPECT_EQ(Broken(Claim(1000000, 1000000, 1000, 0), l), "");
}

TEST(PlausibleTest, AnOldStartBuysNoMoreThanTheLongestWindow) {
  PlausibleLimits l;
  l.runs_per_minute = 60;
  l.max_window_ms = 3600000;  // an hour: 3,600 runs
  const int64_t year = int64_t{365} * 86400 * 1000;
  EXPECT_EQ(Broken(Claim(3601, 3601, 1000, year), l), "");
  EXPECT_EQ(Broken(Claim(3602, 3602, 1000, year), l), "runs_per_window");
}

TEST(PlausibleTest, CallsAreBoundedByTheCpus) {
  PlausibleLimits l;
  l.cpus = 2;
  // One second (and the second of allowance): 2 CPUs x 2e9 ns / 5 ns.
  const uint64_t most = 2 * 2000000000ull / kMinCallNs;
  EXPECT_EQ(Broken(Claim(1, most, 10, 1000), l), "");
  EXPECT_EQ(Broken(Claim(1, most + 1, 10, 1000), l), "calls_per_window");
}

TEST(PlausibleTest, NoCallIsLongerThanItsWindow) {
  // 10 s window (and a second's allowance for clock steps).
  EXPECT_EQ(Broken(Claim(1, 1, 10900000000ull, 10000)), "");
  EXPECT_EQ(Broken(Claim(1, 1, 11100000000ull, 10000)), "duration_per_window");
  // Without a start: a minute.
  EXPECT_EQ(Broken(Claim(1, 1, 70000000000ull, -1)), "duration_per_window");
  // Bytes are not time.
  wire::Batch bytes = Claim(1, 1, 70000000000ull, -1);
  bytes.mutable_records(0)->mutable_key()->set_metric(wire::METRIC_ALLOC_BYTES_INCLUSIVE);
  EXPECT_EQ(Broken(bytes), "");
}

TEST(PlausibleTest, CallsAddUpToNoMoreThanEveryThread) {
  PlausibleLimits l;
  l.cpus = 1 << 20;  // so that the calls rule is not the one that fails
  // A 1 s window (2 s with the allowance), every thread in the same call
  // the whole time: 2^22 threads x 2e9 ns.
  const uint64_t ns = 2000000000ull;
  EXPECT_EQ(Broken(Claim(1, kMaxThreads, ns, 1000), l), "");
  EXPECT_EQ(Broken(Claim(1, kMaxThreads + 1, ns, 1000), l), "duration_per_window");
}

TEST(PlausibleTest, TheWindowStartsBeforeTheSeal) {
  wire::Batch b = Claim(1, 1, 1000, 0);
  b.set_window_start_unix_ms(kSealed + 1);
  EXPECT_EQ(Broken(b), "window_order");
  // The agent's builder never seals such a batch, even if the clock was
  // set back between the run and the seal.
  BatchBuilder builder(kDefaultBatchBytes, DetectPlatform());
  wire::RunRecord run;
  run.set_schema_version(kSchemaVersion);
  *run.add_records() = Claim(1, 1, 1000, 0).records(0);
  run.set_ended_unix_ms(kSealed + 60000);
  ASSERT_TRUE(builder.TryAdd(run));
  EXPECT_EQ(Broken(builder.Seal(IdOf(3), kSealed, {})), "");
}

}  // namespace
}  // namespace fieldprof
