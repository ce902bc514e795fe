// Readable module versions from dpkg's database: which
// installed package holds a file named like the module whose build id is
// the one the runtime saw, and that package's version. The agent rewrites
// the records it uploads with it, and `fieldprof lab` its profiles, so the
// field's keys read "3.40.1-2_5221b80bd99650e3" (common/module_version.h)
// where a build id alone was. Nothing about the path leaves the machine:
// the module's name was already in the key, and the version is the
// package's.
//
// Reads <dpkg>/info/*.list (which package installed which file) and
// <dpkg>/status (each installed package's version) when first asked, and
// again when a new module is asked for after dpkg changed its status file
// (the agent runs for weeks across upgrades); then the build id of each
// candidate file (elfutils' libdwelf). A module
// no package holds, or whose file was rebuilt or replaced since, keeps its
// build id.
#ifndef FIELDPROF_COMMON_PACKAGE_VERSIONS_H_
#define FIELDPROF_COMMON_PACKAGE_VERSIONS_H_

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/wire.h"

namespace fieldprof {

class PackageVersions {
 public:
  explicit PackageVersions(std::string dpkg_dir = "/var/lib/dpkg");

  // The key version for `module` built as `build_id` (hex): package
  // version and build id joined when an installed package holds a file of
  // that name with that build id; else `build_id` as it is.
  std::string KeyVersion(const std::string& module, const std::string& build_id);

  // Rewrites the module_version of every key in `run` / `profile` so. A
  // run's stack series (metric stack_cpu_ns) of a module no package holds
  // are removed: stacks leave only with a packaged module's frames.
  void Apply(wire::RunRecord* run);
  void Apply(wire::LabProfile* profile);

  // Lookups answered by a package, and those that found none.
  uint64_t found() const { return found_; }
  uint64_t not_found() const { return not_found_; }

 private:
  void Load();
  bool DatabaseChanged();  // the status file's time or size moved since Load
  void ApplyToKey(wire::ApiKey* k);

  std::string dir_;
  bool loaded_ = false;
  int64_t stamp_ = -1;
  // A file's name -> (its path, the package that installed it).
  std::unordered_map<std::string, std::vector<std::pair<std::string, std::string>>> files_;
  std::unordered_map<std::string, std::string> version_of_;  // "name" and "name:arch"
  std::map<std::pair<std::string, std::string>, std::string> memo_;
  uint64_t found_ = 0, not_found_ = 0;
};

// The GNU build id of the ELF file at `path`, in hex; empty when it has
// none or cannot be read.
std::string FileBuildId(const std::string& path);

// Removes every stack series from `run`: where no package database is read,
// no module's frames can be known to be a package's.
void DropStackRecords(wire::RunRecord* run);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_PACKAGE_VERSIONS_H_
