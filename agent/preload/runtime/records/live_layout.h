// The live file: where a measured run keeps its counts while it runs, so
// that a run that dies by a signal, or runs for days, still reaches the
// field. A contract between the runtime, which writes it, and
// the agent, which reads it (agent/daemon/live_harvest.h); both are built from
// this tree, and a file of another layout is left alone by the agent.
//
// One file per measured process image, `run-<pid>-<start ms>-<rand>.fplive`
// in the live directory (LiveDirFor: `live_dir` in the settings, by default
// /dev/shm/fieldprof-<uid>, a tmpfs: a page of a file mapping there costs
// what an anonymous page costs, where on ext4 it cost ~70 us here). Mode
// 0600, in a directory of mode 0700 that must be the user's own.
//
//   [LiveHeader, kLiveHeaderBytes] [kSlabs Slab] [kShadowStacks ShadowStack]
//   [LiveSamples]
//
// The slabs and shadow stacks are the runtime's own measuring state
// (hotpath.h), mapped shared from this file instead of from anonymous
// memory: the hot path writes them exactly as before. The header mirrors
// what the record writer needs besides them (the clock, which slots are
// bound to which API, which were dropped or stopped), updated where those
// change, never on the per-call path.
//
// LiveSamples holds the run's stack samples (stack_samples.h) as the
// sampler takes them, and the modules they may be in, so that the agent
// can fold the stacks of a run that was killed (agent/daemon/live_stacks.h).
//
// Locks (fcntl open-file-description locks, released when the last
// descriptor of the file's opening closes, so a killed process releases
// them):
//   byte kLiveAliveByte   held for writing by the process for the life of
//                         its image (the descriptor is close-on-exec). Free:
//                         the image has ended, however it ended.
//   byte kLiveReportByte  held for writing by whoever reports the run: the
//                         agent while it takes a part, the runtime while it
//                         decides at exit whether to write the record itself.
//
// Who writes the run's record:
//   - the runtime, at exit, exec or _exit, when the agent has reported no
//     part of the run (`parts` 0): its record as ever, then `state` becomes
//     kLiveRetired and the file goes (at exit; at exec the agent removes it
//     once the image has ended);
//   - the agent otherwise: every `live_interval_s` of a live run it reports
//     what was counted since its last part (announcing the part in `parts`
//     first); when the image has ended (killed, or ended with `state`
//     kLiveEnded because parts were reported), it reports the rest, the
//     last part, and removes the file.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_RECORDS_LIVE_LAYOUT_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_RECORDS_LIVE_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "agent/preload/runtime/hotpath/hotpath.h"
#include "agent/preload/runtime/stacks/stack_fold.h"

namespace fieldprof::rt {

inline constexpr char kLiveMagic[8] = {'F', 'P', 'L', 'I', 'V', 'E', '0', '1'};
inline constexpr uint32_t kLiveLayout = 2;
inline constexpr size_t kLiveHeaderBytes = 64 * 1024;
inline constexpr off_t kLiveAliveByte = 0;
inline constexpr off_t kLiveReportByte = 1;

// LiveHeader::state
inline constexpr uint32_t kLiveRunning = 0;  // counting (or killed while it was)
inline constexpr uint32_t kLiveEnded =
    1;  // ended; its counts are whole; the agent reports the rest
inline constexpr uint32_t kLiveRetired =
    2;  // the runtime wrote the record itself: nothing to report

// An API bound to a slot, as the record names it (binder/internal.h ApiNames).
struct LiveApi {
  char module[256];
  char build_id[96];
  char symbol[1025];
};

struct LiveHeader {
  char magic[8];
  uint32_t layout;  // kLiveLayout
  // The sizes the file was made with; a reader built otherwise leaves it.
  uint32_t header_bytes, slab_bytes, stack_bytes, slabs, stacks, max_slots, metrics, tick_table,
      ring, histogram_bytes;
  uint64_t pid;
  int64_t start_unix_ms;  // wall clock at the start of the image's counts
  int64_t start_mono_ns;  // CLOCK_MONOTONIC then (the run's length)
  volatile uint32_t state;
  // Parts of this run the agent has reported, raised before each is
  // written (under the report lock).
  volatile uint32_t parts;
  // The clock (hotpath.h Globals): ns = ticks * ns_per_tick_q32 >> 32, and
  // probe_ticks off every duration. Not calibrated: the reader uses the
  // machine's rate if it knows one, else drops the tick counts.
  volatile uint64_t ns_per_tick_q32, probe_ticks, resolution_ticks;
  volatile uint32_t calibrated;
  volatile uint32_t rate_refuted;  // the run's clock disagreed with the machine's rate: no record
  volatile uint8_t bound[FP_MAX_SLOTS];
  volatile uint8_t evicted[FP_MAX_SLOTS];
  volatile uint8_t truncated[FP_MAX_SLOTS];
  volatile uint8_t slabs_ready[kSlabs];
  volatile int32_t next_stack;  // shadow stacks handed out (their rings hold kept durations)
  LiveApi apis[FP_MAX_SLOTS];   // written before bound[slot]
};
static_assert(sizeof(LiveHeader) <= kLiveHeaderBytes);

inline constexpr size_t kLiveSlabsOffset = kLiveHeaderBytes;
inline constexpr size_t kLiveStacksOffset = kLiveSlabsOffset + sizeof(Slab) * kSlabs;

// A run's stack samples, written by the sampler's handler; each page is
// allocated before it is first touched (live_file.h LiveAllocate).
struct LiveSamples {
  static constexpr uint32_t kModules = 512;
  volatile uint32_t nmodules;  // entries of `modules` taken (each whole once its kind is set)
  // The runtime folded these stacks into a record of its own (at exit,
  // after the agent had reported parts): the agent folds them only if not.
  volatile uint32_t folded;
  LiveModule modules[kModules];
  StackTable table;  // its `samples` and `lost` are backed with the header
};

inline constexpr size_t kLiveSamplesOffset =
    (kLiveStacksOffset + sizeof(ShadowStack) * kShadowStacks + 4095) & ~size_t{4095};
inline constexpr size_t kLiveFileBytes = kLiveSamplesOffset + sizeof(LiveSamples);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_RECORDS_LIVE_LAYOUT_H_
