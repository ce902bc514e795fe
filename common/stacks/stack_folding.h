// How one sampled stack becomes the stacks of packaged modules
// (docs/field-stacks.md): the rule, written once for the two places that
// fold: the runtime, at the end of a run (agent/preload/runtime/stacks/stack_fold.cc),
// and the agent, for a run killed before it could (agent/daemon/live_stacks.cc).
// Header-only and allocation-free: the runtime is built without the C++
// library.
//
// `Frames` says what the caller knows of the run's modules:
//   int32_t ObjectOf(uintptr_t a)
//       a module whose frames are kept (an index >= 0 of the caller's), or
//       kOurs, kProgram, kUnpackaged;
//   size_t FrameName(int32_t obj, uintptr_t a, char* out, size_t cap)
//       the frame's name (an exported symbol, else OffsetName), no NUL;
//   const char* ModuleOf(int32_t obj)
//       the module's key name, for a mark;
//   void Add(int32_t obj, const char* stack, uint64_t ns)
//       one folded stack of module `obj` (a key symbol, StackSymbolOk).
#ifndef FIELDPROF_COMMON_STACKS_STACK_FOLDING_H_
#define FIELDPROF_COMMON_STACKS_STACK_FOLDING_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/wire/key_rules.h"

namespace fieldprof::stack_folding {

// Return addresses kept per sample, innermost first; a deeper stack keeps
// its innermost ones (the frames of the libraries it is in).
inline constexpr int kMaxDepth = 48;

// Stack series one run reports at most (a record's size stays that of a
// run's, whoever folds it).
inline constexpr int kMaxRunStacks = 256;

// What a frame is in, when not a kept module.
enum : int32_t { kNone = -4, kOurs = -3, kUnpackaged = -2, kProgram = -1 };

// "+offset" in hex: a frame no exported symbol covers, as an address of
// its module's ELF file (which the module's vendor can name).
inline size_t OffsetName(uint64_t offset, char* out) {
  char d[16];
  size_t n = 0;
  do {
    d[n++] = "0123456789abcdef"[offset & 15];
    offset >>= 4;
  } while (offset != 0);
  out[0] = '+';
  for (size_t i = 0; i < n; ++i) out[1 + i] = d[n - 1 - i];
  return n + 1;
}

// The last frame: where the time went from the module's innermost frame.
template <typename Frames>
size_t Mark(Frames& f, int32_t callee, char* out, size_t cap) {
  const char* name = callee == kProgram      ? "program"
                     : callee == kUnpackaged ? "unpackaged"
                     : callee >= 0           ? f.ModuleOf(callee)
                                             : nullptr;
  if (name == nullptr) return 0;
  const size_t n = strlen(name);
  if (n + 2 > cap) return 0;
  out[0] = '[';
  memcpy(out + 1, name, n);
  out[n + 1] = ']';
  return n + 2;
}

// The stack of module `obj` from its frames addr[inner..outer], outermost
// first, and the mark of `callee`, the object its innermost frame called.
template <typename Frames>
void AddModuleStack(Frames& f, int32_t obj, const uintptr_t* addr, int inner, int outer,
                    int32_t callee, uint64_t ns) {
  constexpr size_t kMax = key_rules::kMaxSymbol;
  constexpr char kDeeper[] = "[deeper]";
  char stack[kMax + 1];
  size_t len = 0;
  bool deeper = false;
  for (int k = outer; k >= inner; --k) {
    char name[kMax + 1];
    const size_t n = f.FrameName(obj, addr[k], name, sizeof name);
    if (len + (len != 0) + n + sizeof kDeeper > kMax) {
      deeper = true;
      break;
    }
    if (len != 0) stack[len++] = key_rules::kStackSeparator;
    memcpy(stack + len, name, n);
    len += n;
  }
  if (len == 0) return;
  char mark[260];
  size_t mark_len = 0;
  if (deeper) {
    memcpy(mark, kDeeper, sizeof kDeeper - 1);
    mark_len = sizeof kDeeper - 1;
  } else if (callee != kNone) {
    mark_len = Mark(f, callee, mark, sizeof mark);
  }
  if (mark_len != 0 && len + 1 + mark_len <= kMax) {
    stack[len++] = key_rules::kStackSeparator;
    memcpy(stack + len, mark, mark_len);
    len += mark_len;
  }
  stack[len] = 0;
  if (key_rules::StackSymbolOk(stack, len)) f.Add(obj, stack, ns);
}

// One sampled stack (`depth` return addresses, innermost first, standing
// for `ns` of CPU time): for each module kept, its innermost stretch of
// frames.
template <typename Frames>
void FoldStack(Frames& f, const uint64_t* ips, uint32_t depth, uint64_t ns) {
  int32_t obj[kMaxDepth];
  uintptr_t addr[kMaxDepth];
  int n = 0;
  // Whether the walk stopped short of the thread's first frame: at the
  // depth bound, or at the runtime's return point (a measured call's
  // return address, which has no unwind information: the walk ends there).
  bool cut = depth >= static_cast<uint32_t>(kMaxDepth);
  for (uint32_t i = 0; i < depth && i < kMaxDepth; ++i) {
    // A return address is the instruction after the call: the call's own
    // place is one byte before.
    const uintptr_t a = i == 0 ? ips[0] : ips[i] - 1;
    const int32_t c = f.ObjectOf(a);
    if (c == kOurs) {  // the runtime's own frames are not the program's
      cut = cut || i + 1 == depth;
      continue;
    }
    obj[n] = c;
    addr[n++] = a;
  }
  int32_t seen[kMaxDepth];
  int nseen = 0;
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && obj[j + 1] == obj[i]) ++j;
    bool again = false;
    for (int s = 0; s < nseen; ++s) again = again || seen[s] == obj[i];
    // The outermost kept stretch handing on to the program (libc's
    // __libc_start_main under the program's _start, start_thread) is
    // where every program's time passes: it says nothing of the module,
    // and is left out. Not in a walk cut short: its outermost stretch is
    // where the walk stopped (qsort's, under a measured qsort, calling
    // the program's comparator).
    bool outermost = !cut;
    for (int k = j + 1; k < n && outermost; ++k) outermost = obj[k] < 0;
    const bool entry = outermost && i > 0 && obj[i - 1] < 0;
    if (obj[i] >= 0 && !again && !entry) {
      seen[nseen++] = obj[i];
      AddModuleStack(f, obj[i], addr, i, j, i > 0 ? obj[i - 1] : kNone, ns);
    }
    i = j + 1;
  }
}

}  // namespace fieldprof::stack_folding

#endif  // FIELDPROF_COMMON_STACKS_STACK_FOLDING_H_
