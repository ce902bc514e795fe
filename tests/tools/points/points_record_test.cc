// fieldprof points end to end: the recorder preloaded into a
// real program built with <fieldprof/points.h>, the files it leaves, and
// what show, tags, compare and the exports say of them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/base/durable_file.h"
#include "common/points/points_file.h"
#include "gtest/gtest.h"
#include "tests/support/progress_watch.h"
#include "tests/support/test_util.h"
#include "tests/tools/snapshot_fixture.h"
#include "tools/tree/call_tree.h"

namespace fieldprof {
namespace {

using json = nlohmann::json;
using testing::RunCommand;
using testing::TempDir;

const std::string kCli = FIELDPROF_CLI_BIN;
const std::string kProg = FIELDPROF_POINTPHASES;
const std::string kBusy = FIELDPROF_POINTSPROG;         // N rounds of 4 events
const std::string kStacksProg = FIELDPROF_POINTSTACKS;  // A, B, N: step from via_a, via_b
constexpr int kRuns = 20;
constexpr int kSlowRun = 7;

// The program's own readings, per run, by name.
std::vector<std::map<std::string, double>> OwnReadings(const std::string& text) {
  std::vector<std::map<std::string, double>> runs;
  std::istringstream in(text);
  std::string name;
  double ns;
  while (in >> name >> ns) {
    if (name == "begin->loaded") runs.emplace_back();
    if (!runs.empty()) runs.back()[name] = ns;
  }
  return runs;
}

// `points show DIR/NAME --html` opened in Chromium by points_page.mjs
// (with `mode`): the state it printed, and in *out all it printed.
void PageState(const TempDir& dir, const std::string& name, const std::string& mode, json* state,
               std::string* out) {
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File(name) + " --html " + dir.File("p.html") +
                           " >/dev/null 2>&1 && node " + FIELDPROF_SOURCE_DIR +
                           "/tests/tools/points/points_page.mjs " + dir.File("p.html") + " " +
                           dir.File("shots") + mode + " 2>&1",
                       out),
            0)
      << *out;
  *state = json::parse(out->substr(out->rfind('{', out->rfind("\"first\""))));
}

// `points record -o DIR/NAME -- COMMAND`, then what `points show --json`
// says of that directory.
void RecordAndShow(const TempDir& dir, const std::string& name, const std::string& command,
                   json* shown) {
  std::string out;
  ASSERT_EQ(
      RunCommand(kCli + " points record -o " + dir.File(name) + " -- " + command + " 2>&1", &out),
      0)
      << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File(name) + " --json", &out), 0) << out;
  *shown = json::parse(out);
}

const json* Segment(const json& tag, const std::string& name) {
  for (const json& s : tag["segments"]) {
    if (s["name"] == name) return &s;
  }
  return nullptr;
}

// 20 runs, the 7th five times as slow: it is removed as dirty and named,
// and the segments' means over the others are the program's own clock
// readings within 1%.
TEST(PointsRecordTest, TwentyRunsOneDirtyAndTheSegmentsMatchTheProgramsClock) {
  TempDir dir;
  std::string own, out;
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("runs") + " --runs " +
                           std::to_string(kRuns) + " -- " + kProg + " " + dir.File("counter") +
                           " " + std::to_string(kSlowRun) + " 2>" + dir.File("stderr"),
                       &own),
            0);
  const auto readings = OwnReadings(own);
  ASSERT_EQ(readings.size(), static_cast<size_t>(kRuns)) << own;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("runs") + " --json", &out), 0) << out;
  const json j = json::parse(out);
  ASSERT_EQ(j["runs"].size(), static_cast<size_t>(kRuns));
  for (const json& r : j["runs"]) {
    EXPECT_TRUE(r["complete"].get<bool>());
    EXPECT_EQ(r["lost"], 0);
  }
  ASSERT_EQ(j["tags"].size(), 1u);
  const json& tag = j["tags"][0];
  EXPECT_EQ(tag["tag"], "startup");
  ASSERT_EQ(tag["removed"].size(), 1u) << tag.dump();
  EXPECT_EQ(tag["removed"][0]["run"], kSlowRun - 1);  // runs are in start order, from 0
  EXPECT_GT(tag["removed"][0]["modified_z"].get<double>(), 3.5);
  EXPECT_EQ(tag["runs"].size(), static_cast<size_t>(kRuns - 1));
  const std::map<std::string, std::string> names = {{"begin -> loaded", "begin->loaded"},
                                                    {"loaded -> ready", "loaded->ready"},
                                                    {"parse (scope)", "parse"}};
  for (const auto& [segment, reading] : names) {
    const json* s = Segment(tag, segment);
    ASSERT_NE(s, nullptr) << segment << ": " << tag.dump();
    double sum = 0;
    for (int r = 0; r < kRuns; ++r) {
      if (r != kSlowRun - 1) sum += readings[r].at(reading);
    }
    const double own_mean = sum / (kRuns - 1);
    EXPECT_NEAR((*s)["mean_ns"].get<double>(), own_mean, own_mean * 0.01) << segment;
    EXPECT_EQ((*s)["runs"], kRuns - 1) << segment;
  }
  // The text names the dirty run and why.
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("runs"), &out), 0);
  EXPECT_NE(out.find("removed run " + std::to_string(kSlowRun)), std::string::npos) << out;
  EXPECT_NE(out.find("|M| > 3.5"), std::string::npos) << out;
  // The page, in Chromium: 3 segments, a bar per kept run; the dirty run
  // drawn on request, hatched, and named when hovered.
  json page;
  ASSERT_NO_FATAL_FAILURE(PageState(dir, "runs", "", &page, &out));
  EXPECT_EQ(page["first"]["segments"], 3) << out;
  EXPECT_EQ(page["first"]["bars"], 3 * (kRuns - 1)) << out;
  EXPECT_EQ(page["first"]["dirty"], 0) << out;
  EXPECT_EQ(page["removed"]["bars"], 3 * kRuns) << out;
  EXPECT_EQ(page["removed"]["dirty"], 3) << out;
  EXPECT_NE(page["tip"].get<std::string>().find("run " + std::to_string(kSlowRun)),
            std::string::npos)
      << out;
  EXPECT_NE(page["tip"].get<std::string>().find("removed as dirty"), std::string::npos) << out;
  // A date range: yesterday to tomorrow holds every run; a day long past
  // none; a date that is not one is a usage error.
  const auto day = [](time_t at) {
    char text[16];
    tm utc;
    gmtime_r(&at, &utc);
    strftime(text, sizeof text, "%Y-%m-%d", &utc);
    return std::string(text);
  };
  const time_t now = time(nullptr);
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("runs") + " --json --from " +
                           day(now - 86400) + " --to " + day(now + 86400),
                       &out),
            0)
      << out;
  EXPECT_EQ(json::parse(out)["runs"].size(), static_cast<size_t>(kRuns));
  EXPECT_EQ(RunCommand(kCli + " points show " + dir.File("runs") + " --to 2001-01-01 2>&1", &out),
            1);
  EXPECT_NE(out.find("no run began in that range"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(kCli + " points show " + dir.File("runs") + " --from 2026-13-45 2>&1", &out),
            2);
  EXPECT_NE(out.find("is not a day"), std::string::npos) << out;
  // Kept, it is there: 20 runs.
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("runs") + " --keep_dirty --json", &out),
            0);
  EXPECT_EQ(json::parse(out)["tags"][0]["runs"].size(), static_cast<size_t>(kRuns));
}

TEST(PointsRecordTest, TagsCompareAndTheExportsRead) {
  TempDir dir;
  std::string out;
  // A: as built; B: the parse scope four times as slow (3 ms of spinning
  // against 12: a loaded machine that preempts A's spin for a few ms, as
  // two CPU hogs beside `ctest -j2` did, does not bring A up to B, where
  // twice as slow once did). 8 runs each, taken in turns (a directory
  // keeps adding runs), so that a machine busy for a while slows both
  // groups alike.
  for (int round = 0; round < 8; ++round) {
    for (const auto& [group, factor] : {std::pair{"a", "1"}, std::pair{"b", "4"}}) {
      ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File(group) + " -- " + kProg + " " +
                               dir.File(std::string("counter-") + group) + " 0 " + factor +
                               " >/dev/null 2>&1",
                           &out),
                0);
    }
  }
  ASSERT_EQ(RunCommand(kCli + " points tags " + dir.File("a"), &out), 0);
  EXPECT_NE(out.find("startup"), std::string::npos) << out;
  ASSERT_EQ(
      RunCommand(kCli + " points compare " + dir.File("a") + " " + dir.File("b") + " --json", &out),
      0)
      << out;
  std::map<std::string, bool> significant;
  std::map<std::string, double> change;  // B's mean against A's
  for (const json& r : json::parse(out)) {
    significant[r["segment"]] = r["significant"];
    change[r["segment"]] = r["mean_b_ns"].get<double>() / r["mean_a_ns"].get<double>() - 1;
  }
  EXPECT_TRUE(significant.at("parse (scope)")) << out;
  EXPECT_TRUE(significant.at("loaded -> ready")) << out;
  // The comparison's page, in Chromium: the table's rows and verdicts are
  // the command's, and each group's 8 runs a dot in each segment.
  const json rows = json::parse(out);
  ASSERT_EQ(RunCommand(kCli + " points compare " + dir.File("a") + " " + dir.File("b") +
                           " --html " + dir.File("c.html") + " >/dev/null 2>&1 && node " +
                           FIELDPROF_SOURCE_DIR + "/tests/tools/points/points_page.mjs " +
                           dir.File("c.html") + " " + dir.File("shots") + " --compare 2>&1",
                       &out),
            0)
      << out;
  const json page = json::parse(out.substr(out.rfind('{', out.rfind("\"state\""))));
  EXPECT_EQ(page["state"]["rows"], rows.size()) << out;
  // A dot per run the comparison kept: 8 a side, less the runs it removed
  // as dirty (a run a busy machine stretched to twice the median), which
  // the page's data names per group and tag ({"a": {"removed": {"startup":
  // 1}}, ...}).
  StatusOr<std::string> html = ReadWholeFile(dir.File("c.html"));
  ASSERT_TRUE(html.ok());
  const std::string open = "<script id=\"fp-data\" type=\"application/json\">";
  const size_t at = html->find(open);
  ASSERT_NE(at, std::string::npos) << "no page data";
  const size_t from = at + open.size();
  const json data = json::parse(html->substr(from, html->find("</script>", from) - from));
  const auto removed = [&](const char* group, const json& row) -> size_t {
    return data[group]["removed"].value(row["tag"].get<std::string>(), size_t{0});
  };
  // From 8 runs the rule removes at most one a tag (points compare --help).
  for (const char* group : {"a", "b"}) {
    for (const auto& [tag, n] : data[group]["removed"].items()) {
      EXPECT_LE(n.get<size_t>(), 1u) << group << " " << tag;
    }
  }
  size_t dots_a = 0, dots_b = 0;
  for (const json& r : rows) {
    dots_a += 8 - removed("a", r);
    dots_b += 8 - removed("b", r);
  }
  EXPECT_EQ(page["state"]["dots_a"], dots_a) << out << data["a"].dump() << data["b"].dump();
  EXPECT_EQ(page["state"]["dots_b"], dots_b) << out << data["a"].dump() << data["b"].dump();
  for (const json& r : rows) {
    const std::string shown = page["state"]["verdicts"][r["tag"].get<std::string>() + ": " +
                                                        r["segment"].get<std::string>()];
    EXPECT_EQ(shown == "—", !r["significant"].get<bool>()) << r.dump() << " shown " << shown;
    if (r["significant"].get<bool>()) {
      EXPECT_EQ(shown, r["mean_b_ns"].get<double>() > r["mean_a_ns"].get<double>() ? "B slower"
                                                                                   : "B faster");
    }
  }
  // The tip of B's last dot: its last kept run.
  const size_t last_b = 8 - removed("b", rows.back());
  EXPECT_NE(page["tip"].get<std::string>().find("B, run " + std::to_string(last_b) + ": "),
            std::string::npos)
      << out;
  // The unchanged segment moves far less. (Whether it is flagged is left
  // to the machine: on one whose cores are both busy, preemptions stretch
  // a few of its 2 ms spins, and 8 runs a side can call that a change.)
  EXPECT_LT(std::fabs(change.at("begin -> loaded")), change.at("parse (scope)") / 2) << out;

  // Chrome trace: a process per run; the scope as B/E, points as instants.
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("a") + " --chrome_trace " +
                           dir.File("t.json") + " --tree " + dir.File("t.fptree") + " >/dev/null",
                       &out),
            0);
  std::ifstream in(dir.File("t.json"));
  const json trace = json::parse(in);
  std::map<std::string, int> phases;
  for (const json& e : trace["traceEvents"]) phases[e["ph"].get<std::string>()]++;
  EXPECT_EQ(phases["M"], 8);
  EXPECT_EQ(phases["B"], 8);
  EXPECT_EQ(phases["E"], 8);
  EXPECT_EQ(phases["i"], 24);
  StatusOr<std::string> bytes = ReadWholeFile(dir.File("t.fptree"));
  ASSERT_TRUE(bytes.ok());
  StatusOr<tools::CallTree> t = tools::DecodeCallTree(*bytes);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const uint32_t parse = t->Find(tools::CallTree::kRoot, "startup:parse");
  ASSERT_NE(parse, tools::CallTree::kNone);
  EXPECT_EQ(t->self(parse, tools::Metric::kCalls), 8);
  EXPECT_GT(t->self(parse, tools::Metric::kTimeNs), 8 * 3000000);
}

