// fieldprof tree: call trees with several metrics per node,
// from recordings, collapsed stacks and Chrome traces, and their algebra.
//
//   fieldprof tree show  TREE [--metric M] [--json|--collapsed|--pprof F]
//   fieldprof tree build SOURCE -o OUT.fptree [--from S --to S --thread T]
//   fieldprof tree top|callers|paths|subtree|leaks TREE [FUNCTION]
//   fieldprof tree add|mean|min TREE... [-o OUT.fptree]
//   fieldprof tree sub NEW... --base OLD[,OLD...] [-o OUT.fptree]
// Every TREE may be a .fptree, a recording (.fprec), Chrome trace JSON or
// collapsed stacks.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "common/base/durable_file.h"
#include "common/settings/options.h"
#include "common/snapshot/snapshot_cache.h"
#include "tools/commands.h"
#include "tools/record/field_marks.h"
#include "tools/record/pprof_export.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"
#include "tools/tree/call_tree.h"
#include "tools/tree/tree_load.h"
#include "tools/tree/tree_page.h"
#include "tools/tree/tree_report.h"

namespace fieldprof::tools {

namespace {

constexpr const char* kUsage =
    "Call trees: each node a call path with several metrics (samples, time, calls,\n"
    "bytes allocated and freed, allocations), self and total; and their algebra.\n"
    "Every TREE may be a .fptree, a recording (.fprec), Chrome trace event JSON\n"
    "(B/E and X events) or collapsed stacks (\"a;b;c COUNT\" lines).\n\n"
    "  fieldprof tree show run.fprec                      # an indented tree\n"
    "  fieldprof tree build trace.json -o run.fptree      # keep it as a tree\n"
    "  fieldprof tree top run.fptree --metric time        # functions by self time\n"
    "  fieldprof tree callers run.fptree malloc           # callers and callees\n"
    "  fieldprof tree paths run.fptree malloc             # every path to it\n"
    "  fieldprof tree subtree run.fptree parse_config     # the tree under it\n"
    "  fieldprof tree leaks run.fptree                    # allocated, not freed\n"
    "  fieldprof tree add a.fptree b.fptree -o ab.fptree  # exact sums\n"
    "  fieldprof tree mean r1 r2 r3                       # per-metric averages\n"
    "  fieldprof tree min r1 r2 r3                        # what every run has\n"
    "  fieldprof tree sub new1 new2 new3 --base old1,old2,old3   # what changed\n"
    "  fieldprof tree merge run.fprec --metric time       # traced scopes and samples in one\n"
    "  fieldprof tree sub run.fprec --base z.folded --field_module libz.so.1 --metric time \\\n"
    "      --normalize total    # inside zlib: this run against the field (fieldprof stacks)\n";

struct Common {
  std::string metric_name, out, match = "exact", normalize = "none", color = "auto", pprof, html;
  double from = 0, to = -1, min_percent = 0.5, fdr = 0.05, min_effect = 0.05, min_share = 0.5;
  int64_t thread = 0, limit = 30;
  bool json = false, collapsed = false, total = false, nodes = false, threads = false;
  bool off_cpu = false, field = false;
  std::string base, cache = DefaultSnapshotCacheDir(), field_module, debug_dir;
};

void AddFlags(OptionTable* t, Common* c) {
  t->AddString("metric", &c->metric_name,
               "samples, time, calls, alloc_bytes, freed_bytes or allocs; empty: time when the "
               "tree has it, else samples");
  t->AddString("output", &c->out, "write the resulting tree (.fptree) to this file");
  t->AddShort('o', "output");
  t->AddString("match", &c->match,
               "how names match across runs: exact, or normalised (ignores clone suffixes, "
               "lambda numbers, addresses, build ids)");
  t->AddString("normalize", &c->normalize,
               "before combining, scale each run to the first: none (exact), total (per "
               "metric, to its root total) or calls (all metrics by the calls' ratio)");
  t->AddString("base", &c->base, "sub: the base runs, comma-separated (the runs given are new)");
  t->AddDouble("fdr", &c->fdr, "sub: the false discovery rate a change must pass", 0, 1);
  t->AddDouble("min_effect", &c->min_effect,
               "sub: test only nodes changed by this fraction of the larger mean or more (0.05: "
               "5%)",
               0, 10);
  t->AddRenamed("min_change", "write --min_effect, a fraction of the larger mean (0.05: 5%)");
  t->AddDouble("min_share", &c->min_share,
               "sub: test only nodes changed by this % of the base's total or more", 0, 100);
  t->AddDouble("from", &c->from, "a recording: from this many seconds after its start", 0, 1e9);
  t->AddDouble("to", &c->to, "a recording: to this many seconds (-1: the end)", -1, 1e9);
  t->AddInt("thread", &c->thread, "a recording: only this thread id (0: all)", 0, INT32_MAX);
  t->AddBool("threads", &c->threads, "a Chrome trace: a frame per thread above its events");
  t->AddBool("off_cpu", &c->off_cpu,
             "a recording: where threads waited instead of the samples (calls: waits, time: "
             "off-CPU time)");
  t->AddString("field_module", &c->field_module,
               "a recording: its samples as the field folds this module's stacks (exported "
               "names or +offset, marks where the time left it; docs/field-stacks.md), to read "
               "beside the field's (fieldprof stacks --format folded)");
  t->AddString("debug_dir", &c->debug_dir,
               "with --field_module: name its +offset frames from the build's debug file under "
               "this directory (.build-id layout, as fieldprof stacks --debug_dir)");
  t->AddBool("json", &c->json, "print JSON");
  t->AddBool("field", &c->field,
             "after each library API node, what the field says it costs (p50 and p99 a call, "
             "calls a run) from the snapshot cache; in --json, its \"field\" object");
  t->AddString("cache", &c->cache, "the snapshot cache (fieldprof pull)");
  t->AddBool("collapsed", &c->collapsed,
             "print collapsed stacks of the metric (sub: two columns, base and new, as "
             "difffolded.pl writes them)");
  t->AddString("pprof", &c->pprof, "write a gzipped pprof profile, a sample type per metric");
  t->AddString("html", &c->html,
               "write a self-contained flame graph page (sub: a differential one, width from "
               "the new runs, red grew, blue shrank, saturated where significant)");
  t->AddDouble("min_percent", &c->min_percent, "hide nodes under this share (%)", 0, 100);
  t->AddBool("total", &c->total, "top: by total instead of self");
  t->AddBool("nodes", &c->nodes, "top: call paths instead of functions");
  t->AddInt("limit", &c->limit, "top, paths: rows to show", 1, 1000000);
  t->AddString("color", &c->color, "heat colours: auto, always, never");
}

Status Check(const Common& c, tools::CombineOptions* co, Metric* metric, bool* metric_given) {
  *metric_given = !c.metric_name.empty();
  if (*metric_given && !tools::MetricByName(c.metric_name, metric)) {
    return InvalidArgument(
        "--metric is samples, time, calls, alloc_bytes, freed_bytes or "
        "allocs, not \"" +
        c.metric_name + "\"");
  }
  if (c.match == "exact") {
    co->match = tools::Match::kExact;
  } else if (c.match == "normalised" || c.match == "normalized") {
    co->match = tools::Match::kNormalised;
  } else {
    return InvalidArgument("--match is exact or normalised, not \"" + c.match + "\"");
  }
  if (c.normalize == "none") {
    co->normalize = tools::Normalize::kNone;
  } else if (c.normalize == "total") {
    co->normalize = tools::Normalize::kTotal;
  } else if (c.normalize == "calls") {
    co->normalize = tools::Normalize::kCalls;
  } else {
    return InvalidArgument("--normalize is none, total or calls, not \"" + c.normalize + "\"");
  }
  if (c.color != "auto" && c.color != "always" && c.color != "never") {
    return InvalidArgument("--color is auto, always or never, not \"" + c.color + "\"");
  }
  if (c.to >= 0 && c.to < c.from) return InvalidArgument("--to is before --from");
  return Status::Ok();
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= s.size();) {
    const size_t comma = std::min(s.find(',', start), s.size());
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

int Fail(const std::string& what) {
  std::cerr << "fieldprof tree: " << what << "\n";
  return 1;
}

// The tree as asked: text, JSON, collapsed, pprof; and -o.
// `changes`: a difference's significance for text and JSON (when tested);
// `page_changes`: its per-run means for the page (a sub, tested or not).
int Emit(const CallTree& t, const Common& c, Metric metric,
         const std::vector<tools::NodeChange>* changes,
         const std::vector<tools::NodeChange>* page_changes = nullptr) {
  if (!c.out.empty()) {
    if (Status w = WriteFileDurably(c.out, tools::EncodeCallTree(t), FileAccess::kShared);
        !w.ok()) {
      return Fail(w.message());
    }
    std::fprintf(stderr, "fieldprof tree: %s written: %zu nodes, %s\n", c.out.c_str(), t.size() - 1,
                 t.description.c_str());
  }
  if (!c.pprof.empty()) {
    StatusOr<std::string> bytes = tools::EncodePprofTree(t);
    Status w = bytes.ok() ? WriteFileDurably(c.pprof, *bytes, FileAccess::kShared) : bytes.status();
    if (!w.ok()) return Fail(w.message());
    std::fprintf(stderr, "fieldprof tree: %s written (go tool pprof -top %s)\n", c.pprof.c_str(),
                 c.pprof.c_str());
  }
  if (!c.html.empty()) {
    const std::string page = tools::CallTreePage(t, metric, page_changes);
    if (Status w = WriteFileDurably(c.html, page, FileAccess::kShared); !w.ok()) {
      return Fail(w.message());
    }
    std::fprintf(stderr, "fieldprof tree: %s written (%s): open it in a browser\n", c.html.c_str(),
                 FormatBytes(static_cast<double>(page.size())).c_str());
  }
  // The field's costs of the API nodes, by node.
  std::map<uint32_t, tools::FieldCostOfName> field;
  if (c.field) {
    std::vector<std::string> names(t.size());
    for (uint32_t n = 1; n < t.size(); ++n) names[n] = t.name(n);
    StatusOr<std::map<uint32_t, tools::FieldCostOfName>> costs =
        tools::FieldCostsOfNames(names, c.cache);
    if (!costs.ok()) return Fail("--field: " + costs.status().message());
    field = std::move(*costs);
  }
  if (c.json) {
    std::cout << tools::TreeJson(t, changes, c.field ? &field : nullptr);
  } else if (c.collapsed) {
    std::cout << tools::TreeCollapsed(t, metric);
  } else if (c.out.empty() && c.pprof.empty() && c.html.empty()) {
    tools::TreeTextOptions o;
    o.sort_by = metric;
    o.min_share = c.min_percent / 100;
    o.color = ColorWanted(c.color);
    o.truecolor = TrueColor();
    o.changes = changes;
    o.field = c.field ? &field : nullptr;
    std::cout << tools::TreeText(t, o);
  }
  return 0;
}

// What the command line asked for, checked.
struct Invocation {
  std::string verb;
  Common c;
  tools::CombineOptions co;
  Metric metric = Metric::kSamples;
  bool metric_given = false;
  std::vector<std::string> files, base;
  std::string function;  // callers, paths, subtree
  bool algebra = false;  // add, mean, min, sub
};

// Reads a verb's flags and operands into `inv` (argv[0] is the verb):
// nothing to go on, else the exit code (ExitCode).
ExitCode Parse(int argc, char** argv, Invocation* inv) {
  const std::string verb = argv[0];
  Common& c = inv->c;
  OptionTable t("fieldprof tree " + verb, kUsage);
  AddFlags(&t, &c);
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  inv->verb = verb;
  if (s.ok()) s = Check(c, &inv->co, &inv->metric, &inv->metric_given);
  std::vector<std::string>& files = inv->files;
  files = t.positional();
  inv->algebra = verb == "add" || verb == "mean" || verb == "min" || verb == "sub";
  const bool named = verb == "callers" || verb == "paths" || verb == "subtree";
  if (s.ok() && named) {
    if (files.size() != 2) {
      s = InvalidArgument("give a tree and a function name");
    } else {
      inv->function = files[1];
      files.pop_back();
    }
  }
  if (s.ok() && verb == "sub") {
    inv->base = SplitCommas(c.base);
    if (inv->base.empty() && files.size() == 2) {  // sub NEW OLD
      inv->base.push_back(files.back());
      files.pop_back();
    }
    if (inv->base.empty() || files.empty())
      s = InvalidArgument("give NEW OLD, or NEW... --base OLD,...");
  }
  if (s.ok() && inv->algebra && verb != "sub" && files.empty()) {
    s = InvalidArgument("give the trees");
  }
  if (s.ok() && !inv->algebra && files.size() != 1) s = InvalidArgument("give one tree");
  if (s.ok() && verb == "build" && c.out.empty()) s = InvalidArgument("build writes -o FILE");
  if (!s.ok()) return UsageError(t, s);
  return std::nullopt;
}

// Reads each of `paths` as a tree (a recording, points, a trace, ...).
bool Load(const Invocation& inv, const std::vector<std::string>& paths,
          std::vector<CallTree>* out) {
  const Common& c = inv.c;
  tools::TreeLoadOptions lo;
  lo.from_ns = static_cast<uint64_t>(std::llround(c.from * 1e9));
  lo.to_ns = c.to < 0 ? UINT64_MAX : static_cast<uint64_t>(std::llround(c.to * 1e9));
  lo.tid = static_cast<uint32_t>(c.thread);
  lo.collapsed_metric = inv.metric_given ? inv.metric : Metric::kSamples;
  lo.chrome.threads = c.threads;
  lo.off_cpu = c.off_cpu;
  lo.merge = inv.verb == "merge";
  lo.field_module = c.field_module;
  lo.debug_dir = c.debug_dir;
  for (const std::string& p : paths) {
    StatusOr<CallTree> tree = tools::LoadCallTree(p, lo);
    if (!tree.ok()) {
      std::cerr << "fieldprof tree: " << tree.status().message() << "\n";
      return false;
    }
    out->push_back(std::move(*tree));
  }
  return true;
}

int PrintTop(const CallTree& tree, const Common& c, Metric metric) {
  const auto rows = c.nodes ? tools::TopNodes(tree, metric, c.total, static_cast<size_t>(c.limit))
                            : tools::TopFunctions(tree, metric, c.total);
  std::printf("%12s %12s  %s (%s, by %s)\n", "self", "total", c.nodes ? "call path" : "function",
              tools::MetricName(metric), c.total ? "total" : "self");
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(c.limit); ++i) {
    std::printf("%12s %12s  %s\n", tools::FormatMetric(metric, rows[i].self).c_str(),
                tools::FormatMetric(metric, rows[i].total).c_str(), rows[i].name.c_str());
  }
  return 0;
}

int PrintCallers(const CallTree& tree, const std::string& function, Metric metric) {
  StatusOr<tools::Butterfly> b = tools::ButterflyOf(tree, function, metric);
  if (!b.ok()) return Fail(b.status().message());
  std::printf("%s: self %s, total %s (%s)\ncallers (its total under each):\n", function.c_str(),
              tools::FormatMetric(metric, b->self).c_str(),
              tools::FormatMetric(metric, b->total).c_str(), tools::MetricName(metric));
  for (const auto& r : b->callers) {
    std::printf("  %12s  %s\n", tools::FormatMetric(metric, r.total).c_str(), r.name.c_str());
  }
  std::printf("callees (their totals under it):\n");
  for (const auto& r : b->callees) {
    std::printf("  %12s  %s\n", tools::FormatMetric(metric, r.total).c_str(), r.name.c_str());
  }
  return 0;
}

int PrintPaths(const CallTree& tree, const std::string& function, const Common& c, Metric metric) {
  const auto rows = tools::PathsTo(tree, function, metric);
  if (rows.empty()) return Fail("no call path holds \"" + function + "\"");
  std::printf("%12s %12s  path to %s (%s)\n", "total", "self", function.c_str(),
              tools::MetricName(metric));
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(c.limit); ++i) {
    std::printf("%12s %12s  %s\n", tools::FormatMetric(metric, rows[i].total).c_str(),
                tools::FormatMetric(metric, rows[i].self).c_str(), rows[i].name.c_str());
  }
  return 0;
}

int PrintLeaks(const CallTree& tree, const std::string& file) {
  if (!tree.has(Metric::kAllocBytes)) {
    return Fail(file + " has no allocation metrics (a lab tree has them)");
  }
  std::printf("%12s %12s %12s %10s  function\n", "kept", "allocated", "freed", "allocs");
  for (const auto& r : tools::AllocatedNotFreed(tree)) {
    std::printf("%12s %12s %12s %10s  %s\n",
                tools::FormatMetric(Metric::kAllocBytes, r.allocated - r.freed, true).c_str(),
                tools::FormatMetric(Metric::kAllocBytes, r.allocated).c_str(),
                tools::FormatMetric(Metric::kFreedBytes, r.freed).c_str(),
                tools::FormatMetric(Metric::kAllocs, r.allocs).c_str(), r.name.c_str());
  }
  return 0;
}

// show, build, top, callers, paths, subtree, leaks: one tree.
int Query(const Invocation& inv, const CallTree& tree) {
  const std::string& verb = inv.verb;
  const Metric metric = inv.metric;
  if (verb == "show" || verb == "build" || verb == "merge")
    return Emit(tree, inv.c, metric, nullptr);
  if (verb == "subtree") {
    StatusOr<CallTree> sub = tools::Subtree(tree, inv.function);
    if (!sub.ok()) return Fail(sub.status().message());
    return Emit(*sub, inv.c, metric, nullptr);
  }
  if (verb == "top") return PrintTop(tree, inv.c, metric);
  if (verb == "callers") return PrintCallers(tree, inv.function, metric);
  if (verb == "paths") return PrintPaths(tree, inv.function, inv.c, metric);
  return PrintLeaks(tree, inv.files[0]);
}

// sub: the groups' means (a single run is its own mean), new less base,
// each node's change tested when both sides have two runs or more.
int Sub(const Invocation& inv, const std::vector<CallTree>& trees,
        const std::vector<CallTree>& bases) {
  const Common& c = inv.c;
  std::vector<const CallTree*> in, old;
  for (const CallTree& tree : trees) in.push_back(&tree);
  for (const CallTree& tree : bases) old.push_back(&tree);
  if (c.collapsed) {  // difffolded.pl's two columns: base, then new
    StatusOr<CallTree> now_mean = tools::Combine(in, tools::Op::kMean, inv.co);
    StatusOr<CallTree> old_mean = tools::Combine(old, tools::Op::kMean, inv.co);
    if (!now_mean.ok() || !old_mean.ok()) return Fail("the runs did not combine");
    std::cout << tools::TreeCollapsedDiff(*old_mean, *now_mean, inv.metric, inv.co.match);
    return 0;
  }
  std::vector<const CallTree*> both(in);
  both.insert(both.end(), old.begin(), old.end());
  tools::CombineOptions sub_o = inv.co;
  sub_o.sub_group = in.size();
  StatusOr<CallTree> diff = tools::Combine(both, tools::Op::kSub, sub_o);
  if (!diff.ok()) return Fail(diff.status().message());
  // A difference of per-run means: not runs to add up again.
  diff->runs = 1;
  diff->per_run = true;
  uint64_t new_runs = 0, base_runs = 0;
  for (const CallTree* t : in) new_runs += t->runs;
  for (const CallTree* t : old) base_runs += t->runs;
  diff->description = "sub: " + std::to_string(new_runs) + " new run(s) less " +
                      std::to_string(base_runs) + " base run(s), per-run means";
  tools::SignificanceOptions so;
  so.metric = inv.metric;
  so.match = inv.co.match;
  so.fdr = c.fdr;
  so.min_effect = c.min_effect;
  so.min_share = c.min_share / 100;
  const std::vector<tools::NodeChange> changes = tools::Significance(*diff, in, old, so);
  const bool tested = trees.size() >= 2 && bases.size() >= 2;
  if (!tested) {
    std::fprintf(stderr,
                 "fieldprof tree sub: one run on a side: no significance (give 2 or more each)\n");
  } else {
    std::fprintf(stderr,
                 "fieldprof tree sub: significance of %s self values: permutation test per node, "
                 "Benjamini-Hochberg at FDR %.2g, floors %.3g%% change and %.3g%% of the base\n",
                 tools::MetricName(inv.metric), c.fdr, c.min_effect * 100, c.min_share);
  }
  return Emit(*diff, c, inv.metric, tested ? &changes : nullptr, &changes);
}

// add, mean, min, sub: several trees.
int Algebra(const Invocation& inv, const std::vector<CallTree>& trees,
            const std::vector<CallTree>& bases) {
  std::fprintf(stderr, "fieldprof tree %s: %zu tree%s, names matched %s, normalize %s\n",
               inv.verb.c_str(), trees.size() + bases.size(),
               trees.size() + bases.size() == 1 ? "" : "s", inv.c.match.c_str(),
               inv.c.normalize.c_str());
  if (inv.verb == "sub") return Sub(inv, trees, bases);
  std::vector<const CallTree*> in;
  for (const CallTree& tree : trees) in.push_back(&tree);
  const tools::Op op = inv.verb == "add"    ? tools::Op::kAdd
                       : inv.verb == "mean" ? tools::Op::kMean
                                            : tools::Op::kMin;
  StatusOr<CallTree> out = tools::Combine(in, op, inv.co);
  if (!out.ok()) return Fail(out.status().message());
  return Emit(*out, inv.c, inv.metric, nullptr);
}

// One verb: every verb reads the same flags, loads its trees and queries
// or combines them.
int RunTreeVerb(int argc, char** argv) {
  Invocation inv;
  if (const ExitCode done = Parse(argc, argv, &inv)) return *done;
  std::vector<CallTree> trees, bases;
  if (!Load(inv, inv.files, &trees) || !Load(inv, inv.base, &bases)) return 1;
  if (!inv.metric_given) inv.metric = trees[0].PrimaryMetric();
  return inv.algebra ? Algebra(inv, trees, bases) : Query(inv, trees[0]);
}

constexpr Verb kVerbs[] = {
    {"show", RunTreeVerb},    {"build", RunTreeVerb}, {"top", RunTreeVerb},
    {"callers", RunTreeVerb}, {"paths", RunTreeVerb}, {"subtree", RunTreeVerb},
    {"leaks", RunTreeVerb},   {"add", RunTreeVerb},   {"mean", RunTreeVerb},
    {"min", RunTreeVerb},     {"sub", RunTreeVerb},   {"merge", RunTreeVerb},
};

}  // namespace

int CmdTree(int argc, char** argv) {
  Common flags;
  OptionTable help("fieldprof tree VERB", kUsage);
  AddFlags(&help, &flags);
  return RunVerb("fieldprof tree", kVerbs, help, argc, argv);
}

}  // namespace fieldprof::tools
