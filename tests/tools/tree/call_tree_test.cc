// Call trees: the algebra's promises over random trees (add
// and sub exact, sub(add(A, B), B) == A node for node; min idempotent and
// order-free, and within every run), the file's round trip and damage,
// name matching across builds, and the sources (collapsed stacks, Chrome
// trace events) against values worked out by hand.
#include "tools/tree/call_tree.h"

#include <zlib.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/record/record_tree.h"
#include "tools/tree/tree_formats.h"
#include "tools/tree/tree_report.h"

namespace fieldprof::tools {
namespace {

// A random tree: paths over a small alphabet (so that runs share paths),
// several metrics, values that may be zero.
CallTree RandomTree(std::mt19937_64& rng, int paths) {
  static const char* kNames[] = {"main", "parse", "run", "step", "malloc", "free", "read", "lock"};
  CallTree t;
  for (int i = 0; i < paths; ++i) {
    std::vector<std::string_view> frames;
    const int depth = 1 + static_cast<int>(rng() % 6);
    for (int d = 0; d < depth; ++d) frames.push_back(kNames[rng() % 8]);
    const uint32_t n = t.AddPath(frames);
    t.Add(n, Metric::kSamples, static_cast<int64_t>(rng() % 50));
    t.Add(n, Metric::kTimeNs, static_cast<int64_t>(rng() % 1000000));
    t.Add(n, Metric::kCalls, static_cast<int64_t>(rng() % 4));
    if (rng() % 2 == 0) t.Add(n, Metric::kAllocBytes, static_cast<int64_t>(rng() % 4096));
  }
  return t;
}

using Canon = std::vector<std::pair<std::string, std::array<int64_t, kMetricCount>>>;

// Canonical form without the paths whose whole subtree is zero (which
// the algebra leaves out).
Canon Live(const CallTree& t) {
  StatusOr<CallTree> same = Combine({&t}, Op::kAdd, {});
  EXPECT_TRUE(same.ok());
  return Canonical(*same);
}

TEST(CallTreeTest, AddAndSubAreExactAndUndoEachOther) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 200; ++round) {
    const CallTree a = RandomTree(rng, 1 + static_cast<int>(rng() % 40));
    const CallTree b = RandomTree(rng, 1 + static_cast<int>(rng() % 40));
    StatusOr<CallTree> ab = Combine({&a, &b}, Op::kAdd, {});
    ASSERT_TRUE(ab.ok());
    StatusOr<CallTree> back = Combine({&*ab, &b}, Op::kSub, {});
    ASSERT_TRUE(back.ok());
    ASSERT_EQ(Canonical(*back), Live(a)) << "round " << round;
    // add is order-free, and its root totals are the sums.
    StatusOr<CallTree> ba = Combine({&b, &a}, Op::kAdd, {});
    ASSERT_EQ(Canonical(*ab), Canonical(*ba));
    for (int m = 0; m < kMetricCount; ++m) {
      const auto metric = static_cast<Metric>(m);
      ASSERT_EQ(ab->Totals(metric)[0], a.Totals(metric)[0] + b.Totals(metric)[0]);
    }
    // A - A is nothing.
    StatusOr<CallTree> none = Combine({&a, &a}, Op::kSub, {});
    ASSERT_EQ(none->size(), 1u);
  }
}

TEST(CallTreeTest, MinIsIdempotentOrderFreeAndWithinEveryRun) {
  std::mt19937_64 rng(9);
  for (int round = 0; round < 200; ++round) {
    const CallTree a = RandomTree(rng, 1 + static_cast<int>(rng() % 40));
    const CallTree b = RandomTree(rng, 1 + static_cast<int>(rng() % 40));
    const CallTree c = RandomTree(rng, 1 + static_cast<int>(rng() % 40));
    StatusOr<CallTree> aa = Combine({&a, &a}, Op::kMin, {});
    ASSERT_EQ(Canonical(*aa), Live(a)) << "min(A, A) == A";
    StatusOr<CallTree> abc = Combine({&a, &b, &c}, Op::kMin, {});
    StatusOr<CallTree> cab = Combine({&c, &a, &b}, Op::kMin, {});
    ASSERT_EQ(Canonical(*abc), Canonical(*cab)) << "order-free";
    StatusOr<CallTree> ab = Combine({&a, &b}, Op::kMin, {});
    StatusOr<CallTree> ab_c = Combine({&*ab, &c}, Op::kMin, {});
    ASSERT_EQ(Canonical(*ab_c), Canonical(*abc)) << "min(min(A, B), C) == min(A, B, C)";
    // Every node of the min is in every run, at no more than each run has.
    for (const CallTree* run : {&a, &b, &c}) {
      const std::vector<uint32_t> at = MapNodes(*abc, *run, Match::kExact);
      for (uint32_t n = 0; n < abc->size(); ++n) {
        ASSERT_NE(at[n], CallTree::kNone) << "round " << round;
        for (int m = 0; m < kMetricCount; ++m) {
          ASSERT_LE(abc->self(n, static_cast<Metric>(m)), run->self(at[n], static_cast<Metric>(m)));
        }
      }
    }
  }
}

