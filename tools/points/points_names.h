// Names for the stacks of points files, written into the files themselves
// ('N', common/points/points_format.h) by the command once a run has ended: its
// modules are then the ones it ran with. A file so named reads the same
// wherever it goes, where those modules are not (a developer's aggregator,
// another machine) or have been rebuilt since.
#ifndef FIELDPROF_TOOLS_POINTS_POINTS_NAMES_H_
#define FIELDPROF_TOOLS_POINTS_POINTS_NAMES_H_

#include <cstdint>
#include <set>
#include <string>

#include "common/base/status.h"

namespace fieldprof::tools {

// Appends the names of every return address in the stacks of the points
// file at `path`, if it has stacks, has ended (its end mark: a process
// still running, or one that exec'd, is left alone) and has no names yet.
// `*names`: how many were written (0: nothing to name).
[[nodiscard]] Status NameStacksOfFile(const std::string& path, size_t* names);

// The points files in `dir`, by name.
std::set<std::string> PointsFilesIn(const std::string& dir);

// NameStacksOfFile for every points file in `dir` but those `before` had
// (each process of a run writes a file of its own); returns how many
// files were named.
size_t NameNewStacksIn(const std::string& dir, const std::set<std::string>& before);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_POINTS_POINTS_NAMES_H_