// The table `points compare` prints: both groups named with their runs;
// where B's runs call a segment ten times as often, a call's time and the
// calls a run below its row; a tag only B has, said so.
TEST(PointsRecordTest, CompareSaysTheGroupsTheCallsAndWhatIsInOneOnly) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record --runs 3 -o " + dir.File("a") + " -- " + kBusy +
                           " 200 >/dev/null 2>&1",
                       &out),
            0);
  ASSERT_EQ(RunCommand(kCli + " points record --runs 2 -o " + dir.File("b") + " -- " + kBusy +
                           " 2000 --bad >/dev/null 2>&1",
                       &out),
            0);
  ASSERT_EQ(RunCommand(kCli + " points compare " + dir.File("a") + " " + dir.File("b"), &out), 0);
  EXPECT_NE(out.find("A  " + dir.File("a") + ": 3 runs of fieldprof_pointsprog\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("B  " + dir.File("b") + ": 2 runs of fieldprof_pointsprog\n"),
            std::string::npos)
      << out;
  // Each of the three segments of tag startup, then its call and its calls.
  std::istringstream lines(out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  for (const std::string segment : {"parse (scope)", "load -> parsed", "parsed -> load"}) {
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const std::string& l) {
      return l.rfind("startup ", 0) == 0 && l.find(" " + segment + " ") != std::string::npos;
    });
    ASSERT_NE(row, rows.end()) << segment << " in\n" << out;
    ASSERT_LT(row + 2, rows.end()) << out;
    EXPECT_NE(row[1].find("  a call "), std::string::npos) << segment << ":\n" << out;
    EXPECT_NE(row[2].find("  calls a run "), std::string::npos) << segment << ":\n" << out;
    const char* calls = segment == std::string("parsed -> load") ? " 199.0      1999.0  +904.5%"
                                                                 : " 200.0      2000.0  +900.0%";
    EXPECT_NE(row[2].find(calls), std::string::npos) << segment << ":\n" << out;
  }
  EXPECT_NE(out.find("\nonly in B: "), std::string::npos) << out;
  EXPECT_NE(out.find("startup2: alice wrote this -> alice wrote this"), std::string::npos) << out;
  EXPECT_EQ(out.find("only in A"), std::string::npos) << out;
  // The same runs on both sides: no call lines, nothing in one only.
  ASSERT_EQ(RunCommand(kCli + " points compare " + dir.File("a") + " " + dir.File("a"), &out), 0);
  EXPECT_NE(out.find("startup      parse (scope)"), std::string::npos) << out;
  EXPECT_EQ(out.find("a call"), std::string::npos) << out;
  EXPECT_EQ(out.find("only in"), std::string::npos) << out;
  // No segment in common: said, not an empty table.
  ASSERT_EQ(RunCommand(
                kCli + " points compare " + dir.File("a") + " " + dir.File("b") + " --tag startup2",
                &out),
            0);
  EXPECT_NE(out.find("No segment is in both groups"), std::string::npos) << out;
  EXPECT_NE(out.find("only in B: startup2: alice wrote this -> alice wrote this\n"),
            std::string::npos)
      << out;
  // A directory with no runs in it is an error, said, not an empty table.
  std::filesystem::create_directory(dir.File("none"));
  for (const std::string& verb :
       {std::string("show "), std::string("tags "), "compare " + dir.File("a") + " "}) {
    EXPECT_EQ(RunCommand(kCli + " points " + verb + dir.File("none") + " 2>&1", &out), 1) << verb;
    EXPECT_NE(out.find(dir.File("none") + ": no recorded runs here"), std::string::npos) << out;
  }
}

// show --calls: each segment's single occurrences over the runs kept, in
// the field's log2 histogram (its count, quantiles and buckets in the
// JSON as "each"); the page draws one histogram per segment passed more
// than once a run, holding every occurrence.
TEST(PointsRecordTest, ShowCallsGivesEachOccurrenceInTheFieldsHistogram) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record --runs 3 -o " + dir.File("r") + " -- " + kBusy +
                           " 500 >/dev/null 2>&1",
                       &out),
            0);
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("r") + " --json", &out), 0);
  const json j = json::parse(out);
  ASSERT_EQ(j["tags"].size(), 1u) << out;
  const std::map<std::string, uint64_t> want = {
      {"parse (scope)", 1500}, {"load -> parsed", 1500}, {"parsed -> load", 1497}};
  std::vector<uint64_t> counts;
  for (const auto& [name, count] : want) {
    const json* s = Segment(j["tags"][0], name);
    ASSERT_NE(s, nullptr) << name << ": " << out;
    const json& each = (*s)["each"];
    EXPECT_EQ(each["count"].get<uint64_t>(), count) << each.dump();
    counts.push_back(count);
    uint64_t in_buckets = 0;
    for (const json& b : each["buckets"]) in_buckets += b[1].get<uint64_t>();
    EXPECT_EQ(in_buckets, count) << each.dump();
    // The mean of the occurrences is the segment's time a call.
    EXPECT_NEAR(each["mean_ns"].get<double>(), (*s)["per_call_ns"].get<double>(),
                1e-9 * (*s)["per_call_ns"].get<double>())
        << each.dump();
    EXPECT_LE(each["min_ns"].get<double>(), each["p50_ns"].get<double>()) << each.dump();
    EXPECT_LE(each["p50_ns"].get<double>(), each["p90_ns"].get<double>()) << each.dump();
    EXPECT_LE(each["p90_ns"].get<double>(), each["p99_ns"].get<double>()) << each.dump();
    EXPECT_LE(each["p99_ns"].get<double>(), each["max_ns"].get<double>()) << each.dump();
  }
  // The text: a line and its buckets per segment, under the table.
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("r") + " --calls", &out), 0);
  const size_t at = out.find("  each occurrence, over the runs kept:\n");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_NE(out.find("  parse (scope) ", at), std::string::npos) << out;
  EXPECT_NE(out.find(" 1,497  mean ", at), std::string::npos) << out;
  EXPECT_NE(out.find(" .. ", at), std::string::npos) << out;  // a bucket's range
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("r"), &out), 0);
  EXPECT_EQ(out.find("each occurrence"), std::string::npos) << out;
  // The page, in Chromium: a histogram for each of the three segments,
  // together every occurrence; the slowest bucket hovered says its count.
  json page;
  ASSERT_NO_FATAL_FAILURE(PageState(dir, "r", " --histograms", &page, &out));
  std::vector<uint64_t> drawn = page["first"]["histograms"].get<std::vector<uint64_t>>();
  std::sort(drawn.begin(), drawn.end());
  std::sort(counts.begin(), counts.end());
  EXPECT_EQ(drawn, counts) << out;
  EXPECT_NE(page["tip"].get<std::string>().find("occurrence"), std::string::npos) << out;
}

// A program quiet for 100 ms, then busy: 240,000 events in about 50 ms.
// The drain, finding nothing at first, sleeps up to 50 ms; the thread
// whose ring fills a quarter wakes it, so that the ring never fills
// (without that wake, 38-68% of the events were lost on this project's VM).
// A little slack for a machine running other tests beside this one.
TEST(PointsRecordTest, AQuietProgramTurningBusyLosesNoEvents) {
  TempDir dir;
  json j;
  ASSERT_NO_FATAL_FAILURE(RecordAndShow(dir, "q", kBusy + " 60000 --quiet-first 100", &j));
  const json r = j["runs"][0];
  EXPECT_EQ(r["events"].get<long>() + r["lost"].get<long>(), 240000) << r.dump();
  EXPECT_LE(r["lost"].get<long>(), 2400) << r.dump();
}

// Many events, faster than one drain takes them: every one is in the
// file or counted as lost, and the file is whole (the exit's drain ran).
TEST(PointsRecordTest, EveryEventOfABusyRunIsWrittenOrCounted) {
  TempDir dir;
  constexpr long kRounds = 300000;
  json j;
  ASSERT_NO_FATAL_FAILURE(RecordAndShow(dir, "busy", kBusy + " " + std::to_string(kRounds), &j));
  ASSERT_EQ(j["runs"].size(), 1u);
  const json& r = j["runs"][0];
  EXPECT_TRUE(r["complete"].get<bool>()) << r.dump();
  EXPECT_EQ(r["events"].get<long>() + r["lost"].get<long>(), 4 * kRounds) << r.dump();
  // FP_POINT("load") then FP_POINT_V("parsed"): both directions, every round.
  const json* load = Segment(j["tags"][0], "load -> parsed");
  ASSERT_NE(load, nullptr) << j.dump().substr(0, 2000);
  if (r["lost"] == 0) {
    EXPECT_EQ((*load)["count"][0], kRounds);
  }
}

