// fieldprof run: runs one command with the runtime loaded (LD_PRELOAD, see
// agent/preload/runtime/runtime.h), as an explicit request: the run
// is measured whatever the consent setting says, with this command's options
// on top of the local settings.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "common/base/decimal.h"
#include "common/settings/options.h"
#include "common/settings/runtime_settings.h"
#include "common/settings/tsc_rate.h"
#include "common/spool/spool.h"
#include "common/system/system_code.h"
#include "tools/commands.h"
#include "tools/shared/command_line.h"
#include "tools/shared/run_record_text.h"
#include "tools/shared/runtime_env.h"

namespace fieldprof::tools {

namespace {

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos;
}

std::set<std::string> SpoolNames(const std::string& dir) {
  std::set<std::string> names;
  StatusOr<std::vector<SpoolEntry>> l = ListSpool(dir);
  if (l.ok()) {
    for (const auto& e : *l) names.insert(e.name);
  }
  return names;
}

struct RunOptions {
  int64_t apis = 0, slots = 0;
  std::string seed, force, points, spool, max_load, budget, debug, lib_dir, share;
  bool show = false;
  char** cmd = nullptr;  // the command and its arguments, NULL-terminated
  std::string runtime_dir;
};

// Options end at "--" or at the first word that is not an option (or an
// option's value), so the command's own flags are left alone. The
// command's index in argv (argc: none), and in *opt_end where the options
// end.
int CommandAt(int argc, char** argv, int* opt_end) {
  static const std::set<std::string> kBoolFlags = {"--show", "--help", "-h"};
  int cmd_at = argc;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      cmd_at = i + 1;
      break;
    }
    if (a.rfind("-", 0) != 0) {
      cmd_at = i;
      break;
    }
    if (a.find('=') == std::string::npos && kBoolFlags.count(a) == 0) ++i;  // its value
  }
  *opt_end =
      (cmd_at < argc && cmd_at > 0 && std::string(argv[cmd_at - 1]) == "--") ? cmd_at - 1 : cmd_at;
  return cmd_at;
}

Status CheckRunValues(const RunOptions& o) {
  if (!o.seed.empty() && !AllDigits(o.seed)) return InvalidArgument("--seed must be a number");
  if (!o.max_load.empty() && !ParseDecimalIn(o.max_load, 0, 1e6)) {
    return InvalidArgument("--max_load must be a number >= 0");
  }
  if (!o.budget.empty() && !ParseDecimalIn(o.budget, 0, 1000)) {
    return InvalidArgument(
        "--budget must be a fraction of run time, 0 to 1 (above 1, up to 1000: no cap)");
  }
  return Status::Ok();
}

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseRunOptions(int argc, char** argv, RunOptions* o) {
  OptionTable t("fieldprof run",
                "Runs a command with the fieldprof runtime: a few randomly chosen library APIs\n"
                "are measured and the run's record is left in the spool. The command's\n"
                "output, exit code and behaviour are unchanged.\n\n"
                "  fieldprof run [options] [--] COMMAND [ARGS...]\n"
                "  e.g. fieldprof run --apis 3 --show -- sqlite3 db.sqlite 'select 1'");
  t.AddInt("apis", &o->apis, "APIs to measure (0: the settings' k, default 2)", 0, 8);
  t.AddString("seed", &o->seed, "random seed for the choice (default: from the OS)");
  t.AddString("force", &o->force,
              "measure these APIs: SYMBOL or MODULE:SYMBOL, comma-separated (count toward --apis)");
  t.AddString("points", &o->points,
              "time these functions as instrumentation points too: MODULE:FUNCTION, "
              "comma-separated, e.g. libsqlite3.so.0:sqlite3_step (on top of --apis)");
  t.AddString("spool", &o->spool,
              "where the record goes (default: the settings', else "
              "$XDG_STATE_HOME/fieldprof/spool)");
  t.AddInt("slots", &o->slots, "machine-wide instrumented programs (0: the settings', default 6)",
           0, 4096);
  t.AddString("max_load", &o->max_load,
              "1-minute load per CPU above which the run is not measured");
  t.AddString("budget", &o->budget,
              "overhead budget, fraction of run time (default 0.01; above 1: no cap)");
  t.AddString("share", &o->share,
              "modules of your own whose APIs may be chosen and named like the system's "
              "(comma-separated names, e.g. libmine.so.1; the settings' share_modules too)");
  t.AddString("debug", &o->debug, "write the runtime's diagnostics to this file");
  t.AddString("lib_dir", &o->lib_dir, "directory holding libfieldprof.so");
  t.AddBool("show", &o->show, "when the command ends, print its record to stderr");
  int opt_end = argc;
  const int cmd_at = CommandAt(argc, argv, &opt_end);
  Status s;
  if (ParseOrShowHelp(t, std::min(opt_end, argc), argv, &s)) return 0;
  if (s.ok()) s = CheckRunValues(*o);
  if (s.ok() && !t.positional().empty()) s = InvalidArgument("unexpected " + t.positional()[0]);
  if (s.ok() && cmd_at >= argc) s = InvalidArgument("no command to run");
  if (!s.ok()) return UsageError(t, s);
  StatusOr<std::string> libs = FindRuntime(o->lib_dir);
  if (!libs.ok()) {
    std::cerr << "fieldprof run: " << libs.status().message() << "\n";
    return 2;
  }
  o->runtime_dir = *libs;
  o->cmd = argv + cmd_at;
  return std::nullopt;
}

