// A recording's file format (recording.h): what EncodeRecording writes,
// DecodeRecording reads back, field for field, with the same answers from
// its time trees; and a damaged file is an error, never a crash.
#include "tools/record/recording.h"

#include <zlib.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tools/record/idle_report.h"
#include "tools/record/pprof_export.h"
#include "tools/record/profile.pb.h"
#include "tools/record/record_tree.h"

namespace fieldprof::tools {
namespace {

Recording Sample(uint32_t seed) {
  std::mt19937 rng(seed);
  Recording r;
  r.command = "sqlite3 db.sqlite 'select 1'";
  r.hz = 999;
  r.wall = (seed & 1) != 0;
  r.source = 2;
  r.start_ns = 123456789;
  r.duration_ns = 2'500'000'000;
  r.dropped = 3;
  r.skipped = 5;
  r.seccomp_aside = 1;
  r.processes = 4;
  r.processes_cut_short = 1;
  r.frames = {"main", "sqlite3_step", "sqlite3VdbeExec", "libz.so.1+0x1a2b", "read"};
  r.stacks = {{0}, {0, 1}, {0, 1, 2}, {0, 3}, {0, 1, 2, 4}};
  r.threads = {{100, 100}, {100, 101}, {200, 200}};
  for (uint32_t th = 0; th < r.threads.size(); ++th) {
    for (uint32_t st = 0; st < r.stacks.size(); ++st) r.types.push_back({th, st});
  }
  std::vector<uint64_t> times;
  std::vector<uint32_t> types;
  uint64_t t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += rng() % 1'000'000;
    times.push_back(t);
    types.push_back(static_cast<uint32_t>(rng() % r.types.size()));
  }
  r.tree = *TimeTree::Build(times, types, {50, 0.9, 2});
  r.idle = true;
  r.switches_lost = 2;
  r.preemptions = 7;
  r.waits_unattributed = 1;
  r.cpu_wide = true;
  r.idle_types = {{0, 4, IdleDirection::kToIdle}, {0, 4, IdleDirection::kFromIdle}};
  std::vector<uint64_t> idle_times = {1000, 5000, 9000, 12000};
  std::vector<uint32_t> idle_kinds = {0, 1, 0, 1};
  r.idle_tree = *TimeTree::Build(idle_times, idle_kinds);
  r.idle_off_ns = {4000, 4000, 3000, 3000};
  r.span_names = {{"startup", "load (scope)", true}, {"startup", "begin -> ready", false}};
  r.spans = {{1, 0, 1, 500, 90000}, {0, 0, 0, 1000, 4000}, {0, 2, 2, 7000, 7000}};
  r.points_lost = 4;
  r.field_stacks = {{"libsqlite3.so.0", "0123456789abcdef", "sqlite3_step;+1a2b"},
                    {"libsqlite3.so.0", "0123456789abcdef", "sqlite3_step;[libc.so.6]"},
                    {"libz.so.1", "aa", "deflate;+4cb3"}};
  r.field_sets = {{}, {0}, {1, 2}, {2}};
  for (size_t i = 0; i < r.tree.samples(); ++i) {
    r.sample_fields.push_back(static_cast<uint32_t>(rng() % r.field_sets.size()));
  }
  return r;
}

void ExpectSameRanges(const TimeTree& a, const TimeTree& b) {
  ASSERT_EQ(a.samples(), b.samples());
  EXPECT_EQ(a.times(), b.times());
  EXPECT_EQ(a.types(), b.types());
  const uint64_t last = a.last_time();
  for (uint64_t t1 : {uint64_t{0}, last / 3, last / 2}) {
    for (uint64_t t2 : {last / 2, last}) {
      if (t2 < t1) continue;
      const RangeCounts x = a.Range(t1, t2), y = b.Range(t1, t2);
      EXPECT_EQ(x.by_type, y.by_type) << t1 << ".." << t2;
      EXPECT_EQ(x.samples, y.samples);
      EXPECT_EQ(x.other, y.other);
    }
  }
}

TEST(RecordingTest, WhatIsWrittenReadsBackFieldForField) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const Recording r = Sample(seed);
    StatusOr<Recording> back = DecodeRecording(EncodeRecording(r));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->command, r.command);
    EXPECT_EQ(back->hz, r.hz);
    EXPECT_EQ(back->wall, r.wall);
    EXPECT_EQ(back->source, r.source);
    EXPECT_EQ(back->start_ns, r.start_ns);
    EXPECT_EQ(back->duration_ns, r.duration_ns);
    EXPECT_EQ(back->dropped, r.dropped);
    EXPECT_EQ(back->skipped, r.skipped);
    EXPECT_EQ(back->processes, r.processes);
    EXPECT_EQ(back->processes_cut_short, r.processes_cut_short);
    EXPECT_EQ(back->frames, r.frames);
    EXPECT_EQ(back->stacks, r.stacks);
    ASSERT_EQ(back->threads.size(), r.threads.size());
    for (size_t i = 0; i < r.threads.size(); ++i) {
      EXPECT_EQ(back->threads[i].pid, r.threads[i].pid);
      EXPECT_EQ(back->threads[i].tid, r.threads[i].tid);
    }
    EXPECT_EQ(back->types, r.types);
    ExpectSameRanges(back->tree, r.tree);
    EXPECT_EQ(back->idle, r.idle);
    EXPECT_EQ(back->cpu_wide, r.cpu_wide);
    EXPECT_EQ(back->switches_lost, r.switches_lost);
    EXPECT_EQ(back->preemptions, r.preemptions);
    EXPECT_EQ(back->waits_unattributed, r.waits_unattributed);
    ASSERT_EQ(back->idle_types.size(), r.idle_types.size());
    for (size_t i = 0; i < r.idle_types.size(); ++i) {
      EXPECT_EQ(back->idle_types[i].thread, r.idle_types[i].thread);
      EXPECT_EQ(back->idle_types[i].stack, r.idle_types[i].stack);
      EXPECT_EQ(back->idle_types[i].direction, r.idle_types[i].direction);
    }
    ExpectSameRanges(back->idle_tree, r.idle_tree);
    EXPECT_EQ(back->idle_off_ns, r.idle_off_ns);
    ASSERT_EQ(back->span_names.size(), r.span_names.size());
    for (size_t i = 0; i < r.span_names.size(); ++i) {
      EXPECT_EQ(back->span_names[i].tag, r.span_names[i].tag);
      EXPECT_EQ(back->span_names[i].segment, r.span_names[i].segment);
      EXPECT_EQ(back->span_names[i].scope, r.span_names[i].scope);
    }
    ASSERT_EQ(back->spans.size(), r.spans.size());
    for (size_t i = 0; i < r.spans.size(); ++i) {
      EXPECT_EQ(std::tie(back->spans[i].name, back->spans[i].begin_thread, back->spans[i].thread,
                         back->spans[i].begin_ns, back->spans[i].end_ns),
                std::tie(r.spans[i].name, r.spans[i].begin_thread, r.spans[i].thread,
                         r.spans[i].begin_ns, r.spans[i].end_ns));
    }
    EXPECT_EQ(back->points_lost, r.points_lost);
    ASSERT_EQ(back->field_stacks.size(), r.field_stacks.size());
    for (size_t i = 0; i < r.field_stacks.size(); ++i) {
      EXPECT_FALSE(back->field_stacks[i] < r.field_stacks[i] ||
                   r.field_stacks[i] < back->field_stacks[i]);
    }
    EXPECT_EQ(back->field_sets, r.field_sets);
    EXPECT_EQ(back->sample_fields, r.sample_fields);
  }
}

