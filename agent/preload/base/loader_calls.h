// The dynamic linker's calls that take its lock (dlopen, dlmopen, dlclose,
// dl_iterate_phdr), wrapped once (loader_calls.cc) for the libraries that
// unwind the program's stacks from a signal handler: the sampler and the
// points recorder. libunwind takes the same lock, so a handler that
// unwinds on a thread inside one of them could wait on its own thread for
// good, or walk the list of loaded objects in the middle of a change.
//
// When the lock itself was found (linker_lock.h), its state tells the
// handler all: then these wrappers count nothing, and a plugin's
// constructors, which run outside the lock, keep their samples. When it
// was not, t_in_linker marks the whole call.
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_LOADER_CALLS_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_LOADER_CALLS_H_

#include <link.h>

namespace fieldprof::preload {

// Non-zero while this thread is inside one of the calls above and the
// lock was not found; 0 inside a dl_iterate_phdr callback (t_iterating
// counts those).
extern __thread int t_in_linker __attribute__((tls_model("initial-exec")));
// How many dl_iterate_phdr callbacks this thread is in: the lock is held
// that many times, whole (LinkerLockUnsafe's `whole`).
extern __thread int t_iterating __attribute__((tls_model("initial-exec")));

// Whether the thread may not unwind for being inside one of the calls
// above: in a dlopen or dlclose while the lock's own state cannot tell, or
// anywhere in a dl_iterate_phdr, its callbacks included. A callback holds
// the linker's lock, and libunwind takes its own cache lock before the
// linker's: an unwind there waits, for good, on a thread that unwinds
// elsewhere and waits for the linker's lock (seen with a thread lingering
// in a callback while others forked).
inline bool InLinkerCall() { return t_in_linker > 0 || t_iterating > 0; }

// The C library's dl_iterate_phdr, for the library's own walks and for
// FindLinkerLock.
int RealDlIteratePhdr(int (*callback)(dl_phdr_info*, size_t, void*), void* data);

// Defined by the library. Around a dlopen of `file` (the program's or a
// library's): BeforeDlopen's answer comes back to AfterDlopen with the
// handle (null when the open failed).
int BeforeDlopen(const char* file);
void AfterDlopen(void* handle, int before_dlopen);

// Defined by the library. Before and after a dlclose.
void BeforeDlclose();
void AfterDlclose();

}  // namespace fieldprof::preload

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_LOADER_CALLS_H_
