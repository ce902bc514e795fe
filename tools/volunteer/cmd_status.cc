// fieldprof status: this machine's side of fieldprof at a glance: consent,
// what waits in the spool and the outbox, the agent's last upload and next
// attempt, and the settings it last applied. Reads local files only.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "common/base/json_writer.h"
#include "common/net/https_client.h"
#include "common/settings/agent_state.h"
#include "common/settings/options.h"
#include "common/settings/runtime_settings.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/spool/run_counters.h"
#include "common/spool/spool.h"
#include "common/spool/spool_sealer.h"
#include "tools/commands.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"
#include "tools/volunteer/pending.h"

namespace fieldprof::tools {

namespace {

struct DirCount {
  uint64_t files = 0, bytes = 0;
  bool missing = false;
};

// What the agent set aside (its quarantine): batches the aggregator refused
// and run records that did not read ("spool-" names), each with a .reason
// file; the newest reason of each kind, its first line.
struct SetAside {
  uint64_t batches = 0, records = 0;
  std::string latest_batch_reason, latest_record_reason;
};

SetAside ReadSetAside(const std::string& dir) {
  SetAside a;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return a;  // no quarantine yet: nothing set aside
  std::filesystem::file_time_type newest_batch{}, newest_record{};
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".reason" || !e.is_regular_file(ec)) continue;
    const bool record = name.rfind("spool-", 0) == 0;
    (record ? a.records : a.batches) += 1;
    const std::filesystem::file_time_type t = e.last_write_time(ec);
    std::filesystem::file_time_type& newest = record ? newest_record : newest_batch;
    std::string& reason = record ? a.latest_record_reason : a.latest_batch_reason;
    if (!reason.empty() && t < newest) continue;
    std::ifstream in(e.path());
    std::string line;
    std::getline(in, line);
    newest = t;
    reason = line;
  }
  return a;
}

// Regular files in `dir` whose name ends in `suffix`.
DirCount CountFiles(const std::string& dir, const std::string& suffix) {
  DirCount c;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    c.missing = true;
    return c;
  }
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    struct stat st;
    if (::stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    ++c.files;
    c.bytes += static_cast<uint64_t>(st.st_size);
  }
  return c;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "3 min ago", "in 2 h", "never".
std::string When(int64_t unix_ms) {
  if (unix_ms <= 0) return "never";
  const int64_t d = unix_ms - NowMs();
  const int64_t a = (d < 0 ? -d : d) / 1000;
  // Rounded to the nearest unit.
  std::string span = a < 90       ? std::to_string(a) + " s"
                     : a < 5400   ? std::to_string((a + 30) / 60) + " min"
                     : a < 172800 ? std::to_string((a + 1800) / 3600) + " h"
                                  : std::to_string((a + 43200) / 86400) + " days";
  return d < 0 ? span + " ago" : "in " + span;
}

struct StatusOptions {
  std::string spool, state_dir, settings_path, cache_dir;
  bool json = false, pending_only = false;
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseStatusOptions(int argc, char** argv, StatusOptions* o) {
  o->spool = DefaultSpoolDir();
  o->state_dir = DefaultAgentStateDir();
  o->settings_path = DefaultRuntimeSettingsPath();
  o->cache_dir = DefaultSnapshotCacheDir();
  OptionTable t("fieldprof status",
                "This machine's side of fieldprof: consent, records waiting in the spool and\n"
                "the outbox, the agent's last upload and next attempt, the settings in force.");
  t.AddString("spool", &o->spool, "the runtime's spool directory");
  t.AddString("state_dir", &o->state_dir, "the agent's state directory");
  t.AddString("runtime_settings", &o->settings_path, "the runtime's settings file");
  t.AddString("cache", &o->cache_dir, "the snapshot cache");
  t.AddBool("json", &o->json, "print as JSON");
  t.AddBool("pending", &o->pending_only,
            "show exactly what would be sent next, record by record (nothing is sent)");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && !t.positional().empty()) s = InvalidArgument("status takes no arguments");
  if (!s.ok()) return UsageError(t, s);
  return std::nullopt;
}

