// The runtime's record of one run, encoded as a wire.RunRecord protobuf
// (common/proto/fieldprof.proto) by hand, so the runtime does not load
// libprotobuf into every program; written atomically into the spool.
#ifndef FIELDPROF_AGENT_RUNTIME_SPOOL_ENCODE_H_
#define FIELDPROF_AGENT_RUNTIME_SPOOL_ENCODE_H_

#include <cstddef>
#include <cstdint>

#include "agent/runtime/runtime.h"
#include "common/histogram.h"

namespace fieldprof::rt {

struct SpoolApi {
  const char* module;
  const char* build_id;
  const char* symbol;
  const Histogram* metrics;  // FP_NUM_METRICS, index = wire::Metric - 1
  bool truncated;
};

struct SpoolRun {
  SpoolApi apis[FP_MAX_APIS];
  int napis = 0;
  uint64_t calls_measured = 0, abandoned = 0, dropped = 0, probe_ns = 0, run_ns = 0;
  uint64_t resolution_ns = 0;  // on each wall-time record (clock.h)
  uint32_t apis_chosen = 0, apis_truncated = 0, refused = 0;
};

// Working memory of the encoder: mapped with the rest of a measured run's
// state, so a run that is not measured carries none of it.
struct SpoolScratch {
  static constexpr size_t kNested = 16 * 1024;
  char plat[64], key[2048], hist[kNested], rec[kNested + 2048 + 64], ctr[128];
  char file[512 * 1024];  // the whole record
};

// Encodes `run` into out[0..cap); returns the size, or 0 if it does not fit.
size_t EncodeRunRecord(const SpoolRun& run, int64_t ended_unix_ms, SpoolScratch& scratch, char* out,
                       size_t cap);

// Writes the record as DIR/run-<ms>-<pid>-<rand>.fpr (mode 0600, temp file +
// rename), creating DIR if needed, unless the spool already holds `cap_bytes`.
// Returns nullptr or what went wrong.
const char* WriteSpoolRecord(const char* dir, uint64_t cap_bytes, const SpoolRun& run,
                             SpoolScratch& scratch);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_RUNTIME_SPOOL_ENCODE_H_
