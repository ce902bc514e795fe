// Files that must survive a crash whole or not at all: write to a
// temporary name in the same directory, fsync, rename, fsync the directory.
// Used by the agent's outbox and state, the aggregator's published
// snapshot, and every file a command writes where the user said (-o).
// A bare file name ("report.html") is in the current directory.
#ifndef FIELDPROF_COMMON_BASE_DURABLE_FILE_H_
#define FIELDPROF_COMMON_BASE_DURABLE_FILE_H_

#include <cstdint>
#include <string>

#include "common/base/status.h"

namespace fieldprof {

// Who may read what is written.
enum class FileAccess {
  kPrivate,  // 0600 files, 0700 directories: spool, outbox, keys, settings
  kShared,   // 0666/0777 less the umask: reports, doc pages, lab profiles
};

// Writes `data` to `path` atomically and durably.
[[nodiscard]] Status WriteFileDurably(const std::string& path, const std::string& data,
                                      FileAccess access = FileAccess::kPrivate);
// Creates `dir` and its parents (the ones it creates get `access`'s mode).
[[nodiscard]] Status MakeDirs(const std::string& dir, FileAccess access = FileAccess::kPrivate);
// fsync()s a directory; "" is the current one.
[[nodiscard]] Status SyncDir(const std::string& dir);
// The whole of a file. NotFound when it cannot be opened.
[[nodiscard]] StatusOr<std::string> ReadWholeFile(const std::string& path);
// The file from byte `offset` to its end ("" past its end).
[[nodiscard]] StatusOr<std::string> ReadFileFrom(const std::string& path, uint64_t offset);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_BASE_DURABLE_FILE_H_
