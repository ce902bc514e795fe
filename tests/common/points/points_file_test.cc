// The points file's batches (common/points/points_format.h), written here by the
// rules of that header and read by common/points/points_file.h: the packed batch
// the recorder writes, and the varint batch older recorders wrote, give the
// same events; a packed batch cut inside an event keeps the ones before.
#include "common/points/points_file.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/points/points_format.h"
#include "common/points/points_stacks.h"
#include "gtest/gtest.h"

namespace fieldprof {
namespace {

namespace pf = points;

struct Ev {
  uint64_t tsc;
  uint32_t site_id;
  uint32_t kind;
  int64_t value;
};

template <typename T>
void Put(std::string* b, T v) {
  b->append(reinterpret_cast<const char*>(&v), sizeof v);
}
void Str(std::string* b, const std::string& s) {
  Put(b, static_cast<uint16_t>(s.size()));
  b->append(s);
}
void Varint(std::string* b, uint64_t v) {
  for (; v >= 0x80; v >>= 7) b->push_back(static_cast<char>(v | 0x80));
  b->push_back(static_cast<char>(v));
}
// `v` in `n` bytes, little-endian.
void Little(std::string* b, uint64_t v, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) b->push_back(static_cast<char>(v >> (8 * i)));
}
uint32_t Bytes(uint64_t v) {
  uint32_t n = 1;
  while (n < 8 && (v >> (8 * n)) != 0) ++n;
  return n;
}
uint64_t Zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

// A file's start: the header, a clock reading at tick 1,000 (ns 0) and
// the sites, numbered as given.
std::string Start(const std::vector<std::pair<uint32_t, std::string>>& sites) {
  std::string b(pf::kMagic, pf::kMagicSize);
  b.push_back(pf::kHeader);
  Put(&b, uint32_t{4242});
  Put(&b, uint64_t{1'700'000'000'000'000'000});
  Str(&b, "prog");
  b.push_back(pf::kClock);
  Put(&b, uint64_t{1000});
  Put(&b, uint64_t{0});
  for (const auto& [id, name] : sites) {
    b.push_back(pf::kSite);
    Put(&b, id);
    Str(&b, "tag");
    Str(&b, name);
  }
  return b;
}

// A batch of `events` of thread `tid`, each event after the previous one.
std::string Batch(char type, const std::vector<Ev>& events, uint32_t tid = 7) {
  std::string b(1, type);
  Put(&b, tid);
  Put(&b, static_cast<uint32_t>(events.size()));
  Put(&b, events.front().tsc);
  uint64_t prev = events.front().tsc;
  for (const Ev& e : events) {
    const uint64_t delta = e.tsc - prev, site = uint64_t{e.site_id} << 2 | e.kind;
    const uint64_t z = Zigzag(e.value);
    prev = e.tsc;
    if (type == pf::kBatch) {
      Varint(&b, delta);
      Varint(&b, site);
      Varint(&b, z);
      continue;
    }
    // Lengths as the header says: 1-8, 1-4, and 0-8 with 7 standing for 8.
    const uint32_t lt = Bytes(delta), ls = Bytes(site), lz = z == 0 ? 0 : Bytes(z);
    const uint32_t code = lz == 8 ? 7 : lz == 7 ? 7 : lz;
    const uint32_t lz_written = code == 7 ? 8 : code;
    b.push_back(static_cast<char>((lt - 1) | (ls - 1) << 3 | code << 5));
    Little(&b, delta, lt);
    Little(&b, site, ls);
    Little(&b, z, lz_written);
  }
  return b;
}

// The end: a clock reading 1e9 ticks and 1e9 ns after the first, so a
// tick is a ns, and the end mark.
std::string End() {
  std::string b(1, pf::kClock);
  Put(&b, uint64_t{1000 + 1'000'000'000});
  Put(&b, uint64_t{1'000'000'000});
  b.push_back(pf::kEnd);
  return b;
}

const std::vector<std::pair<uint32_t, std::string>> kSites = {{0, "a"}, {300, "b"}, {70000, "c"}};

// Ticks 0, 1, 255, 256 and 70,000 apart, one event back in time (an
// earlier TSC on another CPU: its delta wraps); every value length.
const std::vector<Ev> kEvents = {
    {2000, 0, 0, 0},
    {2000, 0, 1, 1},
    {2001, 300, 2, -1},
    {2256, 70000, 0, 128},
    {2512, 0, 0, -129},
    {2500, 300, 1, INT32_MIN},
    {72500, 300, 2, int64_t{1} << 40},
    {72501, 0, 0, (int64_t{1} << 55) - 1},
    {72502, 0, 0, INT64_MAX},
    {72503, 0, 0, INT64_MIN},
};

TEST(PointsFileTest, PackedAndVarintBatchesReadTheSame) {
  for (const char type : {pf::kPackedBatch, pf::kBatch}) {
    SCOPED_TRACE(std::string("batch type ") + type);
    StatusOr<PointsRun> run = DecodePointsRun(Start(kSites) + Batch(type, kEvents) + End());
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_TRUE(run->complete);
    EXPECT_EQ(run->program, "prog");
    ASSERT_EQ(run->events.size(), kEvents.size());
    // Events come by time; the one back in time comes before its elders.
    std::vector<Ev> by_time = kEvents;
    std::stable_sort(by_time.begin(), by_time.end(),
                     [](const Ev& x, const Ev& y) { return x.tsc < y.tsc; });
    for (size_t i = 0; i < by_time.size(); ++i) {
      const PointEvent& got = run->events[i];
      const Ev& want = by_time[i];
      EXPECT_EQ(got.t_ns, static_cast<int64_t>(want.tsc - 1000)) << i;
      EXPECT_EQ(run->sites.at(got.site).name, want.site_id == 0     ? "a"
                                              : want.site_id == 300 ? "b"
                                                                    : "c")
          << i;
      EXPECT_EQ(static_cast<uint32_t>(got.kind), want.kind) << i;
      EXPECT_EQ(got.value, want.value) << i;
      EXPECT_EQ(got.tid, 7u) << i;
    }
  }
}

TEST(PointsFileTest, APackedBatchCutInsideAnEventKeepsTheWholeOnes) {
  // The TSC rate, as `points record` gives it, turns ticks into ns
  // without a second clock reading.
  std::string start = Start(kSites);
  start.push_back(pf::kRate);
  Put(&start, uint64_t{1'000'000'000});
  const std::string batch = Batch(pf::kPackedBatch, kEvents);
  // The last event is INT64_MIN: a control byte, 1 + 1 + 8 bytes of fields.
  for (size_t cut = 1; cut <= 10; ++cut) {
    SCOPED_TRACE("cut " + std::to_string(cut) + " bytes short");
    StatusOr<PointsRun> run = DecodePointsRun(start + batch.substr(0, batch.size() - cut));
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_FALSE(run->complete);
    EXPECT_EQ(run->events.size(), kEvents.size() - 1);
  }
}

// --stacks: a kind-3 event names the stack of the thread's event `back`
// slots before it (its value's low byte), across batches and with another
// thread's batch between; the rest of its value, the ticks taking the
// stack paused that thread, comes out of the thread's later events, not of
// a signal handler's point made meanwhile, nor another thread's. A stack
// whose record is missing (a file cut) leaves its event without one.
TEST(PointsFileTest, StacksGoToTheirEventsAndTheirPausesComeOut) {
  const uint32_t kStack = pf::kStackKind;
  const auto stack_value = [](int64_t pause, int64_t back) { return pause << 8 | back; };
  std::string b = Start(kSites);
  b.push_back(pf::kModule);
  Put(&b, uint64_t{0x1000});
  Put(&b, uint64_t{0x2000});
  Put(&b, uint64_t{0x3000});
  Str(&b, "/usr/bin/prog");
  for (const uint32_t id : {1u, 2u}) {
    b.push_back(pf::kStack);
    Put(&b, id);
    Put(&b, uint16_t{2});
    Put(&b, uint64_t{0x2100 + id});
    Put(&b, uint64_t{0x2200});
  }
  // Thread 7: a point with stack 1 (500 ticks to take), during which a
  // handler's point came (so the stack is 2 back); a begin with stack 2
  // (300 ticks); its end; thread 8's point in between; and thread 7's last
  // point with stack 9, which the file never names.
  b += Batch(pf::kPackedBatch, {{2000, 0, 0, 0},
                                {2100, 70000, 0, 0},
                                {2000, 1, kStack, stack_value(500, 2)},
                                {3000, 300, 1, 0}});
  b += Batch(pf::kPackedBatch, {{2600, 70000, 0, 0}}, 8);
  b += Batch(pf::kPackedBatch, {{3000, 2, kStack, stack_value(300, 1)},
                                {4000, 300, 2, 0},
                                {5000, 0, 0, 0},
                                {5000, 9, kStack, stack_value(40, 1)}});
  // Thread 7 had 3 events whose stacks its budget had no time for.
  b.push_back(pf::kStackless);
  Put(&b, uint32_t{7});
  Put(&b, uint64_t{3});
  StatusOr<PointsRun> run = DecodePointsRun(b + End());
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->modules.size(), 1u);
  EXPECT_EQ(run->modules[0].path, "/usr/bin/prog");
  EXPECT_EQ(run->modules[0].lo, 0x2000u);
  ASSERT_EQ(run->stacks.size(), 2u);
  EXPECT_EQ(run->stacks.at(2), (std::vector<uint64_t>{0x2102, 0x2200}));
  ASSERT_EQ(run->events.size(), 6u);  // kind 3 is no event
  struct Want {
    int64_t t_ns;
    uint32_t tid, stack;
    PointKind kind;
  };
  // Ticks less 1,000, a tick a ns; thread 7's events after the handler's
  // point less 500, after the begin less 300 more.
  std::vector<Want> expected = {{1000, 7, 1, PointKind::kPoint}, {1100, 7, 0, PointKind::kPoint},
                                {1500, 7, 2, PointKind::kBegin}, {2200, 7, 0, PointKind::kEnd},
                                {3200, 7, 0, PointKind::kPoint}, {1600, 8, 0, PointKind::kPoint}};
  std::vector<Want> got;
  for (const PointEvent& e : run->events) got.push_back({e.t_ns, e.tid, e.stack, e.kind});
  const auto by_thread = [](const Want& x, const Want& y) {
    return std::tie(x.tid, x.t_ns) < std::tie(y.tid, y.t_ns);
  };
  std::sort(got.begin(), got.end(), by_thread);
  std::sort(expected.begin(), expected.end(), by_thread);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].t_ns, expected[i].t_ns) << i;
    EXPECT_EQ(got[i].tid, expected[i].tid) << i;
    EXPECT_EQ(got[i].stack, expected[i].stack) << i;
    EXPECT_EQ(got[i].kind, expected[i].kind) << i;
  }
  EXPECT_EQ(run->stack_ns, 840u);  // 500 + 300 + 40 ticks
  EXPECT_EQ(run->stackless, 3u);
  EXPECT_TRUE(run->complete);
}

// Names the command appends after the end ('N'): read back by return
// address; the scan of a file with stacks is finished only once they
// came, and a frame they do not name reads module+offset.
TEST(PointsFileTest, TheStacksNamesAfterTheEndAreReadAndFinishTheScan) {
  std::string b = Start(kSites);
  b.push_back(pf::kModule);
  Put(&b, uint64_t{0x1000});
  Put(&b, uint64_t{0x2000});
  Put(&b, uint64_t{0x3000});
  Str(&b, "/usr/lib/libprog.so.1");
  b.push_back(pf::kStack);
  Put(&b, uint32_t{1});
  Put(&b, uint16_t{2});
  Put(&b, uint64_t{0x2101});
  Put(&b, uint64_t{0x2201});
  b += Batch(pf::kPackedBatch, {{2000, 0, 0, 0}, {2000, 1, pf::kStackKind, 1}});
  b += End();
  std::string names(1, pf::kNames);
  Put(&names, uint32_t{1});
  Put(&names, uint64_t{0x2101});
  Str(&names, "parse_config");

  // Before the names: complete, not finished.
  PointsScan scan;
  ASSERT_TRUE(ScanPointsRun(b, &scan).ok());
  EXPECT_TRUE(scan.complete);
  EXPECT_TRUE(scan.stacks);
  EXPECT_FALSE(scan.Finished());
  // Half the names record: still not (whole records only).
  const size_t before = scan.offset;
  ASSERT_TRUE(ScanPointsRun(names.substr(0, 7), &scan).ok());
  EXPECT_FALSE(scan.Finished());
  EXPECT_EQ(scan.offset, before);
  ASSERT_TRUE(ScanPointsRun(names, &scan).ok());
  EXPECT_TRUE(scan.Finished());

  StatusOr<PointsRun> run = DecodePointsRun(b + names);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_TRUE(run->complete);
  EXPECT_EQ(run->frame_names, (std::map<uint64_t, std::string>{{0x2101, "parse_config"}}));
  const NamedStacks named = NameStacksAsRecorded(*run);
  // Outermost first; 0x2201 is a return address: its call at 0x2200,
  // 0x1200 into the module.
  EXPECT_EQ(named.at(1), (std::vector<std::string>{"libprog.so.1+0x1200", "parse_config"}));

  // Anything but names after the end is not read; a file with no stacks
  // is finished at its end.
  std::string junk = b + names;
  junk.push_back(pf::kLost);
  Put(&junk, uint32_t{7});
  Put(&junk, uint64_t{5});
  StatusOr<PointsRun> cut = DecodePointsRun(junk);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->lost, 0u);
  PointsScan plain;
  ASSERT_TRUE(
      ScanPointsRun(Start(kSites) + Batch(pf::kPackedBatch, {{2000, 0, 0, 0}}) + End(), &plain)
          .ok());
  EXPECT_TRUE(plain.Finished());
}

// A function placed with --at: its begin and end go into the ring as the
// call returns, after the stacks taken inside it, the begin with the TSC
// of the call's start. Each event is moved back by the pauses that ended
// before its time, not by those before it in the ring: the call lasts as
// long as it ran less the pause inside it, and its own stack's pause
// moves only what came after.
TEST(PointsFileTest, APlacedCallIsShortenedByThePausesInsideItOnly) {
  const uint32_t kStack = pf::kStackKind;
  std::string b = Start(kSites);
  for (const uint32_t id : {1u, 2u}) {
    b.push_back(pf::kStack);
    Put(&b, id);
    Put(&b, uint16_t{1});
    Put(&b, uint64_t{0x2100 + id});
  }
  // Thread 7: a point at 2000 with stack 1 (a pause of 500); the placed
  // call's begin at 1500 and end at 4000, then its stack (100 ticks); a
  // point at 5000.
  b += Batch(pf::kPackedBatch, {{2000, 0, 0, 0},
                                {2000, 1, kStack, 500 << 8 | 1},
                                {1500, 300, 1, 0},
                                {4000, 300, 2, 0},
                                {4000, 2, kStack, 100 << 8 | 2},
                                {5000, 0, 0, 0}});
  StatusOr<PointsRun> run = DecodePointsRun(b + End());
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->events.size(), 4u);
  // In time order, ticks less 1,000.
  EXPECT_EQ(run->events[0].t_ns, 500);  // the begin: no pause ended before it
  EXPECT_EQ(run->events[0].kind, PointKind::kBegin);
  EXPECT_EQ(run->events[0].stack, 2u);
  EXPECT_EQ(run->events[1].t_ns, 1000);  // the first point: its own pause comes after it
  EXPECT_EQ(run->events[1].stack, 1u);
  EXPECT_EQ(run->events[2].t_ns, 2500);  // the end: 500 less
  EXPECT_EQ(run->events[2].kind, PointKind::kEnd);
  EXPECT_EQ(run->events[3].t_ns, 3400);  // the last point: 600 less
  EXPECT_EQ(run->stack_ns, 600u);
}

// fieldprof's own frames (the runtime's allocation counter, say, between
// the program's call and malloc) are left out of the stacks. Stacks that
// are then the same are one, and a stack of nothing else is none. A module
// whose name only starts as the runtime's (a test library) is the
// program's.
TEST(PointsFileTest, FieldprofsOwnFramesAreLeftOutOfTheStacks) {
  std::string b = Start(kSites);
  const auto module = [&b](uint64_t lo, uint64_t hi, const std::string& path) {
    b.push_back(pf::kModule);
    Put(&b, uint64_t{0});
    Put(&b, lo);
    Put(&b, hi);
    Str(&b, path);
  };
  module(0x1000, 0x2000, "/usr/bin/prog");
  module(0x5000, 0x6000, std::string("/usr/lib/fieldprof/") + pf::kRuntimeLibName);
  module(0x7000, 0x8000, "/tmp/build/libfieldprof-front.so");
  module(0x9000, 0xa000, "/tmp/build/libfieldprof_testlib.so");
  const std::vector<std::vector<uint64_t>> stacks = {
      {0x1100, 0x1200},                  // 1: the program's
      {0x5100, 0x1100, 0x7100, 0x1200},  // 2: the same, through the runtime
      {0x5100, 0x7200},                  // 3: the runtime's only
      {0x9100, 0x1200},                  // 4: a test library's
  };
  for (uint32_t id = 1; id <= stacks.size(); ++id) {
    b.push_back(pf::kStack);
    Put(&b, id);
    Put(&b, static_cast<uint16_t>(stacks[id - 1].size()));
    for (uint64_t ip : stacks[id - 1]) Put(&b, ip);
  }
  const uint32_t kStack = pf::kStackKind;
  std::vector<Ev> events;
  for (uint32_t id = 1; id <= stacks.size(); ++id) {
    events.push_back({1000 + id * 10, 0, 0, 0});
    events.push_back({1000 + id * 10, id, kStack, 1});
  }
  b += Batch(pf::kPackedBatch, events);
  StatusOr<PointsRun> run = DecodePointsRun(b + End());
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->stacks.size(), 2u);
  EXPECT_EQ(run->stacks.at(1), (std::vector<uint64_t>{0x1100, 0x1200}));
  EXPECT_EQ(run->stacks.at(4), (std::vector<uint64_t>{0x9100, 0x1200}));
  ASSERT_EQ(run->events.size(), 4u);
  EXPECT_EQ(run->events[0].stack, 1u);
  EXPECT_EQ(run->events[1].stack, 1u);  // stack 2 is stack 1 without the runtime
  EXPECT_EQ(run->events[2].stack, 0u);  // nothing of the program's left
  EXPECT_EQ(run->events[3].stack, 4u);
}