// Everything the status shows, read from the local files.
struct MachineStatus {
  StatusOr<std::optional<RuntimeSettings>> settings = std::optional<RuntimeSettings>();
  std::string consent;
  StatusOr<std::vector<SpoolEntry>> spool = std::vector<SpoolEntry>();
  uint64_t spool_bytes = 0;
  DirCount outbox;
  // Stack records the agent holds for the day's batch (spool_sealer.h).
  size_t held_stacks = 0;
  uint64_t held_bytes = 0;
  int64_t held_oldest_ms = 0;
  DirCount live;  // measured runs' live files (runs going on, or ended unreported)
  std::string live_dir;
  SetAside quarantine;
  StatusOr<AgentState> agent = AgentState();
  // Runs counted instead of recorded, not yet reported: still in the
  // spool's .counters, plus what the agent took and holds for its next batch.
  StatusOr<RunCounts> counted = RunCounts();
  RunCounts not_recorded{};
  // The snapshot cache: what is held, against the manifest held.
  StatusOr<wire::Manifest> manifest = wire::Manifest();
  std::vector<CachedFragment> held;
  uint64_t cache_bytes = 0;
  int current = 0;
};

std::string ConsentText(const StatusOr<std::optional<RuntimeSettings>>& settings,
                        const std::string& path) {
  if (!settings.ok()) {
    return "off: the settings file is corrupt (" + settings.status().message() + ")";
  }
  if (!settings->has_value()) return "not given (no settings file " + path + ")";
  return (*settings)->consent ? "yes" : "no";
}

MachineStatus GatherStatus(const StatusOptions& o) {
  MachineStatus m;
  m.settings = ReadRuntimeSettings(o.settings_path);
  m.consent = ConsentText(m.settings, o.settings_path);
  m.spool = ListSpool(o.spool);
  if (m.spool.ok()) {
    for (const SpoolEntry& e : *m.spool) m.spool_bytes += e.bytes;
  }
  m.outbox = CountFiles(OutboxDirOf(o.state_dir), ".batch");
  if (StatusOr<std::vector<std::string>> held = ListHeld(HeldDirOf(o.state_dir)); held.ok()) {
    for (const std::string& name : *held) {
      StatusOr<wire::Batch> h = ReadHeld(HeldDirOf(o.state_dir) + "/" + name);
      if (!h.ok()) continue;  // the agent sets it aside
      m.held_stacks += static_cast<size_t>(h->records_size());
      m.held_bytes += h->ByteSizeLong();
      if (m.held_oldest_ms == 0 || h->created_unix_ms() < m.held_oldest_ms) {
        m.held_oldest_ms = h->created_unix_ms();
      }
    }
  }
  m.live_dir = DefaultLiveDir(m.settings.ok() && m.settings->has_value() ? (*m.settings)->live_dir
                                                                         : std::string());
  if (!m.live_dir.empty()) m.live = CountFiles(m.live_dir, ".fplive");
  m.quarantine = ReadSetAside(QuarantineDirOf(o.state_dir));
  m.agent = ReadAgentState(StatusPathOf(o.state_dir));
  m.counted = ReadRunCounters(o.spool);
  m.not_recorded = m.counted.ok() ? *m.counted : RunCounts{};
  if (m.agent.ok()) {
    m.not_recorded[kRunRefusedSlot] += static_cast<uint64_t>(m.agent->runs_refused_no_slot);
    m.not_recorded[kRunRefusedLoad] += static_cast<uint64_t>(m.agent->runs_refused_load);
    m.not_recorded[kRunRefusedRate] += static_cast<uint64_t>(m.agent->runs_refused_rate_cap);
    m.not_recorded[kRunMeasuredNone] += static_cast<uint64_t>(m.agent->runs_measured_nothing);
  }
  const SnapshotCache cache(o.cache_dir);
  m.manifest = cache.Manifest();
  m.held = cache.Fragments();
  for (const CachedFragment& f : m.held) {
    m.cache_bytes += f.bytes;
    if (m.manifest.ok() && f.index < m.manifest->fragment_count() &&
        f.version == m.manifest->fragments(static_cast<int>(f.index)).version()) {
      ++m.current;
    }
  }
  return m;
}

