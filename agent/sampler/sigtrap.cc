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
// program never sees ours and we never take its: the handler installed
// here samples only traps with si_code TRAP_PERF and our event's sig_data,
// and hands every other one to the disposition the program asked for,
// which sigaction() and signal() record here instead of installing. The
// default disposition is honoured by restoring it and raising again (the
// process dies by SIGTRAP, as it would have). Before an exec the program's
// disposition is put back, so that the new image inherits what it would
// have inherited.
#include <signal.h>
#include <string.h>

#include <atomic>

#include "agent/sampler/sampler.h"

namespace fieldprof::local::sampler {
namespace {

constexpr int kTrapPerf = 6;  // TRAP_PERF, <asm-generic/siginfo.h>; glibc 2.36 lacks the name

using Sigaction = int (*)(int, const struct sigaction*, struct sigaction*);
Sigaction g_real_sigaction = nullptr;
FP_NEXT_SLOT(g_real_sigaction, "sigaction");

void (*g_on_sample)(int, siginfo_t*, void*) = nullptr;
std::atomic<bool> g_owned{false};  // our handler is SIGTRAP's
struct sigaction g_program {};     // what the program asked for (SIG_DFL at first)

Sigaction RealSigaction() { return Next(&g_real_sigaction, "sigaction"); }

// The kernel's siginfo for TRAP_PERF: si_addr, then {si_perf_data,
// si_perf_type, si_perf_flags}. glibc's siginfo_t does not name them.
uint64_t PerfData(const siginfo_t* si) {
  uint64_t data = 0;
  memcpy(&data, reinterpret_cast<const char*>(si) + 24, sizeof data);
  return data;
}

void OnTrap(int sig, siginfo_t* si, void* uc) {
  if (IsSampleTrap(si)) {
    if (g_on_sample != nullptr) g_on_sample(sig, si, uc);
    return;
  }
  const struct sigaction p = g_program;
  if (p.sa_handler == SIG_IGN) return;
  if (p.sa_handler == SIG_DFL) {
    // As without us: the default action, death with a core.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    RealSigaction()(SIGTRAP, &dfl, nullptr);
    sigset_t trap;
    sigemptyset(&trap);
    sigaddset(&trap, SIGTRAP);
    pthread_sigmask(SIG_UNBLOCK, &trap, nullptr);
    raise(SIGTRAP);
    return;
  }
  if ((p.sa_flags & SA_RESETHAND) != 0) {
    g_program = {};
    g_program.sa_handler = SIG_DFL;
  }
  if ((p.sa_flags & SA_SIGINFO) != 0) {
    p.sa_sigaction(sig, si, uc);
  } else {
    p.sa_handler(sig);
  }
}

}  // namespace

bool IsSampleTrap(const siginfo_t* si) {
  return si != nullptr && si->si_signo == SIGTRAP && si->si_code == kTrapPerf &&
         PerfData(si) == kSampleSigData;
}

bool OwnTrapSignal(void (*on_sample)(int, siginfo_t*, void*)) {
  g_on_sample = on_sample;
  if (g_owned.load()) return true;  // a forked child, or a failed exec: ours already
  struct sigaction sa {
  }, old{};
  sa.sa_sigaction = OnTrap;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (RealSigaction()(SIGTRAP, &sa, &old) != 0) return false;
  g_program = old;
  g_owned.store(true);
  return true;
}

void ReturnTrapSignal() {
  if (!g_owned.load()) return;
  g_owned.store(false);
  RealSigaction()(SIGTRAP, &g_program, nullptr);
}

}  // namespace fieldprof::local::sampler

using fieldprof::local::sampler::g_owned;
using fieldprof::local::sampler::g_program;
using fieldprof::local::sampler::RealSigaction;

extern "C" {

// SIGTRAP's disposition, while ours, is kept for the program; any other
// signal's goes through.
__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction* act,
                                                     struct sigaction* old) {
  if (sig != SIGTRAP || !g_owned.load()) return RealSigaction()(sig, act, old);
  if (old != nullptr) *old = g_program;
  if (act != nullptr) g_program = *act;
  return 0;
}

__attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;  // glibc's signal() has BSD semantics
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, sig);
  if (sigaction(sig, &sa, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

}  // extern "C"
