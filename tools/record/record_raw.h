// The raw directory beside a recording being made (NAME.fprec.raw):
// what the samplers write while the command runs, how it is made into the
// recording (at the end, after a kill, or while it runs), and the follower
// that grows the recording's time tree as the samples arrive.
#ifndef FIELDPROF_TOOLS_RECORD_RECORD_RAW_H_
#define FIELDPROF_TOOLS_RECORD_RECORD_RAW_H_

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "common/base/status.h"
#include "tools/record/raw_dir_reader.h"
#include "tools/record/recording.h"

namespace fieldprof::tools {

// A directory removed with what is in it when this goes out of scope,
// unless kept (what it holds could not be made into a recording).
struct ScratchDir {
  std::string path;
  bool keep = false;
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty() && !keep) std::filesystem::remove_all(path, ec);
  }
};

// What the samplers write while the command runs goes to OUTPUT.raw/,
// beside the recording: a `fieldprof record` killed before it wrote the
// recording leaves it there, and `record recover` (or the next `record
// show` of OUTPUT) makes the recording from it. `kRawArgs` in it says how.
inline constexpr const char* kRawSuffix = ".raw";
inline constexpr const char* kRawArgs = "record.args";

// What the follower writes when a `record show` asks (kLiveWant) for the
// recording so far.
inline constexpr const char* kLiveWant = "live.want";
inline constexpr const char* kLiveFile = "live.fprec";

// How a raw directory is made into a recording: the time tree's
// parameters, the command, and how the perf rings were sampled.
struct RawArgs {
  int64_t hz = 999, m = 100, n = 2;
  double p = 0.95;
  bool kernel_time = false;
  std::string command;
  int64_t pid = 0;    // the fieldprof record writing it
  bool live = false;  // its follower answers kLiveWant
  // Idle transitions recorded: said in the processes' files of samples
  // too, since the sampler makes no file for a process that never waited.
  bool idle = false;
  // The points recorder was not preloaded: --points not given, and the
  // command's program and start libraries had none (command_points.h).
  // The recording's modules are then looked at for points, and any said.
  bool points_unasked = false;
};

[[nodiscard]] Status WriteRawArgs(const std::string& raw_dir, const RawArgs& r);
[[nodiscard]] StatusOr<RawArgs> ReadRawArgs(const std::string& raw_dir);
// What the command's start decided, after WriteRawArgs: a later line of a
// key is the one ReadRawArgs takes.
void AppendRawArg(const std::string& raw_dir, const char* key, int64_t value);

tools::TimeTreeOptions TreeOptions(const RawArgs& a);

// What became of a raw directory.
enum class Made { kWritten, kNothing, kNotWritten };

// Makes the recording from what the samplers left in `raw_dir` and writes
// it to `output`: from `followed` (the follower's reader, brought up to
// the end) unless it read a sample before the modules that name it, else
// from the files. kNothing when there is nothing to make one of,
// kNotWritten when it could not be written (both said, with `context`).
Made WriteRecording(const RawArgs& a, const std::string& raw_dir, const std::string& output,
                    const std::string& context, tools::RawDirReader* followed = nullptr);

// `fieldprof record recover DIR`, and `record show` of a recording whose
// fieldprof record was killed: the perf rings copied so far are unwound
// (when there are any left), the raw files made into the recording at
// `output`, and DIR removed once it is written.
bool Recover(const std::string& raw_dir, const std::string& output);

// The recording `file` for show: the file; or, when there is none but its
// raw directory, the live recording (its fieldprof record still runs) or
// the one a killed fieldprof record left (made and written now).
[[nodiscard]] StatusOr<tools::Recording> LoadForShow(const std::string& file);

// Follows a raw directory while the command runs, on a thread of its own:
// every 200 ms its reader takes what the samplers wrote, and the time tree
// grows by the samples taken up to half a second before (the samplers'
// writers drain every 20 to 50 ms). When a `record show` asks, it writes
// the recording so far, the last half second's samples added to a copy of
// the tree. Stop() ends the thread and hands over the reader.
class RawDirFollower {
 public:
  RawDirFollower(std::string raw_dir, const RawArgs& args);
  ~RawDirFollower();
  RawDirFollower(const RawDirFollower&) = delete;
  RawDirFollower& operator=(const RawDirFollower&) = delete;

  void Start();
  tools::RawDirReader& Stop();

 private:
  void Loop();
  void Answer();  // a `record show` asked: the recording so far, as kLiveFile

  std::string dir_;
  RawArgs args_;
  tools::RawDirReader reader_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
};

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_RECORD_RAW_H_