void WriteAgentJson(JsonWriter& j, const AgentState& a) {
  j.Key("server").String(a.server);
  j.Key("server_set_in").String(a.server_set_in);
  j.Key("last_upload_unix_ms").Int(a.last_upload_unix_ms);
  j.Key("last_upload_result").String(a.last_upload_result);
  j.Key("last_success_unix_ms").Int(a.last_success_unix_ms);
  j.Key("next_attempt_unix_ms").Int(a.next_attempt_unix_ms);
  j.Key("batches_uploaded").Int(a.batches_uploaded);
  j.Key("settings_result").String(a.settings_result);
  j.Key("system_code_result").String(a.system_code_result);
  j.Key("counted_result").String(a.counted_result);
  j.Key("snapshot_checked_unix_ms").Int(a.snapshot_checked_unix_ms);
  j.Key("snapshot_result").String(a.snapshot_result);
  j.Key("snapshot_next_unix_ms").Int(a.snapshot_next_unix_ms);
}

std::string StatusJson(const MachineStatus& m, const StatusOptions& o) {
  JsonWriter j;
  j.BeginObject();
  j.Key("consent").String(m.consent);
  j.Key("runtime_settings").String(o.settings_path);
  if (m.settings.ok() && m.settings->has_value()) {
    const FleetSettings& f = (*m.settings)->fleet;
    j.Key("k").Int(f.k).Key("slots").Int(f.slots);
    j.Key("overhead_budget").Double(f.overhead_budget);
    j.Key("sample_fraction").Double(f.sample_fraction);
    j.Key("max_runs_per_minute").Int(f.max_runs_per_minute);
    j.Key("settings_version").String((*m.settings)->version);
  }
  j.Key("spool").BeginObject();
  j.Key("dir").String(o.spool);
  j.Key("records").Uint(m.spool.ok() ? m.spool->size() : 0).Key("bytes").Uint(m.spool_bytes);
  j.EndObject();
  j.Key("outbox").BeginObject();
  j.Key("batches").Uint(m.outbox.files).Key("bytes").Uint(m.outbox.bytes);
  j.EndObject();
  j.Key("held_stacks").BeginObject();
  j.Key("records").Uint(m.held_stacks).Key("bytes").Uint(m.held_bytes);
  j.Key("oldest_unix_ms").Int(m.held_oldest_ms);
  j.EndObject();
  j.Key("live_runs").Uint(m.live.files);
  j.Key("quarantined").Uint(m.quarantine.batches + m.quarantine.records);
  j.Key("set_aside").BeginObject();
  j.Key("batches").Uint(m.quarantine.batches);
  j.Key("latest_batch_reason").String(m.quarantine.latest_batch_reason);
  j.Key("run_records").Uint(m.quarantine.records);
  j.Key("latest_record_reason").String(m.quarantine.latest_record_reason);
  j.EndObject();
  j.Key("runs_not_recorded").BeginObject();
  for (int i = 0; i < kNumRunCounters; ++i) j.Key(kRunCounterNames[i]).Uint(m.not_recorded[i]);
  j.EndObject();
  if (m.agent.ok()) WriteAgentJson(j, *m.agent);
  j.Key("snapshot").BeginObject();
  j.Key("cache").String(o.cache_dir);
  j.Key("version").Uint(m.manifest.ok() ? m.manifest->snapshot_version() : 0);
  j.Key("fragment_count").Uint(m.manifest.ok() ? m.manifest->fragment_count() : 0);
  j.Key("fragments_held").Uint(m.held.size()).Key("fragments_current").Int(m.current);
  j.Key("bytes").Uint(m.cache_bytes);
  if (m.manifest.ok()) {
    j.Key("series_published").Uint(m.manifest->series_published());
    j.Key("k_anonymity").Uint(m.manifest->k_anonymity());
    j.Key("series_withheld").Uint(m.manifest->series_withheld());
    j.Key("modules_withheld").Uint(m.manifest->modules_withheld());
    j.Key("machines_withheld").Uint(m.manifest->machines_withheld());
  }
  j.EndObject();
  j.EndObject();
  return j.Take();
}

