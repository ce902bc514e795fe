// Signals a preloaded library takes for itself while the program keeps its
// own disposition of them, written once for every library.
//
// A library that must be signalled (the sampler's synchronous SIGTRAP
// samples) cannot take a signal the program may use too (debug breaks,
// raise(SIGTRAP)): the program must never see ours, and we must never
// take its. OwnSignal installs one handler that passes the library the
// signals `is_ours` claims and hands every other one to the disposition
// the program asked for. sigaction() and signal(), wrapped here, record
// that disposition instead of installing it while the signal is owned.
// The default disposition is honoured by restoring it and raising again
// (the process dies by the signal, as it would have). Before an exec,
// ReturnSignal puts the program's disposition back, so that the new image
// inherits what it would have inherited.
//
// A library that links owned_signals.cc exports sigaction() and signal().
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_OWNED_SIGNALS_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_OWNED_SIGNALS_H_

#include <signal.h>

namespace fieldprof::preload {

using SignalHandler = void (*)(int, siginfo_t*, void*);

// Makes `on_ours` the handler of the `sig` signals `is_ours` claims
// (called in the handler: async-signal-safe), keeping the program's
// disposition for the others. Owned already (a fork child, a failed
// exec): only the handler is updated. False when the handler could not be
// installed. 1 <= sig < NSIG.
bool OwnSignal(int sig, bool (*is_ours)(const siginfo_t*), SignalHandler on_ours);

// Puts the program's disposition of `sig` back (before an exec, at the
// end); the signal is no longer owned.
void ReturnSignal(int sig);

// Before an exec (or the end of sampling, which may be followed by one): an
// exec keeps an ignored disposition and resets a handled one to its
// default. So only a program's SIG_IGN is put back; otherwise the handler
// stays until the exec replaces it, and a signal of ours still on its way
// to another thread meets it rather than the default action (death).
void ReturnSignalBeforeExec(int sig);

// Whether `sig` is owned now.
bool SignalOwned(int sig);

// Whether `sig` is owned and the kernel still delivers it to us: false when
// the program put its own handler on it with the raw system call, past the
// wrapped sigaction().
bool HandlerStillOurs(int sig);

}  // namespace fieldprof::preload

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_OWNED_SIGNALS_H_
