// A recording (fieldprof record): the samples of every process a
// command ran, symbolised, with their stacks and threads interned, in a
// time tree (tools/record/time_tree.h) whose sample types are (thread,
// stack) pairs. Made from the sampler's raw files (raw_format.h); saved as
// one file (.fprec).
#ifndef FIELDPROF_TOOLS_RECORD_RECORDING_H_
#define FIELDPROF_TOOLS_RECORD_RECORDING_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/base/status.h"
#include "tools/record/time_tree.h"

namespace fieldprof::tools {

struct RecordedThread {
  uint32_t pid = 0, tid = 0;
};

// Idle transitions: a thread's wait, from the switch records
// of its own threads. A to-idle event is a switch out while not runnable
// (the thread began to wait); its from-idle event is the switch back in.
// Both carry the stack the thread waited at (the blocking call it was in,
// or a one-frame "[wait without its stack]") and the wait's off-CPU time.
//
// With CPU-wide switch records (privileged; cpu_switches.h), two more: a
// CPU went idle as the thread began to wait (kCpuIdleAfter: the next task
// was the idle task), and a CPU left idle to run the thread as it woke
// (kCpuWokeInto). They carry the wait's stack, and how long the CPU stayed
// idle as their length.
enum class IdleDirection : uint8_t {
  kToIdle = 0,
  kFromIdle = 1,
  kCpuIdleAfter = 2,
  kCpuWokeInto = 3,
};

struct IdleType {
  uint32_t thread = 0, stack = 0;
  IdleDirection direction = IdleDirection::kToIdle;
};

// The program's points (FP_POINT, FP_SCOPE, FP_BEGIN/FP_END, and scopes
// placed with --at), as the occurrences of their segments and scopes
// (common/points/points_analysis.h) on the recording's timeline.
struct SpanName {
  std::string tag, segment;  // segment: "a -> b", or "name (scope)"
  bool scope = false;
};
struct RecordedSpan {
  uint32_t name = 0;                  // into span_names
  uint32_t begin_thread = 0;          // where it began
  uint32_t thread = 0;                // where it ended (a scope's own thread)
  uint64_t begin_ns = 0, end_ns = 0;  // after start_ns
};

// One stack as the field folds it (tools/record/field_view.h): the module
// (key name) and its build id (hex), and the frames joined by ';',
// outermost first.
struct FieldStackName {
  std::string module, build_id, stack;
  bool operator<(const FieldStackName& o) const {
    return std::tie(module, build_id, stack) < std::tie(o.module, o.build_id, o.stack);
  }
};

struct Recording {
  std::string command;
  uint32_t hz = 0;
  bool wall = false;
  uint32_t source = 0;       // how samples were taken: raw::SampleSource
  uint64_t start_ns = 0;     // the first process's start (CLOCK_MONOTONIC); times are after it
  uint64_t duration_ns = 0;  // to the last process's end or last sample
  uint64_t dropped = 0, skipped = 0;
  uint64_t throttled = 0;      // reported as the recording ends; not kept in the file
  uint32_t stepped_aside = 0;  // processes the in-process sampler did not sample (the same)
  uint32_t signal_taken = 0;   // processes that took its sampling signal for themselves (the same)
  uint32_t seccomp_aside = 0;  // processes it stopped in at a seccomp filter (the same)
  uint32_t processes = 0, processes_cut_short = 0;
  // The files of the modules the processes loaded, each once, as read
  // (the same): record tells points it was not asked to record from them.
  std::vector<std::string> module_files;
  std::vector<std::string> frames;            // names: "sqlite3_step", "libz.so.1+0x1a2b"
  std::vector<std::vector<uint32_t>> stacks;  // frame ids, outermost first
  std::vector<RecordedThread> threads;
  std::vector<std::pair<uint32_t, uint32_t>> types;  // (thread, stack) per sample type
  TimeTree tree;                                     // times relative to start_ns
  // Per sample of `tree`, in its order: the CPU (or wall) time it stands
  // for, measured where it was taken (raw::SampleHeader::weight_ns). Empty
  // in recordings made before it was kept: SampleNs gives 1/hz then.
  std::vector<uint64_t> sample_ns;

  // Idle transitions: off unless recorded with them.
  bool idle = false;
  uint64_t switches_lost = 0;      // switch records the kernel dropped (a full ring)
  uint64_t threads_unwatched = 0;  // threads whose switches could not be watched
  uint64_t preemptions = 0;        // switches out while runnable: not waits, not in the tree
  // Waits without their stack: in the program, outside any wrapped
  // blocking call; from outside, a stack the kernel could not write.
  uint64_t waits_unattributed = 0;
  // CPU-wide: off unless recorded with the privileges it needs.
  bool cpu_wide = false;
  uint64_t cpu_switches_lost = 0;   // CPU-wide records the kernel dropped
  uint64_t cpu_idle_unmatched = 0;  // CPU-wide idle records with no wait of the thread near them
  std::vector<IdleType> idle_types;
  TimeTree idle_tree;                 // events by time; types index idle_types
  std::vector<uint64_t> idle_off_ns;  // per event of idle_tree, in its order: the wait's length
                                      // (0 when it had not ended by the end of the recording)

  // The field's view of the samples (field_view.h): the field stacks they
  // fold into, the distinct sets of them a sample makes (one stack per
  // packaged module on its stack), and each sample's set, in the order of
  // `tree` (empty in recordings made before it was kept).
  std::vector<FieldStackName> field_stacks;
  std::vector<std::vector<uint32_t>> field_sets;
  std::vector<uint32_t> sample_fields;

  // Points: off unless the program passed any.
  std::vector<SpanName> span_names;
  std::vector<RecordedSpan> spans;  // in order of begin
  uint64_t points_lost = 0;         // events the points recorder could not keep
};

// The samples of `r.tree` inside the spans named `name` (its index),
// counted once each however many spans hold them: a span's samples are
// those of its thread (of every thread of its process when it began on
// another), taken in [begin_ns, end_ns]. Exact, by type.
std::map<uint32_t, uint64_t> SamplesDuring(const Recording& r, uint32_t name);

// The time sample `i` of r.tree stands for (see Recording::sample_ns).
uint64_t SampleNs(const Recording& r, size_t i);

// The samples with t1 <= time <= t2, by type, counted exactly, with the
// time they stand for.
struct SampleTotals {
  uint64_t samples = 0, ns = 0;
};
std::map<uint32_t, SampleTotals> SampleTotalsByType(const Recording& r, uint64_t t1_ns,
                                                    uint64_t t2_ns);

// How samples were taken, in words: "CPU time, perf task-clock".
const char* SampleSourceName(uint32_t source);

// The name of the one frame of waits that no wrapped call explains.
inline constexpr const char* kUnattributedWait = "[wait without its stack]";

std::string EncodeRecording(const Recording& r);
[[nodiscard]] StatusOr<Recording> DecodeRecording(std::string_view bytes);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_RECORDING_H_
