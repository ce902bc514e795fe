// fieldprof lab -- COMMAND: a complete profile of one scenario (see
// tools/cli/lab_profile.h for the pipeline and agent/runtime/lab.h for what
// the runtime does in each pass).
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

#include "common/options.h"
#include "common/wire.h"
#include "tools/cli/format.h"
#include "tools/cli/lab_profile.h"
#include "tools/cli/runtime_env.h"
#include "tools/lab/lab_commands.h"
#include "tools/lab/passes.h"
#include "tools/lab/timing_plan.h"

namespace fieldprof::tools {
namespace {

namespace fs = std::filesystem;

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

int LabRun(int argc, char** argv) {
  std::string output, name, lib_dir, keep_dir, debug;
  int64_t repeat = 3;
  OptionTable t(
      "fieldprof lab",
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
      "  fieldprof lab merge -o all.labprofile a.labprofile b.labprofile\n"
      "  fieldprof check build.labprofile      # against the field\n"
      "  fieldprof lab upload build.labprofile --host agg.example  # kept apart from field sums\n\n"
      "Exit: 0 the profile is written and every run exited as the census did;\n"
      "1 written, but some run failed or differed (said above); 2 usage; 3 nothing\n"
      "observed (a static program, or one that exits at once).");
  t.AddString("output", &output, "the profile's file (-o; default NAME.labprofile)");
  t.AddString("name", &name, "the scenario's name in the profile (default: the command's name)");
  t.AddInt("repeat", &repeat, "runs of each timing set", 1, 1000);
  t.AddString("lib_dir", &lib_dir, "directory holding libfieldprof.so");
  t.AddString("keep", &keep_dir,
              "keep every run's raw lab files (and the timing plan) in this directory");
  t.AddString("debug", &debug, "write the runtime's diagnostics to this file");
  int cmd_at = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      cmd_at = i;
      break;
    }
  }
  t.AddShort('o', "output");
  Status s = t.Parse(cmd_at, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  const std::vector<std::string> cmd(argv + std::min(cmd_at + 1, argc), argv + argc);
  if (s.ok() && cmd.empty()) s = InvalidArgument("give the scenario: fieldprof lab -- COMMAND");
  if (s.ok() && !t.positional().empty()) {
    s = InvalidArgument("unexpected '" + t.positional()[0] + "' (the command goes after --)");
  }
  StatusOr<std::string> runtime = s.ok() ? FindRuntime(lib_dir) : StatusOr<std::string>(s);
  if (!runtime.ok()) {
    std::cerr << "fieldprof lab: " << runtime.status().message() << " (see --help)\n";
    return 2;
  }
  if (name.empty()) name = fs::path(cmd[0]).filename().string();
  if (output.empty()) output = name + ".labprofile";

  std::string work = keep_dir;
  if (work.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "fieldprof-lab-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "fieldprof lab: cannot make a work directory: " << std::strerror(errno) << "\n";
      return 3;
    }
    work = tmpl;
  } else {
    std::error_code ec;
    fs::create_directories(work, ec);
  }
  struct RemoveAtEnd {
    std::string dir;
    ~RemoveAtEnd() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } remove_at_end{keep_dir.empty() ? work : ""};