// --at on a library whose own thread already runs the functions when the
// library is first looked at: busy_leaf's entry is moved through the
// padding beside it; busy_push's first instruction is one byte, so its
// entry stays and its direct call is re-aimed. The calls after that are
// scopes, and the thread's results are right throughout.
TEST(PointsRecordTest, AtFunctionsAThreadIsRunningAreMovedOrReAimed) {
  TempDir dir;
  std::string out;
  const std::string lib = FIELDPROF_BUSYLIB;
  ASSERT_EQ(RunCommand(kCli +
                           " points record --at libfieldprof_busylib.so:busy_leaf,"
                           "libfieldprof_busylib.so:busy_push -o " +
                           dir.File("busy") + " -- " + FIELDPROF_INMODULE + " --busy " + lib +
                           " 200 2>" + dir.File("said"),
                       &out),
            0)
      << out;
  EXPECT_EQ(out, "busy wrong 0\n");
  StatusOr<std::string> said = ReadWholeFile(dir.File("said"));
  ASSERT_TRUE(said.ok());
  EXPECT_NE(said->find("--at libfieldprof_busylib.so:busy_leaf: a scope at every call"),
            std::string::npos)
      << *said;
  EXPECT_NE(said->find("--at libfieldprof_busylib.so:busy_push: scopes at calls from other "
                       "modules and 1 direct calls in its own (a second thread ran"),
            std::string::npos)
      << *said;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("busy") + " --json", &out), 0) << out;
  const json j = json::parse(out);
  ASSERT_EQ(j["tags"].size(), 1u) << out.substr(0, 2000);
  for (const char* f : {"busy_leaf (scope)", "busy_push (scope)"}) {
    const json* seg = Segment(j["tags"][0], f);
    ASSERT_NE(seg, nullptr) << f << "\n" << out.substr(0, 2000);
    EXPECT_GE((*seg)["count"][0].get<long>(), 1000) << seg->dump();
  }
  // Both scopes of at least the 200 rounds after busy_join began: 100
  // calls of each function a round, two events a call, written or counted
  // as lost (the thread makes them faster than the drain writes them).
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_GE(j["runs"][0]["events"].get<long>() + j["runs"][0]["lost"].get<long>(),
            200 * 100 * 2 * 2)
      << j["runs"].dump();

  // With --stacks, through both ways out of a measured call (busy_leaf's
  // moved entry returns through fp_detour_return, busy_push's re-aimed
  // call through the stub's fp_return_point): each call's stack starts in
  // Round and goes on to the thread's start, and the thread's results are
  // still right. A begin whose end the full ring lost has no stack either.
  ASSERT_EQ(RunCommand(kCli +
                           " points record --stacks --at libfieldprof_busylib.so:busy_leaf,"
                           "libfieldprof_busylib.so:busy_push -o " +
                           dir.File("stacks") + " -- " + FIELDPROF_INMODULE + " --busy " + lib +
                           " 200 2>/dev/null",
                       &out),
            0)
      << out;
  EXPECT_EQ(out, "busy wrong 0\n");
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("stacks") + " --stacks --json", &out), 0)
      << out.substr(0, 2000);
  const json sj = json::parse(out);
  const int64_t lost = sj["report"]["runs"][0]["lost"].get<int64_t>();
  std::map<std::string, uint64_t> with_stack;
  for (const json& site : sj["stacks"]["sites"]) {
    const std::string name = site["name"];
    EXPECT_LE(site["without_stack"].get<int64_t>(), lost) << site.dump().substr(0, 2000);
    for (const json& s : site["stacks"]) {
      const auto frames = s["frames"].get<std::vector<std::string>>();
      ASSERT_FALSE(frames.empty()) << s.dump();
      EXPECT_EQ(frames.back(), "(anonymous namespace)::Round()") << name << " " << s.dump();
      EXPECT_NE(std::find(frames.begin(), frames.end(), "start_thread"), frames.end())
          << name << " " << s.dump();
      with_stack[name] += s["events"].get<uint64_t>();
    }
  }
  EXPECT_GE(with_stack["busy_leaf"], 1000u) << sj["stacks"].dump().substr(0, 2000);
  EXPECT_GE(with_stack["busy_push"], 1000u) << sj["stacks"].dump().substr(0, 2000);
}

// Every value a point can carry, time gaps of several bytes and more
// sites than one byte numbers come back exactly as the program made them
// (the recorder packs each field in as few bytes as hold it).
TEST(PointsRecordTest, EdgeValuesGapsAndManySitesReadBackExactly) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("edge") + " -- " + kBusy +
                           " 0 --values 2>" + dir.File("said"),
                       &out),
            0)
      << out;
  StatusOr<std::vector<fieldprof::PointsRun>> runs = fieldprof::ReadPointsRuns({dir.File("edge")});
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 1u);
  const fieldprof::PointsRun& r = (*runs)[0];
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.lost, 0u);
  // What the program says it made; among them both ends of int64_t and a
  // value whose zigzag code takes exactly 7 bytes.
  std::vector<int64_t> want;
  std::istringstream made(out);
  for (std::string word; made >> word;) {
    if (word == "edge") {
      long long v = 0;
      made >> v;
      want.push_back(v);
    }
  }
  ASSERT_GE(want.size(), 19u) << out;
  for (const int64_t v : {INT64_MIN, INT64_MAX, int64_t{1} << 50}) {
    EXPECT_NE(std::find(want.begin(), want.end(), v), want.end()) << v;
  }
  std::vector<int64_t> values;
  std::vector<int64_t> times;
  std::vector<std::string> many;
  for (const fieldprof::PointEvent& e : r.events) {
    const fieldprof::PointSite& site = r.sites.at(e.site);
    if (site.tag == "edge" && site.name == "v") {
      values.push_back(e.value);
      times.push_back(e.t_ns);
    } else if (site.tag == "many") {
      many.push_back(site.name);
      EXPECT_EQ(e.value, 0);
    }
  }
  EXPECT_EQ(values, want);
  // From the 4th point on, 20 ms of sleep before each: the gaps read as such.
  ASSERT_EQ(times.size(), want.size());
  for (size_t i = 3; i < times.size(); ++i) {
    EXPECT_GE(times[i] - times[i - 1], 20'000'000) << "point " << i;
    EXPECT_LT(times[i] - times[i - 1], 2'000'000'000) << "point " << i;
  }
  // 80 sites of their own, in the order the program made them.
  ASSERT_EQ(many.size(), 80u);
  for (int i = 0; i < 80; ++i) EXPECT_EQ(many[i], "p" + std::to_string(10 + i));
  EXPECT_GE(r.sites.size(), 81u);
}

// More threads than cores passing points as fast as they can: their rings
// fill faster than the drain, which has a share of the CPUs only, empties
// them. A thread whose ring is full waits for the drain instead of losing
// the event, and the wait is taken out of its times: every event is in
// the file (a wait that found no room in 100 ms loses its event, counted:
// a disk held up the drain), and `show` says how often and how long they
// waited. Before, 4 threads on 2 cores lost 69% of 36 million events.
TEST(PointsRecordTest, AThreadWhoseRingIsFullWaitsForTheDrain) {
  TempDir dir;
  constexpr int kThreads = 4, kRounds = 400000;
  std::string out;
  ASSERT_EQ(
      RunCommand(kCli + " points record -o " + dir.File("full") + " -- " + kBusy + " " +
                     std::to_string(kRounds) + " --threads " + std::to_string(kThreads) + " 2>&1",
                 &out),
      0)
      << out;
  StatusOr<std::vector<fieldprof::PointsRun>> runs = fieldprof::ReadPointsRuns({dir.File("full")});
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 1u);
  const fieldprof::PointsRun& r = (*runs)[0];
  EXPECT_TRUE(r.complete);
  constexpr uint64_t kEvents = uint64_t{kThreads} * (2 + 3 * kRounds);
  EXPECT_EQ(r.events.size() + r.lost, kEvents);
  EXPECT_LT(r.lost, kEvents / 100);
  EXPECT_GT(r.waits, 0u);
  EXPECT_GT(r.wait_ns, 0u);
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("full") + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("note: threads found their buffer full " + std::to_string(r.waits) +
                     " time(s) and waited "),
            std::string::npos)
      << out;
}

// A program that starts and ends thousands of threads, one after the
// other, each passing points: a thread that ends gives its ring back for
// the next, once the drain has taken what it held. Every event is in the
// file under the thread that passed it, every scope ends on its thread,
// and the program's memory stays flat. Before, each thread left a ring
// behind: some 4 KiB a thread (203 MB for 50,000), and a drain walking
// every one of them.
TEST(PointsRecordTest, ThreadsEndingOneAfterAnotherLeaveNoRingBehind) {
  TempDir dir;
  constexpr int kThreads = 4000, kRounds = 1;
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("turns") + " -- " + kBusy + " " +
                           std::to_string(kRounds) + " --threads-in-turn " +
                           std::to_string(kThreads) + " 2>" + dir.File("said"),
                       &out),
            0)
      << out;
  StatusOr<std::vector<fieldprof::PointsRun>> runs = fieldprof::ReadPointsRuns({dir.File("turns")});
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 1u);
  const fieldprof::PointsRun& r = (*runs)[0];
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.lost, 0u);
  // Per thread: its scope's begin and end, and a work scope and a step
  // point each round.
  EXPECT_EQ(r.events.size(), size_t{kThreads} * (2 + 3 * kRounds));
  // The threads' ids, as the program read them, in turn (an id may come
  // again: the kernel reuses them).
  std::vector<uint32_t> tids;
  {
    const size_t t = out.find("tids");
    ASSERT_NE(t, std::string::npos) << out;
    std::istringstream in(out.substr(t + 4));
    for (uint32_t tid; in >> tid;) tids.push_back(tid);
  }
  ASSERT_EQ(tids.size(), size_t{kThreads});
  // In time order, thread after thread: each one's events, all under its
  // own id, from its scope's begin to its end.
  size_t k = 0, in_block = 0;
  for (const fieldprof::PointEvent& e : r.events) {
    const fieldprof::PointSite& site = r.sites.at(e.site);
    ASSERT_LT(k, tids.size());
    ASSERT_EQ(e.tid, tids[k]) << "thread " << k << ", its event " << in_block;
    if (in_block == 0) {
      EXPECT_TRUE(site.name == "thread" && e.kind == fieldprof::PointKind::kBegin) << k;
    }
    if (++in_block == 2 + 3 * kRounds) {
      EXPECT_TRUE(site.name == "thread" && e.kind == fieldprof::PointKind::kEnd) << k;
      ++k;
      in_block = 0;
    }
  }
  EXPECT_EQ(k, tids.size());
  // Memory: a ring left per thread grows it by a page or more a thread
  // (16 MB); rings taken again, by their events' few slots (some 0.5 MB).
  long growth = -1;
  const size_t at = out.find("rss_growth_kib ");
  ASSERT_NE(at, std::string::npos) << out;
  growth = std::atol(out.c_str() + at + 15);
  EXPECT_LT(growth, kThreads * 4 / 2) << "KiB; a ring left per thread";
}

// A program that execs when its points are done: they are in its file,
// drained before the exec (its drain thread had not woken yet).
TEST(PointsRecordTest, AnExecKeepsThePointsBeforeIt) {
  TempDir dir;
  json j;
  ASSERT_NO_FATAL_FAILURE(RecordAndShow(dir, "exec", kBusy + " 1000 --exec", &j));
  ASSERT_EQ(j["runs"].size(), 1u) << j.dump();  // /bin/true has no points: no file
  EXPECT_EQ(j["runs"][0]["events"], 4 * 1000) << j.dump().substr(0, 1000);
  EXPECT_FALSE(j["runs"][0]["complete"].get<bool>());
}

