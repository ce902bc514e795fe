// The file that `fieldprof points record`'s recorder
// (agent/preload/points/recorder.cc) writes for each process, and that
// common/points/points_file.h reads (the CLI, and the agent in developer mode):
// "FPPOINTS1\n", then records, each a type byte and a fixed or length-prefixed body, all
// little-endian:
//   'H' header:  u32 pid, u64 realtime_ns at start, u16 len, the program's name
//   'C' clock:   u64 tsc, u64 CLOCK_MONOTONIC ns, read together
//   'R' rate:    u64 TSC ticks a second, as measured by the command (when
//                it was given one: for files cut before a second clock)
//   'S' site:    u32 index, u16 len, tag, u16 len, name (sites are
//                numbered from 0 as first seen; before their first event;
//                none for a site whose names could not be read, its module
//                closed: its events count as lost)
//   'P' batch:   u32 tid, u32 n, u64 the first event's tsc, then n events of
//                one thread, each a control byte and three little-endian
//                fields of the lengths it gives (PackedLengths): the tsc
//                less the previous one's (mod 2^64), 1-8 bytes; site
//                index << 2 | kind (0 a point, 1 a begin, 2 an end), 1-4
//                bytes; the value zigzag-coded, 0-8 bytes. What the
//                recorder writes: it packs an event without a branch.
//   'B' batch:   the same as 'P', each event three varints (LEB128)
//                instead; written until 2026-11, still read
//                Kind 3 (recorded with --stacks) is no event: its site
//                field holds a stack id (<< 2 | 3), its value, less its
//                low 8 bits, the TSC ticks taking the stack cost the
//                thread after the event's time (<< 8), and the low 8 bits
//                how many of the thread's events and stacks back that
//                event is (1: the one before; more when a signal
//                handler's points came between). With stack id 0 and 0
//                back it is a wait: the thread, its buffer full, waited
//                for the drain from its TSC on for that many ticks
//                (recorded with or without --stacks).
//   'K' stack:   u32 id (from 1), u16 depth, then depth u64 return
//                addresses, innermost first (recorded with --stacks)
//   'M' module:  u64 bias, u64 lo, u64 hi (its code), u16 len, its path:
//                what the stacks' addresses are read against; the whole
//                list again whenever a module came or went
//   'L' lost:    u32 tid, u64 events the thread's buffer had no room for
//   'T' stackless: u32 tid, u64 events of the thread recorded without the
//                stack they would have had (--stacks): taking stacks had
//                used up its share of the thread's time (kStackShare)
//   'X' the end: nothing follows but names (missing when the process was
//                killed or exec'd: the file is still read up to its last
//                record)
//   'N' names:   u32 n, then n times: u64 a return address of the stacks,
//                u16 len, its function's name (or module+offset). Written
//                after the end by the command once the process has ended,
//                while its modules are the ones it ran: the stacks then
//                read the same where the modules are not (an aggregator
//                in developer mode, another machine, a later build)
// Times are TSC ticks, turned into ns by the clock pairs' straight line.
#ifndef FIELDPROF_COMMON_POINTS_POINTS_FORMAT_H_
#define FIELDPROF_COMMON_POINTS_POINTS_FORMAT_H_

#include <cstdint>

