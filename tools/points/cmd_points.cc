// fieldprof points: instrumentation points (agent/include/fieldprof/
// points.h) recorded on the developer's machine, per run.
//   fieldprof points record [-o DIR] [--runs N] [--at MODULE:FUNCTION,...] [--stacks]
//                           -- CMD ARGS...
//   fieldprof points show DIR... [--tag T] [--per_run] [--stacks] [--json]
//                                [--chrome_trace F] [--tree F] [--html F] [--keep_dirty]
//   fieldprof points tags DIR...
//   fieldprof points compare A B [--tag T] [--fdr Q] [--min_effect F] [--json]
//   fieldprof points upload DIR... | pull --tag T -o DIR | tags   --host H --token T
//                                (developer mode: points_remote.h)
//   fieldprof points field --module M [--host H]   (the field's sums: points_field.h)
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/base/durable_file.h"
#include "common/points/points_file.h"
#include "common/points/points_format.h"
#include "common/settings/options.h"
#include "common/settings/tsc_rate.h"
#include "tools/commands.h"
#include "tools/points/at_names.h"
#include "tools/points/points_field.h"
#include "tools/points/points_names.h"
#include "tools/points/points_page.h"
#include "tools/points/points_remote.h"
#include "tools/points/points_report.h"
#include "tools/shared/command_args.h"
#include "tools/shared/command_line.h"
#include "tools/shared/program_files.h"
#include "tools/shared/runtime_env.h"
#include "tools/shared/spawn.h"