// A program without points of its own opens a plugin that has some,
// calls it, closes it, and does all that again (the plugin may come back
// at the same address). Both rounds' points are in the run's file, which
// is in the directory asked for; the program ends as it does alone. Before:
// the file went to / (the directory's name was lost once the recorder's
// constructor had run), the second round's points were not armed, and
// the drain thread, reading the names of points in the closed plugin,
// killed the program with SIGSEGV.
TEST(PointsRecordTest, APluginOpenedAndClosedTwiceIsRecordedWhole) {
  TempDir dir;
  json j;
  ASSERT_NO_FATAL_FAILURE(RecordAndShow(
      dir, "plugin",
      std::string(FIELDPROF_INMODULE) + " --dlopen " + FIELDPROF_POINTSPLUGIN + " 1000", &j));
  ASSERT_EQ(j["runs"].size(), 1u) << j.dump().substr(0, 2000);
  EXPECT_TRUE(j["runs"][0]["complete"].get<bool>()) << j["runs"].dump();
  EXPECT_EQ(j["runs"][0]["events"], 2 * 1000 * 3) << j["runs"].dump();
  ASSERT_EQ(j["tags"].size(), 1u) << j.dump().substr(0, 2000);
  EXPECT_EQ(j["tags"][0]["tag"], "plugin");
  const json* work = Segment(j["tags"][0], "work (scope)");
  const json* tick = Segment(j["tags"][0], "tick -> tick");
  ASSERT_NE(work, nullptr) << j["tags"].dump().substr(0, 2000);
  ASSERT_NE(tick, nullptr) << j["tags"].dump().substr(0, 2000);
  EXPECT_EQ((*work)["count"][0], 2000) << work->dump();
  EXPECT_EQ((*tick)["count"][0], 1999) << tick->dump();
}

// A plugin's own constructor and destructor pass points as it is opened
// and closed, twice: the constructor's `load` scope, before the recorder
// has seen the plugin come in (dlopen has not returned), and the `unload`
// point of a static object's destructor, after the recorder's last drain
// before the close (a moment later the plugin's memory, its points' names
// with it, is gone). Each is recorded every time, named, and with its
// stack: the constructor's through dlopen. The program ends as alone.
// The same with a function placed by --at (the front and the runtime
// loaded too: the recorder still hears of the plugin's coming and going,
// not the front). Before: no `load` event at all, and the drain read
// `unload`'s name in memory no longer mapped: the program died of SIGSEGV.
// With the front before the recorder in LD_PRELOAD, each closing's
// `unload` was counted lost.
TEST(PointsRecordTest, APluginsConstructorAndDestructorPointsAreRecordedWithStacks) {
  for (const std::string at : {"", "--at fieldprof_inmodule:main "}) {
    SCOPED_TRACE(at);
    TempDir dir;
    const std::string cmd =
        std::string(FIELDPROF_INMODULE) + " --dlopen " + FIELDPROF_CTORPLUGIN + " 100";
    std::string plain, out;
    ASSERT_EQ(RunCommand(cmd, &plain), 0);
    ASSERT_EQ(RunCommand(kCli + " points record --stacks " + at + "-o " + dir.File("p") + " -- " +
                             cmd + " 2>/dev/null",
                         &out),
              0)
        << out;
    EXPECT_EQ(out, plain);
    ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("p") + " --stacks --json", &out), 0)
        << out;
    const json j = json::parse(out);
    const json& run = j["report"]["runs"][0];
    EXPECT_TRUE(run["complete"].get<bool>()) << run.dump();
    const int placed = at.empty() ? 0 : 2;  // main's begin and end
    EXPECT_EQ(run["events"], 2 * (2 + 100 + 1) + placed) << run.dump();
    EXPECT_EQ(run["lost"], 0) << run.dump();
    std::map<std::string, uint64_t> events;
    for (const json& site : j["stacks"]["sites"]) {
      events[site["name"].get<std::string>()] = site["events"].get<uint64_t>();
      EXPECT_EQ(site["without_stack"], 0) << site.dump();
      for (const json& s : site["stacks"]) {
        const auto frames = s["frames"].get<std::vector<std::string>>();
        const auto has = [&frames](const char* f) {
          return std::find(frames.begin(), frames.end(), f) != frames.end();
        };
        // The program's function that opens and closes it (main's own,
        // inlined), outside.
        const char* const opener = "OpenAndClose(char const*, long, int, bool, bool)";
        if (site["name"] == "load") {
          EXPECT_EQ(frames.back(), "plugin_start") << s.dump();
          EXPECT_TRUE(has("dlopen") && has(opener)) << s.dump();
        } else if (site["name"] == "unload") {
          EXPECT_EQ(frames.back(), "(anonymous namespace)::Registry::~Registry()") << s.dump();
          EXPECT_TRUE(has("dlclose") && has(opener)) << s.dump();
        }
      }
    }
    // A scope's events here are its begins.
    std::map<std::string, uint64_t> want{{"load", 2}, {"tick", 200}, {"unload", 2}};
    if (!at.empty()) want["main"] = 1;
    EXPECT_EQ(events, want) << j["stacks"].dump().substr(0, 3000);
  }
}

// The same plugin standing for one built with an older points.h, which
// does not tell the recorder of its going: its `unload` point is passed
// after the recorder's last drain before the close, and its name may be
// gone by the time the drain reads it (always for the last close: the
// program ends after it). The recorder reads names through the kernel, so
// such a point is counted as lost, never a crash; the program ends as
// alone. Before: SIGSEGV in the drain thread.
TEST(PointsRecordTest, APointWhoseModuleIsGoneIsCountedLostNotACrash) {
  TempDir dir;
  const std::string cmd =
      std::string(FIELDPROF_INMODULE) + " --dlopen " + FIELDPROF_CTORPLUGIN + " 100";
  std::string plain, out;
  ASSERT_EQ(RunCommand("FIELDPROF_TEST_OLD_HEADER=1 " + cmd, &plain), 0);
  ASSERT_EQ(RunCommand("FIELDPROF_TEST_OLD_HEADER=1 " + kCli + " points record -o " +
                           dir.File("p") + " -- " + cmd,
                       &out),
            0)
      << out;
  EXPECT_EQ(out, plain);
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("p") + " --json", &out), 0) << out;
  const json j = json::parse(out);
  const json& run = j["runs"][0];
  EXPECT_TRUE(run["complete"].get<bool>()) << run.dump();
  // Each unload is named or counted lost; the last one is lost.
  EXPECT_GE(run["lost"].get<uint64_t>(), 1u) << run.dump();
  EXPECT_EQ(run["events"].get<uint64_t>() + run["lost"].get<uint64_t>(), 2u * (2 + 100 + 1))
      << run.dump();
}

// --at: the processes around the program (a shell) that never load the
// module named leave no file (before: a file each, and `show` named the
// runs after the shell); the program, which opens the library, calls it,
// closes it and does it again, has both calls (before: the second copy,
// loaded where the first had been, was taken for moved already, and its
// call was not timed).
TEST(PointsRecordTest, AtRecordsTheProcessThatOpensTheModuleEachTimeItDoes) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record --at libfieldprof_testlib2.so:fp_test2_outer -o " +
                           dir.File("at") + " -- sh -c '" + FIELDPROF_INMODULE + " --dlopen " +
                           FIELDPROF_TESTLIB2 + " 50; /bin/true' 2>&1",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("1 process file, 4 events"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("at") + " --json", &out), 0) << out;
  const json j = json::parse(out);
  ASSERT_EQ(j["runs"].size(), 1u) << j["runs"].dump().substr(0, 2000);
  EXPECT_EQ(j["runs"][0]["program"], "fieldprof_inmodule") << j["runs"].dump();
  EXPECT_TRUE(j["runs"][0]["complete"].get<bool>()) << j["runs"].dump();
  ASSERT_EQ(j["tags"].size(), 1u) << j["tags"].dump().substr(0, 2000);
  const json* outer = Segment(j["tags"][0], "fp_test2_outer (scope)");
  ASSERT_NE(outer, nullptr) << j["tags"].dump().substr(0, 2000);
  EXPECT_EQ((*outer)["count"][0], 2) << outer->dump();
}

// -o with a bare name: a directory in the current one, which the program
// may leave (the recorder writes where record said, made absolute).
TEST(PointsRecordTest, ABareOutputNameIsADirectoryHere) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(
      RunCommand("cd " + dir.path() + " && " + kCli + " points record -o bare -- sh -c 'cd / && " +
                     kProg + " " + dir.File("counter") + " 0' >/dev/null 2>&1",
                 &out),
      0);
  ASSERT_EQ(RunCommand("cd " + dir.path() + " && " + kCli + " points show bare --json", &out), 0)
      << out;
  EXPECT_EQ(json::parse(out)["runs"].size(), 1u) << out;
}

// --stacks: each point's stack, from the function that passed it out.
// `step` (a point, then a scope) is called 30 times from via_a and 70 from
// via_b, in 3 runs; a thread's scopes are passed in worker_loop. show
// --stacks tells the two callers apart with their counts, and the scope's
// means by caller make up its mean per call; the Chrome trace carries each
// event's stack. Recorded without --stacks, there are none, and show says
// so.
// The command names each run's stacks as the run ends, in its file: they
// read the same once the program is gone (another machine, a rebuild, an
// aggregator), where its modules cannot be read.
TEST(PointsRecordTest, StacksAreNamedAsEachRunEndsAndReadWithoutTheProgram) {
  TempDir dir;
  const std::string prog = dir.File("fieldprof_pointstacks_copy");
  std::filesystem::copy_file(kStacksProg, prog);
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record --stacks --runs 2 -o " + dir.File("s") + " -- " +
                           prog + " 30 70 5 2>&1",
                       &out),
            0)
      << out;
  std::string named;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("s") + " --stacks --json", &named), 0);
  std::filesystem::remove(prog);
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("s") + " --stacks --json", &out), 0)
      << out;
  const json st = json::parse(out)["stacks"];
  EXPECT_EQ(st["runs_named"], 2) << st.dump();
  EXPECT_EQ(st, json::parse(named)["stacks"]);
  uint64_t via_b = 0;
  for (const json& site : st["sites"]) {
    if (site["name"] != "step") continue;
    for (const json& s : site["stacks"]) {
      const auto frames = s["frames"].get<std::vector<std::string>>();
      EXPECT_EQ(frames.back(), "step") << s.dump();
      if (frames[frames.size() - 2] == "via_b") via_b += s["events"].get<uint64_t>();
    }
  }
  EXPECT_EQ(via_b, 140u) << st.dump();
}

// Records CMD under `points record --auto` into DIR and gives what
// `points show --json` shows of it, and its tag "auto".
void RecordAutoPoints(const std::string& cmd, const TempDir& dir, json* shown) {
  std::string out;
  ASSERT_EQ(
      RunCommand(kCli + " points record --auto -o " + dir.File("a") + " -- " + cmd + " 2>&1", &out),
      0)
      << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("a") + " --json", &out), 0) << out;
  *shown = json::parse(out);
}