TEST(CallTreeTest, MeanRoundsAndNormalizeScalesToTheFirst) {
  CallTree a, b;
  a.Add(a.AddPath({"main", "f"}), Metric::kSamples, 10);
  b.Add(b.AddPath({"main", "f"}), Metric::kSamples, 5);
  b.Add(b.AddPath({"main", "g"}), Metric::kSamples, 15);
  StatusOr<CallTree> mean = Combine({&a, &b}, Op::kMean, {});
  const uint32_t main = mean->Find(CallTree::kRoot, "main");
  EXPECT_EQ(mean->self(mean->Find(main, "f"), Metric::kSamples), 8);  // 7.5, away from zero
  EXPECT_EQ(mean->self(mean->Find(main, "g"), Metric::kSamples), 8);
  CombineOptions o;
  o.normalize = Normalize::kTotal;  // b (20 samples) scaled to a's 10
  StatusOr<CallTree> sub = Combine({&a, &b}, Op::kSub, o);
  const uint32_t m2 = sub->Find(CallTree::kRoot, "main");
  EXPECT_EQ(sub->self(sub->Find(m2, "f"), Metric::kSamples), 10 - 3);  // 5 * 0.5, rounded
  EXPECT_EQ(sub->self(sub->Find(m2, "g"), Metric::kSamples), -8);      // 15 * 0.5, rounded
  // Groups: the mean of the first two (a, b) less the mean of the rest
  // (c), rounded once: f (10 + 5) / 2 - 3 = 4.5 -> 5; g 15 / 2 - 0 = 7.5 -> 8.
  CallTree c;
  c.Add(c.AddPath({"main", "f"}), Metric::kSamples, 3);
  CombineOptions g;
  g.sub_group = 2;
  StatusOr<CallTree> groups = Combine({&a, &b, &c}, Op::kSub, g);
  const uint32_t m3 = groups->Find(CallTree::kRoot, "main");
  EXPECT_EQ(groups->self(groups->Find(m3, "f"), Metric::kSamples), 5);
  EXPECT_EQ(groups->self(groups->Find(m3, "g"), Metric::kSamples), 8);
}

// A tree knows the runs behind it: add sums them, mean divides by them,
// sub of groups weighs each input by them. The mean of a sum of 5 runs
// (f: 10 each) and one run (f: 20) is 70 / 6, not 70 / 2.
TEST(CallTreeTest, RunsAreCountedByAddMeanAndSub) {
  std::vector<CallTree> singles(5);
  std::vector<const CallTree*> five;
  for (CallTree& t : singles) {
    t.Add(t.AddPath({"main", "f"}), Metric::kSamples, 10);
    five.push_back(&t);
  }
  StatusOr<CallTree> sum5 = Combine(five, Op::kAdd, {});
  ASSERT_TRUE(sum5.ok());
  EXPECT_EQ(sum5->runs, 5u);
  EXPECT_FALSE(sum5->per_run);
  CallTree one;
  one.Add(one.AddPath({"main", "f"}), Metric::kSamples, 20);
  auto f_of = [](const CallTree& t) {
    return t.self(t.Find(t.Find(CallTree::kRoot, "main"), "f"), Metric::kSamples);
  };
  StatusOr<CallTree> mean = Combine({&*sum5, &one}, Op::kMean, {});
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(f_of(*mean), 12);  // 70 / 6 = 11.67
  EXPECT_EQ(mean->runs, 6u);
  EXPECT_TRUE(mean->per_run);
  // A per-run tree adds as its runs: 12 x 6 + 20.
  StatusOr<CallTree> again = Combine({&*mean, &one}, Op::kAdd, {});
  EXPECT_EQ(f_of(*again), 92);
  EXPECT_EQ(again->runs, 7u);
  EXPECT_FALSE(again->per_run);
  // The mean of the same runs however they were grouped.
  StatusOr<CallTree> flat =
      Combine({five[0], five[1], five[2], five[3], five[4], &one}, Op::kMean, {});
  EXPECT_EQ(f_of(*flat), f_of(*mean));
  // sub of groups: new per run (5 runs of 10) less base per run (20).
  CombineOptions g;
  g.sub_group = 1;
  StatusOr<CallTree> diff = Combine({&*sum5, &one}, Op::kSub, g);
  EXPECT_EQ(f_of(*diff), -10);
  EXPECT_TRUE(diff->per_run);
  // Kept in the file.
  StatusOr<CallTree> back = DecodeCallTree(EncodeCallTree(*mean));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->runs, 6u);
  EXPECT_TRUE(back->per_run);
}

