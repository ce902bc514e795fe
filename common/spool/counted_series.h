// The series this machine has already been counted in (docs/privacy.md,
// "k means k machines"): the agent marks a record first_from_machine only
// the first time it ever seals a record of that series, so the aggregator
// counts the machine once in the series however many days it sends it, and
// a series one machine sends for a month is still one machine's.
//
// Kept in <state_dir>/counted: a header, then the sorted 64-bit hashes of
// the series (SeriesHash), written whole and durably before the batch that
// first carries a series is sealed. A crash between the two leaves a
// series counted here and never sent as first: the machine is then never
// counted in it (a count can only come out too low). A file that does not
// read is started afresh, with the same consequence the other way round:
// this machine may be counted again in series it sent before (said in the
// agent's state, so `fieldprof status` shows it).
//
//   CountedSeries counted(state_dir + "/counted");
//   FP_RETURN_IF_ERROR(counted.Load());
//   std::vector<uint64_t> fresh;
//   for (wire::Record& r : *batch.mutable_records())
//     if (counted.MarkFirst(SeriesHash(r.key(), platform), &fresh))
//       r.set_first_from_machine(true);
//   FP_RETURN_IF_ERROR(counted.Commit(fresh));
//
// Not thread-safe: the agent's pass owns it.
#ifndef FIELDPROF_COMMON_SPOOL_COUNTED_SERIES_H_
#define FIELDPROF_COMMON_SPOOL_COUNTED_SERIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "common/wire/api_key.h"

namespace fieldprof {

// A series as the aggregator keys it (module, version, symbol, metric,
// platform; the batch's platform where the record has none), hashed:
// FNV-1a over the fields with separators, stable across agent versions.
uint64_t SeriesHash(const wire::ApiKey& key, const Platform& batch_platform);

class CountedSeries {
 public:
  explicit CountedSeries(std::string path) : path_(std::move(path)) {}

  // Reads the file. A missing one is an empty set; one that does not read
  // is an empty set too, and `reset()` says why.
  [[nodiscard]] Status Load();
  // Whether `hash` is new: not counted, nor in `fresh` (the batch's so
  // far), to which it is then added.
  bool MarkFirst(uint64_t hash, std::vector<uint64_t>* fresh) const;
  // Adds `fresh` and writes the file durably (nothing when it is empty).
  [[nodiscard]] Status Commit(const std::vector<uint64_t>& fresh);

  size_t size() const { return hashes_.size(); }
  // Why the file was started afresh at Load ("" when it read).
  const std::string& reset() const { return reset_; }

 private:
  std::string path_;
  std::vector<uint64_t> hashes_;  // sorted, unique
  std::string reset_;
};

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SPOOL_COUNTED_SERIES_H_