const json* AutoTag(const json& shown) {
  const json* tag = nullptr;
  for (const json& t : shown["tags"]) tag = t["tag"] == "auto" ? &t : tag;
  return tag;
}

// A thread that ends by pthread_exit, not by returning, still ends its
// scope: the recorder is built without C++ exceptions, so the scope's end
// is a cancellation cleanup, which the forced unwinding runs.
TEST(PointsRecordTest, AutoPointsEndAThreadThatEndsByPthreadExit) {
  TempDir dir;
  json j;
  ASSERT_NO_FATAL_FAILURE(RecordAutoPoints(
      std::string(FIELDPROF_INMODULE) + " --dlopen " + FIELDPROF_CTORPLUGIN + " 2 --thread_exit",
      dir, &j));
  const json* tag = AutoTag(j);
  ASSERT_NE(tag, nullptr) << j.dump();
  const json* thread = Segment(*tag, "thread (scope)");
  ASSERT_NE(thread, nullptr) << tag->dump();
  EXPECT_EQ((*thread)["runs"].get<int>(), 1) << tag->dump();
  uint64_t ended = 0;
  for (const json& c : (*thread)["count"]) ended += c.get<uint64_t>();
  EXPECT_EQ(ended, 1u) << thread->dump();
}

// Points nobody wrote (--auto): a shell that runs a program, which opens
// a library twice with a thread running, and then execs /bin/true. Each
// process has its start and main; the shell's image ends in an exec, the
// others in an exit; each dlopen is a scope (its constructors inside it);
// the second thread is a scope on its own thread. Without --auto none of
// it is there, and the shell, with no point of its own, leaves no file.
TEST(PointsRecordTest, AutoPointsReadAStartupWithoutTouchingTheCode) {
  TempDir dir;
  const std::string program = std::string("sh -c '") + FIELDPROF_INMODULE + " --dlopen " +
                              FIELDPROF_CTORPLUGIN + " 2 --thread >/dev/null; exec /bin/true'";
  const std::string cmd = " -- " + program;
  std::string out;
  json j;
  ASSERT_NO_FATAL_FAILURE(RecordAutoPoints(program, dir, &j));
  std::vector<std::string> programs;
  for (const json& r : j["runs"]) programs.push_back(r["program"]);
  std::sort(programs.begin(), programs.end());
  EXPECT_EQ(programs, (std::vector<std::string>{"dash", "fieldprof_inmodule", "true"})) << j.dump();
  const json* tag = AutoTag(j);
  ASSERT_NE(tag, nullptr) << j.dump();
  const auto runs_of = [&](const std::string& name) -> int {
    const json* s = Segment(*tag, name);
    return s == nullptr ? 0 : (*s)["runs"].get<int>();
  };
  EXPECT_EQ(runs_of("start -> main"), 3) << tag->dump();
  EXPECT_EQ(runs_of("main -> exec"), 1) << tag->dump();
  EXPECT_EQ(runs_of("main -> exit"), 2) << tag->dump();
  EXPECT_EQ(runs_of("thread (scope)"), 1) << tag->dump();
  const std::string dlopen =
      "dlopen " + std::filesystem::path(FIELDPROF_CTORPLUGIN).filename().string();
  const json* opened = Segment(*tag, dlopen + " (scope)");
  ASSERT_NE(opened, nullptr) << tag->dump();
  uint64_t opens = 0;
  for (const json& c : (*opened)["count"]) opens += c.get<uint64_t>();
  EXPECT_EQ(opens, 2u) << opened->dump();
  // The library's constructor ran inside each dlopen's scope: its `load`
  // scope begins and ends between the dlopen's begin and end.
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("a") + " --chrome_trace " +
                           dir.File("t.json") + " >/dev/null",
                       &out),
            0);
  StatusOr<std::string> trace = ReadWholeFile(dir.File("t.json"));
  ASSERT_TRUE(trace.ok());
  bool inside = false;  // in the file's order, which is by time
  int loads_inside = 0;
  const json events = json::parse(*trace)["traceEvents"];
  for (const json& e : events) {
    const std::string name = e.value("name", ""), ph = e.value("ph", "");
    if (name == dlopen) inside = ph == "B";
    if (name == "load" && ph == "E" && inside) ++loads_inside;
  }
  EXPECT_EQ(loads_inside, 2) << *trace;

  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("b") + cmd + " 2>&1", &out), 0)
      << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("b") + " --json", &out), 0) << out;
  const json plain = json::parse(out);
  ASSERT_EQ(plain["runs"].size(), 1u) << out;
  EXPECT_EQ(plain["runs"][0]["program"], "fieldprof_inmodule");
  for (const json& t : plain["tags"]) EXPECT_NE(t["tag"], "auto") << out;
}

