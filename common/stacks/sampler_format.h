// The raw files `fieldprof record`'s sampler writes, one per process
// (agent/preload/sampler/), read back by the command line
// (tools/record/recording.h). Native byte order: written and read on the
// same machine. A file: FileHeader, then tagged records until the end:
//   'S' SampleHeader, then `depth` return addresses, innermost first;
//   'M' ModuleHeader, then the module's path (path_len bytes), repeated
//       whenever the set of loaded modules changed;
//   'W' Switch: the thread left the CPU or came back (PERF_RECORD_SWITCH);
//   'B' BlockedHeader, then `depth` return addresses: a wrapped blocking
//       call during which the thread's switch records [from, to) were
//       written, and where it was called from;
//   'E' Trailer, when the process ended normally.
// A file cut short (a killed process) is read up to its last whole record.
#ifndef FIELDPROF_COMMON_STACKS_SAMPLER_FORMAT_H_
#define FIELDPROF_COMMON_STACKS_SAMPLER_FORMAT_H_

#include <cstdint>

namespace fieldprof::raw {

inline constexpr char kMagic[8] = {'F', 'P', 'R', 'A', 'W', '3', '\n', 0};
inline constexpr int kMaxFrames = 128;

// How CPU-time samples were taken.
enum SampleSource : uint32_t {
  kThreadTimers = 0,   // timer_create per thread: at most one per kernel tick
  kTaskClock = 1,      // perf_event task-clock per thread, user and kernel time
  kTaskClockUser = 2,  // the same, user time only (perf_event_paranoid >= 2)
  kWallTimers = 3,     // --wall: CLOCK_MONOTONIC timers per thread
  // From outside (perf_sampler.h): task-clock events of fieldprof record
  // on the command, the stacks copied and unwound afterwards.
  kPerfOutside = 4,      // user and kernel time
  kPerfOutsideUser = 5,  // user time only (perf_event_paranoid >= 2)
  kNoSamples = 6,        // the in-process file of a recording sampled from outside
};

inline bool IsPerfSource(uint32_t source) {
  return source == kPerfOutside || source == kPerfOutsideUser;
}

struct FileHeader {
  char magic[8];
  uint32_t pid;
  uint32_t hz;
  uint64_t start_ns;  // CLOCK_MONOTONIC
  uint32_t wall;      // 1: wall-clock samples, 0: CPU time
  uint32_t source;    // SampleSource
  uint32_t idle;      // 1: switches are watched ('W' and 'B' records)
  uint32_t flags;     // kSteppedAside...
};

// FileHeader::flags: the in-process sampler took no samples in this
// process because the program owns the signals it samples by (a Go
// program: its runtime installs its handlers with the raw system call).
inline constexpr uint32_t kSteppedAside = 1;

struct SampleHeader {
  uint64_t time_ns;  // CLOCK_MONOTONIC
  uint32_t tid;
  uint16_t cpu;
  uint16_t depth;
  // The time the sample stands for: on its clock (the thread's CPU time,
  // or wall time), since the thread's previous sample. A timer that fired
  // late, a sample skipped or throttled, an overrun: the next one counts
  // what they covered. 0: not known (the reader takes 1/hz).
  uint64_t weight_ns;
};

struct ModuleHeader {
  uint64_t bias;    // the load address its ELF addresses are relative to
  uint64_t lo, hi;  // its executable range
  uint16_t path_len;
  uint16_t reserved[3];
};

// Switch records come from one ring per thread (`ring`, numbered in the
// process from 1); `pos` is the record's offset in that ring's stream.
struct Switch {
  uint64_t time_ns;  // CLOCK_MONOTONIC
  uint64_t pos;
  uint32_t ring;
  uint32_t tid;
  uint16_t cpu;
  uint8_t out;      // 1: left the CPU, 0: came back
  uint8_t preempt;  // left while still runnable (not a wait)
  uint32_t reserved;
};

struct BlockedHeader {
  uint64_t from, to;  // the ring's switch records written during the call
  uint32_t ring;
  uint32_t tid;
  uint16_t depth;
  uint16_t reserved[3];
};

struct Trailer {
  uint64_t end_ns;
  uint64_t dropped;            // samples the writer was too far behind to keep
  uint64_t skipped;            // samples not taken: the thread was in the dynamic linker
  uint64_t switches_lost;      // switch records the kernel could not write (a full ring)
  uint64_t threads_unwatched;  // threads whose switches could not be watched
  uint64_t throttled;          // samples not taken: sampling held to its share of a thread
  uint64_t signal_taken;       // 1: the program took the sampling signal's handler for itself
                               // by the raw system call (its samples went to it, not to us)
  uint64_t seccomp_aside;      // 1: the file ended as the program installed a seccomp filter
};

}  // namespace fieldprof::raw

#endif  // FIELDPROF_COMMON_STACKS_SAMPLER_FORMAT_H_