TEST(PointsFileTest, ControlBytesRoundTrip) {
  for (uint32_t lt = 1; lt <= 8; ++lt) {
    for (uint32_t ls = 1; ls <= 4; ++ls) {
      for (uint32_t lz = 0; lz <= 8; ++lz) {
        if (lz == 7) continue;  // PackedValueBytes makes it 8
        const pf::PackedLengths l = pf::UnpackControl(pf::PackedControl(lt, ls, lz));
        EXPECT_EQ(l.tsc, lt);
        EXPECT_EQ(l.site, ls);
        EXPECT_EQ(l.value, lz);
      }
    }
  }
  EXPECT_EQ(pf::BytesFor(0), 1u);
  EXPECT_EQ(pf::BytesFor(255), 1u);
  EXPECT_EQ(pf::BytesFor(256), 2u);
  EXPECT_EQ(pf::BytesFor(~uint64_t{0}), 8u);
  EXPECT_EQ(pf::PackedValueBytes(0), 0u);
  EXPECT_EQ(pf::PackedValueBytes(1), 1u);
  EXPECT_EQ(pf::PackedValueBytes(uint64_t{1} << 48), 7u + 1);  // 7 bytes go as 8
  EXPECT_EQ(pf::PackedValueBytes(uint64_t{1} << 47), 6u);
}