namespace fieldprof::tools {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "Instrumentation points: the tagged points a program marks with\n"
    "<fieldprof/points.h> (FP_POINT, FP_SCOPE, FP_BEGIN/FP_END), recorded per run,\n"
    "and the time between them.\n"
    "  fieldprof points record -o startup.d --runs 20 -- ./myprog --init-only\n"
    "  fieldprof points record --at libsqlite3.so.0:sqlite3_step -- sqlite3 db < q.sql\n"
    "  fieldprof points show startup.d              # per tag: segments across runs\n"
    "  fieldprof points show startup.d --per_run    # and each run's values\n"
    "  fieldprof points show startup.d --calls      # each call's p50, p90, p99, histogram\n"
    "  fieldprof points record --stacks -o s.d -- ./myprog && fieldprof points show s.d --stacks\n"
    "  fieldprof points show s.d --tree s.fptree && fieldprof tree show s.fptree --html s.html\n"
    "                                               # scopes under their stacks, a flame graph\n"
    "  fieldprof points tags startup.d              # the tags, newest first\n"
    "  fieldprof points show startup.d --tag startup --from 2026-11-20 --to 2026-11-24\n"
    "  fieldprof points compare cold.d warm.d       # B against A, per segment\n"
    "  fieldprof points compare cold.d warm.d --html c.html   # and a page: each run a dot\n"
    "  fieldprof points show startup.d --html startup.html   # bar charts, a bar per run\n"
    "  fieldprof points show startup.d --chrome_trace t.json --tree t.fptree\n"
    "  fieldprof points upload startup.d --host agg.example --token $TOKEN   # developer mode\n"
    "  fieldprof points pull --tag startup -o startup.d --host agg.example --token $TOKEN\n"
    "  fieldprof points field --module main       # the field's sums (volunteers' runs)\n"
    "A segment is the time from one point to the next of the same tag (in time\n"
    "order, any thread), or a scope's duration. Dirty runs (a span with modified\n"
    "Z-score |M| > 3.5) are removed and named: from 20 runs at most 5% of them, from\n"
    "5 runs at most one, and only at twice the median span or more.\n"
    "points record's exit status is the program's (of the last run that failed).";

void Say(const std::string& what) { std::cerr << "fieldprof points: " << what << "\n"; }

// One --at entry with a C++ name (myprog:Config::load): the plan lines of
// the functions it names in the module's file, by their symbols; in
// *names, a line per symbol that says which entry it came from.
Status PlanCxxName(const std::string& entry, size_t colon, const std::string& program,
                   std::string* plan, std::string* names) {
  const std::string module = entry.substr(0, colon), name = entry.substr(colon + 1);
  const std::string file = tools::ModuleFile(program, module);
  if (file.empty()) {
    return InvalidArgument("--at " + entry + ": " + name +
                           " is a C++ name, and no file of module " + module +
                           " was found to look it up in (give the mangled name, as nm shows it)");
  }
  std::vector<std::string> near;
  StatusOr<std::vector<tools::CxxMatch>> found = tools::FunctionsNamed(file, name, &near);
  if (!found.ok()) return InvalidArgument("--at " + entry + ": " + found.status().message());
  if (found->empty()) {
    std::string hint;
    for (const std::string& n : near) hint += (hint.empty() ? "; did you mean " : ", ") + n;
    return InvalidArgument("--at " + entry + ": no function of that name in " + file +
                           (near.empty() ? " (its symbol table may have been stripped)" : hint));
  }
  for (const tools::CxxMatch& m : *found) {
    *plan += module + ":" + m.symbol + "\n";
    *names += module + ":" + m.symbol + "\t" + module + ":" + m.demangled + "\n";
  }
  return Status::Ok();
}

// Points placed by configuration: the runtime in its points pass binds
// the functions listed and hands each call's span to the recorder, with a
// lab pass's settings. The front loads the runtime, which finds the
// recorder's entries as the first definitions not its own
// (next_symbol.h), wherever the recorder is in LD_PRELOAD. `work`: a
// directory for its plan and lab files. C++ names are looked up in the
// module's file, as `program` (the command's file) loads it.
Status PlaceByConfiguration(const std::string& at, const std::string& runtime_dir,
                            const std::string& work, const std::string& program) {
  std::string plan, names;
  for (size_t start = 0; start <= at.size();) {
    const size_t comma = std::min(at.find(',', start), at.size());
    std::string f = at.substr(start, comma - start);
    f.erase(0, f.find_first_not_of(' '));
    f.erase(f.find_last_not_of(' ') + 1);
    start = comma + 1;
    if (f.empty()) continue;
    const size_t colon = f.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == f.size()) {
      return InvalidArgument("--at takes MODULE:FUNCTION (libsqlite3.so.0:sqlite3_step), not \"" +
                             f + "\"");
    }
    if (tools::IsPlainSymbol(f.substr(colon + 1))) {
      plan += f + "\n";
    } else if (Status c = PlanCxxName(f, colon, program, &plan, &names); !c.ok()) {
      return c;
    }
  }
  if (plan.empty()) return InvalidArgument("--at names no function");
  if (Status w = WriteFileDurably(work + "/at.apis", plan, FileAccess::kPrivate); !w.ok()) return w;
  if (Status w = WriteFileDurably(work + "/at.names", names, FileAccess::kPrivate); !w.ok()) {
    return w;
  }
  setenv("FIELDPROF_LAB", "points", 1);
  setenv("FIELDPROF_LAB_DIR", work.c_str(), 1);
  setenv("FIELDPROF_LAB_APIS", (work + "/at.apis").c_str(), 1);
  SetLabPassEnvironment(work);
  PrependEnv("LD_PRELOAD", runtime_dir + "/" + kFrontLib);
  return Status::Ok();
}

