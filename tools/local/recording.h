// A recording (fieldprof record, issue #32): the samples of every process a
// command ran, symbolised, with their stacks and threads interned, in a
// time tree (tools/local/time_tree.h) whose sample types are (thread,
// stack) pairs. Made from the sampler's raw files (raw_format.h); saved as
// one file (.fprec).
#ifndef FIELDPROF_TOOLS_LOCAL_RECORDING_H_
#define FIELDPROF_TOOLS_LOCAL_RECORDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/local/time_tree.h"

namespace fieldprof::local {

struct RecordedThread {
  uint32_t pid = 0, tid = 0;
};

struct Recording {
  std::string command;
  uint32_t hz = 0;
  bool wall = false;
  uint64_t start_ns = 0;     // the first process's start (CLOCK_MONOTONIC); times are after it
  uint64_t duration_ns = 0;  // to the last process's end or last sample
  uint64_t dropped = 0, skipped = 0;
  uint32_t processes = 0, processes_cut_short = 0;
  std::vector<std::string> frames;            // names: "sqlite3_step", "libz.so.1+0x1a2b"
  std::vector<std::vector<uint32_t>> stacks;  // frame ids, outermost first
  std::vector<RecordedThread> threads;
  std::vector<std::pair<uint32_t, uint32_t>> types;  // (thread, stack) per sample type
  TimeTree tree;                                     // times relative to start_ns
};

// Reads every raw file in `dir` and makes the recording: stacks symbolised
// from the modules' ELF symbol tables and installed debug info (elfutils),
// names demangled. Processes cut short (no trailer) are read to their last
// whole record and counted.
[[nodiscard]] StatusOr<Recording> RecordingFromRawDir(const std::string& dir,
                                                      const TimeTreeOptions& options);

std::string EncodeRecording(const Recording& r);
[[nodiscard]] StatusOr<Recording> DecodeRecording(std::string_view bytes);

}  // namespace fieldprof::local

#endif  // FIELDPROF_TOOLS_LOCAL_RECORDING_H_
