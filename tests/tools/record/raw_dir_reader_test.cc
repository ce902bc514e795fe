// The raw directory read as it is written (raw_dir_reader.h): two
// processes' files appended in chunks that cut records in two, read
// between the chunks with a watermark that trails the samples, make the
// recording the whole files make at once; the time tree grew with the
// samples. A sample that comes behind the watermark, and one read before
// the module that names it, are caught.
#include "tools/record/raw_dir_reader.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/stacks/sampler_format.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace fieldprof::tools {
namespace {

using testing::TempDir;

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string Header(uint32_t pid, uint64_t start_ns) {
  raw::FileHeader h{};
  std::memcpy(h.magic, raw::kMagic, sizeof h.magic);
  h.pid = pid;
  h.hz = 999;
  h.start_ns = start_ns;
  h.source = raw::kTaskClock;
  std::string out;
  Put(&out, h);
  return out;
}

// This test's own executable as the module: its addresses get names.
std::string Module(uint64_t lo, uint64_t hi) {
  static const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  raw::ModuleHeader m{};
  m.bias = 0;
  m.lo = lo;
  m.hi = hi;
  m.path_len = static_cast<uint16_t>(self.size());
  std::string out = "M";
  Put(&out, m);
  return out + self;
}

std::string SampleRecord(uint64_t time, uint32_t tid, const std::vector<uint64_t>& ips) {
  raw::SampleHeader s{};
  s.time_ns = time;
  s.tid = tid;
  s.depth = static_cast<uint16_t>(ips.size());
  s.weight_ns = 1000 + time % 7;
  std::string out = "S";
  Put(&out, s);
  for (uint64_t ip : ips) Put(&out, ip);
  return out;
}

void Append(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::app | std::ios::binary) << bytes;
}

// Samples per (tid, stack by name), with the time they stand for: what a
// recording says, whatever its ids.
std::map<std::pair<uint32_t, std::string>, std::pair<uint64_t, uint64_t>> ByName(
    const Recording& r) {
  std::map<std::pair<uint32_t, std::string>, std::pair<uint64_t, uint64_t>> out;
  for (const auto& [type, t] : SampleTotalsByType(r, 0, UINT64_MAX)) {
    const auto [thread, stack] = r.types[type];
    std::string names;
    for (uint32_t f : r.stacks[stack]) names += r.frames[f] + ";";
    auto& e = out[{r.threads[thread].tid, names}];
    e.first += t.samples;
    e.second += t.ns;
  }
  return out;
}

