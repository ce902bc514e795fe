// fieldprof optin / fieldprof optout: one user's own answer, on top of the
// machine's (as Debian's popularity-contest keeps one machine-wide answer,
// fieldprof keeps it in /etc/fieldprof/volunteer.conf: `participate = yes`,
// written from the fieldprof package's question). A user takes part only
// when both say yes. The user's answer is `consent` in their runtime
// settings file, which the runtime reads at every program start and the
// agent before every pass: nothing is measured or sent without it.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/settings/agent_state.h"
#include "common/settings/options.h"
#include "common/settings/runtime_settings.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/spool/spool.h"
#include "common/system/system_code.h"
#include "tools/commands.h"
#include "tools/shared/command_line.h"

namespace fieldprof::tools {
namespace {

namespace fs = std::filesystem;

constexpr char kMachineConf[] = "/etc/fieldprof/volunteer.conf";
constexpr char kAgentUnit[] = "fieldprof-agent.service";
constexpr char kLoginHook[] = "/etc/profile.d/fieldprof.sh";

// $FIELDPROF_MACHINE_CONF (tests), else /etc/fieldprof/volunteer.conf.
std::string DefaultMachineConf() {
  const char* p = std::getenv("FIELDPROF_MACHINE_CONF");
  return p != nullptr && *p ? p : kMachineConf;
}

// The machine's answer: "yes", "no", or why there is none. The file is a
// "name = value" file like every other (common/settings/options.h reads it).
std::string MachineAnswer(const std::string& path) {
  if (!fs::exists(path)) return "none (no " + path + ")";
  std::string participate;
  OptionTable t("volunteer.conf", "");
  t.AddString("participate", &participate, "yes or no");
  const Status s = t.ParseFile(path);
  if (!s.ok()) return "unreadable (" + s.message() + ")";
  if (participate == "yes" || participate == "no") return participate;
  if (participate.empty()) return "none (no 'participate' in " + path + ")";
  return "unreadable (participate = '" + participate + "' in " + path + ")";
}

// The agent's user service, if the package installed one: started or
// stopped with systemctl --user. Says what happened.
void AgentService(bool start) {
  bool installed = false;
  for (const char* dir : {"/usr/lib/systemd/user", "/lib/systemd/user", "/etc/systemd/user"}) {
    installed = installed || fs::exists(std::string(dir) + "/" + kAgentUnit);
  }
  if (!installed) {
    if (start) {
      std::cout << "The agent is not installed as a user service here: run fieldprof-agent "
                   "yourself to upload.\n";
    }
    return;
  }
  const std::string cmd = std::string("systemctl --user ") +
                          (start ? "enable --now " : "disable --now ") + kAgentUnit +
                          " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) == 0) {
    std::cout << (start ? "The agent started (systemctl --user status " : "The agent stopped (")
              << kAgentUnit << ").\n";
  } else {
    std::cout << "Could not " << (start ? "start" : "stop")
              << " the agent's user service (no user session?); it checks your answer before "
                 "every pass anyway.\n";
  }
}

// Removes `dir` and everything in it; says what went.
void RemoveAll(const std::string& what, const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || !fs::exists(dir, ec)) return;
  const std::uintmax_t n = fs::remove_all(dir, ec);
  if (ec) {
    std::cout << "  could not remove " << what << " " << dir << ": " << ec.message() << "\n";
  } else {
    std::cout << "  removed " << what << " " << dir << " (" << n << " entries)\n";
  }
}

struct Paths {
  std::string settings = DefaultRuntimeSettingsPath();
  std::string machine = DefaultMachineConf();
  std::string spool;  // empty: the settings' spool_dir, else the default
  std::string state_dir = DefaultAgentStateDir();
  std::string cache = DefaultSnapshotCacheDir();
};

// optout runs in the user's session, whose programs carry the runtime:
// this very process would write its record into the spool it deletes, at
// exit. Runs again without it (the record of what ran so far, if any, is
// written before the exec and deleted with the rest).
void WithoutRuntime(int argc, char** argv) {
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload == nullptr || std::string(preload).find("libfieldprof.so") == std::string::npos) {
    return;
  }
  std::istringstream words(preload);
  std::string kept, w;
  while (words >> w) {
    if (w.find("libfieldprof.so") == std::string::npos) kept += (kept.empty() ? "" : " ") + w;
  }
  if (kept.empty()) {
    unsetenv("LD_PRELOAD");
  } else {
    setenv("LD_PRELOAD", kept.c_str(), 1);
  }
  std::vector<char*> args = {const_cast<char*>("fieldprof")};
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data());
  // Could not: carry on; the record this process leaves waits unsent.
}

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseConsentOptions(int argc, char** argv, bool in, const std::string& name, Paths* p) {
  OptionTable t(name, in ? "Take part in fieldprof: programs you start measure a few library APIs "
                           "each\n(1 run in 16 by default, under a machine-wide cap) and the "
                           "agent uploads the\nsums. The machine's administrator must have said "
                           "yes (the fieldprof package\nasks; dpkg-reconfigure fieldprof)."
                         : "Stop taking part: programs you start from now on are not measured, "
                           "the agent\nsends nothing more, and your spool, outbox and snapshot "
                           "cache are deleted.");
  t.AddString("runtime_settings", &p->settings, "your runtime settings file");
  t.AddString("machine_conf", &p->machine, "the machine's answer");
  t.AddString("spool", &p->spool, "the spool (default: as the settings say)");
  t.AddString("state_dir", &p->state_dir, "the agent's state directory");
  t.AddString("cache", &p->cache, "the snapshot cache");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && !t.positional().empty()) s = InvalidArgument("unexpected " + t.positional()[0]);
  if (s.ok() && p->settings.empty()) s = InvalidArgument("no settings file: set HOME");
  if (!s.ok()) return UsageError(t, s);
  return std::nullopt;
}

