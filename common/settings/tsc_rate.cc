#include "common/settings/tsc_rate.h"

#include <cpuid.h>
#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace fieldprof {
namespace {

struct Reading {
  uint64_t before = 0, after = ~uint64_t{0};
  int64_t mono_ns = 0;
  uint64_t width() const { return after - before; }
};

int64_t MonoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// The narrowest of 16 bracketed readings.
Reading Narrowest() {
  Reading best;
  for (int i = 0; i < 16; ++i) {
    Reading r;
    r.before = __rdtsc();
    r.mono_ns = MonoNs();
    r.after = __rdtsc();
    if (r.width() < best.width()) best = r;
  }
  return best;
}

}  // namespace

bool HasInvariantTsc() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000007, &a, &b, &c, &d)) return false;
  return (d & (1u << 8)) != 0;
}

std::optional<int64_t> MeasureTscHz(std::chrono::milliseconds span) {
  if (!HasInvariantTsc()) return std::nullopt;
  const Reading start = Narrowest();
  std::this_thread::sleep_for(span);
  const Reading end = Narrowest();
  const int64_t dns = end.mono_ns - start.mono_ns;
  if (dns <= 0 || end.before <= start.after) return std::nullopt;
  const uint64_t lo = end.before - start.after, hi = end.after - start.before;
  // Each bracket within 1e-5 of the span, or the reading was disturbed.
  if ((hi - lo) * 100000 > lo) return std::nullopt;
  const double hz = static_cast<double>(lo + (hi - lo) / 2) * 1e9 / static_cast<double>(dns);
  if (hz < FP_MIN_TSC_HZ || hz > FP_MAX_TSC_HZ) return std::nullopt;
  return static_cast<int64_t>(hz + 0.5);
}

bool SameTscRate(int64_t a, int64_t b) { return std::llabs(a - b) * 10000 <= std::max(a, b); }

}  // namespace fieldprof
