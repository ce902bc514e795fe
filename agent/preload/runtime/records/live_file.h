// The runtime's side of the live file (live_layout.h): a measured field
// run's slabs and shadow stacks are mapped from it, so that what a run has
// counted outlives the run however it ends, and the agent can report a
// long run while it goes on. A run whose file cannot be made (no live
// directory, a full tmpfs, `live_dir = off`, a lab pass) maps anonymous
// memory as before and is reported only by its own record.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_RECORDS_LIVE_FILE_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_RECORDS_LIVE_FILE_H_

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "agent/preload/runtime/records/live_layout.h"
#include "agent/preload/runtime/sys.h"

namespace fieldprof::rt {

struct RunSettings;

// The header of this image's live file; nullptr when it has none. Written
// by the runtime only (and `parts` by the agent, under the report lock).
FP_HIDDEN extern LiveHeader* g_live;
FP_HIDDEN extern int g_live_fd;  // -1: none (or let go of, after the record)
// The file's identity: a program may close our descriptor (daemons close
// every one) and open something else under its number, which must never
// be locked, allocated into or closed in our stead.
FP_HIDDEN extern uint64_t g_live_ino, g_live_dev;
inline bool LiveFdIsOurs() {
  struct stat st;
  return g_live_fd >= 0 && sys::Fstat(g_live_fd, &st) == 0 && st.st_ino == g_live_ino &&
         st.st_dev == g_live_dev;
}

// Bytes [offset, offset + bytes) of the live file backed by memory now, so
// that a write there can never fault for want of it (a full tmpfs would
// be SIGBUS in the program); false when the file system has no room.
// True without a live file. A system call, no libc: callable from code
// built without vector registers. madvise(MADV_POPULATE_WRITE) allocates
// and maps the pages in one call, failing cleanly where a write would have
// raised SIGBUS (Linux 5.14); before that, fallocate allocates them and
// the writes fault them in.
inline bool LiveAllocate(size_t offset, size_t bytes) {
  if (g_live == nullptr) return true;  // anonymous memory: nothing to back
  constexpr uintptr_t kPage = 4096;
  const uintptr_t from = (reinterpret_cast<uintptr_t>(g_live) + offset) & ~(kPage - 1);
  const uintptr_t to = reinterpret_cast<uintptr_t>(g_live) + offset + bytes;
  const long r = sys::Call(SYS_madvise, static_cast<long>(from), static_cast<long>(to - from),
                           23 /* MADV_POPULATE_WRITE */);
  if (r != -EINVAL) return r == 0;
  // Older kernels: by the descriptor, while it is still ours.
  return LiveFdIsOurs() &&
         sys::Fallocate(g_live_fd, 0, static_cast<long>(offset), static_cast<long>(bytes)) == 0;
}
// The same for what every measured call of slot `a` may write in slab `s`
// (its time histogram and tick table), and for shadow stack `i`.
inline bool LiveAllocateSlot(int s, int a) {
  const size_t slab = kLiveSlabsOffset + sizeof(Slab) * static_cast<size_t>(s);
  return LiveAllocate(slab + offsetof(Slab, h) + sizeof(Slab::h[0]) * static_cast<size_t>(a),
                      sizeof(Histogram)) &&
         LiveAllocate(
             slab + offsetof(Slab, ticks) + sizeof(Slab::ticks[0]) * static_cast<size_t>(a),
             sizeof(Slab::ticks[0]));
}
// Slot `a`'s other metrics' histograms in slab `s`, written only by calls
// that allocate or do I/O: allocated at the first such call (most slots
// never have one), one bit a slot. False when the file system has no room.
FP_HIDDEN extern uint32_t g_live_metrics_backed[kSlabs];
inline bool LiveAllocateMetrics(int s, int a) {
  const uint32_t bit = uint32_t{1} << a;
  if (g_live == nullptr || (__atomic_load_n(&g_live_metrics_backed[s], __ATOMIC_RELAXED) & bit)) {
    return true;
  }
  const size_t slab = kLiveSlabsOffset + sizeof(Slab) * static_cast<size_t>(s);
  if (!LiveAllocate(slab + offsetof(Slab, h) + sizeof(Slab::h[0]) * static_cast<size_t>(a) +
                        sizeof(Histogram),
                    sizeof(Slab::h[0]) - sizeof(Histogram))) {
    return false;
  }
  __atomic_fetch_or(&g_live_metrics_backed[s], bit, __ATOMIC_RELAXED);
  return true;
}
inline bool LiveAllocateSlabCounts(int s) {
  const size_t slab = kLiveSlabsOffset + sizeof(Slab) * static_cast<size_t>(s);
  return LiveAllocate(slab + offsetof(Slab, calls), sizeof(Slab::calls) + sizeof(Slab::quiet));
}
inline bool LiveAllocateStack(int i) {
  return LiveAllocate(kLiveStacksOffset + sizeof(ShadowStack) * static_cast<size_t>(i),
                      sizeof(ShadowStack));
}

// Makes this image's live file in `settings`' live directory and maps its
// slabs and shadow stacks (kLiveFileBytes - kLiveSlabsOffset bytes, shared,
// zero-filled until written); nullptr when there is none (then nothing of
// it remains). Holds the alive lock from here on.
void* LiveOpen(const RunSettings& settings, const char* debug_log);

// The header's copies of what the record writer reads besides the slabs
// (called where they change; cheap when there is no live file).
void LiveNoteClock();
void LiveNoteApi(int slot, const char* module, const char* build_id, const char* symbol);
void LiveNoteTruncated(int slot);
// From code built without vector registers (the trap, the hot path's slow
// paths): plain stores only.
inline void LiveNoteEvicted(int slot) {
  if (g_live != nullptr) g_live->evicted[slot] = 1;
}
inline void LiveNoteSlabReady(int slab) {
  if (g_live != nullptr) __atomic_store_n(&g_live->slabs_ready[slab], 1, __ATOMIC_RELEASE);
}
// The live file's stack samples (live_layout.h), or nullptr when there is
// no live file.
inline LiveSamples* LiveSamplesOf(LiveHeader* live) {
  return live == nullptr
             ? nullptr
             : reinterpret_cast<LiveSamples*>(reinterpret_cast<char*>(live) + kLiveSamplesOffset);
}
// The run's stacks are in a record the runtime wrote: not the agent's to fold.
inline void LiveNoteStacksFolded() {
  LiveHeader* live = __atomic_load_n(&g_live, __ATOMIC_ACQUIRE);
  if (live != nullptr && LiveAllocate(kLiveSamplesOffset, sizeof(uint64_t))) {
    __atomic_store_n(&LiveSamplesOf(live)->folded, 1u, __ATOMIC_RELEASE);
  }
}
inline void LiveNoteStacks(int n) {
  if (g_live != nullptr) __atomic_store_n(&g_live->next_stack, n, __ATOMIC_RELEASE);
}

// At exit, exec or _exit, before the record: whether the runtime writes it.
// kRuntime: no part was reported; the caller writes the record, then calls
// LiveRetire. kAgent: parts were reported, or the agent is reporting one
// now; the counts are left whole in the file (the caller has flushed them
// and calibrated: LiveNoteClock first) and the agent reports the rest
// once the image has ended. kNone: no live file.
enum class LiveReporter { kNone, kRuntime, kAgent };
LiveReporter LiveBeforeRecord();
// The record is written: the file goes and is let go of. (An image that
// then goes on after a failed exec keeps counting into the mapping, which
// no file names any more: its record is its only report.)
void LiveRetire();
// No record is to be written at all (consent withdrawn, the clock refuted):
// the file goes too.
void LiveDiscard();
// Before a seccomp filter (the run's record already written): retired,
// and no system call more for its pages.
void LiveSeal();
// After a failed exec that had left the counts to the agent: the image
// goes on counting into the same run.
void LiveResumeAfterFailedExec();

// In a fork child: the parent's file let go of; a file of the child's own,
// with its slabs and shadow stacks mapped (zero-filled), or nullptr when it
// cannot be made (then the child maps anonymous memory).
void* LiveOpenInForkChild(const RunSettings& settings, const char* debug_log);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_RECORDS_LIVE_FILE_H_
