// The measured run's clock (part of libfieldprof.so, companion side).
//
// Durations are taken in ticks: the TSC's (one `rdtsc` on each side of a
// call), or, without an invariant TSC, the vDSO's CLOCK_MONOTONIC in ns.
// Ticks become ns with a rate, ns = ticks * g.ns_per_tick_q32 >> 32, from
// one of two sources:
//   - the machine's TSC rate, `tsc_hz` in the settings: the agent (and
//     `fieldprof run`) measure it against CLOCK_MONOTONIC over tens of
//     milliseconds (common/settings/tsc_rate.h), so a run converts right from its
//     first call. The run's own clock checks it (CalibrateNow); a rate the
//     run refutes (a settings file copied from another machine) stops the
//     run's measuring and its record is not written.
//   - otherwise the run's own estimate, over the span since the start and
//     refined each time the span grows fourfold; early conversions carry
//     the early estimate's error (~0.5% on a quiet machine, more when the
//     start is preempted). Each end of the span is a CLOCK_MONOTONIC reading
//     bracketed by two tick readings, so a preempted reading widens the
//     bracket instead of skewing the rate.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_HOTPATH_CLOCK_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_HOTPATH_CLOCK_H_

#include <cstdint>

namespace fieldprof::rt {

// At start, once the measuring state is mapped: picks the clock (the vDSO's
// when there is no invariant TSC, or FIELDPROF_CLOCK=vdso in `envp`), takes
// the rate's first reading, and converts with `tsc_hz` (0: none) from now
// on if the clock is the TSC. False when no clock will do.
bool StartClock(char** envp, uint64_t tsc_hz);

// The probe's own cost (g.probe_ticks, taken off every duration) and what a
// measured call adds in all (g.call_cost_ticks, the overhead budget's unit),
// measured through the very same stub and hot path.
void CalibrateProbe();
// Calls `probe`, a stub whose exit stores the call's raw duration in
// g.calibration_last_ticks, kProbeCalls times; the durations, sorted, in
// `out` (~0 where none was measured). CalibrateProbe's and the lab's
// (lab.h) probes.
inline constexpr int kProbeCalls = 64;
void ProbeDurations(void (*probe)(), uint64_t (&out)[kProbeCalls]);

// Whether this run's clock refuted the machine's rate: nothing it timed may
// be reported.
bool RateRefuted();

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_HOTPATH_CLOCK_H_
