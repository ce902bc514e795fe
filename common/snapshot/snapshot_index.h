// Where each symbol's and each module's records are in the snapshot cache,
// so a reader fetches an API's few records, or one
// module's, instead of parsing every fragment: `fieldprof cost` on a
// 1M-series cache reads a few KiB, not 174 MiB.
//
// On disk: <cache>/symbols.idx, derived from the cache and rebuilt when the
// cache's files change (a new manifest or fragment: CacheSignature), by
// fieldprof pull or else the first reader. Not by the agent: building holds
// ~90 B per series (~90 MiB at 1M series), over its unit's 64 MiB cap.
// Written atomically; a cache directory that cannot be written keeps the
// index in memory for the one reader.
//
//   StatusOr<SnapshotIndex> ix = SnapshotIndex::Open(cache);
//   ix->ForEachRecordOf("deflate", [](const wire::Record& r) { ...; return true; });
//
// Layout (little-endian):
//   "FPSIDX02", u32 n + signature, u32 files, {u16 n + fragment file name},
//   u64 entries, u64 module entries, u64 offset of the sample table,
//   entries sorted by key: {u16 n + key, u32 refs, {u32 file, u64 offset,
//   u32 length} of each record in its fragment file}, where a key is a
//   symbol or "\x01" + a module (those sort first),
//   the sample table: u64 count, u64 offset of every 64th entry.
// An index of an older layout is rebuilt like one of another cache.
#ifndef FIELDPROF_COMMON_SNAPSHOT_SNAPSHOT_INDEX_H_
#define FIELDPROF_COMMON_SNAPSHOT_SNAPSHOT_INDEX_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "common/snapshot/snapshot_cache.h"

namespace fieldprof {

class SnapshotIndex {
 public:
  // The index of the cache as it is now: the file if it matches the cache's
  // files, else built by one pass over the fragments and written.
  // `rebuilt` (optional) says which. NotFound: no snapshot in the cache.
  [[nodiscard]] static StatusOr<SnapshotIndex> Open(const SnapshotCache& cache,
                                                    bool* rebuilt = nullptr);

  // What identifies the cache's content: the manifest's size and time and
  // each fragment file's name (names carry the fragment's version).
  static std::string CacheSignature(const std::string& dir);

  // Every record of `symbol` (any module, version, platform, metric), read
  // from its fragment. `fn` returns false to stop.
  [[nodiscard]] Status ForEachRecordOf(const std::string& symbol,
                                       const std::function<bool(const wire::Record&)>& fn) const;
  // Every record of `module` (any symbol), the same way.
  [[nodiscard]] Status ForEachRecordOfModule(
      const std::string& module, const std::function<bool(const wire::Record&)>& fn) const;
  // Every record of every symbol that starts with `prefix` ("startup$":
  // a point tag's series), in symbol order, the same way.
  [[nodiscard]] Status ForEachRecordWithPrefix(
      const std::string& prefix, const std::function<bool(const wire::Record&)>& fn) const;
  // Every symbol, in order.
  void ForEachSymbol(const std::function<void(std::string_view)>& fn) const;
  uint64_t symbols() const { return symbols_ - modules_; }
  const std::string& signature() const { return signature_; }

 private:
  [[nodiscard]] Status Parse();
  // The records of the entry `key`, or with `prefix` of every entry that
  // starts with it.
  [[nodiscard]] Status ForEachRecordAt(const std::string& key, bool prefix,
                                       const std::function<bool(const wire::Record&)>& fn) const;
  // The entry at `at`: its symbol, and where its refs start.
  std::string_view SymbolAt(size_t at, size_t* refs_at) const;

  std::string dir_;
  std::shared_ptr<const void> hold_;  // the mapping of the file, or the bytes built
  std::string_view data_;             // the index's bytes
  std::string signature_;
  std::vector<std::string> files_;  // fragment file paths
  uint64_t symbols_ = 0;            // entries: the modules' first, then the symbols'
  uint64_t modules_ = 0;
  size_t entries_at_ = 0;
  size_t table_at_ = 0;            // the sample table, just past the entries
  std::vector<uint64_t> samples_;  // offsets of every 64th entry
};

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SNAPSHOT_SNAPSHOT_INDEX_H_
