// What every preloaded library does around fork, written once.
//
// Before the fork: every wrapper's next definition is filled
// (next_slots.h), so that the child looks nothing up in the dynamic
// linker; and the dynamic linker's lock is found, if it was not yet
// (linker_lock.h). Then the library's own handler.
// In the child: whether that lock stayed held, by a thread that did not
// come along. It is then held for good in the child, and any walk of the
// loaded objects (an unwind, a list of the modules, the runtime's binder)
// would wait on it until the child is killed; LoaderStuck() says so until
// the child execs (the new image starts clear). Then the library's own
// handler. No system call: the child may be under a seccomp filter.
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_FORK_HOOKS_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_FORK_HOOKS_H_

#include "agent/preload/base/linker_lock.h"

namespace fieldprof::preload {

// Registers the handlers above, around `before` and `child` (either may be
// null); `walk` is the C library's dl_iterate_phdr, for FindLinkerLock.
// Once per library, at its start.
void AtFork(DlIteratePhdrFn walk, void (*before)(), void (*child)());

// In a fork child whose parent had another thread in the dynamic linker at
// the fork: true. No walk of the loaded objects may start then.
bool LoaderStuck();

// Whether the thread `tid` must not walk the loaded objects now (unwind,
// list the modules): the lock is stuck since a fork, or unsafe for this
// thread (LinkerLockUnsafe, with `whole`). Async-signal-safe.
inline bool LoaderUnsafe(int tid, int whole) {
  return LoaderStuck() || LinkerLockUnsafe(tid, whole);
}

}  // namespace fieldprof::preload

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_FORK_HOOKS_H_