TEST(PointsRecordTest, StacksTellWhereEachPointWasPassedFrom) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record --stacks --runs 3 -o " + dir.File("s") + " -- " +
                           kStacksProg + " 30 70 5 2>&1",
                       &out),
            0)
      << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("s") + " --stacks --json", &out), 0)
      << out;
  const json j = json::parse(out);
  const json& st = j["stacks"];
  EXPECT_EQ(st["runs"], 3);
  EXPECT_EQ(st["runs_with_stacks"], 3);
  std::map<std::string, uint64_t> step_by_caller, inner_by_caller;
  double inner_ns = 0;
  bool work_seen = false;
  for (const json& site : st["sites"]) {
    EXPECT_EQ(site["without_stack"], 0) << site.dump();
    for (const json& s : site["stacks"]) {
      const auto frames = s["frames"].get<std::vector<std::string>>();
      ASSERT_GE(frames.size(), 2u) << s.dump();
      // Outermost first: the function that passed the point is last.
      if (site["name"] == "step") {
        EXPECT_EQ(frames.back(), "step") << s.dump();
        EXPECT_NE(std::find(frames.begin(), frames.end(), "main"), frames.end()) << s.dump();
        step_by_caller[frames[frames.size() - 2]] += s["events"].get<uint64_t>();
        EXPECT_EQ(s["runs"], 3);
      } else if (site["name"] == "inner") {
        EXPECT_TRUE(site["scope"].get<bool>());
        EXPECT_EQ(frames.back(), "step") << s.dump();
        inner_by_caller[frames[frames.size() - 2]] += s["ended"].get<uint64_t>();
        inner_ns += s["mean_ns"].get<double>() * s["ended"].get<double>();
      } else if (site["name"] == "work") {
        EXPECT_TRUE(site["scope"].get<bool>());
        EXPECT_EQ(frames.back(), "worker_loop") << s.dump();
        EXPECT_EQ(site["events"], 15);
        work_seen = true;
      }
    }
  }
  EXPECT_TRUE(work_seen) << st.dump();
  EXPECT_EQ(step_by_caller, (std::map<std::string, uint64_t>{{"via_a", 90}, {"via_b", 210}}))
      << st.dump();
  EXPECT_EQ(inner_by_caller, step_by_caller) << st.dump();
  // The means by caller, weighted by their calls, are the report's mean
  // per call of the scope.
  const json* inner = nullptr;
  for (const json& tag : j["report"]["tags"]) inner = inner ? inner : Segment(tag, "inner (scope)");
  ASSERT_NE(inner, nullptr) << j["report"].dump();
  EXPECT_NEAR(inner_ns / 300, (*inner)["per_call_ns"].get<double>(),
              1e-6 * (*inner)["per_call_ns"].get<double>());

  // The text names the callers, most events first.
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("s") + " --stacks", &out), 0) << out;
  const size_t b = out.find("\n        via_b\n"), a = out.find("\n        via_a\n");
  EXPECT_NE(b, std::string::npos) << out;
  EXPECT_NE(a, std::string::npos) << out;
  EXPECT_LT(b, a) << out;
  EXPECT_NE(out.find(" 70.0%       210 events in 3 runs"), std::string::npos) << out;

  // The Chrome trace: each step event's stack in its args, outermost first.
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("s") + " --chrome_trace " +
                           dir.File("t.json") + " >/dev/null",
                       &out),
            0);
  StatusOr<std::string> trace = ReadWholeFile(dir.File("t.json"));
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  const json events = json::parse(*trace)["traceEvents"];
  size_t with_stack = 0;
  for (const json& e : events) {
    if (e.value("name", "") != "step") continue;
    ASSERT_TRUE(e.contains("args") && e["args"].contains("stack")) << e.dump();
    EXPECT_EQ(e["args"]["stack"].back(), "step");
    ++with_stack;
  }
  EXPECT_EQ(with_stack, 300u);

  // Functions placed with --at take their callers' stacks too: inside the
  // program and libc's getppid (their entries moved: they return through
  // fp_detour_return) and libc's rand (called through the runtime's stub:
  // fp_return_point, and fp_exit's slow path). Each stack
  // starts in the function that made the call and goes on through the
  // placed calls around it (via_a, via_b) to main; so do the stacks of the
  // program's own points inside them.
  ASSERT_EQ(RunCommand(kCli + " points record --stacks --runs 3 --at " +
                           "fieldprof_pointstacks:placed,fieldprof_pointstacks:via_a," +
                           "fieldprof_pointstacks:via_b,libc.so.6:getppid,libc.so.6:rand -o " +
                           dir.File("at") + " -- " + kStacksProg + " 30 70 5 2>&1",
                       &out),
            0)
      << out;
  for (const char* f : {"placed", "via_a", "via_b"}) {
    EXPECT_NE(out.find(std::string("fieldprof_pointstacks:") + f + ": a scope at every call"),
              std::string::npos)
        << f << "\n"
        << out;
  }
  EXPECT_NE(out.find("libc.so.6:rand: scopes at calls from other modules only"), std::string::npos)
      << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("at") + " --stacks --json", &out), 0)
      << out;
  const json at = json::parse(out)["stacks"];
  std::map<std::string, std::map<std::string, uint64_t>> at_by_caller;
  for (const json& site : at["sites"]) {
    const std::string name = site["name"];
    SCOPED_TRACE(name);
    EXPECT_EQ(site["without_stack"], 0) << site.dump();
    for (const json& s : site["stacks"]) {
      const auto frames = s["frames"].get<std::vector<std::string>>();
      ASSERT_GE(frames.size(), 2u) << s.dump();
      if (name == "placed" || name == "getppid" || name == "rand") {  // from via_a or via_b
        EXPECT_EQ(frames[frames.size() - 2], "main") << s.dump();
        at_by_caller[name][frames.back()] += s["ended"].get<uint64_t>();
      } else if (name == "via_a" || name == "via_b") {  // called from main
        EXPECT_EQ(frames.back(), "main") << s.dump();
        at_by_caller[name][frames.back()] += s["ended"].get<uint64_t>();
      } else if (name == "step") {  // a point inside step, called from via_a or via_b
        ASSERT_GE(frames.size(), 3u) << s.dump();
        EXPECT_EQ(frames.back(), "step") << s.dump();
        EXPECT_EQ(frames[frames.size() - 3], "main") << s.dump();
        at_by_caller[name][frames[frames.size() - 2]] += s["events"].get<uint64_t>();
      }
    }
  }
  for (const char* f : {"placed", "getppid", "rand", "step"}) {
    EXPECT_EQ(at_by_caller[f], step_by_caller) << f << "\n" << at.dump();
  }
  EXPECT_EQ(at_by_caller["via_a"], (std::map<std::string, uint64_t>{{"main", 3}})) << at.dump();
  EXPECT_EQ(at_by_caller["via_b"], (std::map<std::string, uint64_t>{{"main", 3}})) << at.dump();

  // As a call tree, each scope sits under its stack: placed's calls under
  // main > via_b (210) and main > via_a (90), the program's inner scope
  // under via_b > step. The scopes inside via_a's and via_b's count as
  // theirs, not twice: all under main adds up to via_a's and via_b's
  // durations, as the runs' own events give them.
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("at") + " --tree " +
                           dir.File("at.fptree") + " >/dev/null",
                       &out),
            0);
  StatusOr<std::string> tree_bytes = ReadWholeFile(dir.File("at.fptree"));
  ASSERT_TRUE(tree_bytes.ok());
  StatusOr<tools::CallTree> tree = tools::DecodeCallTree(*tree_bytes);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  uint32_t main_node = tools::CallTree::kNone;
  for (uint32_t i = 0; i < tree->size() && main_node == tools::CallTree::kNone; ++i) {
    if (tree->name(i) == "main") main_node = i;
  }
  ASSERT_NE(main_node, tools::CallTree::kNone);
  const auto calls = [&](const std::vector<std::string>& path) {
    uint32_t n = main_node;
    for (const std::string& f : path) n = n == tools::CallTree::kNone ? n : tree->Find(n, f);
    return n == tools::CallTree::kNone ? -1 : tree->self(n, tools::Metric::kCalls);
  };
  EXPECT_EQ(calls({"via_b", "fieldprof_pointstacks:placed"}), 210);
  EXPECT_EQ(calls({"via_a", "fieldprof_pointstacks:placed"}), 90);
  EXPECT_EQ(calls({"via_b", "libc.so.6:rand"}), 210);
  EXPECT_EQ(calls({"via_b", "step", "stacks:inner"}), 210);
  EXPECT_EQ(calls({"fieldprof_pointstacks:via_b"}), 3);
  StatusOr<std::vector<fieldprof::PointsRun>> at_runs = fieldprof::ReadPointsRuns({dir.File("at")});
  ASSERT_TRUE(at_runs.ok()) << at_runs.status().ToString();
  int64_t outer_ns = 0;
  for (const fieldprof::PointsRun& r : *at_runs) {
    int64_t begun = 0;
    for (const fieldprof::PointEvent& e : r.events) {
      const fieldprof::PointSite& site = r.sites[e.site];
      if (site.name != "via_a" && site.name != "via_b") continue;
      if (e.kind == fieldprof::PointKind::kBegin) begun = e.t_ns;
      if (e.kind == fieldprof::PointKind::kEnd) outer_ns += e.t_ns - begun;
    }
  }
  const int64_t under_main = tree->Totals(tools::Metric::kTimeNs)[main_node];
  EXPECT_GT(outer_ns, 0);
  EXPECT_NEAR(static_cast<double>(under_main), static_cast<double>(outer_ns), outer_ns * 0.01);

  // 200,000 points and scopes in a tight loop, five ring slots each: what
  // a full ring loses is counted in events, not in stacks, so the events
  // recorded and lost are exactly those passed; every point recorded has
  // its stack, or is counted without one.
  ASSERT_EQ(RunCommand(kCli + " points record --stacks -o " + dir.File("busy") + " -- " +
                           kStacksProg + " 0 200000 0 2>&1",
                       &out),
            0)
      << out;
  StatusOr<std::vector<fieldprof::PointsRun>> busy = fieldprof::ReadPointsRuns({dir.File("busy")});
  ASSERT_TRUE(busy.ok() && busy->size() == 1u) << busy.status().ToString();
  const fieldprof::PointsRun& one = (*busy)[0];
  EXPECT_EQ(one.events.size() + one.lost, 600000u) << one.lost << " lost";
  size_t with_stacks = 0, points = 0, begins = 0;
  for (const fieldprof::PointEvent& e : one.events) {
    with_stacks += e.stack != 0;
    points += e.kind == fieldprof::PointKind::kPoint;
    begins += e.kind == fieldprof::PointKind::kBegin;
  }
  EXPECT_GT(with_stacks, 0u);
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("busy") + " --stacks --json", &out), 0);
  const json bj = json::parse(out)["stacks"]["sites"];
  ASSERT_EQ(bj.size(), 2u) << bj.dump();  // by name: inner, step
  for (const json& site : bj) {
    SCOPED_TRACE(site["name"].get<std::string>());
    EXPECT_EQ(site["events"], site["scope"].get<bool>() ? begins : points);
    uint64_t by_stack = 0;
    for (const json& s : site["stacks"]) {
      const json& f = s["frames"];
      EXPECT_EQ(f[f.size() - 1], "step") << s.dump();
      EXPECT_EQ(f[f.size() - 2], "via_b") << s.dump();
      by_stack += s["events"].get<uint64_t>();
    }
    EXPECT_EQ(by_stack + site["without_stack"].get<uint64_t>(), site["events"].get<uint64_t>());
  }

  // Points passed in a signal handler, often while the interrupted code
  // was taking a stack itself: the program ends, and the handler's points
  // that have stacks start in the handler.
  ASSERT_EQ(RunCommand(kCli + " points record --stacks -o " + dir.File("sig") + " -- " +
                           kStacksProg + " 20000 20000 0 signals 2>&1",
                       &out),
            0)
      << out;
  StatusOr<std::vector<fieldprof::PointsRun>> sig = fieldprof::ReadPointsRuns({dir.File("sig")});
  ASSERT_TRUE(sig.ok() && sig->size() == 1u) << sig.status().ToString();
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("sig") + " --stacks --json", &out), 0);
  const json sig_sites = json::parse(out)["stacks"]["sites"];
  uint64_t in_handler = 0, handler_stacks = 0;
  for (const json& site : sig_sites) {
    if (site["name"] != "in_handler") continue;
    in_handler = site["events"].get<uint64_t>();
    for (const json& s : site["stacks"]) {
      EXPECT_EQ(s["frames"].back(), "on_signal") << s.dump();
      handler_stacks += s["events"].get<uint64_t>();
    }
  }
  EXPECT_GT(in_handler, 0u) << out;
  EXPECT_GT(handler_stacks, 0u) << out;

  // Without --stacks: no stack is recorded, and show says so.
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("plain") + " -- " + kStacksProg +
                           " 3 4 1 2>&1",
                       &out),
            0)
      << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("plain") + " --stacks", &out), 0) << out;
  EXPECT_NE(out.find("no stacks: these runs were recorded without --stacks"), std::string::npos)
      << out;
  StatusOr<std::vector<std::string>> files = fieldprof::PointsFiles({dir.File("plain")});
  ASSERT_TRUE(files.ok() && files->size() == 1u);
  StatusOr<fieldprof::PointsRun> run = fieldprof::ReadPointsRun((*files)[0]);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->stacks.empty());
  EXPECT_EQ(run->events.size(), 23u);  // 7 points, 7 + 1 scopes
  for (const fieldprof::PointEvent& e : run->events) EXPECT_EQ(e.stack, 0u);
}

// malloc placed with --at, inside a placed main, with --stacks: only the
// program's own calls are recorded, on its own threads, none counted lost.
// The recorder's calls are not (its drain thread's, its arming of modules
// as the runtime loads, the unwinder's first use on a thread), and no
// stack holds a frame of fieldprof's own: a malloc inside a measured call
// goes through the runtime's allocation counter, and its stack is still
// the program's, from main.
TEST(PointsRecordTest, APlacedMallocSeesTheProgramsCallsAndNoFrameOfOurs) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record --stacks --at fieldprof_pointstacks:main," +
                           "libc.so.6:malloc -o " + dir.File("m") + " -- " + kStacksProg +
                           " 3000 7000 50 2>&1",
                       &out),
            0)
      << out;
  StatusOr<std::vector<fieldprof::PointsRun>> runs = fieldprof::ReadPointsRuns({dir.File("m")});
  ASSERT_TRUE(runs.ok() && runs->size() == 1u) << runs.status().ToString();
  const fieldprof::PointsRun& run = (*runs)[0];
  EXPECT_EQ(run.lost, 0u);
  std::set<uint32_t> program_threads{run.pid};
  for (const fieldprof::PointEvent& e : run.events) {
    if (run.sites[e.site].name == "work") program_threads.insert(e.tid);
  }
  EXPECT_EQ(program_threads.size(), 2u);  // main's and worker_loop's
  int mallocs = 0;
  for (const fieldprof::PointEvent& e : run.events) {
    if (run.sites[e.site].name != "malloc" || e.kind != fieldprof::PointKind::kBegin) continue;
    ++mallocs;
    EXPECT_EQ(program_threads.count(e.tid), 1u) << "a malloc on thread " << e.tid;
  }
  EXPECT_GE(mallocs, 2);  // std::thread's state, stdout's buffer

  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("m") + " --stacks --json", &out), 0)
      << out;
  const json sites = json::parse(out)["stacks"]["sites"];
  bool from_new = false;
  for (const json& site : sites) {
    EXPECT_EQ(site["without_stack"], 0) << site.dump();
    for (const json& s : site["stacks"]) {
      const auto frames = s["frames"].get<std::vector<std::string>>();  // outermost first
      for (const std::string& f : frames) {
        EXPECT_EQ(f.find("libfieldprof"), std::string::npos) << s.dump();
        EXPECT_EQ(f.find("fp_detour"), std::string::npos) << s.dump();
      }
      if (site["name"] != "malloc") continue;
      EXPECT_NE(std::find(frames.begin(), frames.end(), "main"), frames.end()) << s.dump();
      if (frames.back() == "operator new(unsigned long)") {
        from_new = true;
        ASSERT_GE(frames.size(), 2u);
        EXPECT_EQ(frames[frames.size() - 2], "main") << s.dump();
      }
    }
  }
  EXPECT_TRUE(from_new) << sites.dump();
}

// A SIGPROF handler every 20 us, itself placed with --at, with --stacks:
// its stacks take 6-12 us each, so without a budget for them the program
// made no progress (30 s, killed). With it, the program ends with its own
// output; the events that went without a stack for the budget are counted,
// and are among those show gives no stack.
TEST(PointsRecordTest, AHandlerWhoseStacksAreSlowStillLetsTheProgramRun) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(
      RunCommand(kCli + " points record --stacks --at " + "fieldprof_pointstacks:on_signal -o " +
                     dir.File("h") + " -- " + kStacksProg + " 2000 2000 0 signals 2>&1",
                 &out),
      0)
      << out;
  EXPECT_NE(out.find("done\n"), std::string::npos) << out;
  StatusOr<std::vector<fieldprof::PointsRun>> runs = fieldprof::ReadPointsRuns({dir.File("h")});
  ASSERT_TRUE(runs.ok() && runs->size() == 1u) << runs.status().ToString();
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("h") + " --stacks --json", &out), 0)
      << out;
  const json j = json::parse(out)["stacks"];
  EXPECT_EQ(j["stackless"].get<uint64_t>(), (*runs)[0].stackless);
  uint64_t without = 0, handler_events = 0;
  for (const json& site : j["sites"]) {
    without += site["without_stack"].get<uint64_t>();
    if (site["name"] == "on_signal") handler_events = site["events"].get<uint64_t>();
  }
  EXPECT_GT(handler_events, 0u) << out;
  EXPECT_LE((*runs)[0].stackless, without) << out;
}