// What the runtime made of each --at function, over every process of
// every run: its lines "MODULE:FUNCTION<TAB>WHAT[: WHY]" in placed-<pid>
// files (agent/preload/runtime/lab/lab.h), the best outcome of each kept.
void SayPlacements(const std::string& work) {
  const auto rank = [](const std::string& what) {
    if (what.rfind("every call", 0) == 0) return 4;
    if (what.rfind("calls from other modules and ", 0) == 0) return 3;  // direct calls re-aimed
    if (what.rfind("imports only", 0) == 0) return 2;
    return 1;
  };
  std::map<std::string, std::string> best;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(work, ec)) {
    if (e.path().filename().string().rfind("placed-", 0) != 0) continue;
    StatusOr<std::string> text = ReadWholeFile(e.path().string());
    if (!text.ok()) continue;
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
      const size_t tab = line.find('\t');
      if (tab == std::string::npos) continue;
      const std::string name = line.substr(0, tab), what = line.substr(tab + 1);
      auto it = best.find(name);
      if (it == best.end() || rank(what) > rank(it->second)) best[name] = what;
    }
  }
  // A C++ name's symbols are said by their names as written.
  std::map<std::string, std::string> shown;
  StatusOr<std::string> names = ReadWholeFile(work + "/at.names");
  std::istringstream names_in(names.ok() ? *names : "");
  for (std::string line; std::getline(names_in, line);) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) shown[line.substr(0, tab)] = line.substr(tab + 1);
  }
  StatusOr<std::string> plan = ReadWholeFile(work + "/at.apis");
  std::istringstream in(plan.ok() ? *plan : "");
  for (std::string name; std::getline(in, name);) {
    auto it = best.find(name);
    std::string said;
    if (it == best.end()) {
      said = "no process loaded a module named " + name.substr(0, name.find(':')) +
             " (a library's soname, or the program's file name)";
    } else if (rank(it->second) == 4) {
      said = "a scope at every call";
    } else if (rank(it->second) == 3) {
      const size_t colon = it->second.find(": ");
      said = "scopes at " + it->second.substr(0, colon) +
             (colon == std::string::npos ? "" : " (" + it->second.substr(colon + 2) + ")");
    } else if (rank(it->second) == 2) {
      const size_t colon = it->second.find(": ");
      said =
          "scopes at calls from other modules only" +
          (colon == std::string::npos ? "" : " (not moved: " + it->second.substr(colon + 2) + ")");
    } else {
      said = it->second;
    }
    const auto as_written = shown.find(name);
    Say("--at " + (as_written != shown.end() ? as_written->second : name) + ": " + said);
  }
}

// Runs `cmd` `runs` times, naming after each the stacks of the files it
// left in `name_in` (none when empty); returns the last failing run's exit
// status (the program's own; 0 when none failed), or -1 when it cannot run.
int RunTimes(const std::vector<std::string>& cmd, int64_t runs, const std::string& name_in) {
  SpawnOptions so;
  so.interrupt_child_only = true;
  int failed_with = 0;
  for (int64_t r = 1; r <= runs; ++r) {
    const std::set<std::string> before =
        name_in.empty() ? std::set<std::string>() : tools::PointsFilesIn(name_in);
    if (runs > 1) {
      std::fprintf(stderr, "%sfieldprof points: run %lld of %lld", isatty(2) ? "\r\033[K" : "",
                   static_cast<long long>(r), static_cast<long long>(runs));
      if (!isatty(2)) std::fprintf(stderr, "\n");
    }
    std::string error;
    const int code = SpawnAndWait(cmd, so, &error);
    if (code < 0) {
      Say("cannot run " + cmd[0] + ": " + error);
      return -1;
    }
    if (code != 0) {
      failed_with = code;
      std::fprintf(stderr, "%sfieldprof points: run %lld exited %d\n", isatty(2) ? "\r\033[K" : "",
                   static_cast<long long>(r), code);
    }
    // Its stacks named now, while its modules are the ones it ran with
    // (points_names.h), before the agent sends the files on.
    if (!name_in.empty()) tools::NameNewStacksIn(name_in, before);
  }
  if (runs > 1 && isatty(2)) std::fprintf(stderr, "\r\033[K");
  return failed_with;
}

