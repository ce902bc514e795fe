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
// its body lands inside the jump's 5 bytes, or when its first instructions
// hold a call or a branch the move cannot keep. Detour's 5-byte jump is
// written only while the process has no second thread of its own (a thread
// could be stopped between the instructions it replaces; fieldprof's own
// threads are named "fieldprof-drain" and never run the program's code).
// With one, DetourWhileThreadsRun replaces the first instruction alone, and
// where even that cannot be done the calls the module makes to the
// function are re-aimed instead (RedirectCalls, call_sites.cc): each is one
// instruction, which another thread is either before or past.
// These are called with the binder's lock and the
// dynamic linker's held (DetourEachNewObject), so that no other thread's
// dlclose unmaps the module meanwhile; decoding allocates nothing.
// DetourLoad dlopens, so it is called before that lock is taken, and at
// start, so that no thread's first call makes the binder read capstone
// while the dynamic linker is still relocating it.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_POINTS_DETOUR_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_POINTS_DETOUR_H_

#include <cstddef>
#include <cstdint>

#include "agent/preload/runtime/binder/elf_object.h"

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
// jump back), or 0 with *why saying why it was left alone. Only while no
// other thread runs (OtherThreadsRun, asked by the caller).
uintptr_t Detour(uintptr_t fn, size_t size, uint32_t slot, const char** why);

// Detour's move for a process whose other threads may be running the
// function (call_sites.cc): only its first instruction, which must be 2
// bytes or more, is replaced, by a 2-byte jump to a 5-byte jump written
// into the alignment padding beside the function (bytes between two
// functions of `e`'s unwind table, all nops or int3, within a short jump's
// reach), as Windows hot-patches a function. A thread is before that
// instruction or past it, never inside it; the 2-byte store is atomic
// within a cache line, with every core serialized after the padding is
// written and after the entry is (membarrier SYNC_CORE). Another thread
// may take the new way at once, so `*real`, the slot's real function,
// is given the moved copy before the entry is changed. Returns where the
// moved copy starts, or 0 with *why and *real as it was (then
// RedirectCalls is the way left).
uintptr_t DetourWhileThreadsRun(const ElfObject& e, uintptr_t fn, size_t size, uint32_t slot,
                                uintptr_t* real, const char** why);

// Whether the process has a thread besides the calling one and fieldprof's
// own (or it cannot tell): then Detour refuses.
bool OtherThreadsRun();

// Re-aims at a thunk that enters fp_detour_entry with `slot` every direct
// call and jump (rel32) in `e`'s code to the function at `fn`, found as the
// compiler wrote it: a candidate's bytes are taken for an instruction only
// when decoding its function from the start (.eh_frame_hdr's table) lands
// on it. Safe while other threads run them: each site is patched as HotSpot
// patches call sites, a 2-byte jump to itself first, then the rest, then
// the first 2 bytes, every core serialized between the steps (membarrier,
// MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE); a fork waits until a patch
// is done (WaitForCodePatch). The module's own PLT entry for `fn` (an
// exported function its code calls through the PLT) goes to the thunk too;
// *through_plt says whether it had one. The slot's real function must be
// `fn` before this is called. Calls through pointers are not seen. Returns
// how many sites were re-aimed, or -1 with *why when none could be.
int RedirectCalls(const ElfObject& e, uintptr_t fn, uint32_t slot, int* through_plt,
                  const char** why);

// What became of a function's calls after RedirectCalls, in words the
// debug log and `points record` share ("calls from other modules and N
// direct calls in its own..."), into out[0..cap).
void SayRedirected(int sites, int through_plt, char* out, size_t cap);

// For pthread_atfork's prepare: returns once no call site is half patched,
// so that no child starts with a thread's jump to itself in its code.
void WaitForCodePatch();

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_POINTS_DETOUR_H_
