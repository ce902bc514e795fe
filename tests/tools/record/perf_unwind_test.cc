// The outside sampler's switch records made into waits (perf_unwind.cc,
// raw_dir_reader.cc): a thread's switch off the CPU that was no
// preemption is a wait, ended by its next switch onto a CPU. When the
// kernel's record of a switch between two others is missing (a full ring
// whose loss it never got to tell), the wait left without an end is
// counted as a switch record lost, so that the report says it is
// incomplete rather than showing more waits begun than ended.
#include <linux/perf_event.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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

struct Told {
  uint64_t to_idle = 0, from_idle = 0, switches_lost = 0, preemptions = 0;
};

// The recording made of one CPU's ring written from `script`: records in
// its order, a microsecond apart, each a word: `in`, `wait` or `preempt`
// (a switch), `fork` or `exit` (a thread's start or end), of the main
// thread, or with `:N` of thread kPid + N ("in:1").
Told Unwound(const std::string& script) {
  std::string ring;
  uint64_t time = 0;
  std::istringstream words(script);
  for (std::string word; words >> word;) {
    time += 1000;
    const size_t colon = word.find(':');
    const uint32_t tid =
        kPid + (colon == std::string::npos ? 0 : std::stoul(word.substr(colon + 1)));
    const std::string what = word.substr(0, colon);
    if (what == "in" || what == "wait" || what == "preempt") {
      ring += SwitchRecord(tid, time,
                           what == "in"     ? Switch::kIn
                           : what == "wait" ? Switch::kWait
                                            : Switch::kPreempt);
    } else {
      EXPECT_TRUE(what == "fork" || what == "exit") << word;
      ring += TaskRecord(what == "fork" ? PERF_RECORD_FORK : PERF_RECORD_EXIT, tid, time);
    }
  }
  TempDir dir;
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
  const Told t = Unwound("in wait in preempt in wait in exit");
  EXPECT_EQ(t.to_idle, 2u);
  EXPECT_EQ(t.from_idle, 2u);
  EXPECT_EQ(t.preemptions, 1u);
  EXPECT_EQ(t.switches_lost, 0u);
}

// A switch in missing after the second wait: that wait has no end, and
// the recording says a record was lost. So too a missing switch off (two
// switches in a row onto the CPU), which loses a wait instead.
TEST(PerfUnwindTest, AMissingSwitchIsCountedAsLost) {
  const Told in_missing = Unwound("in wait in wait wait in exit");
  EXPECT_EQ(in_missing.to_idle, 3u);
  EXPECT_EQ(in_missing.from_idle, 2u);
  EXPECT_EQ(in_missing.switches_lost, 1u);
  const Told out_missing = Unwound("in wait in in wait in exit");
  EXPECT_EQ(out_missing.to_idle, 2u);
  EXPECT_EQ(out_missing.from_idle, 2u);
  EXPECT_EQ(out_missing.switches_lost, 1u);
}

// A switch off that the thread's exit follows is its last, as it ends: no
// wait, and nothing lost; nor is one recorded after the exit.
TEST(PerfUnwindTest, TheSwitchOffBeforeTheExitIsNoWait) {
  const Told t = Unwound("in wait in wait exit wait");
  EXPECT_EQ(t.to_idle, 1u);
  EXPECT_EQ(t.from_idle, 1u);
  EXPECT_EQ(t.switches_lost, 0u);
}

// A thread that ends on the CPU, and a new one given its id: the new
// thread's first switch onto a CPU follows the old one's last, and is no
// gap.
TEST(PerfUnwindTest, AThreadIdUsedAgainStartsAfresh) {
  const Told t = Unwound("in fork:1 in:1 wait:1 in:1 exit:1 fork:1 in:1 wait:1 in:1 exit");
  EXPECT_EQ(t.to_idle, 2u);
  EXPECT_EQ(t.from_idle, 2u);
  EXPECT_EQ(t.switches_lost, 0u);
}

}  // namespace
}  // namespace fieldprof::tools
