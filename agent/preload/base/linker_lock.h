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
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_LINKER_LOCK_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_LINKER_LOCK_H_

#include <link.h>

namespace fieldprof::preload {

using DlIteratePhdrFn = int (*)(int (*)(dl_phdr_info*, size_t, void*), void*);

// Finds the lock, with the C library's own dl_iterate_phdr (`real`, not a
// wrapper): the one recursive mutex inside ld.so's _rtld_global that the
// calling thread holds once inside a dl_iterate_phdr callback and no
// longer holds outside it (another thread may have taken it since). True
// when found; when not (another C library, its layout changed),
// LinkerLockUnsafe is always false, and only the wrapped calls are known.
// Call it at load, before any handler can run.
bool FindLinkerLock(DlIteratePhdrFn real);

// Whether FindLinkerLock found it: LinkerLockUnsafe then sees every
// stretch under the lock, the wrapped calls' and libc's own.
bool LinkerLockKnown();

// What the lock says about unwinding on the thread `tid` now, from one
// look at its words:
//   kSafe    free, held by another thread (the walk waits for it), or held
//            by `tid` exactly `whole` times (dl_iterate_phdr callbacks it
//            is in, where the list is whole)
//   kUnsafe  held by `tid` otherwise; with `whole` 0, any hold of `tid`'s,
//            the last unlock's count already 0 included (a walk then would
//            release the lock under the unlock that is under way)
//   kMoment  its word set and no owner named: a moment of some thread's
//            taking or giving it. Another thread's lasts a few
//            instructions; this thread's own, when a handler cut in there,
//            lasts as long as the handler, and nothing tells the two
//            apart (libc's own loading passes no wrapper that could mark
//            it). A caller may wait one out only for a time on the clock,
//            once per moment of its thread's, never for a count of spins:
//            256 `pause`s in a handler outlasted the next 20 us timer
//            signal on a machine of our kind, and the thread never moved
//            again (points/stacks.cc's LoaderSafe).
// Async-signal-safe: three loads, no wait.
enum class LinkerLockLook { kSafe, kUnsafe, kMoment };
LinkerLockLook LookAtLinkerLock(int tid, int whole);

// The look from the lock's three words as read (its word, owner, count):
// glibc's recursive mutex sets the word, then the count, then the owner
// to take it; to give it back, lowers the count, at 0 clears the owner,
// then the word. A thread re-taking a lock it owns only raises the count.
inline LinkerLockLook LinkerLockLookOf(int word, int owner, unsigned count, int tid, int whole) {
  if (word == 0) return LinkerLockLook::kSafe;
  if (owner == 0) return LinkerLockLook::kMoment;
  if (owner != tid) return LinkerLockLook::kSafe;
  if (whole == 0) return LinkerLockLook::kUnsafe;
  return count == static_cast<unsigned>(whole) ? LinkerLockLook::kSafe : LinkerLockLook::kUnsafe;
}

// LookAtLinkerLock other than kSafe: a moment counts as unsafe at once.
inline bool LinkerLockUnsafe(int tid, int whole) {
  return LookAtLinkerLock(tid, whole) != LinkerLockLook::kSafe;
}

// For a walk of the loaded objects inside an unwind (loader_calls.cc):
// takes the lock when it is free or already this thread's (it is
// recursive), without waiting. kTaken: taken, give it back with
// GiveLinkerLock; kBusy: another thread holds it or is taking it; kUnknown:
// the lock was not found, nothing was taken. Async-signal-safe as the walk
// itself (glibc's trylock and unlock of the same mutex dl_iterate_phdr
// takes).
enum class LinkerLockTry { kTaken, kBusy, kUnknown };
LinkerLockTry TryLinkerLock();
void GiveLinkerLock();

// Whether a thread other than `tid` holds the lock (or is taking it: the
// word set and no owner, which in a fork child lasts). In a fork child,
// whose one thread is `tid`, such
// a lock is held for good: the thread that held it at the fork is not
// there to give it back, so nothing may walk the loaded objects until
// exec. False when the lock was not found.
bool LinkerLockHeldByAnother(int tid);

}  // namespace fieldprof::preload

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_LINKER_LOCK_H_