// Millions of events of 4 threads, a batch of each per drain round, the
// rounds overlapping in time, ties within and across threads: read back
// in the order std::stable_sort gives the file's events by time (ties in
// file order), past the reader's chunks of 2^20 events. `spread_out`:
// each thread's events in batches after the other threads', every
// thread's spanning the whole time, so that a chunk's merge with those
// before it reaches back over most of them.
void ExpectStableOrderByTime(bool spread_out) {
  struct Made {
    uint64_t tsc;
    int64_t id;
  };
  std::vector<Made> in_file;
  std::string b = Start(kSites);
  // 3,000 events a batch, so that the reader's chunks end mid-round.
  constexpr int kThreads = 4, kRounds = 200, kPerBatch = 3000;
  std::mt19937_64 random(42);
  std::vector<std::vector<Ev>> per_thread(kThreads);
  for (int round = 0; round < kRounds; ++round) {
    for (int t = 0; t < kThreads; ++t) {
      // A thread's events in its batch: 0-2 ticks apart (ties), some
      // 3,000 ticks in all, from a round's start 2,000 ticks after the one
      // before: each batch overlaps the others of its round and the next.
      uint64_t tsc = 2000 + uint64_t{static_cast<uint64_t>(round)} * 2000 + random() % 1000;
      for (int i = 0; i < kPerBatch; ++i) {
        tsc += random() % 3;
        per_thread[t].push_back({tsc, 0, 0, static_cast<int64_t>(per_thread[t].size() * 8 + t)});
      }
      if (spread_out) continue;
      const std::vector<Ev> batch(per_thread[t].end() - kPerBatch, per_thread[t].end());
      b += Batch(pf::kPackedBatch, batch, static_cast<uint32_t>(t + 1));
      for (const Ev& e : batch) in_file.push_back({e.tsc, e.value});
    }
  }
  if (spread_out) {
    for (int t = 0; t < kThreads; ++t) {
      for (size_t at = 0; at < per_thread[t].size(); at += pf::kMaxBatch) {
        const std::vector<Ev> batch(
            per_thread[t].begin() + static_cast<long>(at),
            per_thread[t].begin() +
                static_cast<long>(std::min(at + pf::kMaxBatch, per_thread[t].size())));
        b += Batch(pf::kPackedBatch, batch, static_cast<uint32_t>(t + 1));
        for (const Ev& e : batch) in_file.push_back({e.tsc, e.value});
      }
    }
  }
  b += End();
  std::stable_sort(in_file.begin(), in_file.end(),
                   [](const Made& x, const Made& y) { return x.tsc < y.tsc; });
  StatusOr<PointsRun> run = DecodePointsRun(b);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->events.size(), in_file.size());
  ASSERT_GT(in_file.size(), size_t{2} << 20);  // more than two of the reader's chunks
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < in_file.size(); ++i) {
    const PointEvent& e = run->events[i];
    if (e.value != in_file[i].id || e.t_ns != static_cast<int64_t>(in_file[i].tsc - 1000)) {
      if (differ++ == 0) first = i;
    }
  }
  EXPECT_EQ(differ, 0u) << "first at " << first;
}

TEST(PointsFileTest, ManyThreadsEventsComeByTimeTiesInFileOrder) { ExpectStableOrderByTime(false); }

TEST(PointsFileTest, EventsOverlappingEverywhereStillComeByTime) { ExpectStableOrderByTime(true); }

}  // namespace
}  // namespace fieldprof