// What the runs left in `out_dir`: files and events, and a hint when no
// point was recorded. Counted from each file's scan, not its whole
// reading: a recording of tens of millions of events would take as many
// seconds and GB. False when a file cannot be read (said).
bool SayWhatWasRecorded(const std::string& out_dir, const std::string& output,
                        const std::string& at) {
  StatusOr<std::vector<std::string>> all = fieldprof::PointsFiles({out_dir});
  if (!all.ok()) {
    Say(all.status().message());
    return false;
  }
  uint64_t events = 0;
  for (const std::string& f : *all) {
    fieldprof::PointsScan scan;
    if (Status s = fieldprof::ScanPointsFile(f, &scan); !s.ok()) {
      Say(s.message());
      return false;
    }
    events += scan.Events();
  }
  std::fprintf(stderr,
               "fieldprof points: %s: %zu process file%s, %llu events (fieldprof points show %s)\n",
               output.c_str(), all->size(), all->size() == 1 ? "" : "s",
               static_cast<unsigned long long>(events), output.c_str());
  if (events == 0) {
    Say(at.empty()
            ? "no point was recorded: does the program include <fieldprof/points.h> and pass one?"
            : "no point was recorded: no --at function was called, and the program passed no "
              "point of its own");
  }
  return true;
}

// The folder holding the points recorder (`lib_dir`, else where the
// runtime is found).
StatusOr<std::string> RecorderDir(const std::string& lib_dir) {
  StatusOr<std::string> dir = FindRuntime(lib_dir);
  if (dir.ok() && access((*dir + "/" + points::kLibName).c_str(), R_OK) != 0) {
    return NotFound(*dir + " has no " + points::kLibName);
  }
  return dir;
}

// The TSC's rate, in the files: what reads a file cut before its second
// clock reading still has times.
void SetTscRateForFiles() {
  if (std::getenv("FIELDPROF_TSC_HZ") != nullptr) return;
  if (std::optional<int64_t> hz = MeasureTscHz(); hz.has_value()) {
    setenv("FIELDPROF_TSC_HZ", std::to_string(*hz).c_str(), 1);
  }
}

int Record(int argc, char** argv) {
  std::string output, lib_dir, at;
  int64_t runs = 1;
  bool stacks = false, auto_points = false;
  OptionTable t("fieldprof points record", kUsage);
  t.AddString("output", &output, "directory the runs' files go to (-o; default CMD.points)");
  t.AddInt("runs", &runs, "run the command this many times", 1, 100000);
  t.AddString("at", &at,
              "also make every call of these functions a scope, no rebuild needed: "
              "MODULE:FUNCTION,... (tag: the module; MODULE is a library's soname or the "
              "program's file name; a function inside a module needs its symbol table)");
  t.AddBool("stacks", &stacks,
            "also record the call stack of each point and scope begun, and of each call "
            "of an --at function from its caller (0.2 us a stack; more the first time "
            "through new code)");
  t.AddBool("auto", &auto_points,
            "also points nobody wrote, tag auto: each process's start, main entered, exec, "
            "exit, fork, a scope around each dlopen (its constructors included) and around "
            "each thread; every process of the command then has a file");
  t.AddString("lib_dir", &lib_dir, "directory holding libfieldprof-points.so");
  t.AddShort('o', "output");
  const int cmd_at = DoubleDashAt(argc, argv);
  Status s;
  if (ParseOrShowHelp(t, cmd_at, argv, &s)) return 0;
  const std::vector<std::string> cmd = ProgramArgs(argc, argv, cmd_at);
  if (s.ok() && cmd.empty()) s = InvalidArgument("give the command to record: -- CMD ARGS...");
  if (s.ok() && !t.positional().empty()) {
    s = InvalidArgument("unexpected '" + t.positional()[0] + "' (the command goes after --)");
  }
  if (!s.ok()) return UsageError(t, s);
  if (output.empty()) output = fs::path(cmd[0]).filename().string() + ".points";
  const StatusOr<std::string> dir = RecorderDir(lib_dir);
  if (!dir.ok()) {
    Say(dir.status().message());
    return 3;
  }
  const std::string lib = *dir + "/" + points::kLibName;
  std::error_code ec;
  const std::string out_dir = fs::absolute(output, ec).string();
  if (Status m = MakeDirs(out_dir, FileAccess::kShared); ec || !m.ok()) {
    Say("cannot make " + output + ": " + (ec ? ec.message() : m.message()));
    return 3;
  }
  SetTscRateForFiles();
  setenv(points::kDirEnv, out_dir.c_str(), 1);
  if (stacks) setenv(points::kStacksEnv, "1", 1);
  if (auto_points) setenv(points::kAutoEnv, "1", 1);
  std::string work;
  if (!at.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "fieldprof-points-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      Say("cannot make a temporary directory: " + std::string(std::strerror(errno)));
      return 3;
    }
    work = tmpl;
    const std::string program = ProgramFile(cmd[0]);
    if (Status p = PlaceByConfiguration(at, *dir, work, program.empty() ? cmd[0] : program);
        !p.ok()) {
      fs::remove_all(work, ec);
      return UsageError(t, p);
    }
  }
  // The recorder first, before the front --at adds: a module's
  // fieldprof_point_module (fieldprof/points.h) is then the recorder's,
  // which the front would otherwise answer and pass on to the runtime.
  PrependEnv("LD_PRELOAD", lib);
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code e;
      if (!dir.empty()) fs::remove_all(dir, e);
    }
  } cleanup{work};
  const int failed_with = RunTimes(cmd, runs, stacks ? out_dir : "");
  if (failed_with < 0) return 127;
  if (!work.empty()) SayPlacements(work);
  if (!SayWhatWasRecorded(out_dir, output, at)) return 1;
  return failed_with;
}

