// The table of a run's distinct stacks (stack_samples.h), and their
// folding into the records of packaged modules when the run ends.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_STACKS_STACK_FOLD_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_STACKS_STACK_FOLD_H_

#include <cstddef>
#include <cstdint>

#include "common/stacks/stack_folding.h"

namespace fieldprof::rt {

struct SpoolRun;

// Return addresses kept per sample, innermost first (stack_folding.h).
inline constexpr int kStackDepth = stack_folding::kMaxDepth;

struct StackEntry {
  uint32_t state;  // 0 free, 1 being written, 2 ready
  uint32_t depth;
  uint64_t hash;
  uint64_t ns;  // CPU time of the samples with this stack
  uint64_t ips[kStackDepth];
};

// Open addressing; mapped without reserve, so only the pages used count.
struct StackTable {
  static constexpr uint32_t kEntries = 4096;  // a power of two
  StackEntry e[kEntries];
  uint64_t samples, lost;  // lost: no free entry within the probes
};

// Makes `bytes` at `p` writable for good (a live file's pages: live_file.h
// LiveAllocate); false when they cannot be.
using BackFn = bool (*)(const void* p, size_t bytes);

// Adds a sample of `n` return addresses standing for `ns` of CPU time;
// `back` (or nullptr: anonymous memory) is asked for each entry before it
// is looked at. Async-signal-safe, lock-free: any thread, inside a signal
// handler.
void AddStack(StackTable* t, const uint64_t* ips, int n, uint64_t ns, BackFn back);

// What a module's frames are to the fold (a live file's module table,
// live_layout.h, holds them for the agent).
inline constexpr uint32_t kLiveModuleKept = 1;     // a system library's: kept
inline constexpr uint32_t kLiveModuleProgram = 2;  // the program's own
inline constexpr uint32_t kLiveModuleOther = 3;    // any other file, none, the vdso
inline constexpr uint32_t kLiveModuleOurs = 4;     // the runtime's own

// The fold's code (stack_folding.h) for a module of `kind` that is the
// folder's module number `index`.
inline int32_t FoldCode(uint32_t kind, int32_t index) {
  return kind == kLiveModuleKept      ? index
         : kind == kLiveModuleOurs    ? stack_folding::kOurs
         : kind == kLiveModuleProgram ? stack_folding::kProgram
                                      : stack_folding::kUnpackaged;
}

struct LiveModule {
  uint64_t lo, hi;  // the addresses it is mapped at, [lo, hi)
  uint64_t base;    // its load bias: "+offset" frames are a - base
  uint32_t kind;    // written last; 0: not yet
  // Of a kept module only (else ""): its key name, build id (hex, as keys
  // carry it), and where the agent reads its exported symbols ("": too long).
  char module[256];
  char build_id[80];
  char path[512];
};

// Notes the binder's object `i` in a live file's module table of `cap`
// entries, `*claimed` of them taken: takes an entry, backs it, writes it,
// its kind last (0 until then: the agent skips it). False when the table
// is full or cannot be backed. Reads the object's ELF headers in its
// mapping: only for an object that cannot be unloaded meanwhile (loaded
// at start; or under the dynamic linker's lock, as the binder looks).
bool NoteModule(uint32_t i, LiveModule* table, uint32_t cap, uint32_t* claimed, BackFn back);

// Names and folds every ready stack of `t` into run->stacks (memory of its
// own, kept until the next fold). `backed` (nullptr: all of `t` may be
// read) says which entries may be read: a live file's page never written
// is never read either (on tmpfs a read allocates it, or faults when the
// file system is full).
void FoldStacks(const StackTable& t, SpoolRun* run, BackFn backed);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_STACKS_STACK_FOLD_H_
