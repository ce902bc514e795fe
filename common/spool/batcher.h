// Sums the runtime's run records into upload batches. Records with the same
// key (module, version, symbol, metric, platform) are additive, so a batch
// holds one record per key however many runs contributed.
//
//   BatchBuilder b(128 * 1024, DetectPlatform());
//   for (const wire::RunRecord& run : runs) {
//     if (!b.TryAdd(run)) { Upload(b.Seal(id, now_ms, counters)); b.TryAdd(run); }
//   }
//
// Size rule: a batch never encodes to more than `max_bytes`, unless a single
// run's records alone are larger (that run then gets a batch of its own).
#ifndef FIELDPROF_COMMON_SPOOL_BATCHER_H_
#define FIELDPROF_COMMON_SPOOL_BATCHER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/proto/fieldprof.pb.h"
#include "common/settings/agent_state.h"
#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"

namespace fieldprof {

inline constexpr size_t kDefaultBatchBytes = 128 * 1024;

// What one run from the spool adds to its batch's counters.
void CountRunInBatch(const wire::RunRecord& run, wire::AgentCounters* runs);
// A sealed batch's counters: its runs' (CountRunInBatch), plus what the
// agent holds for its next batch (`held`: records dropped or quarantined,
// runs counted without a record).
wire::AgentCounters BatchCounters(const wire::AgentCounters& runs, const AgentState& held);

class BatchBuilder {
 public:
  // `platform`: the batch's client platform; records of runs on the same
  // platform carry none of their own.
  BatchBuilder(size_t max_bytes, const Platform& platform);

  // Adds every record of `run` if the batch stays within max_bytes (an empty
  // builder takes any run). Returns false, changing nothing, otherwise.
  bool TryAdd(const wire::RunRecord& run);
  // Whether TryAdd(run) would take it (nothing changes).
  bool Fits(const wire::RunRecord& run) const;
  // Adds the records of a batch held back (`held`, as Held() made it: its
  // records, the oldest run's end as created_unix_ms, its window start)
  // if the batch stays within max_bytes; no run is counted.
  bool TryAddHeld(const wire::Batch& held);

  // The records so far as a held batch (no id, counters or key; the oldest
  // run's end as created_unix_ms); the builder keeps them.
  wire::Batch Held() const;

  // Nothing added (no run, no held batch).
  bool empty() const { return adds_ == 0; }
  size_t runs() const { return runs_; }
  size_t records() const { return series_.size(); }
  // Exact encoded size of the batch Seal would return now.
  size_t encoded_bytes() const;
  // The oldest run's end time (ms since the epoch); 0 when empty.
  int64_t oldest_unix_ms() const { return oldest_ms_; }
  // When the earliest run started (its end less its run time); 0 when no
  // run said when it ended.
  int64_t window_start_unix_ms() const { return window_start_ms_; }

  // The batch, records ordered by key, with `machine_key` (today's,
  // wire::Batch; empty: none); empties the builder.
  wire::Batch Seal(const std::string& batch_id, int64_t created_unix_ms,
                   const wire::AgentCounters& counters, std::string_view machine_key = {});

 private:
  struct Series {
    ApiKey key;
    Histogram histogram;
    uint64_t runs = 0;
    bool truncated = false;
    size_t encoded = 0;          // bytes of this record inside the batch, tag included
    uint64_t resolution_ns = 0;  // the largest of the runs' (wire::Record)
  };
  void Encode(const Series& s, wire::Record* out) const;
  size_t EncodedSize(const Series& s) const;
  // The series `records` (of `platform`) touch, merged into copies, and
  // the batch's size change; nothing changes.
  std::map<std::string, Series> Merged(
      const google::protobuf::RepeatedPtrField<wire::Record>& records,
      const wire::Platform& platform, int64_t* delta) const;
  bool Takes(int64_t delta) const;
  void Commit(std::map<std::string, Series> touched, int64_t delta, int64_t ended_ms,
              int64_t started_ms);
  void Fill(wire::Batch* b) const;

  size_t max_bytes_;
  Platform platform_;
  std::map<std::string, Series> series_;  // by EncodeApiKey
  size_t records_bytes_ = 0;
  size_t runs_ = 0;
  size_t adds_ = 0;  // runs and held batches
  int64_t oldest_ms_ = 0;
  int64_t window_start_ms_ = 0;
};

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SPOOL_BATCHER_H_
