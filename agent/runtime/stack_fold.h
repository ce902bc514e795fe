// The table of a run's distinct stacks (stack_samples.h), and their
// folding into the records of packaged modules when the run ends.
#ifndef FIELDPROF_AGENT_RUNTIME_STACK_FOLD_H_
#define FIELDPROF_AGENT_RUNTIME_STACK_FOLD_H_

#include <cstdint>

namespace fieldprof::rt {

struct SpoolRun;

// Return addresses kept per sample, innermost first; a deeper stack keeps
// its innermost ones (the frames of the libraries it is in).
inline constexpr int kStackDepth = 48;

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

// Adds a sample of `n` return addresses standing for `ns` of CPU time.
// Async-signal-safe, lock-free: any thread, inside a signal handler.
void AddStack(StackTable* t, const uint64_t* ips, int n, uint64_t ns);

// Names and folds every ready stack of `t` into run->stacks (memory of its
// own, kept until the next fold).
void FoldStacks(const StackTable& t, SpoolRun* run);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_RUNTIME_STACK_FOLD_H_