  // Every pass is an explicit run, never refused: its own slots, no load cap,
  // no overhead budget.
  setenv("FIELDPROF_RUN", "1", 1);
  setenv("FIELDPROF_SLOT_DIR", (work + "/slots").c_str(), 1);
  setenv("FIELDPROF_SLOTS", "1000", 1);
  setenv("FIELDPROF_MAX_LOAD", "1000000", 1);
  setenv("FIELDPROF_BUDGET", "1000", 1);
  setenv("FIELDPROF_SPOOL", (work + "/spool").c_str(), 1);
  if (!debug.empty()) setenv("FIELDPROF_DEBUG", debug.c_str(), 1);
  SetTscRate();
  const std::string preload = *runtime + "/libfieldprof.so";
  PrependEnv("LD_PRELOAD", preload);
  const bool tty = isatty(STDERR_FILENO);
  const auto started = std::chrono::steady_clock::now();
  wire::LabProfile profile;
  profile.set_schema_version(1);
  profile.add_scenarios(name);
  profile.set_repeat(static_cast<uint32_t>(repeat));
  bool trouble = false;
  auto record_pass = [&](uint32_t set, uint32_t rep, const PassResult& r) {
    wire::LabPass* p = profile.add_passes();
    p->set_set(set);
    p->set_repeat(rep);
    p->set_exit_status(r.exit_status);
    p->set_wall_ns(r.wall_ns);
    p->set_processes(static_cast<uint32_t>(r.runs.size()));
    p->set_scenario(name);
  };

  // 1. The census.
  std::fprintf(stderr, "fieldprof lab: census run of %s ...\n", name.c_str());
  const PassResult census =
      RunPass(cmd, "census", work + "/census", "", STDOUT_FILENO, STDERR_FILENO);
  record_pass(0, 1, census);
  if (census.exit_status < 0) return 3;
  LabGraph graph;
  uint32_t clique = 0;
  uint64_t calls = 0, refused = 0, lost = 0;
  for (const wire::LabRunRecord& r : census.runs) {
    graph.AddRun(r);
    clique = std::max(clique, r.max_depth());
    calls += r.counters().calls_measured();
    refused += r.apis_refused();
    lost += r.edges_lost();
  }
  std::set<std::string> modules;
  for (uint32_t a = 0; a < graph.size(); ++a) modules.insert(graph.api(a).module());
  std::fprintf(stderr,
               "fieldprof lab: census: %zu APIs in %zu modules, %s calls, %zu nested pairs, "
               "%zu process%s, exit %d, %.2f s\n",
               graph.size(), modules.size(), FormatCount(calls).c_str(), graph.pairs().size(),
               census.runs.size(), census.runs.size() == 1 ? "" : "es", census.exit_status,
               static_cast<double>(census.wall_ns) / 1e9);
  if (refused > 0 || lost > 0) {
    std::fprintf(stderr,
                 "fieldprof lab: warning: the runtime's tables were full: %llu APIs unobserved, "
                 "%llu nested pairs lost\n",
                 static_cast<unsigned long long>(refused), static_cast<unsigned long long>(lost));
  }
  if (graph.size() == 0) {
    std::fprintf(
        stderr,
        "fieldprof lab: the census observed no API in %s (a statically linked program, "
        "or one that exits before calling any library? --debug FILE says what the runtime saw)\n",
        name.c_str());
    return 3;
  }

  // 2. The plan.
  std::vector<uint32_t> all(graph.size());
  for (uint32_t a = 0; a < graph.size(); ++a) all[a] = a;
  const TimingPlan plan = PlanTiming(graph, all, clique);
  std::fprintf(stderr,
               "fieldprof lab: timing plan: %zu sets (no plan can use fewer than %u), %lld runs "
               "each: %lld runs for %zu APIs\n",
               plan.sets.size(), plan.lower_bound, static_cast<long long>(repeat),
               static_cast<long long>(plan.sets.size() * repeat), graph.size());
  if (!plan.recursive.empty()) {
    std::fprintf(stderr,
                 "fieldprof lab: %zu APIs run inside themselves (e.g. %s): their outer calls "
                 "include an inner call's probe\n",
                 plan.recursive.size(), LabApiName(graph.api(plan.recursive[0])).c_str());
  }
  profile.set_timing_sets(static_cast<uint32_t>(plan.sets.size()));
  profile.set_min_sets(plan.lower_bound);