namespace fieldprof::points {

inline constexpr char kMagic[] = "FPPOINTS1\n";  // 10 bytes
inline constexpr size_t kMagicSize = sizeof kMagic - 1;
inline constexpr char kHeader = 'H', kClock = 'C', kRate = 'R', kSite = 'S', kBatch = 'B',
                      kPackedBatch = 'P', kStack = 'K', kModule = 'M', kLost = 'L', kEnd = 'X',
                      kStackless = 'T', kNames = 'N';
// The kind of the event that carries the stack of the one before it.
inline constexpr uint32_t kStackKind = 3;
inline constexpr uint16_t kMaxStackDepth = 64;  // frames kept of a point's stack
inline constexpr uint64_t kMaxStackBack = 255;  // how far back a stack's event may be
// Taking stacks may take each thread this share of its time (1/N), after
// a first kStackBurstMs of it: past that, events go without their stacks
// (counted, 'T'), and a program whose stacks are slow to take (a signal
// handler's, every few us, in code libunwind must walk the slow way)
// still runs. A quarter, as perf's own default cap on the time its
// samples take (kernel.perf_cpu_time_max_percent = 25): at a half, a
// handler every 20 us left its thread about a tenth of its time on this
// VM (signal delivery takes about a third by itself), and none when the
// machine was busy.
inline constexpr uint64_t kStackShare = 4, kStackBurstMs = 50;

// The bytes that hold `v` little-endian, 1-8 (0 takes one).
inline uint32_t BytesFor(uint64_t v) {
  return static_cast<uint32_t>(71 - __builtin_clzll(v | 1)) >> 3;
}

// The bytes a zigzag-coded value takes in a packed event: 0 for 0, else
// BytesFor's, 7 taken as 8.
inline uint32_t PackedValueBytes(uint64_t zigzag) {
  const uint32_t n = BytesFor(zigzag) & -static_cast<uint32_t>(zigzag != 0);
  return n + (n == 7);
}

// A packed event's control byte: bits 0-2 the tsc delta's bytes less one,
// bits 3-4 the site field's bytes less one, bits 5-7 the value's bytes
// (0-6; 7 stands for 8). Fields of these lengths follow it.
struct PackedLengths {
  uint32_t tsc, site, value;
};
// `value_bytes` is PackedValueBytes's (never 7).
inline uint8_t PackedControl(uint32_t tsc_bytes, uint32_t site_bytes, uint32_t value_bytes) {
  return static_cast<uint8_t>((tsc_bytes - 1) | (site_bytes - 1) << 3 |
                              (value_bytes - (value_bytes >> 3)) << 5);
}
inline PackedLengths UnpackControl(uint8_t c) {
  const uint32_t v = c >> 5u;
  return {(c & 7u) + 1, ((c >> 3) & 3u) + 1, v + (v == 7)};
}
// The most a packed event takes, and what a buffer needs beyond its last
// event for the 8-byte stores that write each field.
inline constexpr size_t kMaxPackedEvent = 1 + 8 + 4 + 8, kPackedSlack = 8;

// One event in the recorder's rings, 24 bytes: a push writes less than a
// cache line's worth, and the ring's lines are most of its cost.
struct Event {
  uint64_t tsc;
  // The site's address in the process (8-aligned), | the kind (0-2, or
  // kStackKind), | in the top 8 bits, the ring's mark that it is whole.
  uint64_t site_kind;
  int64_t value;
};
inline constexpr uint32_t kMaxBatch = 1u << 20;  // events in one batch, at most
inline constexpr size_t kClockBody = 16;
inline constexpr size_t kLostBody = 4 + 8;
inline constexpr uint16_t kMaxString = 1024;  // longer tags and names are cut

// Environment of the recorded processes.
inline constexpr char kDirEnv[] = "FIELDPROF_POINTS_DIR";        // where each process writes
inline constexpr char kStacksEnv[] = "FIELDPROF_POINTS_STACKS";  // "1": each event's stack too
inline constexpr char kAutoEnv[] = "FIELDPROF_POINTS_AUTO";  // "1": points of the recorder's own
inline constexpr char kLibName[] = "libfieldprof-points.so";
// The runtime the front opens (agent/preload/runtime/front/front.cc), and every module
// of fieldprof's own a recorded process has loaded: their frames are no
// part of the program's stacks.
inline constexpr char kRuntimeLibName[] = "libfieldprof.so";
inline constexpr const char* kOwnModules[] = {kLibName, kRuntimeLibName, "libfieldprof-front.so",
                                              "libfieldprof-inert.so"};

}  // namespace fieldprof::points

#endif  // FIELDPROF_COMMON_POINTS_POINTS_FORMAT_H_
