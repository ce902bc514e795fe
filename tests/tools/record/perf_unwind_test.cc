// The outside sampler's switch records made into waits (perf_unwind.cc,
// raw_dir_reader.cc): a thread's switch off the CPU that was no
// preemption is a wait, ended by its next switch onto a CPU. When the
// kernel's record of a switch between two others is missing (a full ring
// whose loss it never got to tell), the wait left without an end is
// counted as a switch record lost, so that the report says it is
// incomplete rather than showing more waits begun than ended.
#include <linux/perf_event.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"
#include "tools/record/perf_sampler.h"
#include "tools/record/raw_dir_reader.h"

namespace fieldprof::tools {
namespace {

using testing::TempDir;

constexpr uint32_t kPid = 4242;

template <typename T>
void PutBytes(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

// What sample_id_all puts at the end of each record here: pid, tid, time,
// cpu, reserved.
void PutTrailer(std::string* out, uint32_t tid, uint64_t time) {
  PutBytes(out, kPid);
  PutBytes(out, tid);
  PutBytes(out, time);
  PutBytes(out, uint32_t{0});
  PutBytes(out, uint32_t{0});
}

void PutHeader(std::string* out, uint32_t type, uint16_t misc, size_t body) {
  perf_event_header h{};
  h.type = type;
  h.misc = misc;
  h.size = static_cast<uint16_t>(sizeof h + body + 24);
  PutBytes(out, h);
}

// A thread's switch record (a per-thread one, as with inherited events):
// onto the CPU, off it waiting, or off it preempted.
enum class Switch { kIn, kWait, kPreempt };
std::string SwitchRecord(uint32_t tid, uint64_t time, Switch s) {
  const uint16_t misc = s == Switch::kIn ? 0
                        : s == Switch::kWait
                            ? PERF_RECORD_MISC_SWITCH_OUT
                            : PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT;
  std::string out;
  PutHeader(&out, PERF_RECORD_SWITCH, misc, 0);
  PutTrailer(&out, tid, time);
  return out;
}

// A thread's start (FORK) or end (EXIT) in the process: pid, ppid, tid,
// ptid, time. The main thread's exit ends the process's image.
std::string TaskRecord(uint32_t type, uint32_t tid, uint64_t time) {
  std::string out;
  PutHeader(&out, type, 0, 4 * 4 + 8);
  PutBytes(&out, kPid);
  PutBytes(&out, tid == kPid ? uint32_t{1} : kPid);
  PutBytes(&out, tid);
  PutBytes(&out, tid == kPid ? uint32_t{1} : kPid);
  PutBytes(&out, time);
  PutTrailer(&out, tid, time);
  return out;
}

std::string ExitRecord(uint64_t time) { return TaskRecord(PERF_RECORD_EXIT, kPid, time); }

struct Told {
  uint64_t to_idle = 0, from_idle = 0, switches_lost = 0, preemptions = 0;
};

// The recording made of one CPU's ring holding `records`.
Told Unwound(const std::vector<std::string>& records) {
  TempDir dir;
  std::string ring;
  for (const std::string& r : records) ring += r;
  std::ofstream(dir.File("cpu0.perf"), std::ios::binary) << ring;
  std::filesystem::create_directory(dir.File("raw"));
  EXPECT_TRUE(UnwindPerfSamples(dir.path(), dir.File("raw"), 999, false, /*idle=*/true).ok());
  StatusOr<Recording> r = RecordingFromRawDir(dir.File("raw"), {});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  Told told;
  if (!r.ok()) return told;
  told.switches_lost = r->switches_lost;
  told.preemptions = r->preemptions;
  for (const uint32_t type : r->idle_tree.types()) {
    const IdleDirection d = r->idle_types[type].direction;
    told.to_idle += d == IdleDirection::kToIdle ? 1 : 0;
    told.from_idle += d == IdleDirection::kFromIdle ? 1 : 0;
  }
  return told;
}

TEST(PerfUnwindTest, EachWaitEndsAtTheThreadsNextSwitchIn) {
  const Told t =
      Unwound({SwitchRecord(kPid, 1000, Switch::kIn), SwitchRecord(kPid, 2000, Switch::kWait),
               SwitchRecord(kPid, 3000, Switch::kIn), SwitchRecord(kPid, 4000, Switch::kPreempt),
               SwitchRecord(kPid, 5000, Switch::kIn), SwitchRecord(kPid, 6000, Switch::kWait),
               SwitchRecord(kPid, 7000, Switch::kIn), ExitRecord(8000)});
  EXPECT_EQ(t.to_idle, 2u);
  EXPECT_EQ(t.from_idle, 2u);
  EXPECT_EQ(t.preemptions, 1u);
  EXPECT_EQ(t.switches_lost, 0u);
}

// The switch in at about 5000 is missing: the wait at 4000 has no end, and
// the recording says a record was lost. So too a missing switch off
// (two switches in a row onto the CPU).
TEST(PerfUnwindTest, AMissingSwitchIsCountedAsLost) {
  const Told in_missing =
      Unwound({SwitchRecord(kPid, 1000, Switch::kIn), SwitchRecord(kPid, 2000, Switch::kWait),
               SwitchRecord(kPid, 3000, Switch::kIn), SwitchRecord(kPid, 4000, Switch::kWait),
               SwitchRecord(kPid, 6000, Switch::kWait), SwitchRecord(kPid, 7000, Switch::kIn),
               ExitRecord(8000)});
  EXPECT_EQ(in_missing.to_idle, 3u);
  EXPECT_EQ(in_missing.from_idle, 2u);
  EXPECT_EQ(in_missing.switches_lost, 1u);
  const Told out_missing =
      Unwound({SwitchRecord(kPid, 1000, Switch::kIn), SwitchRecord(kPid, 2000, Switch::kWait),
               SwitchRecord(kPid, 3000, Switch::kIn), SwitchRecord(kPid, 5000, Switch::kIn),
               SwitchRecord(kPid, 6000, Switch::kWait), SwitchRecord(kPid, 7000, Switch::kIn),
               ExitRecord(8000)});
  EXPECT_EQ(out_missing.to_idle, 2u);
  EXPECT_EQ(out_missing.from_idle, 2u);
  EXPECT_EQ(out_missing.switches_lost, 1u);
}

// A switch off that the thread's exit follows is its last, as it ends: no
// wait, and nothing lost.
TEST(PerfUnwindTest, TheSwitchOffBeforeTheExitIsNoWait) {
  const Told t =
      Unwound({SwitchRecord(kPid, 1000, Switch::kIn), SwitchRecord(kPid, 2000, Switch::kWait),
               SwitchRecord(kPid, 3000, Switch::kIn), SwitchRecord(kPid, 4000, Switch::kWait),
               ExitRecord(5000), SwitchRecord(kPid, 6000, Switch::kWait)});
  EXPECT_EQ(t.to_idle, 1u);
  EXPECT_EQ(t.from_idle, 1u);
  EXPECT_EQ(t.switches_lost, 0u);
}

// A thread that ends on the CPU, and a new one given its id: the new
// thread's first switch onto a CPU follows the old one's last, and is no
// gap.
TEST(PerfUnwindTest, AThreadIdUsedAgainStartsAfresh) {
  constexpr uint32_t kTid = kPid + 1;
  const Told t =
      Unwound({SwitchRecord(kPid, 500, Switch::kIn), TaskRecord(PERF_RECORD_FORK, kTid, 900),
               SwitchRecord(kTid, 1000, Switch::kIn), SwitchRecord(kTid, 2000, Switch::kWait),
               SwitchRecord(kTid, 3000, Switch::kIn), TaskRecord(PERF_RECORD_EXIT, kTid, 4000),
               TaskRecord(PERF_RECORD_FORK, kTid, 5000), SwitchRecord(kTid, 6000, Switch::kIn),
               SwitchRecord(kTid, 7000, Switch::kWait), SwitchRecord(kTid, 8000, Switch::kIn),
               ExitRecord(9000)});
  EXPECT_EQ(t.to_idle, 2u);
  EXPECT_EQ(t.from_idle, 2u);
  EXPECT_EQ(t.switches_lost, 0u);
}

}  // namespace
}  // namespace fieldprof::tools