TEST(RawDirReaderTest, FollowedAsWrittenItMakesTheRecordingTheFilesMake) {
  TempDir dir;
  std::mt19937_64 rng(17);
  const uint64_t start = 1'000'000'000;
  // Each process's records as its writer would put them: the module
  // first, then samples drained a thread at a time (their times out of
  // order by up to 20 ms), and the trailer.
  std::vector<std::string> streams;
  for (uint32_t pid : {100u, 200u}) {
    std::string s = Header(pid, start + pid * 1000) + Module(0x1000, 0x200000);
    uint64_t t = start + pid * 1000;
    for (int batch = 0; batch < 60; ++batch) {
      for (uint32_t tid : {pid, pid + 1}) {
        for (int k = 0; k < 20; ++k) {
          std::vector<uint64_t> ips;
          for (size_t d = 0; d < 1 + rng() % 6; ++d) ips.push_back(0x1000 + rng() % 0x1f000);
          s += SampleRecord(t + k * 1'000'000 + tid % 2, tid, ips);
        }
      }
      t += 20'000'000;
    }
    raw::Trailer tr{};
    tr.end_ns = t;
    s += "E";
    Put(&s, tr);
    streams.push_back(std::move(s));
  }
  // Appended in chunks that cut records anywhere, read after each with
  // the watermark 100 ms behind the latest sample written.
  RawDirReader reader(dir.path(), {});
  std::vector<size_t> at(streams.size());
  std::vector<std::string> paths = {dir.File("rec-100-1.raw"), dir.File("rec-200-1.raw")};
  size_t polls = 0, grew = 0;
  while (at[0] < streams[0].size() || at[1] < streams[1].size()) {
    for (size_t i = 0; i < streams.size(); ++i) {
      const size_t n = std::min<size_t>(streams[i].size() - at[i], 1 + rng() % 3000);
      Append(paths[i], streams[i].substr(at[i], n));
      at[i] += n;
    }
    const uint64_t written = start + 1'200'000'000ull * std::min(at[0], at[1]) /
                                         std::max(streams[0].size(), streams[1].size());
    const size_t before = reader.samples_in_tree();
    ASSERT_TRUE(reader.Poll(written > 100'000'000 + start ? written - 100'000'000 : 0).ok());
    grew += reader.samples_in_tree() > before;
    ++polls;
  }
  EXPECT_GT(grew, polls / 4) << "the tree grew as the samples came, not at the end";
  EXPECT_GT(reader.samples_waiting(), 0u);
  // What a live `record show` gets: the tree and the samples waiting.
  StatusOr<Recording> so_far = reader.Snapshot(/*with_waiting=*/true);
  ASSERT_TRUE(so_far.ok());
  EXPECT_EQ(so_far->tree.samples(), reader.samples_in_tree() + reader.samples_waiting());
  ASSERT_TRUE(reader.Poll(UINT64_MAX).ok());
  EXPECT_EQ(reader.samples_waiting(), 0u);
  EXPECT_EQ(reader.samples_late(), 0u);
  EXPECT_FALSE(reader.stale());
  StatusOr<Recording> followed = reader.Snapshot();
  ASSERT_TRUE(followed.ok()) << followed.status().ToString();
  StatusOr<Recording> whole = RecordingFromRawDir(dir.path(), {});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(followed->tree.samples(), 2u * 60 * 2 * 20);
  EXPECT_EQ(followed->tree.samples(), whole->tree.samples());
  EXPECT_EQ(followed->tree.times(), whole->tree.times());
  EXPECT_EQ(ByName(*followed), ByName(*whole));
  EXPECT_EQ(followed->processes, 2u);
  EXPECT_EQ(followed->processes_cut_short, 0u);
  EXPECT_EQ(followed->start_ns, whole->start_ns);
  EXPECT_EQ(followed->duration_ns, whole->duration_ns);
  // Any range, by name, the same.
  for (int q = 0; q < 20; ++q) {
    uint64_t t1 = rng() % 1'300'000'000, t2 = rng() % 1'300'000'000;
    if (t1 > t2) std::swap(t1, t2);
    const auto names = [](const Recording& r, uint64_t a, uint64_t b) {
      std::map<std::pair<uint32_t, uint32_t>, uint64_t> out;
      for (const auto& [type, c] : r.tree.Range(a, b, /*exact=*/true).by_type) {
        const auto [thread, stack] = r.types[type];
        out[{r.threads[thread].tid, static_cast<uint32_t>(r.stacks[stack].size())}] += c;
      }
      return out;
    };
    EXPECT_EQ(names(*followed, t1, t2), names(*whole, t1, t2)) << t1 << " " << t2;
  }

  // A writer that fell behind: its sample is older than the tree's last.
  // It is kept apart, and the snapshot's tree made from them all.
  Append(paths[0], SampleRecord(start + 500'000'000, 100, {0x2000}));
  ASSERT_TRUE(reader.Poll(UINT64_MAX).ok());
  EXPECT_EQ(reader.samples_late(), 1u);
  StatusOr<Recording> with_late = reader.Snapshot();
  ASSERT_TRUE(with_late.ok());
  EXPECT_EQ(with_late->tree.samples(), followed->tree.samples() + 1);
  StatusOr<Recording> whole_late = RecordingFromRawDir(dir.path(), {});
  ASSERT_TRUE(whole_late.ok());
  EXPECT_EQ(with_late->tree.times(), whole_late->tree.times());
  EXPECT_EQ(ByName(*with_late), ByName(*whole_late));

  // A sample read before the module record that covers it: stale.
  Append(paths[1], SampleRecord(start + 5'000'000'000ull, 200, {0x900000}));
  ASSERT_TRUE(reader.Poll(UINT64_MAX).ok());
  EXPECT_FALSE(reader.stale());
  Append(paths[1], Module(0x800000, 0xa00000));
  ASSERT_TRUE(reader.Poll(UINT64_MAX).ok());
  EXPECT_TRUE(reader.stale());
}

}  // namespace
}  // namespace fieldprof::tools
