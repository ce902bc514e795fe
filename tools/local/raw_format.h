// The raw files `fieldprof record`'s sampler writes, one per process
// (tools/local/sampler/sampler.cc), read back by the command line
// (tools/local/recording.h). Native byte order: written and read on the
// same machine. A file: FileHeader, then tagged records until the end:
//   'S' SampleHeader, then `depth` return addresses, innermost first;
//   'M' ModuleHeader, then the module's path (path_len bytes), repeated
//       whenever the set of loaded modules changed;
//   'E' Trailer, when the process ended normally.
// A file cut short (a killed process) is read up to its last whole record.
#ifndef FIELDPROF_TOOLS_LOCAL_RAW_FORMAT_H_
#define FIELDPROF_TOOLS_LOCAL_RAW_FORMAT_H_

#include <cstdint>

namespace fieldprof::local::raw {

inline constexpr char kMagic[8] = {'F', 'P', 'R', 'A', 'W', '1', '\n', 0};
inline constexpr int kMaxFrames = 128;

struct FileHeader {
  char magic[8];
  uint32_t pid;
  uint32_t hz;
  uint64_t start_ns;  // CLOCK_MONOTONIC
  uint32_t wall;      // 1: wall-clock samples, 0: CPU time
  uint32_t reserved;
};

struct SampleHeader {
  uint64_t time_ns;  // CLOCK_MONOTONIC
  uint32_t tid;
  uint16_t cpu;
  uint16_t depth;
};

struct ModuleHeader {
  uint64_t bias;    // the load address its ELF addresses are relative to
  uint64_t lo, hi;  // its executable range
  uint16_t path_len;
  uint16_t reserved[3];
};

struct Trailer {
  uint64_t end_ns;
  uint64_t dropped;  // samples the writer was too far behind to keep
  uint64_t skipped;  // samples not taken: the thread was in the dynamic linker
};

}  // namespace fieldprof::local::raw

#endif  // FIELDPROF_TOOLS_LOCAL_RAW_FORMAT_H_