void SayOptedIn(const Paths& p) {
  std::cout << "You take part in fieldprof (" << p.settings << ": consent = yes).\n"
            << "What is collected: the names of shared-library APIs your programs call, "
               "log2 histograms of\ntheir cost (time, bytes allocated, I/O), and a coarse "
               "platform class. Never paths,\narguments, file contents, user or host names, "
               "or addresses.\n"
            << (fs::exists(kLoginHook)
                    ? "Programs you start from your next login or new shell on are measured.\n"
                    : std::string("No login hook is installed here (") + kLoginHook +
                          ", from the fieldprof package): fieldprof run measures one "
                          "command.\n")
            << "See what would be sent before it is: fieldprof status --pending. Leave any "
               "time: fieldprof optout.\n";
}

// The counts measured runs keep while they run (live files): those of runs
// still going on are no longer reported (each run checks consent before it
// reports); those of runs that ended are not either.
void RemoveLiveFiles(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".fplive" && fs::remove(e.path(), ec)) ++n;
  }
  std::cout << "  removed the counts of " << n << " measured runs in " << dir << "\n";
}

// Optout's cleanup: the user's spool, the live files, the agent's state,
// the cache.
void RemoveLocalData(const Paths& p, const std::string& settings_spool,
                     const std::string& settings_live_dir) {
  std::cout << "You no longer take part (" << p.settings << ": consent = no).\n"
            << "Programs you start from now on are not measured; the agent sends nothing "
               "more.\n";
  AgentService(false);
  const std::string spool = !p.spool.empty()          ? p.spool
                            : !settings_spool.empty() ? settings_spool
                                                      : DefaultSpoolDir();
  RemoveAll("the spool", spool);
  RemoveLiveFiles(DefaultLiveDir(settings_live_dir));
  RemoveAll("the agent's outbox and state", p.state_dir);
  RemoveAll("the snapshot cache", p.cache);
}

int Consent(int argc, char** argv, bool in) {
  if (!in) WithoutRuntime(argc, argv);
  Paths p;
  const std::string name = in ? "fieldprof optin" : "fieldprof optout";
  if (const ExitCode done = ParseConsentOptions(argc, argv, in, name, &p)) return *done;
  if (in) {
    const std::string machine = MachineAnswer(p.machine);
    if (machine != "yes") {
      std::cerr << name << ": this machine does not take part: its answer is " << machine
                << ".\nIts administrator decides (the fieldprof package asks; as root: "
                   "dpkg-reconfigure fieldprof).\n";
      return 1;
    }
  }
  // Opting in: the system's code, so that measured runs choose among it
  // from the first (the agent keeps it current afterwards; docs/privacy.md).
  // The first time on a machine this reads its packaged libraries once.
  std::string system_code;
  if (in) {
    SystemCode code;
    if (Status s = code.Refresh(); s.ok()) {
      system_code = code.BuildIdListPath();
    } else {
      std::cerr << name << ": the system's code is not known yet (" << s.message()
                << "); the agent's next pass finds it, and runs measure nothing till then\n";
    }
  }
  bool was_in = false;
  std::string spool_dir, live_dir;
  Status w = UpdateRuntimeSettings(
      p.settings, [&](const std::optional<RuntimeSettings>& now, RuntimeSettings* next) {
        was_in = now.has_value() && now->consent;
        spool_dir = next->spool_dir;
        live_dir = next->live_dir;
        next->consent = in;
        if (!system_code.empty()) next->system_code = system_code;
        return true;
      });
  if (!w.ok()) {
    std::cerr << name << ": " << w.message()
              << (w.code() == StatusCode::kInvalidArgument
                      ? "\nFix or remove that file first: it was edited by hand, and is left "
                        "as it is.\n"
                      : "\n");
    return 1;
  }
  if (!in && !was_in) {
    std::cout << "You were not taking part: nothing was measured or sent for you.\n";
  }
  if (in) {
    SayOptedIn(p);
    AgentService(true);
  } else {
    RemoveLocalData(p, spool_dir, live_dir);
  }
  return 0;
}

}  // namespace

int CmdOptin(int argc, char** argv) { return Consent(argc, argv, true); }
int CmdOptout(int argc, char** argv) { return Consent(argc, argv, false); }

}  // namespace fieldprof::tools