// Every build is a package's, named "<module>-pkg".
std::string Packaged(const std::string& module, const std::string&) { return module + "-pkg"; }

// The field's view of a recording: a module's field stacks, each sample's
// time under every stack of that module it folded into, within the range
// and thread asked; counted as the samples are.
TEST(RecordingTest, TheFieldsViewSumsASamplesTimeUnderItsModulesStacks) {
  const Recording r = Sample(5);
  const uint64_t last = r.tree.last_time();
  for (const auto& [t1, t2, tid] : std::vector<std::tuple<uint64_t, uint64_t, uint32_t>>{
           {0, UINT64_MAX, 0}, {last / 3, last / 2, 0}, {0, UINT64_MAX, 101}}) {
    std::map<std::string, int64_t> want;  // stack -> samples
    for (size_t i = 0; i < r.tree.samples(); ++i) {
      if (r.tree.times()[i] < t1 || r.tree.times()[i] > t2) continue;
      if (tid != 0 && r.threads[r.types[r.tree.types()[i]].first].tid != tid) continue;
      for (uint32_t id : r.field_sets[r.sample_fields[i]]) {
        if (r.field_stacks[id].module == "libsqlite3.so.0") ++want[r.field_stacks[id].stack];
      }
    }
    StatusOr<CallTree> t = FieldTreeFromRecording(r, "libsqlite3.so.0", t1, t2, tid, Packaged);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    std::map<std::string, int64_t> got;
    for (uint32_t n = 1; n < t->size(); ++n) {
      if (t->self(n, Metric::kSamples) == 0) continue;
      std::string path;
      for (const std::string& f : t->Path(n)) path += (path.empty() ? "" : ";") + f;
      got[path] = t->self(n, Metric::kSamples);
    }
    EXPECT_EQ(got, want) << t1 << ".." << t2 << " tid " << tid;
    EXPECT_GT(got.size(), 0u);
  }
  StatusOr<CallTree> none = FieldTreeFromRecording(r, "libcrypto.so.3", 0, UINT64_MAX, 0, Packaged);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("libsqlite3.so.0, libz.so.1"), std::string::npos)
      << none.status().message();
  // A build no package holds: dropped, as the agent drops its stacks.
  const VersionOf no_package = [](const std::string&, const std::string& id) { return id; };
  EXPECT_FALSE(FieldTreeFromRecording(r, "libz.so.1", 0, UINT64_MAX, 0, no_package).ok());
  Recording old = r;
  old.sample_fields.clear();
  EXPECT_FALSE(FieldTreeFromRecording(old, "libsqlite3.so.0", 0, UINT64_MAX, 0, Packaged).ok());

  // Frames named by the build's debug file (here: every offset is one
  // function): the stacks under an offset and under its mark stay apart,
  // the offsets' become the function's; a namer's error is the call's.
  const FrameNamer inner = [](const std::string& id, std::string_view f) -> StatusOr<std::string> {
    if (id != "0123456789abcdef") return NotFound("no debug file for build " + id);
    return f[0] == '+' ? std::string("sqlite3VdbeExec") : std::string(f);
  };
  StatusOr<CallTree> named =
      FieldTreeFromRecording(r, "libsqlite3.so.0", 0, UINT64_MAX, 0, Packaged, inner);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  std::set<std::string> paths;
  for (uint32_t n = 1; n < named->size(); ++n) {
    std::string path;
    for (const std::string& f : named->Path(n)) path += (path.empty() ? "" : ";") + f;
    paths.insert(path);
  }
  EXPECT_EQ(paths, (std::set<std::string>{"sqlite3_step", "sqlite3_step;sqlite3VdbeExec",
                                          "sqlite3_step;[libc.so.6]"}));
  const FrameNamer missing = [](const std::string& id, std::string_view) -> StatusOr<std::string> {
    return NotFound("no debug file for build " + id);
  };
  StatusOr<CallTree> failed =
      FieldTreeFromRecording(r, "libsqlite3.so.0", 0, UINT64_MAX, 0, Packaged, missing);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("0123456789abcdef"), std::string::npos);
}

