// fieldprof status: this machine's side of fieldprof at a glance: consent,
// what waits in the spool and the outbox, the agent's last upload and next
// attempt, and the settings it last applied. Reads local files only.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "common/agent_state.h"
#include "common/json_writer.h"
#include "common/options.h"
#include "common/run_counters.h"
#include "common/runtime_settings.h"
#include "common/snapshot_cache.h"
#include "common/spool.h"
#include "tools/commands.h"
#include "tools/cli/format.h"
#include "tools/volunteer/pending.h"

namespace fieldprof::tools {

namespace {

struct DirCount {
  uint64_t files = 0, bytes = 0;
  bool missing = false;
};

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

}  // namespace

int CmdStatus(int argc, char** argv) {
  std::string spool = DefaultSpoolDir(), state_dir = DefaultAgentStateDir(),
              settings_path = DefaultRuntimeSettingsPath(), cache_dir = DefaultSnapshotCacheDir();
  bool json = false, pending_only = false;
  OptionTable t("fieldprof status",
                "This machine's side of fieldprof: consent, records waiting in the spool and\n"
                "the outbox, the agent's last upload and next attempt, the settings in force.");
  t.AddString("spool", &spool, "the runtime's spool directory");
  t.AddString("state_dir", &state_dir, "the agent's state directory");
  t.AddString("runtime_settings", &settings_path, "the runtime's settings file");
  t.AddString("cache", &cache_dir, "the snapshot cache");
  t.AddBool("json", &json, "print as JSON");
  t.AddBool("pending", &pending_only,
            "show exactly what would be sent next, record by record (nothing is sent)");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  if (s.ok() && !t.positional().empty()) s = InvalidArgument("status takes no arguments");
  if (!s.ok()) {
    std::cerr << "fieldprof status: " << s.message() << "\n";
    return 2;
  }
  if (pending_only) return PrintPending(spool, state_dir, json);

  // Consent and settings, as the runtime will read them.
  StatusOr<std::optional<RuntimeSettings>> settings = ReadRuntimeSettings(settings_path);
  std::string consent;
  if (!settings.ok()) {
    consent = "off: the settings file is corrupt (" + settings.status().message() + ")";
  } else if (!settings->has_value()) {
    consent = "not given (no settings file " + settings_path + ")";
  } else {
    consent = (*settings)->consent ? "yes" : "no";
  }
  StatusOr<std::vector<SpoolEntry>> files = ListSpool(spool);
  uint64_t spool_bytes = 0;
  if (files.ok()) {
    for (const SpoolEntry& e : *files) spool_bytes += e.bytes;
  }
  const DirCount outbox = CountFiles(OutboxDirOf(state_dir), ".batch");
  const DirCount quarantine = CountFiles(QuarantineDirOf(state_dir), ".reason");
  StatusOr<AgentState> agent = ReadAgentState(StatusPathOf(state_dir));
  // Runs counted instead of recorded, not yet reported: still in the
  // spool's .counters, plus what the agent took and holds for its next batch.
  StatusOr<RunCounts> counted = ReadRunCounters(spool);
  RunCounts pending = counted.ok() ? *counted : RunCounts{};
  if (agent.ok()) {
    pending[kRunRefusedSlot] += static_cast<uint64_t>(agent->runs_refused_no_slot);
    pending[kRunRefusedLoad] += static_cast<uint64_t>(agent->runs_refused_load);
    pending[kRunRefusedRate] += static_cast<uint64_t>(agent->runs_refused_rate_cap);
    pending[kRunMeasuredNone] += static_cast<uint64_t>(agent->runs_measured_nothing);
  }
  // The snapshot cache: what is held, against the manifest held.
  const SnapshotCache cache(cache_dir);
  StatusOr<wire::Manifest> manifest = cache.Manifest();
  const std::vector<CachedFragment> held = cache.Fragments();
  uint64_t cache_bytes = 0;
  int current = 0;
  for (const CachedFragment& f : held) {
    cache_bytes += f.bytes;
    if (manifest.ok() && f.index < manifest->fragment_count() &&
        f.version == manifest->fragments(static_cast<int>(f.index)).version()) {
      ++current;
    }
  }

  if (json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("consent").String(consent);
    j.Key("runtime_settings").String(settings_path);
    if (settings.ok() && settings->has_value()) {
      const FleetSettings& f = (*settings)->fleet;
      j.Key("k").Int(f.k).Key("slots").Int(f.slots);
      j.Key("overhead_budget").Double(f.overhead_budget);
      j.Key("sample_fraction").Double(f.sample_fraction);
      j.Key("max_runs_per_minute").Int(f.max_runs_per_minute);
      j.Key("settings_version").String((*settings)->version);
    }
    j.Key("spool").BeginObject();
    j.Key("dir").String(spool);
    j.Key("records").Uint(files.ok() ? files->size() : 0).Key("bytes").Uint(spool_bytes);
    j.EndObject();
    j.Key("outbox").BeginObject();
    j.Key("batches").Uint(outbox.files).Key("bytes").Uint(outbox.bytes);
    j.EndObject();
    j.Key("quarantined").Uint(quarantine.files);
    j.Key("runs_not_recorded").BeginObject();
    for (int i = 0; i < kNumRunCounters; ++i) j.Key(kRunCounterNames[i]).Uint(pending[i]);
    j.EndObject();
    if (agent.ok()) {
      const AgentState& a = *agent;
      j.Key("last_upload_unix_ms").Int(a.last_upload_unix_ms);
      j.Key("last_upload_result").String(a.last_upload_result);
      j.Key("last_success_unix_ms").Int(a.last_success_unix_ms);
      j.Key("next_attempt_unix_ms").Int(a.next_attempt_unix_ms);
      j.Key("batches_uploaded").Int(a.batches_uploaded);
      j.Key("settings_result").String(a.settings_result);
      j.Key("snapshot_checked_unix_ms").Int(a.snapshot_checked_unix_ms);
      j.Key("snapshot_result").String(a.snapshot_result);
      j.Key("snapshot_next_unix_ms").Int(a.snapshot_next_unix_ms);
    }
    j.Key("snapshot").BeginObject();
    j.Key("cache").String(cache_dir);
    j.Key("version").Uint(manifest.ok() ? manifest->snapshot_version() : 0);
    j.Key("fragment_count").Uint(manifest.ok() ? manifest->fragment_count() : 0);
    j.Key("fragments_held").Uint(held.size()).Key("fragments_current").Int(current);
    j.Key("bytes").Uint(cache_bytes);
    j.EndObject();
    j.EndObject();
    std::cout << j.Take() << "\n";
    return 0;
  }

  std::printf("consent:        %s\n", consent.c_str());
  if (settings.ok() && settings->has_value()) {
    const RuntimeSettings& r = **settings;
    std::printf(
        "settings:       k %lld, %lld slots, load cap %g per CPU, budget %g, %g of runs "
        "sampled, at most %lld measured runs a minute%s%s\n",
        static_cast<long long>(r.fleet.k), static_cast<long long>(r.fleet.slots),
        r.fleet.max_load_per_cpu, r.fleet.overhead_budget, r.fleet.sample_fraction,
        static_cast<long long>(r.fleet.max_runs_per_minute), r.version.empty() ? "" : ", version ",
        r.version.c_str());
  }
  if (files.ok()) {
    std::printf("spool:          %zu records, %s  (%s)\n", files->size(),
                FormatBytes(static_cast<double>(spool_bytes)).c_str(), spool.c_str());
  } else {
    std::printf("spool:          unreadable: %s\n", files.status().message().c_str());
  }
  if (!counted.ok()) {
    std::printf("runs counted:   unreadable: %s\n", counted.status().message().c_str());
  } else {
    std::printf(
        "runs counted:   %llu refused (no slot), %llu refused (load), %llu refused (rate cap), "
        "%llu measured no call; no record, not yet reported\n",
        static_cast<unsigned long long>(pending[kRunRefusedSlot]),
        static_cast<unsigned long long>(pending[kRunRefusedLoad]),
        static_cast<unsigned long long>(pending[kRunRefusedRate]),
        static_cast<unsigned long long>(pending[kRunMeasuredNone]));
  }
  std::printf("outbox:         %llu batches, %s waiting for the aggregator\n",
              static_cast<unsigned long long>(outbox.files),
              FormatBytes(static_cast<double>(outbox.bytes)).c_str());
  if (quarantine.files > 0) {
    std::printf("quarantined:    %llu (see %s)\n",
                static_cast<unsigned long long>(quarantine.files),
                QuarantineDirOf(state_dir).c_str());
  }
  if (!agent.ok()) {
    std::printf("agent:          state unreadable: %s\n", agent.status().message().c_str());
    return 1;
  }
  const AgentState& a = *agent;
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
  if (manifest.ok()) {
    std::printf("snapshot:       version %llu, %zu of %u fragments held (%d current), %s  (%s)\n",
                static_cast<unsigned long long>(manifest->snapshot_version()), held.size(),
                manifest->fragment_count(), current, FormatBytes(cache_bytes).c_str(),
                cache_dir.c_str());
  } else {
    std::printf("snapshot:       none yet in %s (fieldprof pull --all fetches it)\n",
                cache_dir.c_str());
  }
  if (a.snapshot_checked_unix_ms > 0) {
    std::printf("snapshot check: %s: %s\n", When(a.snapshot_checked_unix_ms).c_str(),
                a.snapshot_result.c_str());
  }
  if (a.snapshot_next_unix_ms > 0) {
    std::printf("next snapshot:  %s\n", When(a.snapshot_next_unix_ms).c_str());
  }
  return 0;
}

}  // namespace fieldprof::tools
