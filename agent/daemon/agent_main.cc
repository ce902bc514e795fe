// fieldprof-agent: uploads the runtime's spool records to the aggregator in
// batches, exactly once. `--once` makes one pass and exits (status 0 when
// nothing is left to send, 3 when batches wait for the aggregator); without
// it the agent runs until SIGTERM, waking when a record lands in the spool
// (inotify), when an upload retry is due or when waiting records reach
// their maximum age.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "agent/daemon/agent.h"
#include "common/net/endpoint.h"
#include "common/settings/options.h"
#include "common/settings/runtime_settings.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/spool/outbox.h"
#include "common/spool/spool.h"

namespace {

using fieldprof::Status;
using fieldprof::StatusOr;
using fieldprof::agent::Agent;
using fieldprof::agent::AgentConfig;
using fieldprof::agent::PassResult;

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Developer mode's part of a pass, when it did anything.
void ReportDev(const PassResult& r, bool always) {
  const fieldprof::agent::DevPassResult& d = r.dev;
  if (always || d.runs_sealed > 0 || d.uploads_sent > 0 || d.uploads_quarantined > 0) {
    std::fprintf(stderr,
                 "fieldprof-agent: developer runs: %d sealed in %d uploads, %d uploads sent, %d "
                 "set aside, %d waiting\n",
                 d.runs_sealed, d.uploads_sealed, d.uploads_sent, d.uploads_quarantined,
                 d.uploads_waiting);
  }
  if (!d.upload_status.ok()) {
    std::fprintf(stderr, "fieldprof-agent: developer upload stopped: %s\n",
                 d.upload_status.ToString().c_str());
  }
}

void Report(const Agent& agent, const PassResult& r, bool always) {
  if (!agent.config().dev.spool_dir.empty()) ReportDev(r, always);
  if (!r.consent) {
    if (always) {
      std::fprintf(stderr,
                   "fieldprof-agent: no consent in %s (fieldprof optin): nothing sealed or sent\n",
                   agent.config().runtime_settings.c_str());
    }
    return;
  }
  if (r.snapshot_fetched >= 0) {
    std::fprintf(stderr, "fieldprof-agent: snapshot %lld: %d fragments fetched: %s\n",
                 static_cast<long long>(agent.state().snapshot_version), r.snapshot_fetched,
                 agent.state().snapshot_result.c_str());
  }
  if (!always && r.batches_sealed == 0 && r.batches_uploaded == 0 && r.batches_quarantined == 0 &&
      r.runs_bad == 0 && r.records_dropped == 0 && r.upload_status.ok() && r.counters_status.ok()) {
    return;
  }
  std::fprintf(stderr,
               "fieldprof-agent: %d runs read, %lld counted without a record, %d batches sealed, "
               "%d uploaded, %d quarantined, %d waiting, %zu stack series held for the day's "
               "batch%s%s%s%s\n",
               r.runs_read, static_cast<long long>(r.runs_counted), r.batches_sealed,
               r.batches_uploaded, r.batches_quarantined, r.batches_waiting, r.stacks_held,
               r.runs_bad > 0 ? "; bad spool files set aside: " : "",
               r.runs_bad > 0 ? std::to_string(r.runs_bad).c_str() : "",
               r.records_dropped > 0 ? "; over the cap, oldest records dropped: " : "",
               r.records_dropped > 0 ? std::to_string(r.records_dropped).c_str() : "");
  if (r.live.parts_written > 0 || r.live.calls_dropped > 0) {
    std::fprintf(stderr,
                 "fieldprof-agent: live runs: %d parts written, %d runs ended and reported, %llu "
                 "calls read mid-update and dropped, %d stack series folded from killed runs\n",
                 r.live.parts_written, r.live.runs_ended,
                 static_cast<unsigned long long>(r.live.calls_dropped), r.live.stacks_folded);
  }
  if (r.batches_restamped > 0) {
    std::fprintf(stderr,
                 "fieldprof-agent: %d batches sealed without a usable upload token got a fresh "
                 "one\n",
                 r.batches_restamped);
  }
  if (!r.counters_status.ok()) {
    std::fprintf(stderr, "fieldprof-agent: run counters left in the spool: %s\n",
                 r.counters_status.ToString().c_str());
  }
  if (!r.upload_status.ok()) {
    std::fprintf(stderr, "fieldprof-agent: upload stopped: %s\n",
                 r.upload_status.ToString().c_str());
  }
}

// The daemon's signals: SIGTERM and SIGINT stay blocked except inside
// ppoll, which unblocks them atomically, so a signal that lands during a
// pass is taken by the next wait at once instead of being missed until the
// hourly wake.
struct DaemonSignals {
  sigset_t stop, waiting_mask;