// --from/--to: a day (YYYY-MM-DD; --to takes the whole day) or a time
// (YYYY-MM-DDTHH:MM[:SS]), UTC; the runs that began inside.
struct DateRange {
  std::string from, to;
  int64_t from_ns = 0, to_ns = INT64_MAX;
};

Status ParseWhen(const std::string& text, bool end, int64_t* ns) {
  tm t{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%d", &t);
  bool day = rest != nullptr && *rest == 0;
  if (rest != nullptr && *rest == 'T') {
    const char* r2 = strptime(rest + 1, "%H:%M:%S", &t);
    if (r2 == nullptr) r2 = strptime(rest + 1, "%H:%M", &t);
    rest = r2;
  }
  if (rest == nullptr || *rest != 0) {
    return InvalidArgument("\"" + text +
                           "\" is not a day (2026-11-24) or a time (2026-11-24T13:05)");
  }
  int64_t secs = timegm(&t);
  if (day && end) secs += 86400;
  *ns = secs * 1000000000LL - (day && end ? 1 : 0);
  return Status::Ok();
}

Status CheckRange(DateRange* r) {
  if (!r->from.empty()) {
    if (Status p = ParseWhen(r->from, false, &r->from_ns); !p.ok()) return p;
  }
  if (!r->to.empty()) {
    if (Status p = ParseWhen(r->to, true, &r->to_ns); !p.ok()) return p;
  }
  if (r->from_ns > r->to_ns) return InvalidArgument("--from is after --to");
  return Status::Ok();
}

void AddRange(OptionTable* t, DateRange* r) {
  t->AddString("from", &r->from, "only runs begun from this day or time on (UTC, 2026-11-24)");
  t->AddString("to", &r->to, "only runs begun up to this day (all of it) or time (UTC)");
}

StatusOr<std::vector<fieldprof::PointsRun>> Load(const std::vector<std::string>& paths,
                                                 const DateRange& range) {
  if (paths.empty()) return InvalidArgument("give a directory of recorded runs (or files)");
  // Reading takes some 0.1 s and 36 MB a million events: a large
  // recording says so while it is read (on a terminal).
  uint64_t bytes = 0;
  if (StatusOr<std::vector<std::string>> files = fieldprof::PointsFiles(paths); files.ok()) {
    std::error_code ec;
    for (const std::string& f : *files) bytes += std::filesystem::file_size(f, ec);
  }
  const bool say = isatty(2) && bytes >= (uint64_t{64} << 20);
  if (say) {
    std::fprintf(stderr, "fieldprof points: reading %llu MB of runs...",
                 static_cast<unsigned long long>(bytes >> 20));
  }
  StatusOr<std::vector<fieldprof::PointsRun>> runs = fieldprof::ReadPointsRuns(paths);
  if (say) std::fprintf(stderr, "\r\033[K");
  if (!runs.ok()) return runs;
  if (runs->empty()) {  // a wrong directory, not a table of nothing
    std::string named;
    for (const std::string& p : paths) named += (named.empty() ? "" : ", ") + p;
    return NotFound(named +
                    ": no recorded runs here (fieldprof points record leaves a .fppoints file "
                    "per process)");
  }
  std::vector<fieldprof::PointsRun> kept;
  for (fieldprof::PointsRun& r : *runs) {
    const auto at = static_cast<int64_t>(r.start_unix_ns);
    if (at >= range.from_ns && at <= range.to_ns) kept.push_back(std::move(r));
  }
  return kept;
}

int Show(const std::string& verb, int argc, char** argv) {
  std::string tag, chrome, tree, html;
  bool json = false, per_run = false, keep_dirty = false, stacks = false, calls = false;
  DateRange range;
  OptionTable t("fieldprof points " + verb, kUsage);
  t.AddString("tag", &tag, "only this tag");
  t.AddBool("json", &json, "print JSON");
  AddRange(&t, &range);
  if (verb == "show") {
    t.AddBool("per_run", &per_run, "also each run's value of each segment");
    t.AddBool("calls", &calls,
              "also each segment's single occurrences (a scope's calls): p50, p90, p99 and "
              "their log2 histogram, as the field's");
    t.AddBool("keep_dirty", &keep_dirty, "keep runs the modified Z-score calls dirty");
    t.AddBool("stacks", &stacks,
              "also where each point was passed: its stacks (recorded with record --stacks)");
    t.AddString("chrome_trace", &chrome, "also write the runs as Chrome trace event JSON here");
    t.AddString("tree", &tree, "also write the runs' scopes as a call tree (.fptree) here");
    t.AddString("html", &html,
                "also write a page here: per segment a bar chart with a bar per run");
  }
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok()) s = CheckRange(&range);
  if (!s.ok()) return UsageError(t, s);
  StatusOr<std::vector<fieldprof::PointsRun>> runs = Load(t.positional(), range);
  if (!runs.ok()) {
    if (runs.status().code() == StatusCode::kInvalidArgument && t.positional().empty()) {
      return UsageError(t, runs.status());
    }
    Say(runs.status().message());
    return 1;
  }
  if (runs->empty() && (!range.from.empty() || !range.to.empty())) {
    Say("no run began in that range (--from " + (range.from.empty() ? "-" : range.from) + " --to " +
        (range.to.empty() ? "-" : range.to) + ", UTC)");
    return 1;
  }
  fieldprof::PointsOptions o;
  o.tag = tag;
  o.remove_dirty = !keep_dirty;
  const std::vector<fieldprof::TagReport> tags = fieldprof::AnalyzePoints(*runs, o);
  if (!tag.empty() && tags.empty()) {
    Say("no run has tag \"" + tag + "\"");
    return 1;
  }
  // The files asked for, each made only when asked.
  const std::pair<const std::string*, std::function<std::string()>> files[] = {
      {&chrome, [&] { return tools::PointsChromeTrace(*runs); }},
      {&html, [&] { return tools::PointsPage(*runs, tags); }},
      {&tree, [&] { return tools::EncodeCallTree(tools::PointsCallTree(*runs)); }}};
  for (const auto& [path, make] : files) {
    if (path->empty()) continue;
    if (Status w = WriteFileDurably(*path, make(), FileAccess::kShared); !w.ok()) {
      Say(w.message());
      return 1;
    }
  }
  if (verb == "tags") {
    std::cout << (json ? fieldprof::PointsJson(*runs, tags) : tools::TagsText(tags));
  } else {
    if (json && stacks) {  // the report and the stacks, one object
      std::cout << "{\"report\": " << fieldprof::PointsJson(*runs, tags)
                << ", \"stacks\": " << tools::PointsStacksJson(*runs, tag) << "}\n";
    } else if (json) {
      std::cout << fieldprof::PointsJson(*runs, tags);
    } else {
      std::cout << tools::PointsText(*runs, tags, per_run, calls);
      if (stacks) std::cout << "\n" << tools::PointsStacksText(*runs, tag);
    }
  }
  return 0;
}

