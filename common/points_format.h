// The file that `fieldprof points record`'s recorder
// (tools/local/points/recorder.cc) writes for each process, and that
// common/points_file.h reads (the CLI, and the agent in developer mode):
// "FPPOINTS1\n", then records, each a type byte and a fixed or length-prefixed body, all
// little-endian:
//   'H' header:  u32 pid, u64 realtime_ns at start, u16 len, the program's name
//   'C' clock:   u64 tsc, u64 CLOCK_MONOTONIC ns, read together
//   'R' rate:    u64 TSC ticks a second, as measured by the command (when
//                it was given one: for files cut before a second clock)
//   'S' site:    u32 index, u16 len, tag, u16 len, name (sites are
//                numbered from 0 as first seen; before their first event)
//   'B' batch:   u32 tid, u32 n, u64 the first event's tsc, then n events of
//                one thread, each three varints (LEB128): the tsc less the
//                previous one's (mod 2^64), site index << 2 | kind (0 a
//                point, 1 a begin, 2 an end), the value zigzag-coded
//   'L' lost:    u32 tid, u64 events the thread's buffer had no room for
//   'X' the end: nothing follows (missing when the process was killed or
//                exec'd: the file is still read up to its last record)
// Times are TSC ticks, turned into ns by the clock pairs' straight line.
#ifndef FIELDPROF_COMMON_POINTS_FORMAT_H_
#define FIELDPROF_COMMON_POINTS_FORMAT_H_

#include <cstdint>

namespace fieldprof::local::points {

inline constexpr char kMagic[] = "FPPOINTS1\n";  // 10 bytes
inline constexpr size_t kMagicSize = sizeof kMagic - 1;
inline constexpr char kHeader = 'H', kClock = 'C', kRate = 'R', kSite = 'S', kBatch = 'B',
                      kLost = 'L', kEnd = 'X';

// One event in the recorder's rings, 24 bytes: a push writes less than a
// cache line's worth, and the ring's lines are most of its cost.
struct Event {
  uint64_t tsc;
  uint64_t site_kind;  // the site's address in the process (8-aligned), | the kind (0-2)
  int64_t value;
};
inline constexpr uint32_t kMaxBatch = 1u << 20;  // events in one batch, at most
inline constexpr size_t kClockBody = 16;
inline constexpr size_t kLostBody = 4 + 8;
inline constexpr uint16_t kMaxString = 1024;  // longer tags and names are cut

// Environment of the recorded processes.
inline constexpr char kDirEnv[] = "FIELDPROF_POINTS_DIR";  // where each process writes
inline constexpr char kLibName[] = "libfieldprof_points.so";

}  // namespace fieldprof::local::points

#endif  // FIELDPROF_COMMON_POINTS_FORMAT_H_