TEST(CallTreeTest, TheFileRoundTripsAndRefusesDamage) {
  std::mt19937_64 rng(3);
  CallTree t = RandomTree(rng, 200);
  t.description = "a \"hostile\"\n description";
  t.runs = 7;
  StatusOr<CallTree> diff = Combine({&t, &t, &t}, Op::kSub, {});  // negative values
  for (const CallTree* tree : {&t, &*diff}) {
    const std::string bytes = EncodeCallTree(*tree);
    StatusOr<CallTree> back = DecodeCallTree(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(Canonical(*back), Canonical(*tree));
    EXPECT_EQ(back->description, tree->description);
    EXPECT_EQ(back->runs, tree->runs);
    EXPECT_EQ(back->metrics(), tree->metrics());
    // Every cut and every flipped byte is refused, never misread.
    for (size_t cut = 0; cut < bytes.size(); cut += 1 + bytes.size() / 97) {
      EXPECT_FALSE(DecodeCallTree(bytes.substr(0, cut)).ok()) << "cut at " << cut;
    }
    for (size_t at = 0; at < bytes.size(); at += 1 + bytes.size() / 97) {
      std::string bad = bytes;
      bad[at] = static_cast<char>(bad[at] ^ 0x21);
      EXPECT_FALSE(DecodeCallTree(bad).ok()) << "flip at " << at;
    }
  }
  EXPECT_EQ(DecodeCallTree("main;f 3\n").status().message(), "not a call tree (.fptree) file");
  // A file of the first version (no flags after the runs) reads as a sum.
  CallTree small;
  small.Add(small.AddPath({"main", "f"}), Metric::kSamples, 4);
  small.runs = 3;
  std::string v2 = EncodeCallTree(small);
  ASSERT_EQ(v2.substr(0, 8), "FPTREE2\n");
  // magic, metrics (1 byte), runs (1 byte), flags (1 byte: 0), ..., CRC.
  std::string v1 = "FPTREE1\n" + v2.substr(8, 2) + v2.substr(11, v2.size() - 11 - 4);
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(v1.data()), v1.size());
  for (int i = 0; i < 4; ++i) v1.push_back(static_cast<char>(crc >> (8 * i)));
  StatusOr<CallTree> old = DecodeCallTree(v1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(Canonical(*old), Canonical(small));
  EXPECT_EQ(old->runs, 3u);
  EXPECT_FALSE(old->per_run);
}

TEST(CallTreeTest, NormalisedNamesMatchAcrossBuilds) {
  const std::pair<const char*, const char*> same[] = {
      {"parse(char const*) [clone .constprop.0]", "parse(char const*)"},
      {"parse.isra.0", "parse.part.3"},
      {"compress_block.cold", "compress_block"},
      {"ns::run()::{lambda(int)#3}::operator()(int) const",
       "ns::run()::{lambda(int)#1}::operator()(int) const"},
      {"libz.so.1+0x1a2b", "libz.so.1+0xff00"},
      {"(anonymous namespace)::Helper()", "_GLOBAL__N_1::Helper()"},
      {"[build 0123456789abcdef0123]", "[build fedcba9876543210fedc]"},
  };
  for (const auto& [a, b] : same) {
    EXPECT_EQ(MatchKey(a, Match::kNormalised), MatchKey(b, Match::kNormalised)) << a;
    EXPECT_NE(MatchKey(a, Match::kExact), MatchKey(b, Match::kExact)) << a;
    // Keys are keys: normalising one again changes nothing.
    const std::string k = MatchKey(a, Match::kNormalised);
    EXPECT_EQ(MatchKey(k, Match::kNormalised), k);
  }
  const std::pair<const char*, const char*> differ[] = {
      {"parse", "parser"}, {"f(int)", "f(long)"}, {"step2", "step3"}, {"a::b", "a::c"}};
  for (const auto& [a, b] : differ) {
    EXPECT_NE(MatchKey(a, Match::kNormalised), MatchKey(b, Match::kNormalised)) << a;
  }
  // Two builds' trees subtract to nothing when matched normalised.
  CallTree x, y;
  x.Add(x.AddPath({"main", "parse.isra.0", "libc.so.6+0x100"}), Metric::kSamples, 4);
  y.Add(y.AddPath({"main", "parse.part.1", "libc.so.6+0x200"}), Metric::kSamples, 4);
  CombineOptions o;
  o.match = Match::kNormalised;
  EXPECT_EQ(Combine({&x, &y}, Op::kSub, o)->size(), 1u);
  EXPECT_EQ(Combine({&x, &y}, Op::kSub, {})->size(), 6u);  // exact: nothing matches below main
}

TEST(CallTreeTest, CollapsedStacksAndTheirErrors) {
  StatusOr<CallTree> t = CallTreeFromCollapsed(
      "# a comment\nmain;parse;malloc 10\n\nmain;parse 5\r\nmain;run 7\nmain;parse;malloc 1\n",
      Metric::kSamples);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(TreeCollapsed(*t, Metric::kSamples),
            "main;parse 5\nmain;parse;malloc 11\nmain;run 7\n");
  EXPECT_EQ(t->Totals(Metric::kSamples)[0], 23);
  for (const char* bad : {"main;parse\n", "main;parse x\n", "main -3\n", " 12\n"}) {
    StatusOr<CallTree> b = CallTreeFromCollapsed(std::string("main 1\n") + bad, Metric::kSamples);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().message().rfind("line 2: ", 0), 0u) << b.status().message();
  }
}

