// Files that must survive a crash whole or not at all: write to a
// temporary name in the same directory, fsync, rename, fsync the directory.
// Used by the agent's outbox and state, and the aggregator's published
// snapshot.
#ifndef FIELDPROF_COMMON_DURABLE_FILE_H_
#define FIELDPROF_COMMON_DURABLE_FILE_H_

#include <string>

#include "common/status.h"

namespace fieldprof {

// Writes `data` to `path` atomically and durably. Mode 0600.
[[nodiscard]] Status WriteFileDurably(const std::string& path, const std::string& data);
// Creates `dir` and its parents (mode 0700 for the ones it creates).
[[nodiscard]] Status MakeDirs(const std::string& dir);
[[nodiscard]] Status SyncDir(const std::string& dir);
// The whole of a file. NotFound when it cannot be opened.
[[nodiscard]] StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_DURABLE_FILE_H_
