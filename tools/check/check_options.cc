#include "tools/check/check_options.h"

#include <algorithm>
#include <iostream>

#include "common/settings/options.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/spool/spool.h"
#include "common/wire/api_key.h"
#include "tools/shared/command_args.h"
#include "tools/shared/command_line.h"

namespace fieldprof::tools {
namespace {

constexpr const char* kAbout =
    "Do your runs pay more for an API than the field does? Compares run records\n"
    "(your spool by default, or the record files named) with the field snapshot in\n"
    "the local cache (or an aggregator, --host), API by API: a one-sided permutation\n"
    "test of your cost against the field's on the log2 buckets, then Benjamini-Hochberg\n"
    "across the APIs. The field is matched to your platform class, widened (and said\n"
    "so) when the class has no data. Shows only APIs with evidence, by excess cost.\n\n"
    "  fieldprof check                       # your spool\n"
    "  fieldprof check run-*.fpr --json\n"
    "  fieldprof check sqlite3.labprofile     # a lab profile (fieldprof lab)\n"
    "  fieldprof check --fail_on_excess_ns 1000000   # exit 1 when found (CI)\n"
    "  fieldprof check -- sqlite3 db 'select 1'      # every API the command calls\n"
    "  fieldprof check --apis sqlite3_prepare_v2 --repeat 10 -- sqlite3 db 'select 1'\n\n"
    "With -- COMMAND, the command is profiled with the lab (fieldprof lab: a census\n"
    "run, then timing runs, --repeat times each, default 3) and every API it calls\n"
    "that the field has data for is checked. With --apis, it is run --repeat times\n"
    "(default 5) under fieldprof run measuring only those. Its output is shown once,\n"
    "for the first run.\n\n"
    "Exit: 0 nothing found (or nothing over --fail_on_excess_ns / --fail_on_p), 1\n"
    "evidence found with --fail_on_excess_ns or --fail_on_p, 2 a usage error, 3 no\n"
    "data to compare.";

// The statistical flags, in the numbers the table reads.
struct TestFlags {
  int64_t resamples = 9999, seed = 1, stop_after = 20;
};

void AddAnalysisFlags(OptionTable& t, CheckOptions* o, TestFlags* tf) {
  AnalysisOptions& a = o->analysis;
  t.AddString("metric", &o->metric_name,
              "wall_time_ns, alloc_bytes_inclusive, alloc_bytes_exclusive, alloc_count, "
              "file_io_bytes, socket_io_bytes");
  t.AddString("statistic", &o->statistic, "mean, or a quantile: p50, p90, p99");
  t.AddInt("resamples", &tf->resamples, "permutations per API at most", 99, 10000000);
  t.AddInt("stop_after", &tf->stop_after,
           "stop an API's resampling once this many reach its statistic (Besag-Clifford; 0: "
           "never)",
           0, 1000000);
  t.AddInt("seed", &tf->seed, "the random seed (the same seed, the same p-values)", 0,
           int64_t{1} << 62);
  t.AddDouble("fdr", &a.fdr, "false discovery rate: an API has evidence at adjusted p <= this", 0,
              1);
  t.AddBool("dependent", &a.dependent, "Benjamini-Yekutieli (any dependence between APIs)");
  t.AddDouble("min_calls", &a.min_calls, "skip APIs with fewer local calls than this", 1, 1e18);
  t.AddDouble("fail_on_excess_ns", &a.fail_excess,
              "exit 1 when an API with evidence costs at least this much more in all (its "
              "excess, in the metric's unit); -1: never",
              -1, 1e30);
  t.AddDouble("fail_on_p", &a.fail_p,
              "exit 1 when an API's adjusted p-value is at most this (with any excess); -1: "
              "never",
              -1, 1);
  t.AddDouble("min_effect", &a.min_effect,
              "evidence needs your statistic at least this fraction above the field's (0.05: "
              "5%); separate runs of one program differ by a few percent",
              0, 1e6);
  t.AddDouble("min_diff_ns", &a.min_diff_ns,
              "wall time: evidence needs your statistic at least this many ns above the "
              "field's, and above twice the timing resolution",
              0, 1e18);
}

void AddInputOutputFlags(OptionTable& t, CheckOptions* o) {
  t.AddBool("all", &o->all, "show every API compared, with or without evidence");
  t.AddBool("json", &o->json, "print as JSON");
  t.AddString("apis", &o->apis,
              "with -- COMMAND: measure only these APIs, SYMBOL or MODULE:SYMBOL, "
              "comma-separated (default: profile every API it calls with the lab)");
  t.AddInt("repeat", &o->repeat,
           "with -- COMMAND: runs of it (with --apis, default 5), or of each lab timing set "
           "(default 3)",
           1, 100000);
  o->client.Register(t);
  t.AddString("from", &o->from, "with --host: the field from this day (YYYY-MM-DD)");
  t.AddString("to", &o->to, "with --host: the field to this day (YYYY-MM-DD)");
  t.AddString("sarif", &o->sarif_path,
              "also write the findings as SARIF 2.1.0 to this file (code-scanning tools)");
  t.AddString("junit", &o->junit_path,
              "also write JUnit XML to this file: a test case per API compared, failed when it "
              "has evidence");
}

// What the flags say together: the command, the metric, the statistic.
Status Settle(const TestFlags& tf, CheckOptions* o) {
  if (!o->apis.empty() && o->command.empty()) {
    return InvalidArgument("--apis needs -- COMMAND: the command whose runs measure them");
  }
  if (!o->command.empty() && !o->files.empty()) {
    return InvalidArgument("record files and -- COMMAND: one or the other");
  }
  FP_ASSIGN_OR_RETURN(o->metric, ParseMetric(o->metric_name));
  PermutationOptions& test = o->analysis.test;
  test.resamples = static_cast<int>(tf.resamples);
  test.seed = static_cast<uint64_t>(tf.seed);
  test.stop_after = static_cast<int>(tf.stop_after);
  o->analysis.wall_time = o->metric == wire::METRIC_WALL_TIME_NS;
  return ParseStatistic(o->statistic, &test).WithContext("--statistic");
}

}  // namespace

ExitCode ParseCheckOptions(int argc, char** argv, CheckOptions* o) {
  o->cache_dir = DefaultSnapshotCacheDir();
  o->spool_dir = DefaultSpoolDir();
  o->client.options.host = "";
  OptionTable t("fieldprof check", kAbout);
  TestFlags tf;
  t.AddString("cache", &o->cache_dir, "the snapshot cache (the field)");
  t.AddString("spool", &o->spool_dir, "the spool read when no record file is named");
  AddAnalysisFlags(t, o, &tf);
  AddInputOutputFlags(t, o);
  // Options and record files end at "--"; the command follows.
  const int cmd_at = DoubleDashAt(argc, argv);
  Status s;
  if (ParseOrShowHelp(t, cmd_at, argv, &s)) return 0;
  o->command = ProgramArgs(argc, argv, cmd_at);
  o->files = t.positional();
  if (!t.given("repeat")) o->repeat = o->apis.empty() ? 3 : 5;
  if (s.ok()) s = Settle(tf, o);
  if (!s.ok()) return UsageError(t, s);
  return std::nullopt;
}

}  // namespace fieldprof::tools