TEST(CallTreeTest, ChromeTraceEventsNestByTime) {
  // Thread 1: X main [0, 100) us holding B/E parse [10, 40) and X step
  // [50, 90) twice nested; thread 2: B lonely never ended, last ts 30.
  const std::string json = R"({"traceEvents": [
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "worker"}},
    {"ph": "X", "name": "main", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "B", "name": "parse", "pid": 1, "tid": 1, "ts": 10},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 40},
    {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 50, "dur": 40},
    {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 60, "dur": 10.5},
    {"ph": "i", "name": "instant", "pid": 1, "tid": 1, "ts": 5},
    {"ph": "B", "name": "lonely", "pid": 1, "tid": 2, "ts": 20},
    {"ph": "X", "name": "tick", "pid": 1, "tid": 2, "ts": 25, "dur": 5}
  ]})";
  uint64_t unended = 0;
  StatusOr<CallTree> t = CallTreeFromChromeTrace(json, {}, &unended);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(unended, 1u);
  const uint32_t main = t->Find(CallTree::kRoot, "main");
  const uint32_t parse = t->Find(main, "parse"), step = t->Find(main, "step");
  const uint32_t inner = t->Find(step, "step");
  ASSERT_NE(inner, CallTree::kNone);
  EXPECT_EQ(t->Totals(Metric::kTimeNs)[main], 100000);
  EXPECT_EQ(t->self(main, Metric::kTimeNs), 100000 - 30000 - 40000);
  EXPECT_EQ(t->self(parse, Metric::kTimeNs), 30000);
  EXPECT_EQ(t->self(step, Metric::kTimeNs), 40000 - 10500);
  EXPECT_EQ(t->self(inner, Metric::kTimeNs), 10500);
  EXPECT_EQ(t->self(step, Metric::kCalls), 1);
  EXPECT_EQ(t->Totals(Metric::kCalls)[main], 4);
  const uint32_t lonely = t->Find(CallTree::kRoot, "lonely");
  EXPECT_EQ(t->Totals(Metric::kTimeNs)[lonely], 10000);  // ended at its thread's last ts, 30
  EXPECT_EQ(t->self(t->Find(lonely, "tick"), Metric::kTimeNs), 5000);
  // With a frame per thread.
  ChromeTraceOptions o;
  o.threads = true;
  StatusOr<CallTree> by = CallTreeFromChromeTrace(json, o);
  EXPECT_NE(by->Find(CallTree::kRoot, "thread worker"), CallTree::kNone);
  EXPECT_NE(by->Find(CallTree::kRoot, "tid 2"), CallTree::kNone);
  // A bare array is a trace too; bad ones say why.
  EXPECT_TRUE(CallTreeFromChromeTrace(R"([{"ph":"X","name":"a","ts":1,"dur":2}])", {}).ok());
  EXPECT_FALSE(CallTreeFromChromeTrace("{", {}).ok());
  EXPECT_FALSE(CallTreeFromChromeTrace(R"({"events": []})", {}).ok());
  EXPECT_FALSE(CallTreeFromChromeTrace(R"([{"ph":"X","name":"a","ts":1}])", {}).ok());
  EXPECT_FALSE(CallTreeFromChromeTrace(R"([{"ph":"B","name":"a"}])", {}).ok());
}

