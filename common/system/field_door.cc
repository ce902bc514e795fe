#include "common/system/field_door.h"

#include <unordered_map>
#include <vector>

#include "common/stacks/field_stacks.h"
#include "common/wire/key_rules.h"

namespace fieldprof {

namespace {

// The marks that name no module.
bool FixedMark(std::string_view frame) {
  for (std::string_view m : {"[program]", "[unpackaged]", "[deeper]", "[other]", "[vdso]"}) {
    if (frame == m) return true;
  }
  return false;
}

}  // namespace

FieldDoor::FieldDoor(const SystemCode* code, std::string_view share_modules)
    : code_(code), share_("," + std::string(share_modules) + ",") {}

bool FieldDoor::Shared(std::string_view module) const {
  return !module.empty() && share_.size() > 2 &&
         share_.find("," + std::string(module) + ",") != std::string::npos;
}

SystemCode::Judgement FieldDoor::Judge(std::string_view module,
                                       std::string_view module_version) const {
  if (Shared(module)) return {SystemCode::kShared, "", ""};
  return code_->Judge(module, module_version);
}

bool FieldDoor::Pass(wire::ApiKey* key) {
  const std::string& module = key->module();
  if (Shared(module)) {
    kept_.emplace(module, "shared by you (share_modules)");
  } else {
    const SystemCode::Judgement j = code_->Judge(module, key->module_version());
    if (j.verdict != SystemCode::kShared) {
      Dropped& d = dropped_[module];
      if (d.records == 0) d.why = j.Why();
      ++d.records;
      return false;
    }
    kept_.emplace(module, "package " + j.package + " " + j.version + " from a known archive");
    const std::string version = code_->KeyVersion(module, key->module_version());
    if (version != key->module_version()) key->set_module_version(version);
  }
  if (key->metric() != wire::METRIC_STACK_CPU_NS) return true;
  // A stack's frames are the module's own (its exports, or offsets in
  // it); its marks may name another module, which must be the system's too.
  const std::vector<std::string> frames = SplitStack(key->symbol());
  std::string symbol;
  bool changed = false;
  for (const std::string& f : frames) {
    std::string_view frame = f;
    if (IsStackMark(frame) && !FixedMark(frame)) {
      const std::string_view named = frame.substr(1, frame.size() - 2);
      if (!code_->SharedModuleName(named) && !Shared(named)) {
        frame = "[unpackaged]";
        changed = true;
        ++marks_rewritten_;
      }
    }
    if (!symbol.empty()) symbol += key_rules::kStackSeparator;
    symbol += frame;
  }
  if (changed) key->set_symbol(symbol);
  return true;
}

size_t FieldDoor::Pass(google::protobuf::RepeatedPtrField<wire::Record>* records) {
  size_t removed = 0;
  for (int i = 0; i < records->size();) {
    if (Pass(records->Mutable(i)->mutable_key())) {
      ++i;
    } else {
      records->DeleteSubrange(i, 1);
      ++removed;
    }
  }
  return removed;
}

size_t FieldDoor::Apply(wire::RunRecord* run) { return Pass(run->mutable_records()); }

size_t FieldDoor::Apply(wire::Batch* held) { return Pass(held->mutable_records()); }

size_t FieldDoor::Apply(wire::LabProfile* profile, bool keep_scenario_names) {
  const size_t removed = Pass(profile->mutable_records());
  // The call graph: its APIs, renumbered, and the edges between kept ones.
  std::vector<int> renumber(static_cast<size_t>(profile->apis_size()), -1);
  google::protobuf::RepeatedPtrField<wire::ApiKey> apis;
  for (int i = 0; i < profile->apis_size(); ++i) {
    wire::ApiKey k = profile->apis(i);
    if (!Pass(&k)) continue;
    renumber[static_cast<size_t>(i)] = apis.size();
    *apis.Add() = std::move(k);
  }
  profile->mutable_apis()->Swap(&apis);
  google::protobuf::RepeatedPtrField<wire::LabEdge> edges;
  for (const wire::LabEdge& e : profile->edges()) {
    if (e.outer() >= renumber.size() || e.inner() >= renumber.size() || renumber[e.outer()] < 0 ||
        renumber[e.inner()] < 0) {
      continue;
    }
    wire::LabEdge* kept = edges.Add();
    *kept = e;
    kept->set_outer(static_cast<uint32_t>(renumber[e.outer()]));
    kept->set_inner(static_cast<uint32_t>(renumber[e.inner()]));
  }
  profile->mutable_edges()->Swap(&edges);
  if (!keep_scenario_names) {
    std::unordered_map<std::string, std::string> renamed;
    auto rename = [&](std::string* s) {
      auto [it, fresh] = renamed.emplace(*s, "");
      if (fresh) it->second = "scenario-" + std::to_string(renamed.size());
      *s = it->second;
    };
    for (std::string& s : *profile->mutable_scenarios()) rename(&s);
    for (wire::LabPass& p : *profile->mutable_passes()) rename(p.mutable_scenario());
  }
  return removed;
}

}  // namespace fieldprof