// A signal handler's point cutting into a call that takes the dynamic
// linker's lock, which the unwinder takes too: the thread may be taking
// that lock, so the event goes without a stack, counted. The program calls
// one of them (`how`) `times` times under SIGPROF every 20 us, a point
// before each, and exits within the minute; `timeout` kills it after 120 s.
// A deadlock fails by ctest's limit on each test (600 s), not by a clock of
// the test's own: the work is bounded (`times` calls); how long it takes
// is the machine's (one machine of this kind took 18.4 s for 40,000
// dl_iterate_phdr calls, this one 11).
// `times` calls at most, or 20 s of the machine's time, whichever first
// (tests/support/progress_watch.h): a machine several times slower makes
// fewer calls and passes; a program that stops making progress (waits on
// itself, or is livelocked by its own handler) fails.
void ExpectAHandlersPointInALinkerCallTakesNoStack(const std::string& how, int times) {
  SCOPED_TRACE(how);
  TempDir dir;
  const testing::WatchedRun run = testing::RunWatchingProgress(
      kCli + " points record --stacks --at fieldprof_pointstacks:on_signal -o " + dir.File("d") +
          " -- " + kStacksProg + " " + std::to_string(times) + " 0 0 " + how,
      dir.File("progress"), /*span_ms=*/20000);
  ASSERT_FALSE(run.stalled) << "no progress past " << run.progress << " calls for 2 minutes\n"
                            << run.out;
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const std::string& out = run.out;
  const size_t at = out.find("iterations ");
  ASSERT_NE(at, std::string::npos) << out;
  times = std::atoi(out.c_str() + at + 11);
  EXPECT_GT(times, 0) << out;
  EXPECT_NE(out.find("found " + std::to_string(times) + "\ndone\n"), std::string::npos) << out;
  StatusOr<std::vector<fieldprof::PointsRun>> runs = fieldprof::ReadPointsRuns({dir.File("d")});
  ASSERT_TRUE(runs.ok() && runs->size() == 1u) << runs.status().ToString();
  const fieldprof::PointsRun& r = (*runs)[0];
  EXPECT_TRUE(r.complete);
  uint64_t lookups = 0, in_handler = 0, in_callback = 0, in_callback_stacks = 0;
  for (const fieldprof::PointEvent& e : r.events) {
    const fieldprof::PointSite& site = r.sites.at(e.site);
    lookups += site.name == "lookup";
    in_handler += site.name == "in_handler";
    in_callback += site.name == "in_callback";
    in_callback_stacks += site.name == "in_callback" && e.stack != 0;
  }
  EXPECT_LE(static_cast<uint64_t>(times) - lookups, r.lost) << "every lookup point kept or lost";
  EXPECT_GT(in_handler, 0u);
  if (how == "dliterate") {
    // Inside dl_iterate_phdr's callback the thread holds the linker's lock,
    // and libunwind takes its own lock before the linker's: a stack taken
    // there could wait, for good, on a thread unwinding elsewhere. Those
    // points go without, counted.
    EXPECT_LE(static_cast<uint64_t>(times) - in_callback, r.lost);
    EXPECT_EQ(in_callback_stacks, 0u);
    EXPECT_GE(r.stackless, in_callback) << in_callback << " in callbacks";
  }
}

// The runtime's binder work: each dlsym of the program's has the runtime
// look at the loaded objects. Before, the program waited on itself for
// good in 6 runs of 6, its signals blocked by the unwinder.
TEST(PointsRecordTest, AHandlersPointInsideTheBindersWorkTakesNoStackAndNoLock) {
  ExpectAHandlersPointInALinkerCallTakesNoStack("dlsym", 300000);
}

// The program's own dl_iterate_phdr, and its own dlopen and dlclose (the
// recorder wraps each). Before, the program waited on itself for good in
// 3 runs of 3 of each.
TEST(PointsRecordTest, AHandlersPointInsideTheProgramsOwnLinkerCallsTakesNoStack) {
  ExpectAHandlersPointInALinkerCallTakesNoStack("dliterate", 300000);
  ExpectAHandlersPointInALinkerCallTakesNoStack("dlopen", 2000);
}

// libc's own loading, which passes through no call the recorder wraps:
// iconv_open loads a converter module and iconv_close unloads another (a
// dlopen and a dlclose inside libc). The recorder knows the dynamic
// linker's lock itself (found at start in ld.so's _rtld_global), taken or
// being taken by the thread. Before, the program waited on itself for
// good in 3 runs of 3 of 5,000 iconv_opens, and in 2 of 3 of 1,500.
TEST(PointsRecordTest, AHandlersPointInsideLibcsOwnLoadingTakesNoStack) {
  ExpectAHandlersPointInALinkerCallTakesNoStack("iconv", 2500);
}

// Without --stacks, a signal handler's points land inside the points its
// thread is passing (SIGPROF every 20 us; the handler is a placed scope
// around a point: three events): the program runs to its end, and each
// event is in the file whole, once, or counted as lost.
TEST(PointsRecordTest, SignalHandlersPointsInsideTheThreadsOwnAreKeptWhole) {
  TempDir dir;
  constexpr long kSteps = 200000;  // step is called kSteps times: a point and a scope
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record --at fieldprof_pointstacks:on_signal -o " +
                           dir.File("s") + " -- " + kStacksProg + " " + std::to_string(kSteps / 2) +
                           " " + std::to_string(kSteps / 2) + " 0 signals 2>&1",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("done\n"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("s") + " --json", &out), 0) << out;
  const json j = json::parse(out);
  ASSERT_EQ(j["runs"].size(), 1u) << out.substr(0, 2000);
  const json r = j["runs"][0];
  EXPECT_TRUE(r["complete"].get<bool>()) << r.dump();
  const long lost = r["lost"].get<long>();
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("s") + " --stacks --json", &out), 0)
      << out;
  const json shown = json::parse(out);
  std::map<std::string, long> events;
  for (const json& site : shown["stacks"]["sites"]) {
    events[site["name"].get<std::string>()] = site["events"].get<long>();
  }
  EXPECT_GT(events["in_handler"], 0) << out;
  // A scope's site counts its begins.
  for (const char* name : {"step", "inner"}) {
    EXPECT_LE(events[name], kSteps) << name;
    EXPECT_GE(events[name] + lost, kSteps) << name;
  }
  EXPECT_LE(std::abs(events["on_signal"] - events["in_handler"]), lost) << out;
  if (lost == 0) {
    EXPECT_EQ(r["events"].get<long>(),
              events["step"] + 2 * events["inner"] + 2 * events["on_signal"] + events["in_handler"])
        << r.dump();
  }
}

// A signal handler that jumps out of the points it cuts into leaves slots
// claimed and never written: the drain passes them by, counted as lost,
// while the program runs on (it would otherwise hold every later event
// back, and lose them when the ring filled), and no event is read twice
// or torn.
TEST(PointsRecordTest, PointsAHandlerJumpsOutOfAreCountedAndTheRestKept) {
  TempDir dir;
  constexpr long kJumpy = 200000;  // points while the handler jumps; then 100 ms of others
  std::string out;
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("j") + " -- " + kBusy + " " +
                           std::to_string(kJumpy) + " --jump-out 100 2>&1",
                       &out),
            0)
      << out;
  long begun = 0, jumps = 0;
  const size_t said = out.rfind('\n', out.find(" jumps "));
  ASSERT_EQ(std::sscanf(out.c_str() + (said == std::string::npos ? 0 : said + 1),
                        "points %ld jumps %ld", &begun, &jumps),
            2)
      << out;
  EXPECT_GT(jumps, 0) << out;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("j") + " --json --chrome_trace " +
                           dir.File("j.json"),
                       &out),
            0)
      << out;
  const json r = json::parse(out)["runs"][0];
  EXPECT_TRUE(r["complete"].get<bool>()) << r.dump();
  const long events = r["events"].get<long>(), lost = r["lost"].get<long>();
  // A jump cuts off at most one point: before its slot (no event), or
  // after (lost, or whole).
  EXPECT_LE(events + lost, begun) << r.dump();
  EXPECT_GE(events + lost, begun - jumps) << r.dump();
  // Most of the points after the jumps are kept. A drain that waited on
  // the first slot cut off till the end would have kept two rings' worth:
  // what came before it, and what filled the ring behind it.
  EXPECT_GT(events, begun - kJumpy - 65536) << r.dump();
  EXPECT_GT(events, 2 * 65536) << r.dump();
  std::ifstream trace(dir.File("j.json"));
  const json t = json::parse(trace);
  std::set<long> values;
  for (const json& e : t["traceEvents"]) {
    if (e["name"] != "tick") continue;
    const long v = e.contains("args") ? e["args"]["value"].get<long>() : 0;  // none: 0
    EXPECT_TRUE(v >= 0 && v < begun && values.insert(v).second) << e.dump();
  }
  EXPECT_EQ(static_cast<long>(values.size()), events);
  // The warning names what lost them.
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("j"), &out), 0) << out;
  EXPECT_NE(out.find(std::to_string(lost) + " events were lost"), std::string::npos) << out;
  EXPECT_NE(out.find("a signal handler jumped out of a point"), std::string::npos) << out;
}