  DaemonSignals() {
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, &waiting_mask);
    sigdelset(&waiting_mask, SIGTERM);
    sigdelset(&waiting_mask, SIGINT);
  }
  // Waits up to `ms` on `p` (or only the time, and the signals).
  int Wait(pollfd* p, nfds_t n, int64_t ms) const {
    const timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
    return ppoll(p, n, &ts, &waiting_mask);
  }
};

// One pass in a child process. The daemon itself only waits, so it stays
// small while idle: TLS, protobuf and the pass's buffers live and die with
// the child. A pass that crashes costs that pass only (its work is
// crash-safe) and the daemon carries on. False when the pass failed;
// *waiting gets the batches left in the outbox.
bool PassInChild(Agent& agent, const DaemonSignals& signals, int* waiting) {
  const bool upload_due = NowMs() >= agent.next_attempt_unix_ms();
  const bool snapshot_due = NowMs() >= agent.snapshot_next_unix_ms();
  *waiting = 0;
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    std::perror("fieldprof-agent: pipe");
    return false;
  }
  const pid_t child = fork();
  if (child == 0) {
    close(pipefd[0]);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    sigprocmask(SIG_UNBLOCK, &signals.stop, nullptr);
    // While uploads back off, a due snapshot refresh still runs.
    StatusOr<PassResult> r = agent.Pass(/*flush=*/false, upload_due,
                                        /*force_snapshot=*/!upload_due && snapshot_due);
    if (!r.ok()) {
      std::fprintf(stderr, "fieldprof-agent: %s\n", r.status().ToString().c_str());
      _exit(1);
    }
    Report(agent, *r, false);
    const int w = r->batches_waiting;
    // Should this write fail, the parent reads no count: it wakes at the
    // hourly pass instead of the next upload retry.
    if (write(pipefd[1], &w, sizeof w) != static_cast<ssize_t>(sizeof w)) _exit(0);
    // Developer uploads that could not go: tried again half a minute on.
    _exit(r->dev.uploads_waiting > 0 && !r->dev.upload_status.ok() ? 1 : 0);
  }
  close(pipefd[1]);
  bool failed = false;
  if (child < 0) {
    std::perror("fieldprof-agent: fork");
    failed = true;
  } else {
    if (read(pipefd[0], waiting, sizeof *waiting) != static_cast<ssize_t>(sizeof *waiting)) {
      *waiting = 0;
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (WIFSIGNALED(status) && !g_stop) {
      std::fprintf(stderr, "fieldprof-agent: a pass died with signal %d; carrying on\n",
                   WTERMSIG(status));
    }
    if (Status s = agent.ReloadState(); !s.ok()) {
      std::fprintf(stderr, "fieldprof-agent: %s\n", s.ToString().c_str());
      failed = true;
    }
  }
  close(pipefd[0]);
  return !failed;
}

// When the next pass is due: the earliest of an upload retry (if batches
// wait), the oldest waiting record's max age, a snapshot refresh, a look at
// measured runs' live files while there are any (a minute, or the
// interval if shorter: a killed run is reported within it), and the hourly
// pass (half a minute after a failed one).
int64_t NextWake(const Agent& agent, bool failed, int waiting) {
  constexpr int64_t kIdleWakeMs = 3600 * 1000;
  constexpr int64_t kAfterFailureMs = 30000;
  constexpr int64_t kLiveLookMs = 60 * 1000;
  int64_t wake = NowMs() + (failed ? kAfterFailureMs : kIdleWakeMs);
  if (fieldprof::agent::AnyLiveFile(agent.LiveDir())) {
    wake = std::min(wake, NowMs() + std::min(kLiveLookMs, agent.config().live_interval_s * 1000));
  }
  if (waiting > 0) wake = std::min(wake, agent.next_attempt_unix_ms());
  if (agent.seal_deadline_unix_ms() > 0) wake = std::min(wake, agent.seal_deadline_unix_ms());
  if (agent.snapshot_next_unix_ms() > 0) wake = std::min(wake, agent.snapshot_next_unix_ms());
  const fieldprof::agent::DevConfig& dev = agent.config().dev;
  if (const int64_t d = fieldprof::agent::DevSealDeadline(dev.spool_dir, dev.max_age_ms); d > 0) {
    wake = std::min(wake, d);
  }
  return wake;
}

