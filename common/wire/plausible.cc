#include "common/wire/plausible.h"

#include <algorithm>
#include <string>

#include "common/statistics/histogram.h"
#include "common/wire/wire.h"

namespace fieldprof {
namespace {

Status Fail(std::string_view rule, const std::string& where, const std::string& detail) {
  return InvalidArgument(std::string(rule) + ": " + where + ": " + detail);
}

std::string Where(int i, const RecordView& r) {
  std::string w = "record " + std::to_string(i);
  // Validation has checked the strings: printable, bounded.
  w += " (" + std::string(r.key().module()) + " " + std::string(r.key().symbol()) + ")";
  return w;
}

std::string Seconds(int64_t ms) { return std::to_string(ms / 1000) + " s"; }

bool IsTime(int32_t metric) {
  return metric == wire::METRIC_WALL_TIME_NS || metric == wire::METRIC_POINT_NS ||
         metric == wire::METRIC_STACK_CPU_NS;
}

}  // namespace

Status CheckPlausible(const BatchView& batch, const PlausibleLimits& limits) {
  if (limits.runs_per_minute <= 0) return Status::Ok();
  const int64_t start = batch.window_start_unix_ms();
  const int64_t created = batch.created_unix_ms();
  int64_t window_ms = kAssumedWindowMs;
  if (start != 0) {
    if (start > created) {
      return InvalidArgument("window_order: the window starts at " + std::to_string(start) +
                             " ms, after the batch was sealed at " + std::to_string(created) +
                             " ms");
    }
    window_ms = std::max<int64_t>(created - start, 1000);
  }
  // A call is no longer than its run; a clock step of a second is allowed.
  const uint128 longest_ns = static_cast<uint128>(window_ms + 1000) * 1000000;
  const int64_t rate_ms = std::min(window_ms, limits.max_window_ms);
  const uint128 rate_ns = static_cast<uint128>(rate_ms + 1000) * 1000000;
  const auto max_runs =
      static_cast<uint64_t>(static_cast<double>(rate_ms) * limits.runs_per_minute / 60000.0) + 1;
  const uint128 max_calls = rate_ns * static_cast<uint128>(limits.cpus) / kMinCallNs;
  const uint128 max_time = rate_ns * kMaxThreads;
  for (int i = 0; i < batch.records_size(); ++i) {
    const RecordView& r = batch.records(i);
    if (r.runs() > max_runs) {
      return Fail("runs_per_window", Where(i, r),
                  std::to_string(r.runs()) + " runs in a window of " + Seconds(rate_ms) +
                      "; one machine makes at most " + std::to_string(max_runs));
    }
    const HistogramView& h = r.histogram();
    if (h.count() > max_calls) {
      return Fail("calls_per_window", Where(i, r),
                  std::to_string(h.count()) + " calls in a window of " + Seconds(rate_ms) + "; " +
                      std::to_string(limits.cpus) + " CPUs measure at most " +
                      Uint128ToString(max_calls));
    }
    if (!IsTime(r.key().metric())) continue;
    if (h.max() > longest_ns) {
      return Fail("duration_per_window", Where(i, r),
                  "a call of " + std::to_string(h.max() / 1000000) +
                      " ms is longer than the batch's window of " + Seconds(window_ms));
    }
    if (MakeUint128(h.sum_lo(), h.sum_hi()) > max_time) {
      return Fail("duration_per_window", Where(i, r),
                  "calls add up to " + Uint128ToString(MakeUint128(h.sum_lo(), h.sum_hi())) +
                      " ns, more than every thread of a machine in a window of " +
                      Seconds(rate_ms));
    }
  }
  return Status::Ok();
}

}  // namespace fieldprof