TEST(RecordingTest, ACutOrDamagedFileIsAnErrorNeverACrash) {
  const std::string bytes = EncodeRecording(Sample(7));
  // Every cut shorter than the file: an error (the last field is needed).
  for (size_t n = 0; n < bytes.size(); n += std::max<size_t>(1, bytes.size() / 997)) {
    EXPECT_FALSE(DecodeRecording(std::string_view(bytes).substr(0, n)).ok()) << "cut at " << n;
  }
  // Bytes changed anywhere: an error or a recording, whichever, and no
  // crash or runaway allocation (run under ASan in the fuzz build too).
  std::mt19937 rng(11);
  int errors = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bad = bytes;
    for (int k = 0; k < 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    errors += DecodeRecording(bad).ok() ? 0 : 1;
  }
  EXPECT_GT(errors, 0);
  EXPECT_FALSE(DecodeRecording("not a recording at all").ok());
}

std::string Gunzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
  std::string out;
  char buf[1 << 14];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  inflateEnd(&z);
  return out;
}

// pprof's profile as go tool pprof reads it: each sample's stack, leaf
// first, by its locations' function names; its values; its thread label.
TEST(PprofExportTest, SamplesKeepTheirStacksValuesAndThreads) {
  const Recording r = Sample(5);
  PprofProfile p;
  p.value_types = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  p.period_type = {"cpu", "nanoseconds"};
  p.period = 1001001;
  p.duration_ns = 2'500'000'000;
  p.samples = {{2, 100, {7, 7007007}}, {4, 101, {3, 3003003}}, {2, 200, {1, 1001001}}};
  StatusOr<std::string> gz = EncodePprof(r, p);
  ASSERT_TRUE(gz.ok()) << gz.status().ToString();
  pprof::Profile prof;
  ASSERT_TRUE(prof.ParseFromString(Gunzip(*gz)));
  const auto str = [&](int64_t i) { return prof.string_table(static_cast<int>(i)); };
  ASSERT_EQ(prof.sample_type_size(), 2);
  EXPECT_EQ(str(prof.sample_type(1).type()), "cpu");
  EXPECT_EQ(str(prof.sample_type(1).unit()), "nanoseconds");
  EXPECT_EQ(prof.period(), 1001001);
  std::map<uint64_t, std::string> function_name;
  for (const auto& f : prof.function()) function_name[f.id()] = str(f.name());
  std::map<uint64_t, std::string> location_name;
  for (const auto& l : prof.location()) {
    ASSERT_EQ(l.line_size(), 1);
    location_name[l.id()] = function_name[l.line(0).function_id()];
  }
  ASSERT_EQ(prof.sample_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const auto& s = prof.sample(i);
    std::vector<std::string> leaf_first;
    for (uint64_t id : s.location_id()) leaf_first.push_back(location_name[id]);
    std::vector<std::string> want;
    for (auto it = r.stacks[p.samples[i].stack].rbegin(); it != r.stacks[p.samples[i].stack].rend();
         ++it) {
      want.push_back(r.frames[*it]);
    }
    EXPECT_EQ(leaf_first, want) << i;
    ASSERT_EQ(s.value_size(), 2);
    EXPECT_EQ(s.value(0), p.samples[i].values[0]);
    EXPECT_EQ(s.value(1), p.samples[i].values[1]);
    bool tid_seen = false;
    for (const auto& l : s.label()) {
      if (l.num() == p.samples[i].tid) tid_seen = true;
    }
    EXPECT_TRUE(tid_seen) << i;
  }
}

// Waits by the stack they waited at: two waits at one stack, each
// counted once in off-CPU time, however many events mark it.
TEST(IdleReportTest, EachWaitCountsOnceAtItsStack) {
  const Recording r = Sample(9);
  IdleReportOptions o;
  o.collapsed = true;
  o.min_share = 0;
  const std::string text = IdleReport(r, o);
  EXPECT_NE(text.find("main;sqlite3_step;sqlite3VdbeExec;read 7\n"), std::string::npos) << text;
  // A range holding only the second wait.
  o.from_ns = 8000;
  const std::string later = IdleReport(r, o);
  EXPECT_NE(later.find("main;sqlite3_step;sqlite3VdbeExec;read 3\n"), std::string::npos) << later;
  o.collapsed = false;
  const std::string tree = IdleReport(r, o);
  EXPECT_NE(tree.find("read"), std::string::npos) << tree;
}

}  // namespace
}  // namespace fieldprof::tools
