// What one machine can have measured in a batch's window: the plausibility
// rules the aggregator applies after validation (common/wire/validate.h), so
// that a well-formed batch still cannot claim more runs, calls or time than
// a machine produces. Each refusal names its rule, like validation's:
//
//   window_order         the window starts after the batch was sealed
//   runs_per_window      a record's runs exceed window x runs_per_minute
//   calls_per_window     a record's calls exceed window x cpus / kMinCallNs
//                        (every measured call runs its probe on some CPU)
//   duration_per_window  a time record's longest call is longer than the
//                        window, or its calls add up to more than every
//                        thread a machine can hold running the whole window
//
// The window is created_unix_ms - window_start_unix_ms (wire::Batch), at
// least one second; batches without a start count as one minute. For the
// rates it is capped at max_window_ms: runs older than that count as if
// they fit in it, so an old claimed start buys no extra weight. The bounds
// are physical, not typical: they stop a forged batch from weighing as
// much as a fleet, not a machine that is busier than most.
#ifndef FIELDPROF_COMMON_WIRE_PLAUSIBLE_H_
#define FIELDPROF_COMMON_WIRE_PLAUSIBLE_H_

#include <cstdint>

#include "common/base/status.h"
#include "common/wire/batch_view.h"

namespace fieldprof {

struct PlausibleLimits {
  // Measured runs a minute one machine can make; the runtime's own cap
  // (max_runs_per_minute) goes up to 1,000,000. 0: no plausibility rules.
  double runs_per_minute = 1e6;
  // CPUs of the largest machine that takes part.
  int64_t cpus = 1024;
  // The longest window the rates are granted.
  int64_t max_window_ms = int64_t{7} * 86400 * 1000;
};

// A measured call costs at least two clock reads on its CPU.
inline constexpr uint64_t kMinCallNs = 5;
// Threads one Linux machine can hold at once (pid_max's ceiling, 2^22).
inline constexpr uint64_t kMaxThreads = uint64_t{1} << 22;
// The window of a batch that does not say when its runs started.
inline constexpr int64_t kAssumedWindowMs = 60000;

// OK, or InvalidArgument whose message starts with the rule's name.
[[nodiscard]] Status CheckPlausible(const BatchView& batch, const PlausibleLimits& limits);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_WIRE_PLAUSIBLE_H_
