// Routes the spool's runs into upload batches, holding stack records back
// so that a day's stacks are summed into as few batches as they fill.
//
// A run's API records go into the batch being built, as they always did.
// Its stack records (metric stack_cpu_ns) go into the held records instead:
// stacks repeat from run to run far more than they differ, so summed over a
// day they take a fraction of what they take summed batch by batch. When a
// batch is sealed, the held records so far (the runs of that batch's and
// of earlier ones') are written as one held file in the same step
// (Outbox::Seal's HeldChange), replacing the previous held file, so every
// run's stacks are in exactly one place through any crash. The held
// records are sealed into a batch of their own (or the last batch, when
// they fit) when their oldest run is max_age old, when they fill a batch,
// or when flushing.
//
//   SpoolSealer s(batch_bytes, platform, [&](SealStep& step) { ... });
//   for (each held file) s.AddHeld(name, batch);   // first
//   for (each spool run) s.Add(name, run);
//   s.Finish(flush, now_ms, max_age_ms);
//
// The agent seals through it (agent/daemon/agent.cc), and `fieldprof status
// --pending` shows what it would seal (tools/volunteer/pending.cc).
#ifndef FIELDPROF_COMMON_SPOOL_SPOOL_SEALER_H_
#define FIELDPROF_COMMON_SPOOL_SPOOL_SEALER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "common/spool/batcher.h"
#include "common/spool/outbox.h"

namespace fieldprof {

// One batch to seal: `batch` (BatchBuilder::Seal empties it), the counters
// of its runs, the spool files whose records it holds, and what it does to
// the held files. A step is all or nothing (Outbox::Seal).
struct SealStep {
  BatchBuilder* batch = nullptr;
  const wire::AgentCounters* runs = nullptr;
  const std::vector<std::string>* consumed = nullptr;
  HeldChange held;
};

// The held files in `dir` (names "stacks-<oldest ms>-<hex>.held"), oldest
// first; a missing directory has none.
[[nodiscard]] StatusOr<std::vector<std::string>> ListHeld(const std::string& dir);
// `run` with only its stack records (`stacks`), or only the others: the
// two parts the sealer routes apart.
wire::RunRecord SplitRun(const wire::RunRecord& run, bool stacks);

// Reads and validates a held file: a batch of stack records, as
// BatchBuilder::Held() makes it. Errors name the file.
[[nodiscard]] StatusOr<wire::Batch> ReadHeld(const std::string& path);

class SpoolSealer {
 public:
  // Seals one step durably, or fails changing nothing; a failure stops the
  // sealer (the caller drops it).
  using SealFn = std::function<Status(SealStep&)>;

  SpoolSealer(size_t max_bytes, const Platform& platform, SealFn seal);

  // A held file found at the start of the pass (before any Add).
  [[nodiscard]] Status AddHeld(const std::string& name, const wire::Batch& held);
  // A spool run, its file `name`; seals every batch it fills.
  [[nodiscard]] Status Add(const std::string& name, const wire::RunRecord& run);
  // The end of the spool: seals what is due (everything when `flush`).
  [[nodiscard]] Status Finish(bool flush, int64_t now_ms, int64_t max_age_ms);

  // After Finish: when what waits is due (ms since the epoch; 0: nothing waits).
  int64_t deadline_unix_ms() const { return deadline_ms_; }
  // Stack records held now (after Finish: what the held file keeps).
  size_t held_records() const { return held_.records(); }

 private:
  // Seals the batch being built (when it has runs or records), writing the
  // held records as the new held file.
  Status SealBatch();
  // Seals the held records as a batch of their own (after SealBatch).
  Status SealHeld();

  size_t max_bytes_;
  Platform platform_;
  SealFn seal_;
  BatchBuilder batch_;
  wire::AgentCounters runs_;
  std::vector<std::string> consumed_;
  bool has_records_ = false;
  BatchBuilder held_;
  std::vector<std::string> held_files_;  // the held files held_ includes
  int64_t deadline_ms_ = 0;
};

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SPOOL_SPOOL_SEALER_H_
