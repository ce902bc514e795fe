// The runtime's record of one run, encoded as a wire.RunRecord protobuf
// (common/proto/fieldprof.proto) by hand, so the runtime does not load
// libprotobuf into every program; written atomically into the spool.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_RECORDS_SPOOL_ENCODE_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_RECORDS_SPOOL_ENCODE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "agent/preload/runtime/runtime.h"
#include "common/statistics/histogram.h"

namespace fieldprof::rt {

// A bounded output buffer; overflow sets `bad`, never writes past the end.
struct ProtoOut {
  char* p;
  size_t n = 0, cap;
  bool bad = false;
  void Byte(uint8_t b) {
    if (n < cap)
      p[n++] = static_cast<char>(b);
    else
      bad = true;
  }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      Byte(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    Byte(static_cast<uint8_t>(v));
  }
  void Tag(int field, int wire_type) { Varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  void U64(int field, uint64_t v) {  // proto3: zero is the default, omitted
    if (v == 0) return;
    Tag(field, 0);
    Varint(v);
  }
  void Bytes(int field, const char* s, size_t len) {
    Tag(field, 2);
    Varint(len);
    for (size_t i = 0; i < len; ++i) Byte(static_cast<uint8_t>(s[i]));
  }
  void Str(int field, const char* s) { Bytes(field, s, strlen(s)); }
};

// The platform message (wire.Platform) of this machine.
void EncodePlatform(ProtoOut& o);
// A wire.Histogram.
void EncodeHistogram(const Histogram& h, ProtoOut& o);

struct SpoolApi {
  const char* module;
  const char* build_id;
  const char* symbol;
  const Histogram* metrics;  // FP_NUM_METRICS, index = wire::Metric - 1
  bool truncated;
};

// One instrumentation point series (points.cc): metric point_ns.
struct SpoolPoint {
  char module[256], build_id[80], symbol[3 * 65];
  const Histogram* h;
};

// One stack series of the run (stack_fold.h): metric stack_cpu_ns.
struct SpoolStack {
  const char* module;
  char build_id[80];
  char symbol[1024 + 1];  // common/wire/key_rules.h kMaxSymbol
  uint64_t ns;
};

// The part number of a record holding only a run's stacks, written when
// the agent reported the run's counts from its live file (live_file.h): a
// later part, so that the run is not counted twice.
inline constexpr uint32_t kStacksOnlyPart = 0x7fffffff;

struct SpoolRun {
  SpoolApi apis[FP_MAX_APIS];
  int napis = 0;
  SpoolPoint points[FP_MAX_POINT_SERIES];
  int npoints = 0;
  uint64_t calls_measured = 0, abandoned = 0, dropped = 0, probe_ns = 0, run_ns = 0;
  uint64_t resolution_ns = 0;  // on each wall-time record (clock.h)
  uint32_t apis_chosen = 0, apis_truncated = 0, refused = 0;
  const SpoolStack* stacks = nullptr;
  int nstacks = 0;
  uint32_t part = 0;  // RunRecord.part: 0, or kStacksOnlyPart
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

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_RECORDS_SPOOL_ENCODE_H_
