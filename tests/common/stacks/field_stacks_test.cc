// The field stacks' model (common/stacks/field_stacks.h) and the key rule of a
// stack series' symbol (common/wire/key_rules.h StackSymbolOk).
#include "common/stacks/field_stacks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "common/wire/key_rules.h"

namespace fieldprof {
namespace {

bool Ok(const std::string& s) { return key_rules::StackSymbolOk(s.data(), s.size()); }

TEST(StackSymbolTest, FramesAreSymbolsOrOffsetsWithOneMarkLast) {
  for (const char* good :
       {"sqlite3_step", "sqlite3_step;sqlite3VdbeExec;+94a90", "deflate;+1a2b;[libc.so.6]",
        "qsort;[program]", "f;[unpackaged]", "f;+ffffffffffffffff", "_ZN3foo3barEv;[deeper]"}) {
    EXPECT_TRUE(Ok(good)) << good;
  }
  for (const char* bad :
       {"", "[program]", "f;[program];g", "f;;g", "f;+", "f;+12G", "f;+11111111111111111", "f;+ABC",
        "f;[]", "f;[/home/alice/lib.so]", "/home/alice/x;f", "f g", "f;[a b]"}) {
    EXPECT_FALSE(Ok(bad)) << bad;
  }
  EXPECT_TRUE(Ok(std::string(key_rules::kMaxSymbol, 'a')));
  EXPECT_FALSE(Ok(std::string(key_rules::kMaxSymbol + 1, 'a')));
}

SeriesSum Stack(const std::string& version, const std::string& symbol,
                std::vector<uint64_t> per_run, uint64_t machines = 1) {
  SeriesSum s;
  s.key.set_module("libx.so.1");
  s.key.set_module_version(version);
  s.key.set_symbol(symbol);
  s.key.set_metric(wire::METRIC_STACK_CPU_NS);
  for (uint64_t v : per_run) s.histogram.Record(v);
  s.runs = per_run.size();
  s.machines = machines;
  return s;
}

TEST(FieldStacksTest, SumsPerStackOverVersionsAndFindsTheFramesUnderAnApi) {
  const std::vector<SeriesSum> series = {
      Stack("1", "api;+10;+20", {600, 400}, 3), Stack("2", "api;+10;+20", {1000}, 5),
      Stack("1", "api;+10", {300}), Stack("1", "api;+30;[libc.so.6]", {200}),
      Stack("1", "other;+40", {50})};
  const FieldStacks s = BuildFieldStacks("libx.so.1", series, {});
  EXPECT_EQ(s.total_ns, 2550u);
  EXPECT_EQ(s.versions, (std::vector<std::string>{"1", "2"}));
  ASSERT_EQ(s.stacks.size(), 4u);
  EXPECT_EQ(s.stacks[0].frames, (std::vector<std::string>{"api", "+10", "+20"}));
  EXPECT_EQ(s.stacks[0].ns, 2000u);
  EXPECT_EQ(s.stacks[0].runs, 3u);
  EXPECT_EQ(s.stacks[0].machines, 5u);
  ModelFilter only1;
  only1.module_version = "1";
  EXPECT_EQ(BuildFieldStacks("libx.so.1", series, only1).total_ns, 1550u);
  // Under api (2,500 ns): +10 on 2,300 of them, +20 on 2,000, +30 and the
  // mark on 200.
  const std::vector<FrameShare> top = TopFramesUnder(s, "api", 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].frame, "+10");
  EXPECT_DOUBLE_EQ(top[0].share, 2300.0 / 2500);
  EXPECT_EQ(top[1].frame, "+20");
  EXPECT_EQ(StacksUnder(s, "api").total_ns, 2500u);
  const std::string text = FieldStacksText(s, 100, 0);
  EXPECT_NE(text.find("98.0%"), std::string::npos) << text;  // api: 2500 of 2550
  EXPECT_NE(text.find("      +20"), std::string::npos) << text;
  EXPECT_EQ(FieldStacksFolded(s).substr(0, 16), "api;+10;+20 2000");
}

// /v1/stacks's builder keeps each stack's frames in its symbol alone (no
// allocation per frame): its JSON and folded answers are those of a builder
// that splits them, and a frame with characters JSON escapes is escaped.
TEST(FieldStacksTest, AnswersFromUnsplitStacksAreTheSame) {
  const std::vector<SeriesSum> series = {Stack("1", "api;+10;+20", {600, 400}, 3),
                                         Stack("2", "api;+10;+20", {1000}, 5),
                                         Stack("1", "api;+10", {300}),
                                         Stack("1", "api;+30;[libc.so.6]", {200}),
                                         Stack("1", "op\"q\\r\x01;+40", {50}),
                                         Stack("2", "b;+a", {300})};
  FieldStacksBuilder split("libx.so.1", false), unsplit("libx.so.1", false, false);
  for (const SeriesSum& x : series) {
    split.Add(x.key.symbol(), x.key.module_version(), x.histogram, x.runs, x.machines);
    unsplit.Add(x.key.symbol(), x.key.module_version(), x.histogram, x.runs, x.machines);
  }
  const FieldStacks a = split.Finish(), b = unsplit.Finish();
  EXPECT_TRUE(b.stacks[0].frames.empty());
  EXPECT_EQ(FieldStacksJson(a, 100), FieldStacksJson(b, 100));
  EXPECT_EQ(FieldStacksFolded(a), FieldStacksFolded(b));
  EXPECT_NE(FieldStacksJson(b, 100).find("[\"op\\\"q\\\\r\\u0001\",\"+40\"]"), std::string::npos)
      << FieldStacksJson(b, 100);
  // Equal times: by the stacks' symbols, whatever order the series came in.
  EXPECT_EQ(b.stacks[1].symbol, "api;+10");
  EXPECT_EQ(b.stacks[2].symbol, "b;+a");
}

// A store walks its series in key order, where a stack's versions are
// neighbours, and the builder then sums without an index; series in any
// other order (reversed, shuffled, or a walk's folded "[other]" stacks
// after it) must give the same stacks. Asked for the dearest few only,
// those come in the same order as a full sort's.
TEST(FieldStacksTest, TheOrderTheSeriesComeInChangesNothing) {
  std::mt19937_64 rng(68);
  std::vector<SeriesSum> walk;  // in key order: symbol, then version
  for (int i = 0; i < 400; ++i) {
    const std::string symbol = "api_" + std::to_string(i / 40) + ";+" + std::to_string(1000 + i);
    for (const char* version : {"", "1.0", "2.0"}) {
      if (rng() % 3 == 0) continue;
      walk.push_back(Stack(version, symbol, {1 + rng() % 5000, 1 + rng() % 50}, 1 + rng() % 9));
    }
  }
  // `take`: each symbol handed over (as a store's walk does), not copied.
  auto build = [](const std::vector<SeriesSum>& series, size_t dearest = SIZE_MAX,
                  bool take = false) {
    FieldStacksBuilder b("libx.so.1", /*keep_per_run=*/false, /*split_frames=*/false);
    for (const SeriesSum& x : series) {
      if (take) {
        std::string symbol = x.key.symbol();
        b.Add(std::move(symbol), x.key.module_version(), x.histogram, x.runs, x.machines);
      } else {
        b.Add(x.key.symbol(), x.key.module_version(), x.histogram, x.runs, x.machines);
      }
    }
    return b.Finish(dearest);
  };
  const FieldStacks in_order = build(walk);
  ASSERT_GT(in_order.stacks.size(), 300u);
  EXPECT_EQ(in_order.versions, (std::vector<std::string>{"", "1.0", "2.0"}));
  uint64_t total = 0;
  for (const SeriesSum& x : walk) total += static_cast<uint64_t>(x.histogram.sum());
  EXPECT_EQ(in_order.total_ns, total);
  const std::string want = FieldStacksFolded(in_order);
  std::vector<SeriesSum> reversed(walk.rbegin(), walk.rend());
  EXPECT_EQ(FieldStacksFolded(build(reversed)), want);
  std::vector<SeriesSum> shuffled = walk;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  EXPECT_EQ(FieldStacksFolded(build(shuffled)), want);
  EXPECT_EQ(FieldStacksFolded(build(walk, SIZE_MAX, /*take=*/true)), want);
  EXPECT_EQ(FieldStacksFolded(build(shuffled, SIZE_MAX, /*take=*/true)), want);
  // A tail after the walk: series of stacks already seen, and new ones.
  std::vector<SeriesSum> tail = walk;
  const std::vector<SeriesSum> extra = {Stack("1.0", "api_3;+1130", {77}),
                                        Stack("1.0", "api_0;[other]", {500}),
                                        Stack("2.0", "api_0;[other]", {300})};
  tail.insert(tail.end(), extra.begin(), extra.end());
  std::vector<SeriesSum> sorted_tail = tail;
  std::sort(sorted_tail.begin(), sorted_tail.end(), [](const SeriesSum& a, const SeriesSum& b) {
    return std::tie(a.key.symbol(), a.key.module_version()) <
           std::tie(b.key.symbol(), b.key.module_version());
  });
  EXPECT_EQ(FieldStacksFolded(build(tail)), FieldStacksFolded(build(sorted_tail)));
  // The 25 dearest, ordered alike; the rest all there.
  const FieldStacks top = build(shuffled, 25);
  ASSERT_EQ(top.stacks.size(), in_order.stacks.size());
  EXPECT_EQ(top.total_ns, in_order.total_ns);
  EXPECT_EQ(FieldStacksJson(top, 25), FieldStacksJson(in_order, 25));
}

Histogram HistogramOf(const std::vector<uint64_t>& v) {
  Histogram h;
  for (uint64_t x : v) h.Record(x);
  return h;
}

TEST(FieldStacksTest, ADiffFlagsTheStackWhoseRunsGotSlower) {
  std::vector<SeriesSum> series;
  std::vector<uint64_t> a, b, same;
  for (int i = 0; i < 40; ++i) {
    a.push_back(10000 + 97 * i);
    b.push_back(30000 + 291 * i);  // three times as much a run
    same.push_back(5000 + 53 * i);
  }
  for (const auto& [version, slow] : {std::pair{"1", a}, std::pair{"2", b}}) {
    series.push_back(Stack(version, "api;+10;+20", slow));
    series.push_back(Stack(version, "api;+10", same));
  }
  ModelFilter f1, f2;
  f1.module_version = "1";
  f2.module_version = "2";
  DiffOptions o;
  o.min_calls = 10;
  const FieldStacksDiff d = DiffFieldStacks(BuildFieldStacks("libx.so.1", series, f1),
                                            BuildFieldStacks("libx.so.1", series, f2), o);
  ASSERT_EQ(d.stacks.size(), 2u);
  EXPECT_EQ(d.stacks[0].frames.back(), "+20");
  EXPECT_EQ(d.stacks[0].verdict, ApiDiff::kSlower);
  EXPECT_NEAR(d.stacks[0].change, 2.0, 0.1);
  EXPECT_EQ(d.stacks[1].verdict, ApiDiff::kSame);
  // Both sides' CPU time per stack, as difffolded.pl writes them.
  const std::string folded = FieldStacksDiffFolded(BuildFieldStacks("libx.so.1", series, f1),
                                                   BuildFieldStacks("libx.so.1", series, f2));
  const uint64_t before = static_cast<uint64_t>(HistogramOf(a).sum());
  const uint64_t after = static_cast<uint64_t>(HistogramOf(b).sum());
  EXPECT_NE(
      folded.find("api;+10;+20 " + std::to_string(before) + " " + std::to_string(after) + "\n"),
      std::string::npos)
      << folded;
}

}  // namespace
}  // namespace fieldprof
