// The machine's TSC rate, which the runtime converts its ticks with
// (agent/preload/runtime/hotpath/clock.h): measured here by the agent and by `fieldprof
// run`, and handed over as the settings' tsc_hz.
//
// The rate is taken against CLOCK_MONOTONIC over `span`. Each end is a
// clock reading between two TSC readings (the narrowest of several), so the
// rate is off by at most the two brackets' width over the span: ~1e-5 over
// the default 20 ms on a quiet machine.
#ifndef FIELDPROF_COMMON_SETTINGS_TSC_RATE_H_
#define FIELDPROF_COMMON_SETTINGS_TSC_RATE_H_

// The range of tsc_hz both sides accept: 1 MHz..100 GHz. (The runtime,
// libfieldprof.so, includes only these.)
#define FP_MIN_TSC_HZ 1000000LL
#define FP_MAX_TSC_HZ 100000000000LL

#ifndef FIELDPROF_RUNTIME
#include <chrono>
#include <cstdint>
#include <optional>

namespace fieldprof {

// Whether this CPU's TSC runs at a constant rate in every state (CPUID
// 0x80000007 EDX bit 8). Without one the runtime times with the vDSO
// clock, and needs no rate.
bool HasInvariantTsc();

// The TSC's rate in Hz. nullopt without an invariant TSC, or when no
// reading narrow enough came (a machine too busy to answer in time).
std::optional<int64_t> MeasureTscHz(std::chrono::milliseconds span = std::chrono::milliseconds(20));

// Whether two measured rates are the same rate (within 1e-4).
bool SameTscRate(int64_t a, int64_t b);

}  // namespace fieldprof

#endif  // FIELDPROF_RUNTIME
#endif  // FIELDPROF_COMMON_SETTINGS_TSC_RATE_H_
