// The next definition of a name after libfieldprof.so in the program's
// search order: what dlsym(RTLD_NEXT, name) would answer for the
// interposers (malloc, read, execve, ...), found in the loaded objects' own
// symbol tables instead. dlsym would clear an error the program has yet to
// read with dlerror(), and would allocate inside malloc; this does neither.
// Runs under dl_iterate_phdr's lock; safe from the first malloc on.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_NEXT_SYMBOL_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_NEXT_SYMBOL_H_

#include <cstdint>

#include "agent/preload/base/next_slots.h"

namespace fieldprof::rt {

// For each of names[0..n) whose out[i] is 0, the address of its first
// definition in an object after this library (0 when there is none);
// IFUNC definitions are resolved.
void ResolveNext(const char* const* names, uintptr_t* out, int n);

// Set at start when the runtime was not preloaded but loaded later (by the
// front, late_interpose.h): then nothing may come after it, and the next
// definition is the first one in search order that is not its own.
extern bool g_loaded_late;

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_NEXT_SYMBOL_H_
