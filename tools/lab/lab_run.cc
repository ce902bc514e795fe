// fieldprof lab -- COMMAND: a complete profile of one scenario (see
// tools/shared/lab_profile.h for the pipeline and agent/preload/runtime/lab/lab.h for what
// the runtime does in each pass). In stages: options -> the census ->
// the timing plan (timing_plan.h) -> the timing passes -> the profile.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/base/durable_file.h"
#include "common/settings/options.h"
#include "common/statistics/histogram.h"
#include "common/system/system_code.h"
#include "common/wire/wire.h"
#include "tools/lab/lab_commands.h"
#include "tools/lab/lab_tree.h"
#include "tools/lab/passes.h"
#include "tools/lab/timing_plan.h"
#include "tools/shared/command_args.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"
#include "tools/shared/lab_profile.h"
#include "tools/shared/runtime_env.h"

namespace fieldprof::tools {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAbout =
    "Profiles one scenario completely: every exported API it calls across module\n"
    "boundaries, in every module it loads (dlopen'ed ones too), into a lab profile\n"
    "in the field's record format.\n"
    "  1. the census (one run): every API's calls, allocation (inclusive and\n"
    "     exclusive of nested APIs), allocation count, I/O, and which APIs ran\n"
    "     inside which: the nesting graph;\n"
    "  2. the timing plan: the APIs in sets of which no two were ever on one stack\n"
    "     (a colouring of the graph), so no probe's cost lands in a timed call;\n"
    "  3. the timing passes: each set, --repeat times.\n"
    "The scenario's output, exit status and behaviour are unchanged; its output is\n"
    "shown for the census run only. A run that fails is reported.\n\n"
    "  fieldprof lab -- sqlite3 /tmp/db.sqlite < workload.sql\n"
    "  fieldprof lab --repeat 5 -o build.labprofile -- make -j2\n"
    "  fieldprof lab show build.labprofile\n"
    "  fieldprof lab --tree q.fptree -- sqlite3 db < q.sql   # and: fieldprof tree show q.fptree\n"
    "  fieldprof lab merge -o all.labprofile a.labprofile b.labprofile\n"
    "  fieldprof check build.labprofile      # against the field\n"
    "  fieldprof lab upload build.labprofile --host agg.example  # kept apart from field sums\n\n"
    "Exit: 0 the profile is written and every run exited as the census did;\n"
    "1 written, but some run failed or differed (said above); 2 usage; 3 nothing\n"
    "observed (a static program, or one that exits at once).";

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

struct LabOptions {
  std::string output, name, lib_dir, keep_dir, debug, tree;
  int64_t repeat = 3;
  std::vector<std::string> cmd;
  std::string runtime_dir;  // where libfieldprof.so is
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseLabOptions(int argc, char** argv, LabOptions* o) {
  OptionTable t("fieldprof lab", kAbout);
  t.AddString("output", &o->output, "the profile's file (-o; default NAME.labprofile)");
  t.AddString("name", &o->name, "the scenario's name in the profile (default: the command's name)");
  t.AddInt("repeat", &o->repeat, "runs of each timing set", 1, 1000);
  t.AddString("lib_dir", &o->lib_dir, "directory holding libfieldprof.so");
  t.AddString("keep", &o->keep_dir,
              "keep every run's raw lab files (and the timing plan) in this directory");
  t.AddString("debug", &o->debug, "write the runtime's diagnostics to this file");
  t.AddString("tree", &o->tree,
              "also write the census's API call paths as a call tree to this file (.fptree: "
              "calls, time, bytes allocated and freed, allocations; `fieldprof tree` reads it)");
  t.AddShort('o', "output");
  const int cmd_at = DoubleDashAt(argc, argv);
  Status s;
  if (ParseOrShowHelp(t, cmd_at, argv, &s)) return 0;
  o->cmd = ProgramArgs(argc, argv, cmd_at);
  if (s.ok() && o->cmd.empty()) s = InvalidArgument("give the scenario: fieldprof lab -- COMMAND");
  if (s.ok() && !t.positional().empty()) {
    s = InvalidArgument("unexpected '" + t.positional()[0] + "' (the command goes after --)");
  }
  StatusOr<std::string> runtime = s.ok() ? FindRuntime(o->lib_dir) : StatusOr<std::string>(s);
  if (!runtime.ok()) return UsageError(t, runtime.status());
  o->runtime_dir = *runtime;
  if (o->name.empty()) o->name = fs::path(o->cmd[0]).filename().string();
  if (o->output.empty()) o->output = o->name + ".labprofile";
  return std::nullopt;
}

// The work directory: --keep, or a temporary one removed at the end.
class WorkDir {
 public:
  ~WorkDir() {
    std::error_code ec;
    if (remove_) fs::remove_all(path_, ec);
  }
  bool Make(const std::string& keep) {
    if (!keep.empty()) {
      // Absolute: the runtime writes here from inside the program, which
      // may change its directory.
      std::error_code ec;
      path_ = fs::absolute(keep, ec).string();
      return !ec && MakeDirs(path_, FileAccess::kShared).ok();
    }
    std::string tmpl = (fs::temp_directory_path() / "fieldprof-lab-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return false;
    path_ = tmpl;
    remove_ = true;
    return true;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool remove_ = false;
};

// Every pass is an explicit run, never refused: its own slots, no load cap,
// no overhead budget.
void SetPassEnvironment(const LabOptions& o, const std::string& work) {
  SetLabPassEnvironment(work);
  if (!o.debug.empty()) setenv("FIELDPROF_DEBUG", fs::absolute(o.debug).c_str(), 1);
  PrependEnv("LD_PRELOAD", o.runtime_dir + "/" + kFrontLib);
}

// One run of the lab: its options, where it works, the profile it builds.
class LabSession {
 public:
  LabSession(const LabOptions& o, std::string work)
      : o_(o), work_(std::move(work)), started_(std::chrono::steady_clock::now()) {
    profile_.set_schema_version(1);
    profile_.add_scenarios(o.name);
    profile_.set_repeat(static_cast<uint32_t>(o.repeat));
  }

  // 1. The census: every API, and the nesting graph. An exit code when the
  // scenario cannot be profiled, else 0.
  int Census();
  // The census's call paths, with the timing passes' times, written to
  // --tree. False when it cannot be.
  bool WriteTree();
  // 2. The plan: sets of APIs never on one stack.
  void Plan();
  // 3. The timing passes, each set --repeat times.
  void TimingPasses();
  // 4. The profile: time from the timing passes, the rest from the census.
  int WriteProfile();

 private:
  void RecordPass(uint32_t set, uint32_t rep, const PassResult& r);
  void TimeSet(size_t si, int devnull, size_t* done);
  // What the census saw, said on stderr.
  void SayCensus(uint64_t calls, uint64_t refused, uint64_t lost) const;

  const LabOptions& o_;
  const std::string work_;
  const std::chrono::steady_clock::time_point started_;
  const bool tty_ = isatty(STDERR_FILENO);
  wire::LabProfile profile_;
  PassResult census_;
  LabGraph graph_;
  uint32_t clique_ = 0;  // the most distinct APIs the census saw on one stack
  TimingPlan plan_;
  std::vector<wire::LabRunRecord> timed_;
  bool trouble_ = false;  // a pass failed or exited unlike the census
};

void LabSession::RecordPass(uint32_t set, uint32_t rep, const PassResult& r) {
  wire::LabPass* p = profile_.add_passes();
  p->set_set(set);
  p->set_repeat(rep);
  p->set_exit_status(r.exit_status);
  p->set_wall_ns(r.wall_ns);
  p->set_processes(static_cast<uint32_t>(r.runs.size()));
  p->set_scenario(o_.name);
}

int LabSession::Census() {
  std::fprintf(stderr, "fieldprof lab: census run of %s ...\n", o_.name.c_str());
  census_ = RunPass(o_.cmd, "census", work_ + "/census", "", STDOUT_FILENO, STDERR_FILENO);
  RecordPass(0, 1, census_);
  if (census_.exit_status < 0) return 3;
  uint64_t calls = 0, refused = 0, lost = 0;
  for (const wire::LabRunRecord& r : census_.runs) {
    graph_.AddRun(r);
    clique_ = std::max(clique_, r.max_depth());
    calls += r.counters().calls_measured();
    refused += r.apis_refused();
    lost += r.edges_lost();
  }
  SayCensus(calls, refused, lost);
  if (graph_.size() == 0) {
    std::fprintf(
        stderr,
        "fieldprof lab: the census observed no API in %s (a statically linked program, "
        "or one that exits before calling any library? --debug FILE says what the runtime saw)\n",
        o_.name.c_str());
    return 3;
  }
  return 0;
}

bool LabSession::WriteTree() {
  // Each API's mean time per call in its timing passes.
  std::map<std::string, std::pair<double, double>> timed;  // time, calls
  for (const wire::LabRunRecord& r : timed_) {
    for (const wire::Record& rec : r.records()) {
      if (rec.key().metric() != wire::METRIC_WALL_TIME_NS) continue;
      const Histogram h = HistogramFromWire(rec.histogram());
      auto& [ns, calls] = timed[rec.key().module() + ":" + rec.key().symbol()];
      ns += static_cast<double>(h.sum());
      calls += static_cast<double>(h.count());
    }
  }
  std::map<std::string, double> mean_ns;
  for (const auto& [key, tc] : timed) {
    if (tc.second > 0) mean_ns[key] = tc.first / tc.second;
  }
  uint64_t lost = 0;
  tools::CallTree t = LabCallTree(census_.runs, mean_ns, &lost);
  t.description = "lab census of " + o_.name;
  if (Status w = WriteFileDurably(o_.tree, tools::EncodeCallTree(t), FileAccess::kShared);
      !w.ok()) {
    std::cerr << "fieldprof lab: " << w.message() << "\n";
    return false;
  }
  std::fprintf(stderr, "fieldprof lab: %s written: %zu call paths (fieldprof tree show %s)\n",
               o_.tree.c_str(), t.size() - 1, o_.tree.c_str());
  if (lost > 0) {
    std::fprintf(stderr,
                 "fieldprof lab: warning: %llu calls are not in the tree (the runtime's path "
                 "table was full)\n",
                 static_cast<unsigned long long>(lost));
  }
  return true;
}

void LabSession::SayCensus(uint64_t calls, uint64_t refused, uint64_t lost) const {
  std::set<std::string> modules;
  for (uint32_t a = 0; a < graph_.size(); ++a) modules.insert(graph_.api(a).module());
  std::fprintf(stderr,
               "fieldprof lab: census: %zu APIs in %zu modules, %s calls, %zu nested pairs, "
               "%zu process%s, exit %d, %.2f s\n",
               graph_.size(), modules.size(), FormatCount(calls).c_str(), graph_.pairs().size(),
               census_.runs.size(), census_.runs.size() == 1 ? "" : "es", census_.exit_status,
               static_cast<double>(census_.wall_ns) / 1e9);
  if (refused > 0 || lost > 0) {
    std::fprintf(stderr,
                 "fieldprof lab: warning: the runtime's tables were full: %llu APIs unobserved, "
                 "%llu nested pairs lost\n",
                 static_cast<unsigned long long>(refused), static_cast<unsigned long long>(lost));
  }
}

void LabSession::Plan() {
  std::vector<uint32_t> all(graph_.size());
  for (uint32_t a = 0; a < graph_.size(); ++a) all[a] = a;
  plan_ = PlanTiming(graph_, all, clique_);
  std::fprintf(stderr,
               "fieldprof lab: timing plan: %zu sets (no plan can use fewer than %u), %lld runs "
               "each: %lld runs for %zu APIs\n",
               plan_.sets.size(), plan_.lower_bound, static_cast<long long>(o_.repeat),
               static_cast<long long>(plan_.sets.size() * o_.repeat), graph_.size());
  if (!plan_.recursive.empty()) {
    std::fprintf(stderr,
                 "fieldprof lab: %zu APIs run inside themselves (e.g. %s): their outer calls "
                 "include an inner call's probe\n",
                 plan_.recursive.size(), LabApiName(graph_.api(plan_.recursive[0])).c_str());
  }
  profile_.set_timing_sets(static_cast<uint32_t>(plan_.sets.size()));
  profile_.set_min_sets(plan_.lower_bound);
}

// Set `si`'s --repeat runs, their output to /dev/null, their stderr kept
// in their directory and shown when a run goes wrong.
void LabSession::TimeSet(size_t si, int devnull, size_t* done) {
  const std::string plan_file = work_ + "/set-" + std::to_string(si + 1) + ".apis";
  {
    std::ofstream pf(plan_file);
    for (uint32_t a : plan_.sets[si]) pf << LabApiName(graph_.api(a)) << "\n";
  }
  const size_t total = plan_.sets.size() * static_cast<size_t>(o_.repeat);
  for (int64_t rep = 1; rep <= o_.repeat; ++rep) {
    ++*done;
    const std::string dir =
        work_ + "/set-" + std::to_string(si + 1) + "-run-" + std::to_string(rep);
    fs::create_directories(dir);
    const std::string err_path = dir + "/stderr.txt";
    const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    std::fprintf(
        stderr, "%sfieldprof lab: [%zu/%zu] set %zu of %zu (%zu APIs), run %lld of %lld, %.1f s%s",
        tty_ ? "\r\033[K" : "", *done, total, si + 1, plan_.sets.size(), plan_.sets[si].size(),
        static_cast<long long>(rep), static_cast<long long>(o_.repeat),
        Seconds(std::chrono::steady_clock::now() - started_), tty_ ? "" : "\n");
    std::fflush(stderr);
    PassResult r = RunPass(o_.cmd, "time", dir, plan_file, devnull >= 0 ? devnull : STDOUT_FILENO,
                           err_fd >= 0 ? err_fd : STDERR_FILENO);
    if (err_fd >= 0) close(err_fd);
    RecordPass(static_cast<uint32_t>(si + 1), static_cast<uint32_t>(rep), r);
    if (r.exit_status != census_.exit_status || r.unreadable > 0) {
      trouble_ = true;
      const std::string unreadable =
          r.unreadable ? ", " + std::to_string(r.unreadable) + " unreadable lab files" : "";
      std::fprintf(stderr,
                   "%sfieldprof lab: set %zu run %lld exited %d (the census run: %d)%s; its "
                   "data is kept, its stderr ends:\n%s",
                   tty_ ? "\r\033[K" : "", si + 1, static_cast<long long>(rep), r.exit_status,
                   census_.exit_status, unreadable.c_str(), TailOf(err_path, 5).c_str());
    }
    for (auto& run : r.runs) timed_.push_back(std::move(run));
  }
}

void LabSession::TimingPasses() {
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  size_t done = 0;
  for (size_t si = 0; si < plan_.sets.size(); ++si) TimeSet(si, devnull, &done);
  if (devnull >= 0) close(devnull);
  if (tty_ && done > 0) std::fprintf(stderr, "\r\033[K");
}

int LabSession::WriteProfile() {
  std::map<std::string, wire::Record> records;
  SumRecords(census_.runs, wire::METRIC_ALLOC_BYTES_INCLUSIVE, wire::METRIC_SOCKET_IO_BYTES,
             &records);
  SumRecords(timed_, wire::METRIC_WALL_TIME_NS, wire::METRIC_WALL_TIME_NS, &records);
  std::set<std::string> timed_apis;
  for (const auto& [k, r] : records) {
    if (r.key().metric() == wire::METRIC_WALL_TIME_NS) timed_apis.insert(LabApiName(r.key()));
  }
  uint64_t untimed = 0;
  for (uint32_t a = 0; a < graph_.size(); ++a) {
    untimed += !timed_apis.count(LabApiName(graph_.api(a)));
  }
  profile_.set_apis_untimed(untimed);
  for (auto& [k, r] : records) *profile_.add_records() = std::move(r);
  graph_.ToProfile(&profile_);
  // Keys as the agent uploads them: package versions where the module is
  // the system's code (the profile keeps every module; `lab upload` sends
  // only those). Without an answer, build ids stay.
  SystemCode code;
  if (code.Refresh().ok()) {
    auto name = [&](wire::ApiKey* k) {
      k->set_module_version(code.KeyVersion(k->module(), k->module_version()));
    };
    for (wire::Record& r : *profile_.mutable_records()) name(r.mutable_key());
    for (wire::ApiKey& k : *profile_.mutable_apis()) name(&k);
  }
  if (Status w = WriteLabProfile(o_.output, profile_); !w.ok()) {
    std::cerr << "fieldprof lab: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr,
               "fieldprof lab: %s written: %zu APIs, %zu timed (%llu never called in their "
               "timing runs), %zu runs in %.1f s\n",
               o_.output.c_str(), graph_.size(), timed_apis.size(),
               static_cast<unsigned long long>(untimed),
               static_cast<size_t>(profile_.passes_size()),
               Seconds(std::chrono::steady_clock::now() - started_));
  if (!o_.keep_dir.empty())
    std::fprintf(stderr, "fieldprof lab: raw files kept in %s\n", work_.c_str());
  return trouble_ ? 1 : 0;
}

}  // namespace

int LabRun(int argc, char** argv) {
  LabOptions o;
  if (const ExitCode done = ParseLabOptions(argc, argv, &o)) return *done;
  WorkDir work;
  if (!work.Make(o.keep_dir)) {
    std::cerr << "fieldprof lab: cannot make a work directory: " << std::strerror(errno) << "\n";
    return 3;
  }
  SetPassEnvironment(o, work.path());
  LabSession lab(o, work.path());
  if (int code = lab.Census(); code != 0) return code;
  lab.Plan();
  lab.TimingPasses();
  const int code = lab.WriteProfile();
  return !o.tree.empty() && !lab.WriteTree() ? 1 : code;
}

}  // namespace fieldprof::tools
