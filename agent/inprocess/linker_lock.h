// The dynamic linker's lock, seen from a signal handler that is about to
// unwind. libunwind looks up unwind tables through dl_iterate_phdr, which
// takes glibc's _dl_load_write_lock, a recursive mutex. A handler that
// interrupts its own thread while that thread takes the lock (the word
// set, no owner yet) waits on itself for good; one that interrupts it
// while it holds the lock re-enters it and walks the list of loaded
// objects in the middle of a change (a module half unmapped: a crash).
// The samplers wrap dlopen, dlclose and dl_iterate_phdr, but libc's own
// loading (iconv_open's converters, NSS modules) calls the dynamic linker
// with no call they see. So each looks at the lock itself, before it
// unwinds. Used by libfieldprof-sampler.so (fieldprof record) and
// libfieldprof-points.so (points record --stacks); no state of its own but
// the lock's address, found once at load.
#ifndef FIELDPROF_AGENT_INPROCESS_LINKER_LOCK_H_
#define FIELDPROF_AGENT_INPROCESS_LINKER_LOCK_H_

#include <link.h>

namespace fieldprof::inproc {

using DlIteratePhdrFn = int (*)(int (*)(dl_phdr_info*, size_t, void*), void*);

// Finds the lock, with the C library's own dl_iterate_phdr (`real`, not a
// wrapper): the one recursive mutex inside ld.so's _rtld_global that the
// calling thread holds once inside a dl_iterate_phdr callback and that
// nobody holds outside it. True when found; when not (another C library,
// its layout changed, another thread held it then), LinkerLockUnsafe is
// always false, and only the wrapped calls are known. Call it at load,
// before any handler can run.
bool FindLinkerLock(DlIteratePhdrFn real);

// Whether FindLinkerLock found it: LinkerLockUnsafe then sees every
// stretch under the lock, the wrapped calls' and libc's own.
bool LinkerLockKnown();

// Whether the thread `tid` may be taking the lock (its word set and no
// owner named: this thread's moment or another's, told apart by no wait)
// or holds it other than `whole` times (dl_iterate_phdr callbacks it is
// in, where the list is whole). Unwinding then is not safe.
// Async-signal-safe: three loads, no wait.
bool LinkerLockUnsafe(int tid, int whole);

// Whether the lock's word is set and no owner is named: a moment of some
// thread's lock or unlock. Another thread's lasts a few instructions;
// this thread's own, when a handler cut in there, lasts as long as the
// handler. A caller that waits one out must bound the wait by something
// that stops it for good (points' stack budget, stacks.cc), never by a
// count of spins alone: a handler that spins on its own thread's moment
// until the next timer signal is a livelock. Async-signal-safe: two loads.
bool LinkerLockMoment();

// Whether a thread other than `tid` holds the lock (or is taking it: the
// word set and no owner, which in a fork child lasts). In a fork child,
// whose one thread is `tid`, such
// a lock is held for good: the thread that held it at the fork is not
// there to give it back, so nothing may walk the loaded objects until
// exec. False when the lock was not found.
bool LinkerLockHeldByAnother(int tid);

}  // namespace fieldprof::inproc

#endif  // FIELDPROF_AGENT_INPROCESS_LINKER_LOCK_H_
