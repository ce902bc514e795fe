// The APIs seen most recently, for the dashboard's "seen lately" list: the
// ingest handler adds a few keys of every batch it applies, /v1/recent
// reads them. A ring of the last kCapacity keys, so the ingest path pays
// O(1) per key. Thread-safe.
#ifndef FIELDPROF_AGGREGATOR_READS_RECENT_APIS_H_
#define FIELDPROF_AGGREGATOR_READS_RECENT_APIS_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/wire/batch_view.h"

namespace fieldprof::aggregator {

class RecentApis {
 public:
  static constexpr size_t kCapacity = 512;
  // Keys taken from each batch.
  static constexpr size_t kPerBatch = 8;

  struct Seen {
    std::string module, symbol;
    int64_t unix_ms = 0;  // when its batch was applied
  };

  // The first kPerBatch keys of `batch`, applied at `unix_ms`.
  void Add(const BatchView& batch, int64_t unix_ms);
  // Up to `limit` APIs, newest first, each (module, symbol) once: its
  // latest sighting.
  std::vector<Seen> Latest(size_t limit) const;

 private:
  mutable std::mutex mu_;
  std::vector<Seen> ring_;  // GUARDED_BY(mu_); kCapacity entries once full
  size_t next_ = 0;         // GUARDED_BY(mu_); where the next key goes
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_READS_RECENT_APIS_H_
