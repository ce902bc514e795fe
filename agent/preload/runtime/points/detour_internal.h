// What detour.cc (an entry moved) and call_sites.cc (code changed while
// threads run) share:
// capstone's decoder, loaded by DetourLoad, and the thunk that enters
// fp_detour_entry (stubs_x86_64.S) with a slot. Called with the binder's
// lock held; one decoded instruction at a time (Insn() is the last one).
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_POINTS_DETOUR_INTERNAL_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_POINTS_DETOUR_INTERNAL_H_

#include <capstone/capstone.h>

#include <cstddef>
#include <cstdint>

namespace fieldprof::rt::code {

inline constexpr size_t kPage = 4096;
// The thunk's bytes: the way to fp_detour_entry, padded with int3.
inline constexpr size_t kThunk = 32;

// Loads capstone once; false (and *why) when it cannot be had. Registers
// the process for membarrier's SYNC_CORE at the same time (call_sites.cc):
// done while the process has one thread, registering takes microseconds;
// with two it waits for an RCU grace period (8 ms measured here).
bool Load(const char** why);
// Whether that registration was made.
bool SyncCoreRegistered();

// Decodes the instruction at `at` (at most `max` bytes) into Insn(); `next`
// is where the one after it starts. False when the bytes do not decode.
bool Decode(uintptr_t at, size_t max, uintptr_t* next);
const cs_insn& Insn();

enum class Branch { kNone, kJmp, kJcc, kCall, kLoop };
// What kind of relative branch the decoded instruction is, by its opcode.
Branch RelativeBranch(const cs_x86& x);
bool HasGroup(const cs_insn& i, uint8_t group);

bool FitsRel32(int64_t d);
void PutRel32(uint8_t* at, int64_t d);

// A fresh read-write page within ±1.5 GB of `fn`, so that rel32 reaches
// both ways; nullptr when none is free.
uint8_t* NearPage(uintptr_t fn);

// Copies a function's first instructions, whole and covering at least
// `cover` bytes of [fn, fn + size), to a fresh page near it, behind the
// thunk for `slot` and before a jump back to the instruction after them;
// branches and RIP-relative operands among them are re-aimed. Returns the
// page (the thunk at its start, the moved copy at + kThunk), with
// *moved_insns the instructions moved, or 0 with *why. Refuses what
// Detour refuses (detour.h), a branch landing inside [fn + 1, fn + cover)
// among it. The function itself is not changed.
uintptr_t MoveEntry(uintptr_t fn, size_t size, size_t cover, uint32_t slot, int* moved_insns,
                    const char** why);

// Writes at out[0..kThunk) the thunk that enters fp_detour_entry with
// `slot` in %r11d, %r11 itself kept below the stack pointer.
void WriteThunk(uint8_t* out, uint32_t slot);

}  // namespace fieldprof::rt::code

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_POINTS_DETOUR_INTERNAL_H_
