#include "agent/preload/base/owned_signals.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "agent/preload/base/next_slots.h"

namespace fieldprof::preload {
namespace {

using Sigaction = int (*)(int, const struct sigaction*, struct sigaction*);
Sigaction g_real_sigaction = nullptr;
FP_NEXT_SLOT(g_real_sigaction, "sigaction");

Sigaction RealSigaction() { return Next(&g_real_sigaction, "sigaction"); }

struct Owned {
  std::atomic<bool> owned{false};
  bool (*is_ours)(const siginfo_t*) = nullptr;
  SignalHandler on_ours = nullptr;
  struct sigaction program {};  // what the program asked for (SIG_DFL at first)
};
// Zero until a signal is owned: in .lbss, so that a library that links
// this file but owns nothing (a measured run without stack samples) keeps
// its .bss on the page it writes anyway (tests/agent/preload/runtime, RuntimeLayoutTest).
[[gnu::section(".lbss")]] Owned g_owned[NSIG];

bool InRange(int sig) { return sig > 0 && sig < NSIG; }

// The program's disposition of a signal that is not ours, as the kernel
// would have applied it.
void ToProgram(int sig, siginfo_t* si, void* uc) {
  Owned& o = g_owned[sig];
  const struct sigaction p = o.program;
  if (p.sa_handler == SIG_IGN) return;
  if (p.sa_handler == SIG_DFL) {
    // As without us: the default action (for a trap, death with a core).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    RealSigaction()(sig, &dfl, nullptr);
    o.owned.store(false);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    raise(sig);
    return;
  }
  if ((p.sa_flags & SA_RESETHAND) != 0) {
    o.program = {};
    o.program.sa_handler = SIG_DFL;
  }
  if ((p.sa_flags & SA_SIGINFO) != 0) {
    p.sa_sigaction(sig, si, uc);
  } else {
    p.sa_handler(sig);
  }
}

void OnOwned(int sig, siginfo_t* si, void* uc) {
  const Owned& o = g_owned[sig];
  if (o.is_ours != nullptr && o.is_ours(si)) {
    if (o.on_ours != nullptr) o.on_ours(sig, si, uc);
    return;
  }
  ToProgram(sig, si, uc);
}

}  // namespace

bool OwnSignal(int sig, bool (*is_ours)(const siginfo_t*), SignalHandler on_ours) {
  if (!InRange(sig)) return false;
  Owned& o = g_owned[sig];
  o.is_ours = is_ours;
  o.on_ours = on_ours;
  if (o.owned.load()) return true;
  struct sigaction sa {
  }, old{};
  sa.sa_sigaction = OnOwned;
  // Not SA_ONSTACK: a program's alternate stack is sized for its own rare
  // crash handler (Chromium's 16 KiB), and a program may give several
  // threads the same one; a sample every few milliseconds on it, with an
  // unwinder's frames, is not what it was made for.
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (RealSigaction()(sig, &sa, &old) != 0) return false;
  o.program = old;
  o.owned.store(true);
  return true;
}

void ReturnSignal(int sig) {
  if (!InRange(sig) || !g_owned[sig].owned.load()) return;
  g_owned[sig].owned.store(false);
  RealSigaction()(sig, &g_owned[sig].program, nullptr);
}

void ReturnSignalBeforeExec(int sig) {
  if (SignalOwned(sig) && g_owned[sig].program.sa_handler == SIG_IGN) ReturnSignal(sig);
}

bool SignalOwned(int sig) { return InRange(sig) && g_owned[sig].owned.load(); }

bool HandlerStillOurs(int sig) {
  if (!SignalOwned(sig)) return false;
  // The kernel's own answer: a raw rt_sigaction may have replaced ours.
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
  } k{};
  if (syscall(SYS_rt_sigaction, sig, nullptr, &k, 8) != 0) return false;
  return k.handler == reinterpret_cast<void*>(OnOwned);
}

}  // namespace fieldprof::preload

extern "C" {

// An owned signal's disposition is kept for the program; any other
// signal's goes through.
__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction* act,
                                                     struct sigaction* old) {
  using fieldprof::preload::g_owned;
  if (!fieldprof::preload::SignalOwned(sig)) {
    return fieldprof::preload::RealSigaction()(sig, act, old);
  }
  if (old != nullptr) *old = g_owned[sig].program;
  if (act != nullptr) g_owned[sig].program = *act;
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