// Consent, settings, spool, counted runs, outbox: this machine's side.
void PrintLocal(const MachineStatus& m, const StatusOptions& o) {
  std::printf("consent:        %s\n", m.consent.c_str());
  if (m.settings.ok() && m.settings->has_value()) {
    const RuntimeSettings& r = **m.settings;
    std::printf(
        "settings:       k %lld, %lld slots, load cap %g per CPU, budget %g, %g of runs "
        "sampled, at most %lld measured runs a minute%s%s\n",
        static_cast<long long>(r.fleet.k), static_cast<long long>(r.fleet.slots),
        r.fleet.max_load_per_cpu, r.fleet.overhead_budget, r.fleet.sample_fraction,
        static_cast<long long>(r.fleet.max_runs_per_minute), r.version.empty() ? "" : ", version ",
        r.version.c_str());
  }
  if (m.spool.ok()) {
    std::printf("spool:          %zu records, %s  (%s)\n", m.spool->size(),
                FormatBytes(static_cast<double>(m.spool_bytes)).c_str(), o.spool.c_str());
  } else {
    std::printf("spool:          unreadable: %s\n", m.spool.status().message().c_str());
  }
  if (!m.counted.ok()) {
    std::printf("runs counted:   unreadable: %s\n", m.counted.status().message().c_str());
  } else {
    std::printf(
        "runs counted:   %llu refused (no slot), %llu refused (load), %llu refused (rate cap), "
        "%llu measured no call; no record, not yet reported\n",
        static_cast<unsigned long long>(m.not_recorded[kRunRefusedSlot]),
        static_cast<unsigned long long>(m.not_recorded[kRunRefusedLoad]),
        static_cast<unsigned long long>(m.not_recorded[kRunRefusedRate]),
        static_cast<unsigned long long>(m.not_recorded[kRunMeasuredNone]));
  }
  if (m.live.files > 0) {
    std::printf(
        "live runs:      %llu measured runs going on or ended unreported; the agent reports them "
        "(%s)\n",
        static_cast<unsigned long long>(m.live.files), m.live_dir.c_str());
  }
  std::printf("outbox:         %llu batches, %s waiting for the aggregator\n",
              static_cast<unsigned long long>(m.outbox.files),
              FormatBytes(static_cast<double>(m.outbox.bytes)).c_str());
  if (m.held_stacks > 0) {
    std::printf(
        "held stacks:    %zu stack records, %s, of runs since %s; sealed with the day's "
        "batch\n",
        m.held_stacks, FormatBytes(static_cast<double>(m.held_bytes)).c_str(),
        When(m.held_oldest_ms).c_str());
  }
  if (m.quarantine.batches > 0) {
    std::printf(
        "set aside:      %llu batch%s the aggregator refused for what %s; never sent again, "
        "kept in %s\n",
        static_cast<unsigned long long>(m.quarantine.batches),
        m.quarantine.batches == 1 ? "" : "es", m.quarantine.batches == 1 ? "it holds" : "they hold",
        QuarantineDirOf(o.state_dir).c_str());
    if (!m.quarantine.latest_batch_reason.empty()) {
      std::printf("                the latest: %s\n", m.quarantine.latest_batch_reason.c_str());
    }
  }
  if (m.quarantine.records > 0) {
    std::printf(
        "set aside:      %llu run record%s in the spool that did not read (damaged, or holding "
        "what may not leave this machine); never sent, kept in %s\n",
        static_cast<unsigned long long>(m.quarantine.records), m.quarantine.records == 1 ? "" : "s",
        QuarantineDirOf(o.state_dir).c_str());
    if (!m.quarantine.latest_record_reason.empty()) {
      std::printf("                the latest: %s\n", m.quarantine.latest_record_reason.c_str());
    }
  }
}

// The aggregator the agent uploads to, and where that was chosen.
void PrintServer(const AgentState& a) {
  if (a.server.empty()) {
    std::printf(
        "aggregator:     not known yet: the agent has not run (the package's agent uploads to "
        "the server set in /etc/fieldprof/agent.conf)\n");
    return;
  }
  std::string where =
      a.server_set_in.empty() ? "set by the agent's flags or default" : "set in " + a.server_set_in;
  if (a.server_set_in == "/etc/fieldprof/agent.conf") {
    where += "; dpkg-reconfigure fieldprof changes it";
  }
  // HOST:PORT, an IPv6 host in brackets.
  std::string host = a.server.substr(0, a.server.rfind(':'));
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  const bool local = IsLoopbackHost(host);
  std::printf("aggregator:     %s%s (%s)\n", a.server.c_str(),
              local ? ", on this machine, where the fieldprof-aggregator package serves" : "",
              where.c_str());
}