// The system's code as of now (common/system/system_code.h): the runtime chooses
// APIs at random only in the modules it lists. The first time on a
// machine this reads every packaged library once (seconds); after that a
// few stats. Unless FIELDPROF_SYSTEM_CODE names a list already.
void SetSystemCode() {
  if (std::getenv("FIELDPROF_SYSTEM_CODE") != nullptr) return;
  SystemCode code;
  const bool tty = isatty(STDERR_FILENO) != 0;
  bool said = false;
  Status s = code.Refresh([&](size_t done, size_t total) {
    if (!tty || total < 4096) return;
    if (!said)
      std::cerr << "fieldprof run: checking the installed packages' libraries against "
                   "dpkg's checksums (once per machine)...\n";
    said = true;
    std::cerr << "\r  " << done << " of " << total << " files" << (done == total ? "\n" : "")
              << std::flush;
  });
  if (!s.ok()) {
    std::cerr << "fieldprof run: " << s.message()
              << ": no API will be chosen at random (only --force and --points)\n";
    return;
  }
  setenv("FIELDPROF_SYSTEM_CODE", code.BuildIdListPath().c_str(), 1);
}

// The runtime's settings for this explicit run, on top of the local ones.
void SetRunEnvironment(const RunOptions& o) {
  setenv("FIELDPROF_RUN", "1", 1);
  if (o.apis > 0) setenv("FIELDPROF_K", std::to_string(o.apis).c_str(), 1);
  if (!o.seed.empty()) setenv("FIELDPROF_SEED", o.seed.c_str(), 1);
  if (!o.force.empty()) setenv("FIELDPROF_FORCE", o.force.c_str(), 1);
  if (!o.points.empty()) setenv("FIELDPROF_POINTS", o.points.c_str(), 1);
  if (!o.spool.empty()) {
    setenv("FIELDPROF_SPOOL", std::filesystem::absolute(o.spool).c_str(), 1);
  }
  if (o.slots > 0) setenv("FIELDPROF_SLOTS", std::to_string(o.slots).c_str(), 1);
  if (!o.max_load.empty()) setenv("FIELDPROF_MAX_LOAD", o.max_load.c_str(), 1);
  if (!o.budget.empty()) setenv("FIELDPROF_BUDGET", o.budget.c_str(), 1);
  if (!o.debug.empty()) setenv("FIELDPROF_DEBUG", std::filesystem::absolute(o.debug).c_str(), 1);
  if (!o.share.empty()) setenv("FIELDPROF_SHARE_MODULES", o.share.c_str(), 1);
  SetTscRate();
  SetSystemCode();
  PrependEnv("LD_PRELOAD", o.runtime_dir + "/" + kFrontLib);
}

// The records the run left in the spool (those not in `before`), on stderr.
void ShowNewRecords(const std::string& spool_dir, const std::set<std::string>& before) {
  int shown = 0;
  for (const std::string& name : SpoolNames(spool_dir)) {
    if (before.count(name)) continue;
    StatusOr<wire::RunRecord> r = ReadRunRecord(spool_dir + "/" + name);
    if (!r.ok()) {
      std::cerr << "fieldprof run: " << r.status().message() << "\n";
      continue;
    }
    std::cerr << "\n";
    PrintRunRecord(stderr, name, *r, /*histograms=*/true);
    ++shown;
  }
  if (shown == 0) {
    std::cerr << "fieldprof run: no record was written to " << spool_dir
              << " (no chosen API was called, or the run was not measured: see --debug)\n";
  }
}

// --show: the command as a child, then its records; its exit status (a
// signal that ended it ends this process the same way).
int RunAndShow(const RunOptions& o) {
  const std::string spool_dir = o.spool.empty() ? DefaultSpoolDir() : o.spool;
  const std::set<std::string> before = SpoolNames(spool_dir);
  // Like system(): the terminal's ^C and ^\ go to the command, not to us.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  const pid_t pid = fork();
  if (pid < 0) {
    std::cerr << "fieldprof run: fork: " << std::strerror(errno) << "\n";
    return 126;
  }
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    execvp(o.cmd[0], o.cmd);
    const int e = errno;
    std::cerr << "fieldprof run: cannot run " << o.cmd[0] << ": " << std::strerror(e) << "\n";
    _exit(e == ENOENT ? 127 : 126);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ShowNewRecords(spool_dir, before);
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int CmdRun(int argc, char** argv) {
  RunOptions o;
  if (const ExitCode done = ParseRunOptions(argc, argv, &o)) return *done;
  SetRunEnvironment(o);
  if (o.show) return RunAndShow(o);
  // Become the command: its exit status and signals are the caller's.
  execvp(o.cmd[0], o.cmd);
  const int e = errno;
  std::cerr << "fieldprof run: cannot run " << o.cmd[0] << ": " << std::strerror(e) << "\n";
  return e == ENOENT ? 127 : 126;
}

}  // namespace fieldprof::tools
