// The stack samples of a run that ended without folding them (killed by a
// signal): read from its live file (agent/preload/runtime/records/live_layout.h
// LiveSamples) and folded by the runtime's own rule (common/stacks/stack_folding.h),
// so that a run ended by Ctrl-C, SIGTERM or a crash still adds its stacks
// to the field (docs/field-stacks.md).
//
// The runtime keeps raw return addresses and, for each module mapped, its
// range, load bias, key name, build id, whether its frames may be kept,
// and (for those) its path. Frames are named here as the runtime names
// them: the exported symbol (.dynsym) that covers the address, as the
// dynamic linker's dladdr finds it, read from the file at that path only
// when its build id is the one the run mapped; else "+offset". A module's
// frames the runtime would not keep are never named or kept here either.
#ifndef FIELDPROF_AGENT_DAEMON_LIVE_STACKS_H_
#define FIELDPROF_AGENT_DAEMON_LIVE_STACKS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/proto/fieldprof.pb.h"
#include "common/system/exported_symbols.h"
#include "common/wire/api_key.h"

namespace fieldprof::agent {

struct LiveStack {
  std::string module, build_id, stack;
  uint64_t ns = 0;
};

struct LiveStacks {
  bool folded = false;  // the runtime wrote them itself: nothing here
  uint64_t samples = 0, lost = 0;
  std::vector<LiveStack> stacks;  // at most a run's (kMaxRunStacks), the dearest
  size_t not_kept = 0;            // series beyond those
};

// `n` bytes of the file at `offset` (a hole reads as zeros, where a
// mapping of a tmpfs file would allocate it); false when short.
bool ReadAt(int fd, void* out, size_t n, size_t offset);

// A C string from a fixed field of the live file, never trusting its
// terminator.
std::string FixedField(const char* p, size_t cap);

// The stacks of the live file open at `fd` (of the live layout: the caller
// checked its header). False when it cannot be read.
bool ReadLiveStacks(int fd, LiveStacks* out);

// Adds them to `rec` as stack_cpu_ns records (runs 1: the run's own, as
// the runtime writes them) under `platform`; returns how many.
int AddLiveStackRecords(const LiveStacks& stacks, const Platform& platform, wire::RunRecord* rec);

}  // namespace fieldprof::agent

#endif  // FIELDPROF_AGENT_DAEMON_LIVE_STACKS_H_