int Compare(int argc, char** argv) {
  std::string tag, html;
  bool json = false;
  fieldprof::CompareOptions co;
  OptionTable t("fieldprof points compare", kUsage);
  t.AddString("tag", &tag, "only this tag");
  t.AddBool("json", &json, "print JSON");
  t.AddString("html", &html,
              "also write a page here: the table, and per segment each run of A and of B as a dot");
  t.AddDouble("fdr", &co.fdr, "false discovery rate for a significant change", 0.0001, 0.5);
  t.AddDouble("min_effect", &co.min_effect,
              "least change that counts, a fraction of A's mean (0.05: 5%)", 0, 10);
  t.AddRenamed("min_change", "write --min_effect, a fraction of A's mean (0.05: 5%)");
  DateRange range;
  AddRange(&t, &range);
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok()) s = CheckRange(&range);
  if (s.ok() && t.positional().size() != 2) {
    s = InvalidArgument("give two groups of runs: fieldprof points compare A B");
  }
  if (!s.ok()) return UsageError(t, s);
  fieldprof::PointsOptions o;
  o.tag = tag;
  std::vector<tools::PointsGroup> groups;
  for (const std::string& g : t.positional()) {
    StatusOr<std::vector<fieldprof::PointsRun>> runs = Load({g}, range);
    if (!runs.ok()) {
      Say(runs.status().message());
      return 1;
    }
    tools::PointsGroup group{g, std::move(*runs), {}};
    group.tags = fieldprof::AnalyzePoints(group.runs, o);
    groups.push_back(std::move(group));
  }
  // Worked out once for the text and the page: each row's permutation
  // tests draw 9,999 relabellings.
  const std::vector<fieldprof::SegmentChange> rows =
      fieldprof::ComparePoints(groups[0].tags, groups[1].tags, co);
  if (!html.empty()) {
    if (Status w = WriteFileDurably(html, tools::PointsComparePage(groups[0], groups[1], rows, co),
                                    FileAccess::kShared);
        !w.ok()) {
      Say(w.message());
      return 1;
    }
  }
  std::cout << tools::PointsCompareText(groups[0], groups[1], rows, co, json);
  return 0;
}

// The verbs that run on an aggregator (developer mode); tags are its
// when --host names one.
int Remote(int argc, char** argv) { return PointsRemote(argv[0], argc, argv); }
int Tags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--host", 6) == 0) return Remote(argc, argv);
  }
  return Show("tags", argc, argv);
}
int ShowVerb(int argc, char** argv) { return Show("show", argc, argv); }

constexpr Verb kVerbs[] = {
    {"record", Record}, {"show", ShowVerb}, {"tags", Tags},         {"compare", Compare},
    {"upload", Remote}, {"pull", Remote},   {"field", PointsField},
};

}  // namespace

int CmdPoints(int argc, char** argv) {
  OptionTable help("fieldprof points VERB", kUsage);
  return RunVerb("fieldprof points", kVerbs, help, argc, argv);
}

}  // namespace fieldprof::tools