TEST(CallTreeTest, QueriesAnswerFromTheTree) {
  StatusOr<CallTree> t = CallTreeFromCollapsed(
      "main;parse;malloc 10\nmain;run;step;malloc 3\nmain;run;step 30\nmain;run;run;step 4\n",
      Metric::kSamples);
  ASSERT_TRUE(t.ok());
  const auto top = TopFunctions(*t, Metric::kSamples, false);
  ASSERT_GE(top.size(), 2u);
  EXPECT_EQ(top[0].name, "step");
  EXPECT_EQ(top[0].self, 34);
  EXPECT_EQ(top[1].name, "malloc");
  EXPECT_EQ(top[1].self, 13);
  // run's total counts the recursive call once.
  for (const TopRow& r : TopFunctions(*t, Metric::kSamples, true)) {
    if (r.name == "run") {
      EXPECT_EQ(r.total, 37);
    }
  }
  StatusOr<Butterfly> b = ButterflyOf(*t, "malloc", Metric::kSamples);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->callers.size(), 2u);
  EXPECT_EQ(b->callers[0].name, "parse");
  EXPECT_EQ(b->callers[0].total, 10);
  EXPECT_FALSE(ButterflyOf(*t, "nothing", Metric::kSamples).ok());
  const auto paths = PathsTo(*t, "step", Metric::kSamples);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0].name, "main;run;step");
  EXPECT_EQ(paths[0].total, 33);
  StatusOr<CallTree> sub = Subtree(*t, "run");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->Totals(Metric::kSamples)[0], 37);
  StatusOr<CallTree> by_path = Subtree(*t, "main;parse");
  ASSERT_TRUE(by_path.ok());
  EXPECT_EQ(by_path->Totals(Metric::kSamples)[0], 10);
  EXPECT_FALSE(Subtree(*t, "main;nothing").ok());
  // Allocated but not freed, by function.
  CallTree a;
  const uint32_t load = a.AddPath({"main", "load"}), drop = a.AddPath({"main", "drop"});
  a.Add(load, Metric::kAllocBytes, 4096);
  a.Add(load, Metric::kFreedBytes, 1024);
  a.Add(drop, Metric::kAllocBytes, 100);
  a.Add(drop, Metric::kFreedBytes, 100);
  const auto leaks = AllocatedNotFreed(a);
  ASSERT_EQ(leaks.size(), 2u);
  EXPECT_EQ(leaks[0].name, "load");
  EXPECT_EQ(leaks[0].allocated - leaks[0].freed, 3072);
}

// Five runs against five: a node that grew in every run is found; nodes
// that moved by noise are not.
TEST(CallTreeTest, SignificanceFindsTheNodeThatChanged) {
  std::mt19937_64 rng(17);
  std::vector<CallTree> base(5), now(5);
  for (int side = 0; side < 2; ++side) {
    for (CallTree& t : side == 0 ? base : now) {
      std::poisson_distribution<int> noise(200);
      for (const char* f : {"a", "b", "c", "d", "e", "f"}) {
        const int64_t v = noise(rng) + (side == 1 && std::string(f) == "c" ? 60 : 0);
        t.Add(t.AddPath({"main", f}), Metric::kSamples, v);
      }
    }
  }
  std::vector<const CallTree*> b, n;
  for (const CallTree& t : base) b.push_back(&t);
  for (const CallTree& t : now) n.push_back(&t);
  StatusOr<CallTree> bm = Combine(b, Op::kMean, {}), nm = Combine(n, Op::kMean, {});
  StatusOr<CallTree> diff = Combine({&*nm, &*bm}, Op::kSub, {});
  ASSERT_TRUE(diff.ok());
  SignificanceOptions o;
  const std::vector<NodeChange> changes = Significance(*diff, n, b, o);
  const uint32_t main = diff->Find(CallTree::kRoot, "main");
  for (uint32_t node = 1; node < diff->size(); ++node) {
    if (node == main) continue;
    EXPECT_EQ(changes[node].significant, diff->name(node) == "c")
        << diff->name(node) << " p " << changes[node].p << " q " << changes[node].q;
  }
  EXPECT_NEAR(changes[diff->Find(main, "c")].p, 2.0 / 252, 1e-9);  // all 5 above all 5
}

}  // namespace
}  // namespace fieldprof::tools