  // 3. The timing passes.
  std::vector<wire::LabRunRecord> timed;
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const size_t total = plan.sets.size() * static_cast<size_t>(repeat);
  size_t done = 0;
  for (size_t si = 0; si < plan.sets.size(); ++si) {
    const std::string plan_file = work + "/set-" + std::to_string(si + 1) + ".apis";
    {
      std::ofstream pf(plan_file);
      for (uint32_t a : plan.sets[si]) pf << LabApiName(graph.api(a)) << "\n";
    }
    for (int64_t rep = 1; rep <= repeat; ++rep) {
      ++done;
      const std::string dir =
          work + "/set-" + std::to_string(si + 1) + "-run-" + std::to_string(rep);
      fs::create_directories(dir);
      const std::string err_path = dir + "/stderr.txt";
      const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      std::fprintf(
          stderr,
          "%sfieldprof lab: [%zu/%zu] set %zu of %zu (%zu APIs), run %lld of %lld, %.1f s%s",
          tty ? "\r\033[K" : "", done, total, si + 1, plan.sets.size(), plan.sets[si].size(),
          static_cast<long long>(rep), static_cast<long long>(repeat),
          Seconds(std::chrono::steady_clock::now() - started), tty ? "" : "\n");
      std::fflush(stderr);
      PassResult r = RunPass(cmd, "time", dir, plan_file, devnull >= 0 ? devnull : STDOUT_FILENO,
                             err_fd >= 0 ? err_fd : STDERR_FILENO);
      if (err_fd >= 0) close(err_fd);
      record_pass(static_cast<uint32_t>(si + 1), static_cast<uint32_t>(rep), r);
      if (r.exit_status != census.exit_status || r.unreadable > 0) {
        trouble = true;
        std::fprintf(stderr,
                     "%sfieldprof lab: set %zu run %lld exited %d (the census run: %d)%s; its "
                     "data is kept, its stderr ends:\n%s",
                     tty ? "\r\033[K" : "", si + 1, static_cast<long long>(rep), r.exit_status,
                     census.exit_status,
                     r.unreadable
                         ? (", " + std::to_string(r.unreadable) + " unreadable lab files").c_str()
                         : "",
                     TailOf(err_path, 5).c_str());
      }
      for (auto& run : r.runs) timed.push_back(std::move(run));
    }
  }
  if (devnull >= 0) close(devnull);
  if (tty && total > 0) std::fprintf(stderr, "\r\033[K");

  // 4. The profile: time from the timing passes, the rest from the census.
  std::map<std::string, wire::Record> records;
  SumRecords(census.runs, wire::METRIC_ALLOC_BYTES_INCLUSIVE, wire::METRIC_SOCKET_IO_BYTES,
             &records);
  SumRecords(timed, wire::METRIC_WALL_TIME_NS, wire::METRIC_WALL_TIME_NS, &records);
  std::set<std::string> timed_apis;
  for (const auto& [k, r] : records) {
    if (r.key().metric() == wire::METRIC_WALL_TIME_NS) timed_apis.insert(LabApiName(r.key()));
  }
  uint64_t untimed = 0;
  for (uint32_t a = 0; a < graph.size(); ++a)
    untimed += !timed_apis.count(LabApiName(graph.api(a)));
  profile.set_apis_untimed(untimed);
  for (auto& [k, r] : records) *profile.add_records() = std::move(r);
  graph.ToProfile(&profile);
  if (Status w = WriteLabProfile(output, profile); !w.ok()) {
    std::cerr << "fieldprof lab: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr,
               "fieldprof lab: %s written: %zu APIs, %zu timed (%llu never called in their "
               "timing runs), %zu runs in %.1f s\n",
               output.c_str(), graph.size(), timed_apis.size(),
               static_cast<unsigned long long>(untimed), static_cast<size_t>(profile.passes_size()),
               Seconds(std::chrono::steady_clock::now() - started));
  if (!keep_dir.empty())
    std::fprintf(stderr, "fieldprof lab: raw files kept in %s\n", work.c_str());
  return trouble ? 1 : 0;
}

}  // namespace fieldprof::tools