TEST(PointsRecordTest, AProgramWithoutPointsRecordsNothingAndSaysSo) {
  TempDir dir;
  std::string out;
  EXPECT_EQ(RunCommand(kCli + " points record -o " + dir.File("none") + " -- /bin/true 2>&1", &out),
            0);
  EXPECT_NE(out.find("no point was recorded"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(kCli + " points show " + dir.File("missing") + " 2>&1", &out), 1);
  EXPECT_NE(out.find("no such file"), std::string::npos) << out;
}

// --at on functions the program calls inside itself (no import to bind):
// each entry becomes a jump to the probe, so every call is a scope, with
// the program's output unchanged; functions the move cannot take are left
// alone and named with the reason, and so is a name nobody defines.
TEST(PointsRecordTest, PointsOnFunctionsInsideTheProgramSeeEveryCall) {
  TempDir dir;
  const std::string prog = FIELDPROF_INMODULE;
  constexpr int kCalls = 200;
  std::string plain, placed, said, out;
  ASSERT_EQ(RunCommand(prog + " " + std::to_string(kCalls), &plain), 0);
  std::string at;
  for (const char* f : {"load_config", "bump", "early", "fib", "thrower", "tiny", "loop_head",
                        "no_such_function", "cfg::Parser::Parse"}) {
    at += std::string(at.empty() ? "" : ",") + "fieldprof_inmodule:" + f;
  }
  ASSERT_EQ(
      RunCommand(kCli + " points record --at " + at + ",libnot_loaded.so.1:f -o " + dir.File("in") +
                     " -- " + prog + " " + std::to_string(kCalls) + " 2>" + dir.File("said"),
                 &placed),
      0);
  if (StatusOr<std::string> text = ReadWholeFile(dir.File("said")); text.ok()) said = *text;
  // The output is the program's: results, the exceptions caught, the
  // calls fib made (its own clock's reading differs from run to run).
  const auto lines = [](const std::string& text) {
    std::map<std::string, std::string> m;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) m[l.substr(0, l.find(' '))] = l;
    return m;
  };
  EXPECT_EQ(lines(placed)["result"], lines(plain)["result"]) << placed;
  EXPECT_EQ(lines(placed)["fib_calls"], lines(plain)["fib_calls"]) << placed;
  for (const char* f : {"load_config", "bump", "early", "fib", "thrower"}) {
    EXPECT_NE(said.find(std::string("fieldprof_inmodule:") + f + ": a scope at every call"),
              std::string::npos)
        << f << "\n"
        << said;
  }
  EXPECT_NE(said.find("tiny: scopes at calls from other modules only (not moved: shorter"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("loop_head: scopes at calls from other modules only (not moved: a branch"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("no_such_function: not found"), std::string::npos) << said;
  // A C++ name as the code writes it: both overloads, said as demangled.
  for (const char* f : {"cfg::Parser::Parse(long)", "cfg::Parser::Parse(char const*)"}) {
    EXPECT_NE(said.find(std::string("fieldprof_inmodule:") + f + ": a scope at every call"),
              std::string::npos)
        << f << "\n"
        << said;
  }
  EXPECT_NE(said.find("libnot_loaded.so.1:f: no process loaded a module named libnot_loaded.so.1"),
            std::string::npos)
      << said;

  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("in") + " --json --chrome_trace " +
                           dir.File("in.json"),
                       &out),
            0)
      << out;
  const json j = json::parse(out);
  ASSERT_EQ(j["tags"].size(), 1u) << out;
  EXPECT_EQ(j["tags"][0]["tag"], "fieldprof_inmodule");
  std::map<std::string, int64_t> count;
  for (const json& seg : j["tags"][0]["segments"]) count[seg["from"]] = seg["count"][0];
  const int64_t fib_calls = std::stoll(lines(plain)["fib_calls"].substr(10));
  EXPECT_EQ(count["load_config"], kCalls) << out;
  EXPECT_EQ(count["bump"], kCalls) << out;
  EXPECT_EQ(count["early"], kCalls) << out;
  EXPECT_EQ(count["fib"], fib_calls) << out;       // nested in itself
  EXPECT_EQ(count["thrower"], kCalls / 2) << out;  // a throw ends no scope
  EXPECT_EQ(count["cfg::Parser::Parse(long)"], kCalls) << out;
  EXPECT_EQ(count["cfg::Parser::Parse(char const*)"], kCalls) << out;
  EXPECT_EQ(count.count("tiny"), 0u) << out;
  EXPECT_EQ(count.count("loop_head"), 0u) << out;
  // load_config's calls as long as the program's own clock had them
  // (medians: a preempted call moves a mean).
  std::ifstream in(dir.File("in.json"));
  const json trace = json::parse(in);
  double begin = 0;
  std::vector<double> ns;
  for (const json& e : trace["traceEvents"]) {
    if (e["name"] != "load_config") continue;
    if (e["ph"] == "B") begin = e["ts"].get<double>();
    if (e["ph"] == "E") ns.push_back((e["ts"].get<double>() - begin) * 1000);
  }
  ASSERT_EQ(ns.size(), static_cast<size_t>(kCalls));
  std::sort(ns.begin(), ns.end());
  const double own = std::stod(lines(placed)["load_config_median_ns"].substr(22));
  EXPECT_NEAR(ns[ns.size() / 2], own, own * 0.05) << own;

  // With --stacks the program's output is the same (the return slots lent
  // to the unwinder are given back, the registers kept), and each call of
  // fib, nested in itself, has a stack through the fib calls around it
  // to main.
  std::string stacked;
  ASSERT_EQ(RunCommand(kCli + " points record --stacks --at " + at + " -o " + dir.File("st") +
                           " -- " + prog + " " + std::to_string(kCalls) + " 2>/dev/null",
                       &stacked),
            0);
  EXPECT_EQ(lines(stacked)["result"], lines(plain)["result"]) << stacked;
  EXPECT_EQ(lines(stacked)["fib_calls"], lines(plain)["fib_calls"]) << stacked;
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("st") + " --stacks --json", &out), 0)
      << out;
  int64_t fib_stacked = 0;
  size_t deepest = 0;
  const json fib_sites = json::parse(out)["stacks"]["sites"];
  for (const json& site : fib_sites) {
    if (site["name"] != "fib") continue;
    EXPECT_EQ(site["without_stack"], 0) << site.dump();
    for (const json& st : site["stacks"]) {
      const auto frames = st["frames"].get<std::vector<std::string>>();
      const auto main_at = std::find(frames.begin(), frames.end(), "main");
      ASSERT_NE(main_at, frames.end()) << st.dump();
      EXPECT_TRUE(std::all_of(main_at + 1, frames.end(), [](const std::string& f) {
        return f == "fib";
      })) << st.dump();
      deepest = std::max(deepest, static_cast<size_t>(frames.end() - main_at - 1));
      fib_stacked += st["events"].get<int64_t>();
    }
  }
  EXPECT_EQ(fib_stacked, fib_calls) << out;
  EXPECT_GE(deepest, 5u) << out;

  // A C++ name that names nothing: refused before the program runs, with
  // the functions of that last name it might have meant.
  EXPECT_EQ(RunCommand(kCli + " points record --at fieldprof_inmodule:cfg::Nope::Parse -o " +
                           dir.File("nope") + " -- " + prog + " 1 2>&1",
                       &out),
            2);
  EXPECT_NE(
      out.find("--at fieldprof_inmodule:cfg::Nope::Parse: no function of that name in " + prog +
               "; did you mean cfg::Parser::Parse(char const*), "
               "cfg::Parser::Parse(long)"),
      std::string::npos)
      << out;
  EXPECT_EQ(out.find("result "), std::string::npos) << "the program did not run: " << out;
}

// A program killed mid-run leaves a file that reads up to its last drain;
// a file cut anywhere reads up to the cut; one that is not a points file,
// or whose header is damaged, is an error that names it.
TEST(PointsRecordTest, KilledCutAndForeignFilesAreReadOrRefusedClearly) {
  TempDir dir;
  std::string out;
  // SIGKILL after 0.1 s of an endless run (rounds: far more than 0.1 s).
  RunCommand(kCli + " points record -o " + dir.File("killed") + " -- timeout -s KILL 0.1 " + kBusy +
                 " 1000000000 >/dev/null 2>&1",
             &out);
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("killed") + " --json", &out), 0) << out;
  json j = json::parse(out);
  ASSERT_EQ(j["runs"].size(), 1u) << out;
  EXPECT_FALSE(j["runs"][0]["complete"].get<bool>());
  EXPECT_GT(j["runs"][0]["events"].get<long>(), 0) << "the drains before the kill were kept";
  ASSERT_EQ(RunCommand(kCli + " points show " + dir.File("killed"), &out), 0);
  EXPECT_NE(out.find("ended without closing their file"), std::string::npos) << out;

  // One whole file, then cut at many places: each reads, with fewer events.
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("whole") + " -- " + kBusy +
                           " 2000 >/dev/null 2>&1",
                       &out),
            0);
  std::string name;
  ASSERT_EQ(RunCommand("ls " + dir.File("whole"), &name), 0);
  name.erase(name.find_last_not_of('\n') + 1);
  StatusOr<std::string> bytes = ReadWholeFile(dir.File("whole") + "/" + name);
  ASSERT_TRUE(bytes.ok());
  long previous = -1;
  for (size_t cut : {bytes->size() * 9 / 10, bytes->size() / 2, bytes->size() / 5}) {
    const std::string part = dir.File("cut-" + std::to_string(cut) + ".fppoints");
    ASSERT_TRUE(WriteFileDurably(part, bytes->substr(0, cut)).ok());
    ASSERT_EQ(RunCommand(kCli + " points show " + part + " --json", &out), 0) << cut << ": " << out;
    const json r = json::parse(out)["runs"][0];
    EXPECT_FALSE(r["complete"].get<bool>());
    if (previous >= 0) {
      EXPECT_LE(r["events"].get<long>(), previous) << cut;
    }
    previous = r["events"].get<long>();
  }
  // Not a points file; a damaged header.
  ASSERT_TRUE(WriteFileDurably(dir.File("foreign.fppoints"), "{\"traceEvents\": []}\n").ok());
  EXPECT_EQ(RunCommand(kCli + " points show " + dir.File("foreign.fppoints") + " 2>&1", &out), 1);
  EXPECT_NE(out.find("foreign.fppoints: not a points file"), std::string::npos) << out;
  ASSERT_TRUE(WriteFileDurably(dir.File("head.fppoints"), bytes->substr(0, 14)).ok());
  EXPECT_EQ(RunCommand(kCli + " points show " + dir.File("head.fppoints") + " 2>&1", &out), 1);
  EXPECT_NE(out.find("damaged header"), std::string::npos) << out;
}

// A file read on as it grows (the agent reads a run still being written a
// piece at each pass, never again from its start): after every piece, the
// events, tags and end mark read so far are those of reading the whole
// prefix at once, also when a piece ends inside a batch or a site's name.
TEST(PointsRecordTest, AFileReadOnAsItGrowsCountsAsReadWhole) {
  TempDir dir;
  std::string out, name;
  ASSERT_EQ(RunCommand(kCli + " points record -o " + dir.File("grow") + " -- " + kBusy +
                           " 20000 >/dev/null 2>&1",
                       &out),
            0);
  ASSERT_EQ(RunCommand("ls " + dir.File("grow"), &name), 0);
  name.erase(name.find_last_not_of('\n') + 1);
  StatusOr<std::string> bytes = ReadWholeFile(dir.File("grow") + "/" + name);
  ASSERT_TRUE(bytes.ok());
  std::mt19937_64 rng(7);
  fieldprof::PointsScan scan;
  size_t have = 0, looks = 0;
  while (have < bytes->size()) {
    have = std::min(bytes->size(), have + 1 + rng() % 3000);
    ASSERT_TRUE(fieldprof::ScanPointsRun(
                    std::string_view(*bytes).substr(scan.offset, have - scan.offset), &scan)
                    .ok());
    ++looks;
    EXPECT_LE(scan.offset, have);
    StatusOr<fieldprof::PointsRun> whole =
        fieldprof::DecodePointsRun(std::string_view(*bytes).substr(0, have));
    if (!whole.ok()) {  // before the first clock reading
      EXPECT_FALSE(scan.clock) << have;
      continue;
    }
    ASSERT_EQ(scan.Events(), whole->events.size()) << "at byte " << have;
    EXPECT_EQ(scan.complete, whole->complete) << have;
    std::set<std::string> tags;
    for (const fieldprof::PointSite& site : whole->sites) tags.insert(site.tag);
    EXPECT_EQ(scan.Tags(), tags) << have;
  }
  EXPECT_TRUE(scan.complete);
  StatusOr<fieldprof::PointsRun> run = fieldprof::DecodePointsRun(*bytes);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(scan.Events() + run->lost, 4u * 20000) << "every event, or counted as lost";
  EXPECT_GT(looks, 20u);
  // From the file, as the agent reads it: the same.
  fieldprof::PointsScan from_file;
  ASSERT_TRUE(fieldprof::ScanPointsFile(dir.File("grow") + "/" + name, &from_file).ok());
  EXPECT_EQ(from_file.Events(), scan.Events());
  EXPECT_EQ(from_file.offset, bytes->size());
}

}  // namespace
}  // namespace fieldprof
