// The field's view of a recording: each sample's stack folded as the field
// runtime folds a measured run's stacks (common/stacks/stack_folding.h,
// docs/field-stacks.md), so that a local recording and a field profile of
// the same library can be read side by side (`fieldprof tree show|sub
// --field_module libz.so.1 my.fprec`).
//
// As the runtime does: the frames of a system file (common/system/system_path.h:
// what a package can have installed) are kept, under the module's key name
// and build id; when the view is read, only a module that a package holds
// is shown, under the package's version, as the agent keeps stacks. A
// frame is its module's exported symbol that covers it, else "+offset" of
// that build; where the time went from the module's innermost frame is a
// mark ("[libc.so.6]", "[program]", "[unpackaged]"). Local names (debug
// info, the program's own functions) are not used: the view names what
// the field can name, and nothing else.
#ifndef FIELDPROF_TOOLS_RECORD_FIELD_VIEW_H_
#define FIELDPROF_TOOLS_RECORD_FIELD_VIEW_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tools/record/recording.h"
#include "tools/shared/symbolizer.h"

namespace fieldprof::tools {

class FieldFolder {
 public:
  FieldFolder();
  ~FieldFolder();
  FieldFolder(const FieldFolder&) = delete;
  FieldFolder& operator=(const FieldFolder&) = delete;

  struct Module;  // what is known of a module's file (field_view.cc)

  // What the folder knows of each of a process's `modules`, looked up
  // once a file: `info` is extended to match them.
  void Describe(const std::vector<LoadedModule>& modules, std::vector<const Module*>* info);

  // The field stacks of one sample of a process that had `modules` loaded
  // (`info` from Describe): `ips` innermost first, the innermost an
  // interrupted instruction, the rest return addresses. One per module
  // kept.
  static std::vector<FieldStackName> Fold(const std::vector<LoadedModule>& modules,
                                          const std::vector<const Module*>& info,
                                          const std::vector<uint64_t>& ips);

 private:
  const Module& Of(const LoadedModule& m);

  std::map<std::string, std::unique_ptr<Module>> modules_;  // by path
};

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_FIELD_VIEW_H_