int RunDaemon(Agent& agent) {
  const AgentConfig& c = agent.config();
  if (Status s = fieldprof::MakeDirs(c.spool_dir); !s.ok()) {
    std::fprintf(stderr, "fieldprof-agent: %s\n", s.ToString().c_str());
    return 1;
  }
  const int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (in < 0 || inotify_add_watch(in, c.spool_dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    std::perror("fieldprof-agent: inotify");
    return 1;
  }
  if (!c.dev.spool_dir.empty() &&
      // IN_CREATE too: a run still being written is never closed, and its
      // parts are due by its start.
      inotify_add_watch(in, c.dev.spool_dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE) <
          0) {
    std::perror("fieldprof-agent: inotify on the developer spool");
    return 1;
  }
  const DaemonSignals signals;
  std::fprintf(
      stderr, "fieldprof-agent: watching %s, uploading to %s\n", c.spool_dir.c_str(),
      fieldprof::FormatHostPort(c.server_host, static_cast<uint16_t>(c.server_port)).c_str());
  // Let a burst of new records land first; no longer than developer
  // mode's time threshold.
  const int64_t settle_ms =
      c.dev.spool_dir.empty() ? 2000 : std::min<int64_t>(2000, c.dev.max_age_ms);
  while (!g_stop) {
    int waiting = 0;
    const bool failed = !PassInChild(agent, signals, &waiting);
    const int64_t wait = std::max<int64_t>(NextWake(agent, failed, waiting) - NowMs(), 0);
    pollfd p{in, POLLIN, 0};
    if (signals.Wait(&p, 1, wait) > 0) {  // a new record
      char buf[4096];
      while (read(in, buf, sizeof buf) > 0) {
      }
      if (!g_stop) signals.Wait(nullptr, 0, settle_ms);
    }
  }
  std::fprintf(stderr, "fieldprof-agent: stopping\n");
  close(in);
  return 0;
}

}  // namespace

// The --config file when the server came from it (given, and not by a
// --server flag); "" otherwise.
std::string ServerSetIn(int argc, char** argv, bool server_given) {
  std::string config;
  bool flag = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--server" || a.rfind("--server=", 0) == 0) flag = true;
    if (a == "--config" && i + 1 < argc) config = argv[i + 1];
    if (a.rfind("--config=", 0) == 0) config = std::string(a.substr(9));
  }
  return server_given && !flag ? config : "";
}

// The aggregator, its connection, and how batches are made and kept.
void AddUploadFlags(fieldprof::OptionTable* t, AgentConfig* c, int64_t* cap_mib) {
  t->AddString("server", &c->server_host,
               "aggregator: HOST, HOST:PORT, [IPv6]:PORT or https://HOST[:PORT]");
  t->AddInt("port", &c->server_port, "aggregator HTTPS port, when --server names none", 1, 65535);
  AddEndpointCheck(*t, "server", &c->server_host, "port", &c->server_port);
  t->AddString("ca_file", &c->ca_file,
               "CA bundle to verify the aggregator with (default: the system store and, for a "
               "server on loopback, --loopback_ca_file)");
  t->AddString(
      "loopback_ca_file", &c->loopback_ca_file,
      "a certificate also trusted, when --ca_file is unset and the server is on loopback "
      "(localhost, 127.0.0.0/8, ::1), if the file exists: the one the fieldprof-aggregator "
      "package makes at install (empty: none)");
  t->AddString("spool", &c->spool_dir, "the runtime's spool directory");
  t->AddString("state_dir", &c->state_dir,
               "the agent's own directory (outbox/, quarantine/, status)");
  t->AddInt("batch_bytes", &c->batch_bytes, "seal a batch at this encoded size", 4096, 1 << 20);
  t->AddInt("max_age_s", &c->max_age_s, "seal a smaller batch once its oldest record is this old",
            1, int64_t{365} * 86400);
  t->AddInt("cap_mib", cap_mib,
            "spool + outbox stay under this; past it the oldest data is dropped (0: no cap)", 0,
            1 << 20);
  t->AddInt("timeout_ms", &c->timeout_ms, "deadline for connecting and for each request", 100,
            600000);
  t->AddInt("backoff_initial_ms", &c->backoff_initial_ms, "first retry delay after a failed upload",
            10, 3600000);
  t->AddInt("backoff_max_ms", &c->backoff_max_ms, "longest retry delay", 10, int64_t{7} * 86400000);
}

// What the agent keeps up to date for the rest of the machine: the
// runtime's settings, package versions, the snapshot cache.
void AddSettingsFlags(fieldprof::OptionTable* t, AgentConfig* c) {
  t->AddString("runtime_settings", &c->runtime_settings,
               "the runtime's settings file, kept up to date from the aggregator's GET /v1/config "
               "(empty: do not download settings)");
  t->AddString("dpkg_dir", &c->dpkg_dir,
               "dpkg's database: which installed package holds a module's file and what it "
               "shipped (docs/privacy.md; empty: no module is the system's code)");
  t->AddString("apt_indexes", &c->apt_indexes,
               "apt's package indexes as lines PATH<TAB>ORIGIN<TAB>yes|no (empty: ask apt)");
  t->AddString("system_code_dir", &c->system_code_dir,
               "where what is known of the system's code is kept (empty: /var/cache/fieldprof/"
               "system-code for root, else ~/.cache/fieldprof/system-code)");
  t->AddString("share_modules", &c->share_modules,
               "modules of your own whose records leave as the system's do (comma-separated "
               "names; the settings file's share_modules too)");
  t->AddInt("settings_interval_s", &c->settings_interval_s,
            "download the settings at most this often (--once: every pass)", 0, int64_t{7} * 86400);
  t->AddString("snapshot_key", &c->snapshot_key,
               "the publisher's public key (PEM) that snapshot manifests must be signed with "
               "(default: snapshot-signing.pub in the user's fieldprof config dir, if there; "
               "empty: no snapshot download)");
  t->AddString("snapshot_cache", &c->snapshot_cache,
               "the local snapshot cache every fieldprof tool reads");
  t->AddInt("snapshot_per_day", &c->snapshot_per_day,
            "snapshot fragments downloaded per day at most (fieldprof pull --all gets all)", 0,
            4096);
}

