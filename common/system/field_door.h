// The door every record passes on its way off the machine: the agent as
// it seals a batch, `fieldprof status --pending` showing what it would
// seal, `fieldprof lab upload`. It keeps a module's records only when the
// module is the system's code (common/system/system_code.h) or the volunteer
// shares it by name (the local `share_modules` setting), names kept
// modules by their package's version, and turns a mark in a stack that
// names any other module into "[unpackaged]". The runtime applies the
// same test when it chooses; this is the second line, for a runtime that
// did not (an older one, a forced API, a killed run folded by the agent).
//
//   SystemCode code;
//   FP_RETURN_IF_ERROR(code.Refresh());
//   FieldDoor door(&code, settings.share_modules);
//   door.Apply(&run);   // what remains may leave
//   for (const auto& [module, why] : door.dropped()) ...
#ifndef FIELDPROF_COMMON_SYSTEM_FIELD_DOOR_H_
#define FIELDPROF_COMMON_SYSTEM_FIELD_DOOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/proto/fieldprof.pb.h"
#include "common/system/system_code.h"

namespace fieldprof {

class FieldDoor {
 public:
  // `code` (refreshed) must outlive this; `share_modules`: the volunteer's
  // own comma-separated module names, whose records leave as they are.
  FieldDoor(const SystemCode* code, std::string_view share_modules);

  // Removes from `run` every record whose module may not leave, names the
  // rest's package versions, rewrites marks. Returns the records removed.
  size_t Apply(wire::RunRecord* run);
  // The same for a batch of stack records the agent held for the day.
  size_t Apply(wire::Batch* held);
  // The same for a lab profile: its records, and the APIs and edges of
  // its call graph. Scenario names (by default the command's name, which
  // may be the user's own program) become "scenario-1", ... unless
  // `keep_scenario_names`.
  size_t Apply(wire::LabProfile* profile, bool keep_scenario_names = false);

  // Whether a record of `module` built as `module_version` may leave, and
  // the verdict (the volunteer's share counts as kShared).
  SystemCode::Judgement Judge(std::string_view module, std::string_view module_version) const;

  // Per module removed: why, and how many records.
  struct Dropped {
    std::string why;
    uint64_t records = 0;
  };
  const std::map<std::string, Dropped>& dropped() const { return dropped_; }
  // Per module kept: why it may leave ("package zlib1g 1:1.2.13.dfsg-1",
  // "shared by you").
  const std::map<std::string, std::string>& kept() const { return kept_; }
  // Marks rewritten to "[unpackaged]".
  uint64_t marks_rewritten() const { return marks_rewritten_; }

 private:
  // Whether the key may leave; renames its version, rewrites its marks.
  bool Pass(wire::ApiKey* key);
  // The records whose keys may leave; the rest removed (how many returned).
  size_t Pass(google::protobuf::RepeatedPtrField<wire::Record>* records);
  bool Shared(std::string_view module) const;

  const SystemCode* code_;
  std::string share_;  // ",a,b," for lookups
  std::map<std::string, Dropped> dropped_;
  std::map<std::string, std::string> kept_;
  uint64_t marks_rewritten_ = 0;
};

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SYSTEM_FIELD_DOOR_H_
