// Samples by synchronous SIGTRAP (perf_event_attr.sigtrap, Linux 5.13+).
//
// A task-clock event with O_ASYNC and F_SETSIG signals its thread through
// the kernel's irq_work: a self-interrupt on every sample, which on this VM
// is a trap to the hypervisor. An event with sigtrap set queues the signal
// as task work instead, delivered on the way back to user space. On the
// sqlite3 workload at 999 Hz, with a handler that does nothing, the signal
// alone cost 4.8% of the run with F_SETSIG and 3.3% with sigtrap (the
// hrtimer under both, 2.2%); see docs/benchmarks-history.md.
//
// SIGTRAP is the program's too (debug breaks, raise(SIGTRAP)), so the
// program never sees ours and we never take its: the signal is owned
// through the in-process base (agent/preload/base/owned_signals.h), which
// keeps the program's disposition; only traps with si_code TRAP_PERF and
// our event's sig_data are samples.
#include <signal.h>
#include <string.h>

#include "agent/preload/base/owned_signals.h"
#include "agent/preload/sampler/sampler.h"

namespace fieldprof::sampler {
namespace {

constexpr int kTrapPerf = 6;  // TRAP_PERF, <asm-generic/siginfo.h>; glibc 2.36 lacks the name

// The kernel's siginfo for TRAP_PERF: si_addr, then {si_perf_data,
// si_perf_type, si_perf_flags}. glibc's siginfo_t does not name them.
uint64_t PerfData(const siginfo_t* si) {
  uint64_t data = 0;
  memcpy(&data, reinterpret_cast<const char*>(si) + 24, sizeof data);
  return data;
}

}  // namespace

bool IsSampleTrap(const siginfo_t* si) {
  return si != nullptr && si->si_signo == SIGTRAP && si->si_code == kTrapPerf &&
         PerfData(si) == kSampleSigData;
}

bool OwnTrapSignal(void (*on_sample)(int, siginfo_t*, void*)) {
  return preload::OwnSignal(SIGTRAP, IsSampleTrap, on_sample);
}

void ReturnTrapSignal() { preload::ReturnSignal(SIGTRAP); }

}  // namespace fieldprof::sampler