// Developer mode, and measured runs that are still going.
void AddDevAndLiveFlags(fieldprof::OptionTable* t, AgentConfig* c) {
  t->AddString("dev_spool", &c->dev.spool_dir,
               "developer mode: the directory `fieldprof points record -o` writes your program's "
               "runs to; they go to the aggregator with your developer token (empty: off)");
  t->AddString("dev_token_file", &c->dev.token_file,
               "developer mode: a file whose first line is your developer token");
  t->AddInt("dev_max_age_ms", &c->dev.max_age_ms,
            "developer mode: upload once the oldest waiting run has waited this long", 100,
            int64_t{7} * 86400000);
  t->AddInt("dev_max_bytes", &c->dev.max_bytes,
            "developer mode: upload once the waiting runs come to this; each upload stays under it "
            "(a larger run goes alone)",
            4096, 1000 * 1000);
  t->AddString("live_dir", &c->live_dir,
               "where measured runs keep their counts while they run (default: the runtime "
               "settings' live_dir, else /dev/shm/fieldprof-UID)");
  t->AddInt("live_interval_s", &c->live_interval_s,
            "a measured run that goes on is reported in a part at most this often (0: at every "
            "pass)",
            0, int64_t{7} * 86400);
}

int main(int argc, char** argv) {
  AgentConfig c;
  c.spool_dir = fieldprof::DefaultSpoolDir();
  c.state_dir = fieldprof::DefaultAgentStateDir();
  c.runtime_settings = fieldprof::DefaultRuntimeSettingsPath();
  c.snapshot_cache = fieldprof::DefaultSnapshotCacheDir();
  // The key ships with the configuration; without it, no snapshot download.
  if (const std::string key = fieldprof::DefaultSnapshotKeyPath(); access(key.c_str(), R_OK) == 0) {
    c.snapshot_key = key;
  }
  bool once = false, flush = false;
  fieldprof::OptionTable t(
      "fieldprof-agent",
      "Uploads the fieldprof runtime's run records (the spool) to the aggregator in batches, "
      "exactly once through crashes and outages.");
  int64_t cap_mib = c.cap_bytes >> 20;
  std::string archives = "Debian";
  AddUploadFlags(&t, &c, &cap_mib);
  AddSettingsFlags(&t, &c);
  t.AddString("archives", &archives,
              "the apt archives (their Release files' Origin, comma-separated) whose packages' "
              "modules may be named off this machine");
  AddDevAndLiveFlags(&t, &c);
  t.AddBool("once", &once, "one pass, then exit (3 if batches are left waiting)");
  t.AddBool("flush", &flush, "seal what the spool holds now, however small or young");
  if (Status s = t.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "fieldprof-agent: %s (see --help)\n", s.message().c_str());
    return 2;
  }
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  c.cap_bytes = cap_mib << 20;
  c.archives.clear();
  for (size_t at = 0; at <= archives.size();) {
    const size_t comma = std::min(archives.find(',', at), archives.size());
    if (comma > at) c.archives.push_back(archives.substr(at, comma - at));
    at = comma + 1;
  }
  c.server_set_in = ServerSetIn(argc, argv, t.given("server"));
  c.batch_bytes_local = t.given("batch_bytes");
  c.max_age_local = t.given("max_age_s");
  if (once && !t.given("settings_interval_s")) c.settings_interval_s = 0;
  Agent agent(c);
  if (Status s = agent.Init(); !s.ok()) {
    std::fprintf(stderr, "fieldprof-agent: %s\n", s.ToString().c_str());
    return 1;
  }
  if (!once) return RunDaemon(agent);
  StatusOr<PassResult> r = agent.Pass(flush);
  if (!r.ok()) {
    std::fprintf(stderr, "fieldprof-agent: %s\n", r.status().ToString().c_str());
    return 1;
  }
  Report(agent, *r, true);
  return r->batches_waiting > 0 || r->dev.uploads_waiting > 0 ? 3 : 0;
}
