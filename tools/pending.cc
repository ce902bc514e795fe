#include "tools/pending.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "agent/batcher.h"
#include "agent/outbox.h"
#include "agent/platform.h"
#include "common/agent_state.h"
#include "common/api_key.h"
#include "common/histogram.h"
#include "common/run_counters.h"
#include "common/spool.h"
#include "common/wire.h"
#include "tools/format.h"

namespace fieldprof::tools {
namespace {

struct Pending {
  std::string what;  // "outbox 1795...-<id>" or "spool"
  wire::Batch batch;
  size_t runs = 0;  // spool batches: runs summed into it
};

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

void PrintBatch(const Pending& p) {
  const wire::Batch& b = p.batch;
  if (b.batch_id().empty()) {
    std::printf(
        "  from the spool, sealed at the agent's next pass that is due: %zu runs, %d "
        "records\n",
        p.runs, b.records_size());
  } else {
    std::printf("  outbox batch %s: %d records, %zu bytes, sent as it is\n",
                Hex(b.batch_id()).c_str(), b.records_size(), b.ByteSizeLong());
  }
  const wire::Platform& pl = b.client_platform();
  std::printf("    platform: %s %s %s family %u\n", std::string(OsName(pl.os())).c_str(),
              std::string(ArchName(pl.arch())).c_str(),
              std::string(CpuVendorName(pl.cpu_vendor())).c_str(), pl.cpu_family());
  for (const wire::Record& r : b.records()) {
    const wire::ApiKey& k = r.key();
    const HistogramStats s = HistogramFromWire(r.histogram()).Stats();
    std::printf("    %s %s (%s) %s: %llu calls, %llu runs, mean %s\n", k.module().c_str(),
                k.symbol().c_str(), k.module_version().c_str(),
                std::string(MetricName(k.metric())).c_str(),
                static_cast<unsigned long long>(s.count), static_cast<unsigned long long>(r.runs()),
                FormatMetricValue(k.metric(), s.mean, r.resolution_ns()).c_str());
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

}  // namespace

int PrintPending(const std::string& spool_dir, const std::string& state_dir, bool json) {
  std::vector<Pending> pending;
  // The outbox: sealed, sent byte for byte as they are.
  agent::Outbox outbox(OutboxDirOf(state_dir), QuarantineDirOf(state_dir));
  StatusOr<std::vector<agent::OutboxEntry>> sealed = outbox.List();
  if (!sealed.ok()) {
    std::cerr << "fieldprof status: the outbox: " << sealed.status().message() << "\n";
    return 1;
  }
  for (const agent::OutboxEntry& e : *sealed) {
    std::ifstream in(e.path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    Pending p{"outbox " + e.name, {}, 0};
    if (!p.batch.ParseFromString(bytes.str())) {
      std::cerr << "fieldprof status: " << e.path << " is not a batch\n";
      return 1;
    }
    pending.push_back(std::move(p));
  }
  // The spool: what the agent's batch builder makes of it, at the batch
  // size the agent uses (the fleet's, as the agent last applied it).
  StatusOr<AgentState> state = ReadAgentState(StatusPathOf(state_dir));
  const size_t batch_bytes = state.ok() && state->fleet_batch_bytes > 0
                                 ? static_cast<size_t>(state->fleet_batch_bytes)
                                 : agent::kDefaultBatchBytes;
  StatusOr<std::vector<SpoolEntry>> files = ListSpool(spool_dir);
  if (!files.ok()) {
    std::cerr << "fieldprof status: the spool: " << files.status().message() << "\n";
    return 1;
  }
  agent::BatchBuilder builder(batch_bytes, agent::DetectPlatform());
  size_t runs = 0, unreadable = 0;
  wire::AgentCounters counters;
  // The first batch the agent seals also reports what it holds for it: runs
  // counted instead of recorded (its state, and the spool's counts it takes
  // at the pass) and records it dropped or had quarantined.
  StatusOr<RunCounts> counted = ReadRunCounters(spool_dir);
  const RunCounts c = counted.ok() ? *counted : RunCounts{};
  const AgentState held = state.ok() ? *state : AgentState{};
  bool first = true;
  auto seal = [&] {
    if (first) {
      counters.set_records_dropped(counters.records_dropped() +
                                   static_cast<uint64_t>(held.records_dropped));
      counters.set_records_quarantined(counters.records_quarantined() +
                                       static_cast<uint64_t>(held.records_quarantined));
      counters.set_runs_refused_load_cap(
          counters.runs_refused_load_cap() + c[kRunRefusedSlot] + c[kRunRefusedLoad] +
          static_cast<uint64_t>(held.runs_refused_no_slot + held.runs_refused_load));
      counters.set_runs_refused_rate_cap(counters.runs_refused_rate_cap() + c[kRunRefusedRate] +
                                         static_cast<uint64_t>(held.runs_refused_rate_cap));
      counters.set_runs_measured_nothing(counters.runs_measured_nothing() + c[kRunMeasuredNone] +
                                         static_cast<uint64_t>(held.runs_measured_nothing));
      first = false;
    }
    pending.push_back({"spool", builder.Seal("", 0, counters), runs});
    runs = 0;
    counters.Clear();
  };
  for (const SpoolEntry& e : *files) {
    StatusOr<wire::RunRecord> run = ReadRunRecord(e.path);
    if (!run.ok()) {
      ++unreadable;  // the agent sets it aside, never sends it
      continue;
    }
    if (!builder.TryAdd(*run)) {
      seal();
      builder.TryAdd(*run);
    }
    ++runs;
    if (run->counters().refused() != 0) {
      counters.set_runs_refused_load_cap(counters.runs_refused_load_cap() + 1);
    } else {
      counters.set_runs_instrumented(counters.runs_instrumented() + 1);
    }
  }
  if (!builder.empty()) seal();

  if (json) {
    std::string out = "{\"batches\":[";
    for (size_t i = 0; i < pending.size(); ++i) {
      std::string b;
      google::protobuf::util::JsonPrintOptions o;
      o.always_print_primitive_fields = true;
      (void)google::protobuf::util::MessageToJsonString(pending[i].batch, &b, o);
      out += (i ? "," : "") + std::string("{\"from\":\"") +
             (pending[i].batch.batch_id().empty() ? "spool" : "outbox") + "\",\"batch\":" + b + "}";
    }
    out += "],\"unreadable_spool_records\":" + std::to_string(unreadable) + "}";
    std::cout << out << "\n";
    return 0;
  }
  std::printf("What would be sent next (nothing is sent by this command):\n");
  if (pending.empty()) std::printf("  nothing: the outbox and the spool are empty\n");
  for (const Pending& p : pending) PrintBatch(p);
  if (unreadable > 0) {
    std::printf("  %zu spool records are not valid: the agent sets them aside, unsent\n",
                unreadable);
  }
  std::printf(
      "Nothing else leaves this machine: no paths, arguments, file contents, user or "
      "host names, addresses.\n");
  return 0;
}

}  // namespace fieldprof::tools
