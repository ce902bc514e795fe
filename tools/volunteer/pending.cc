#include "tools/volunteer/pending.h"

#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include "common/base/durable_file.h"
#include "common/base/json_writer.h"
#include "common/settings/agent_state.h"
#include "common/settings/runtime_settings.h"
#include "common/spool/batcher.h"
#include "common/spool/counted_series.h"
#include "common/spool/outbox.h"
#include "common/spool/run_counters.h"
#include "common/spool/spool.h"
#include "common/spool/spool_sealer.h"
#include "common/statistics/histogram.h"
#include "common/system/field_door.h"
#include "common/wire/api_key.h"
#include "common/wire/platform.h"
#include "common/wire/wire.h"
#include "tools/shared/format.h"

namespace fieldprof::tools {
namespace {

struct Pending {
  wire::Batch batch;
  size_t runs = 0;  // spool batches: runs summed into it
};

void PrintBatch(const Pending& p) {
  const wire::Batch& b = p.batch;
  if (b.batch_id().empty()) {
    std::printf(
        "  from the spool, sealed at the agent's next pass that is due: %zu runs, %d "
        "records\n",
        p.runs, b.records_size());
  } else {
    std::printf("  outbox batch %s: %d records, %zu bytes, sent as it is\n",
                HexEncode(b.batch_id()).c_str(), b.records_size(), b.ByteSizeLong());
  }
  if (!b.machine_key().empty()) {
    std::printf("    machine key of the day: %s\n", HexEncode(b.machine_key()).c_str());
  }
  const wire::Platform& pl = b.client_platform();
  std::printf("    platform: %s %s %s family %u\n", std::string(OsName(pl.os())).c_str(),
              std::string(ArchName(pl.arch())).c_str(),
              std::string(CpuVendorName(pl.cpu_vendor())).c_str(), pl.cpu_family());
  for (const wire::Record& r : b.records()) {
    const wire::ApiKey& k = r.key();
    const HistogramStats s = HistogramFromWire(r.histogram()).Stats();
    std::printf("    %s %s (%s) %s: %llu calls, %llu runs, mean %s%s\n", k.module().c_str(),
                k.symbol().c_str(), k.module_version().c_str(),
                std::string(MetricName(k.metric())).c_str(),
                static_cast<unsigned long long>(s.count), static_cast<unsigned long long>(r.runs()),
                FormatMetricValue(k.metric(), s.mean, r.resolution_ns()).c_str(),
                r.first_from_machine() ? " (this machine's first: counted in it once)" : "");
  }
  const wire::AgentCounters& c = b.counters();
  std::printf(
      "    counters: %llu runs measured, %llu refused (slot or load), %llu refused (rate "
      "cap), %llu measured no call, %llu records dropped, %llu quarantined\n",
      static_cast<unsigned long long>(c.runs_instrumented()),
      static_cast<unsigned long long>(c.runs_refused_load_cap()),
      static_cast<unsigned long long>(c.runs_refused_rate_cap()),
      static_cast<unsigned long long>(c.runs_measured_nothing()),
      static_cast<unsigned long long>(c.records_dropped()),
      static_cast<unsigned long long>(c.records_quarantined()));
}

// The outbox: sealed, sent byte for byte as they are.
StatusOr<std::vector<Pending>> SealedBatches(const std::string& state_dir) {
  Outbox outbox(OutboxDirOf(state_dir), QuarantineDirOf(state_dir));
  StatusOr<std::vector<OutboxEntry>> sealed = outbox.List();
  if (!sealed.ok()) return sealed.status().WithContext("the outbox");
  std::vector<Pending> pending;
  for (const OutboxEntry& e : *sealed) {
    StatusOr<std::string> bytes = ReadWholeFile(e.path);
    Pending p{{}, 0};
    if (!bytes.ok() || !p.batch.ParseFromString(*bytes)) {
      return DataLoss(e.path + " is not a readable batch");
    }
    pending.push_back(std::move(p));
  }
  return pending;
}

// What the agent holds for the first batch it seals: its state's counts,
// and the spool's run counters it takes at the pass.
AgentState HeldCounts(const StatusOr<AgentState>& state, const std::string& spool_dir) {
  AgentState held = state.ok() ? *state : AgentState{};
  if (StatusOr<RunCounts> c = ReadRunCounters(spool_dir); c.ok()) {
    auto i = [](uint64_t v) { return static_cast<int64_t>(v); };
    held.runs_refused_no_slot += i((*c)[kRunRefusedSlot]);
    held.runs_refused_load += i((*c)[kRunRefusedLoad]);
    held.runs_refused_rate_cap += i((*c)[kRunRefusedRate]);
    held.runs_measured_nothing += i((*c)[kRunMeasuredNone]);
  }
  return held;
}

// The spool and the held stack records: what the agent's sealer makes of
// them, at the batch size the agent uses (the fleet's, as the agent last
// applied it). Records that do not read are counted in *unreadable: the
// agent sets them aside.
StatusOr<std::vector<Pending>> SpoolBatches(const std::string& spool_dir,
                                            const std::string& state_dir, FieldDoor* door,
                                            size_t* unreadable) {
  StatusOr<AgentState> state = ReadAgentState(StatusPathOf(state_dir));
  const size_t batch_bytes = state.ok() && state->fleet_batch_bytes > 0
                                 ? static_cast<size_t>(state->fleet_batch_bytes)
                                 : kDefaultBatchBytes;
  StatusOr<std::vector<SpoolEntry>> files = ListSpool(spool_dir);
  if (!files.ok()) return files.status().WithContext("the spool");
  std::vector<Pending> pending;
  const AgentState held = HeldCounts(state, spool_dir);
  // Today's key, when the agent has drawn it already (else it draws a new
  // one as it seals).
  std::string machine_key;
  const int64_t today = std::chrono::duration_cast<std::chrono::hours>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count() /
                        24;
  if (!state.ok() || state->machine_key_day != today ||
      !HexDecode(state->machine_key, &machine_key)) {
    machine_key.clear();
  }
  // As the agent seals with --flush: the stack records it holds for the
  // day's batch go with the last one; a series this machine never sent
  // before marked as its first (common/spool/counted_series.h).
  CountedSeries counted(CountedPathOf(state_dir));
  FP_RETURN_IF_ERROR(counted.Load());
  std::vector<uint64_t> fresh;
  const Platform platform = DetectPlatform();
  SpoolSealer sealer(batch_bytes, platform, [&](SealStep& step) {
    const wire::AgentCounters c = BatchCounters(*step.runs, pending.empty() ? held : AgentState{});
    Pending p{step.batch->Seal("", 0, c, machine_key), step.consumed->size()};
    for (wire::Record& r : *p.batch.mutable_records()) {
      if (counted.MarkFirst(SeriesHash(r.key(), platform), &fresh)) r.set_first_from_machine(true);
    }
    pending.push_back(std::move(p));
    return Status::Ok();
  });
  StatusOr<std::vector<std::string>> held_files = ListHeld(HeldDirOf(state_dir));
  if (!held_files.ok()) return held_files.status().WithContext("the held stack records");
  for (const std::string& name : *held_files) {
    StatusOr<wire::Batch> h = ReadHeld(HeldDirOf(state_dir) + "/" + name);
    if (!h.ok()) {
      ++*unreadable;
      continue;
    }
    door->Apply(&*h);  // as the agent does
    FP_RETURN_IF_ERROR(sealer.AddHeld(name, *h));
  }
  for (const SpoolEntry& e : *files) {
    StatusOr<wire::RunRecord> run = ReadRunRecord(e.path);
    if (!run.ok()) {
      ++*unreadable;
      continue;
    }
    door->Apply(&*run);  // as the agent does when it seals
    FP_RETURN_IF_ERROR(sealer.Add(e.name, *run));
  }
  FP_RETURN_IF_ERROR(sealer.Finish(/*flush=*/true, 0, 0));
  return pending;
}

// Per module, kept or left at home, and why.
void PrintModules(const FieldDoor& door) {
  if (door.kept().empty() && door.dropped().empty()) return;
  std::printf("Modules in the spool, and whether their records leave this machine:\n");
  for (const auto& [module, why] : door.kept()) {
    std::printf("  kept     %-32s %s\n", module.c_str(), why.c_str());
  }
  for (const auto& [module, d] : door.dropped()) {
    std::printf("  dropped  %-32s %s: %llu records stay here\n", module.c_str(), d.why.c_str(),
                static_cast<unsigned long long>(d.records));
  }
  if (door.marks_rewritten() > 0) {
    std::printf("  %llu stack marks naming such a module read [unpackaged]\n",
                static_cast<unsigned long long>(door.marks_rewritten()));
  }
}

std::string ModulesJson(const FieldDoor& door) {
  std::string out = "[";
  bool first = true;
  auto add = [&](const std::string& module, const char* verdict, const std::string& why,
                 uint64_t records) {
    out += first ? "{\"module\":" : ",{\"module\":";
    AppendJsonString(&out, module);
    out += ",\"verdict\":\"" + std::string(verdict) + "\",\"why\":";
    AppendJsonString(&out, why);
    if (records > 0) out += ",\"records\":" + std::to_string(records);
    out += "}";
    first = false;
  };
  for (const auto& [module, why] : door.kept()) add(module, "kept", why, 0);
  for (const auto& [module, d] : door.dropped()) add(module, "dropped", d.why, d.records);
  return out + "]";
}

std::string PendingJson(const std::vector<Pending>& pending, const FieldDoor& door,
                        size_t unreadable) {
  std::string out = "{\"modules\":" + ModulesJson(door) + ",\"batches\":[";
  for (size_t i = 0; i < pending.size(); ++i) {
    std::string b;
    google::protobuf::util::JsonPrintOptions o;
    o.always_print_primitive_fields = true;
    // A batch built here always prints; were it not to, {} says so.
    if (!google::protobuf::util::MessageToJsonString(pending[i].batch, &b, o).ok()) b = "{}";
    out += (i ? "," : "") + std::string("{\"from\":\"") +
           (pending[i].batch.batch_id().empty() ? "spool" : "outbox") + "\",\"batch\":" + b + "}";
  }
  return out + "],\"unreadable_spool_records\":" + std::to_string(unreadable) + "}";
}

}  // namespace

int PrintPending(const std::string& spool_dir, const std::string& state_dir,
                 const std::string& settings_path, bool json) {
  // The agent's door (common/system/field_door.h): the system's code as of now,
  // and the modules the volunteer shares in the settings file.
  SystemCode code;
  if (Status s = code.Refresh(); !s.ok()) {
    std::cerr << "fieldprof status: cannot tell the system's code: " << s.message()
              << " (the agent seals nothing until it can)\n";
    return 1;
  }
  // What the agent shared at its last pass (its flags and the settings
  // file then), and what the settings file shares now.
  std::string share;
  if (StatusOr<AgentState> st = ReadAgentState(StatusPathOf(state_dir)); st.ok()) {
    share = st->share_modules;
  }
  if (!settings_path.empty()) {
    StatusOr<std::optional<RuntimeSettings>> s = ReadRuntimeSettings(settings_path);
    if (s.ok() && s->has_value() && !(*s)->share_modules.empty()) {
      share += (share.empty() ? "" : ",") + (*s)->share_modules;
    }
  }
  FieldDoor door(&code, share);
  StatusOr<std::vector<Pending>> pending = SealedBatches(state_dir);
  size_t unreadable = 0;
  StatusOr<std::vector<Pending>> from_spool =
      pending.ok() ? SpoolBatches(spool_dir, state_dir, &door, &unreadable) : pending.status();
  if (!from_spool.ok()) {
    std::cerr << "fieldprof status: " << from_spool.status().message() << "\n";
    return 1;
  }
  for (Pending& p : *from_spool) pending->push_back(std::move(p));
  if (json) {
    std::cout << PendingJson(*pending, door, unreadable) << "\n";
    return 0;
  }
  std::printf("What would be sent next (nothing is sent by this command):\n");
  if (pending->empty()) std::printf("  nothing: the outbox and the spool are empty\n");
  for (const Pending& p : *pending) PrintBatch(p);
  PrintModules(door);
  if (unreadable > 0) {
    std::printf("  %zu spool records are not valid: the agent sets them aside, unsent\n",
                unreadable);
  }
  std::printf(
      "Each batch also carries a random key drawn anew each day. From it the server derives, "
      "per series, an entry it\ncannot match to this machine's other series or days, and "
      "counts this machine in a series once: from the\nrecord marked as the first of that "
      "series it ever sends (docs/privacy.md).\n"
      "Nothing else leaves this machine: no paths, arguments, file contents, user or "
      "host names, addresses.\n");
  return 0;
}

}  // namespace fieldprof::tools