// The agent's uploads and settings checks.
void PrintAgent(const AgentState& a, const DirCount& outbox) {
  PrintServer(a);
  if (a.last_upload_unix_ms == 0) {
    std::printf("last upload:    never\n");
  } else {
    std::printf("last upload:    %s: %s\n", When(a.last_upload_unix_ms).c_str(),
                a.last_upload_result.c_str());
    if (a.last_success_unix_ms > 0) {
      std::printf("last success:   %s (%lld batches in all)\n",
                  When(a.last_success_unix_ms).c_str(), static_cast<long long>(a.batches_uploaded));
    } else {
      std::printf("last success:   never\n");
    }
  }
  if (a.next_attempt_unix_ms > NowMs() && outbox.files > 0) {
    std::printf("next attempt:   %s (after %lld failures)\n", When(a.next_attempt_unix_ms).c_str(),
                static_cast<long long>(a.failures));
  } else if (outbox.files > 0) {
    std::printf("next attempt:   at the agent's next pass\n");
  }
  if (a.settings_checked_unix_ms > 0) {
    std::printf("settings check: %s: %s\n", When(a.settings_checked_unix_ms).c_str(),
                a.settings_result.c_str());
  }
  if (!a.tokens_result.empty()) {
    std::printf("tokens:         %s%s\n",
                a.tokens_required != 0 ? "one spent a batch (anonymous); " : "",
                a.tokens_result.c_str());
  }
  if (!a.system_code_result.empty()) {
    std::printf("system's code:  %s (docs/privacy.md; --pending says per module)\n",
                a.system_code_result.c_str());
  }
  if (!a.counted_result.empty()) {
    std::printf("machine count:  %s\n", a.counted_result.c_str());
  }
}

// The snapshot cache and the agent's last look for a new snapshot.
void PrintSnapshot(const MachineStatus& m, const StatusOptions& o) {
  if (m.manifest.ok()) {
    std::printf("snapshot:       version %llu, %zu of %u fragments held (%d current), %s  (%s)\n",
                static_cast<unsigned long long>(m.manifest->snapshot_version()), m.held.size(),
                m.manifest->fragment_count(), m.current, FormatBytes(m.cache_bytes).c_str(),
                o.cache_dir.c_str());
    const wire::Manifest& mf = *m.manifest;
    if (mf.series_published() > 0 || mf.k_anonymity() > 0) {  // older aggregators: neither
      std::printf("published:      %llu series in the snapshot\n",
                  static_cast<unsigned long long>(mf.series_published()));
    }
    const std::string held = WithheldText(
        mf.k_anonymity(), static_cast<int64_t>(mf.series_withheld()),
        static_cast<int64_t>(mf.modules_withheld()), static_cast<int64_t>(mf.machines_withheld()));
    if (!held.empty()) std::printf("held back:      %s\n", held.c_str());
  } else {
    std::printf("snapshot:       none yet in %s (fieldprof pull --all fetches it)\n",
                o.cache_dir.c_str());
  }
  const AgentState& a = *m.agent;
  if (a.snapshot_checked_unix_ms > 0) {
    std::printf("snapshot check: %s: %s\n", When(a.snapshot_checked_unix_ms).c_str(),
                a.snapshot_result.c_str());
  }
  if (a.snapshot_next_unix_ms > 0) {
    std::printf("next snapshot:  %s\n", When(a.snapshot_next_unix_ms).c_str());
  }
}

}  // namespace

int CmdStatus(int argc, char** argv) {
  StatusOptions o;
  if (const ExitCode done = ParseStatusOptions(argc, argv, &o)) return *done;
  if (o.pending_only) return PrintPending(o.spool, o.state_dir, o.settings_path, o.json);
  const MachineStatus m = GatherStatus(o);
  if (o.json) {
    std::cout << StatusJson(m, o) << "\n";
    return 0;
  }
  PrintLocal(m, o);
  if (!m.agent.ok()) {
    std::printf("agent:          state unreadable: %s\n", m.agent.status().message().c_str());
    return 1;
  }
  PrintAgent(*m.agent, m.outbox);
  PrintSnapshot(m, o);
  return 0;
}

}  // namespace fieldprof::tools
