// Reading the raw directory that fieldprof record's samplers write (a
// file per process, common/stacks/sampler_format.h) into a recording: all at
// once when the command has ended, or as the files grow while it runs.
#ifndef FIELDPROF_TOOLS_RECORD_RAW_DIR_READER_H_
#define FIELDPROF_TOOLS_RECORD_RAW_DIR_READER_H_

#include <cstdint>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "tools/record/recording.h"
#include "tools/record/time_tree.h"

namespace fieldprof::tools {

class Symbolizer;
class FieldFolder;

// A raw directory read as its files grow. Each Poll reads the whole
// records the samplers appended since the last, names and interns the new
// samples, and adds those taken up to a watermark to the time tree, in
// order of time (TimeTreeBuilder): the tree grows as the samples arrive.
// The others wait for a later Poll. A sample that comes when the tree is
// already past its time (a writer that fell behind the watermark) is kept
// apart, and the tree made again from all of them when a snapshot is
// taken; so is a sample read before the module records that name it
// (stale(): its recording is better made afresh from the whole files).
class RawDirReader {
 public:
  RawDirReader(std::string dir, const TimeTreeOptions& options);
  ~RawDirReader();
  RawDirReader(const RawDirReader&) = delete;
  RawDirReader& operator=(const RawDirReader&) = delete;

  // `watermark_ns`: CLOCK_MONOTONIC, the samples' clock; UINT64_MAX to add
  // everything read.
  [[nodiscard]] Status Poll(uint64_t watermark_ns);

  // The recording of what is in the tree so far, with every wait read;
  // `with_waiting`: and the samples still waiting for the watermark (they
  // are all later than the tree's, and join a copy of it).
  [[nodiscard]] StatusOr<Recording> Snapshot(bool with_waiting = false);

  size_t samples_in_tree() const { return builder_.samples(); }
  size_t samples_waiting() const { return pending_.size(); }
  size_t samples_late() const { return late_.size(); }
  bool stale() const { return stale_; }

 private:
  struct File;
  struct Interned;
  struct Sample {
    uint64_t time;
    uint32_t type;
    uint64_t weight;
    uint32_t field;  // its set of field stacks (Recording::field_sets)
  };
  [[nodiscard]] Status ReadMore(File& f);
  // `f`'s process's symbolizer, made with its modules as read so far.
  Symbolizer& SymOf(File& f);
  static constexpr size_t kSymbolizersKept = 8;
  std::list<File*> symbolized_;  // files whose symbolizer is kept, the latest used first
  // The points files' segments and scopes, as `r`'s spans (afresh).
  void Points(Recording* r);
  // The header's counts in r_ from the processes' files, afresh; their
  // last time.
  uint64_t CountProcesses(const std::vector<File*>& procs);
  // The samples' tree and each sample's weight (`sample_ns`) and field
  // stacks (`sample_fields`): as grown, with the waiting samples when
  // asked; or, when a sample came late, made from them all. Times are
  // after r_.start_ns (those before it, 0).
  [[nodiscard]] StatusOr<TimeTree> SamplesTree(bool with_waiting, std::vector<uint64_t>* sample_ns,
                                               std::vector<uint32_t>* sample_fields);

  std::string dir_;
  TimeTreeOptions options_;
  Recording r_;  // frames, stacks, threads, types as interned so far
  std::vector<std::unique_ptr<File>> files_;
  TimeTreeBuilder builder_;
  std::vector<uint64_t> sample_ns_;      // per sample of builder_
  std::vector<uint32_t> sample_fields_;  // the same
  std::unique_ptr<FieldFolder> folder_;
  std::vector<Sample> pending_, late_;
  bool stale_ = false;
  std::set<std::string> module_files_seen_;  // r_.module_files, to look up
  std::unique_ptr<Interned> in_;
};

// Reads every raw file in `dir` (and the CPU-wide idle log, if there is
// one: cpu_switches.h) and makes the recording: stacks symbolised
// from the modules' ELF symbol tables and installed debug info (elfutils),
// names demangled. Processes cut short (no trailer) are read to their last
// whole record and counted.
[[nodiscard]] StatusOr<Recording> RecordingFromRawDir(const std::string& dir,
                                                      const TimeTreeOptions& options);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_RAW_DIR_READER_H_
