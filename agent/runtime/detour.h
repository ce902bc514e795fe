// Points on a function its own module calls directly, where there is no
// import to rebind (`fieldprof points record --at myprog:load_config`):
// the function's first instructions are moved to a page near it and its
// entry becomes a jump to a stub. The stub calls the moved copy, which runs
// those instructions and jumps back behind them, so every call is seen,
// from inside the module and from outside.
//
// x86-64 decoding is capstone's (Debian's libcapstone4), dlopen'd on first
// use; a process that never detours never maps it. A function is refused,
// and keeps its code, when it is shorter than the jump, when a branch in
// its body lands inside the jump's 5 bytes, when its first instructions
// hold a call or a branch the move cannot keep, or when the process already
// has a second thread of its own (a thread could be running the bytes
// being replaced; fieldprof's own threads are named "fieldprof-drain" and
// never run the program's code). Called with the binder's lock held, never
// the dynamic linker's: capstone allocates. DetourLoad dlopens: it runs
// before the binder starts, so that no thread's first call makes the
// binder read capstone while the dynamic linker is still relocating it.
#ifndef FIELDPROF_AGENT_RUNTIME_DETOUR_H_
#define FIELDPROF_AGENT_RUNTIME_DETOUR_H_

#include <cstddef>
#include <cstdint>

#include "agent/runtime/elf_object.h"

namespace fieldprof::rt {

// Loads capstone once. False (and *why) when it cannot be had.
bool DetourLoad(const char** why);

// The definitions of function `symbol` in `e`, from its dynamic symbols and
// from the file's own symbol table (a program that is not stripped keeps
// its static functions there): up to `cap` addresses and sizes (static
// functions of one name in several files), inside the object's code.
// Returns how many.
int FindFunctions(const ElfObject& e, const char* symbol, uintptr_t* addr, size_t* size, int cap);

// Makes the function at `fn` (`size` bytes long) enter fp_detour_entry
// (stubs_x86_64.S) with `slot`, which keeps every register. Returns where
// the function as it was now starts (its moved first instructions, then a
// jump back), or 0 with *why saying why it was left alone.
uintptr_t Detour(uintptr_t fn, size_t size, uint32_t slot, const char** why);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_RUNTIME_DETOUR_H_
