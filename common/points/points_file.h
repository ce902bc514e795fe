// The points a process recorded under `fieldprof points record`
// (common/points/points_format.h), read back: its sites, and its
// events in time order with their times in ns since the process started.
#ifndef FIELDPROF_COMMON_POINTS_POINTS_FILE_H_
#define FIELDPROF_COMMON_POINTS_POINTS_FILE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"

namespace fieldprof {

enum class PointKind : uint8_t { kPoint = 0, kBegin = 1, kEnd = 2 };

struct PointSite {
  std::string tag, name;
};

struct PointEvent {
  int64_t t_ns;   // since the process's recording began
  uint32_t site;  // index into PointsRun::sites
  uint32_t tid;
  int64_t value;
  PointKind kind;
  uint32_t stack = 0;  // the key of its stack in PointsRun::stacks; 0: none recorded
};

// A module the stacks' addresses are read against.
struct PointsModule {
  std::string path;
  uint64_t bias = 0, lo = 0, hi = 0;  // load bias; its code's span
};

struct PointsRun {
  std::string file;  // where it was read from
  std::string program;
  uint32_t pid = 0;
  uint64_t start_unix_ns = 0;  // when the recording began (CLOCK_REALTIME)
  // CLOCK_MONOTONIC at t_ns 0 (the first clock reading): an event's
  // monotonic time is start_mono_ns + t_ns.
  uint64_t start_mono_ns = 0;
  std::vector<PointSite> sites;
  std::vector<PointEvent> events;  // by time
  // Recorded with --stacks: each stack's return addresses, innermost first
  // (the one into the code that passed the point), and the modules. The
  // frames of fieldprof's own modules (points_format.h) are left out.
  std::map<uint32_t, std::vector<uint64_t>> stacks;
  std::vector<PointsModule> modules;
  // The stacks' frames named when the process ended, by return address
  // ('N', points_format.h); empty when the file has no names.
  std::map<uint64_t, std::string> frame_names;
  // The time taking those stacks paused the threads, taken out of their
  // events' times (each thread's later events are moved back by it).
  uint64_t stack_ns = 0;
  // The times a thread found its buffer full and waited for the recorder
  // to empty it, and how long they waited in all; taken out of the
  // thread's events' times like stacks' pauses.
  uint64_t waits = 0, wait_ns = 0;
  // Events the threads' buffers had no room for, and those of points
  // whose names the recorder could not read (their module was closed).
  uint64_t lost = 0;
  // Events recorded without the stack they would have had: taking stacks
  // had used up its share of their thread's time (points_format.h).
  uint64_t stackless = 0;
  bool complete = false;  // false: the process was killed or exec'd first
};

// What a run file holds so far, read on as the file grows: a reader that
// looks again (the agent, at each pass over a run still being written)
// reads only the bytes added since, not the file from its start.
struct PointsScan {
  uint64_t offset = 0;  // bytes read: through the last whole record
  std::string program;
  uint64_t start_unix_ns = 0;
  bool clock = false;                      // a clock reading came
  bool complete = false;                   // the end mark came
  bool stacks = false;                     // a stack came (recorded with --stacks)
  bool named = false;                      // the stacks' names came, after the end
  std::map<uint64_t, std::string> tag_of;  // site id -> tag
  std::map<uint64_t, uint64_t> events_at;  // site id -> events (sites named later count then)
  std::map<uint64_t, uint64_t> cut_at;     // the same in a batch cut short at the end

  // The events of named sites, as DecodePointsRun would keep them.
  uint64_t Events() const;
  // Nothing more is to come: the end, and the stacks' names if it has
  // stacks (the command names them once the process has ended).
  bool Finished() const { return complete && (!stacks || named); }
  std::set<std::string> Tags() const;
};

// Reads on: `more` is the file's bytes from scan->offset to its end. The
// offset moves past whole records only; the events of a batch cut short
// count (as DecodePointsRun keeps them) until the next look reads it again.
// InvalidArgument for bytes that are no points file.
[[nodiscard]] Status ScanPointsRun(std::string_view more, PointsScan* scan);
// The same, reading the file at `path` from scan->offset on.
[[nodiscard]] Status ScanPointsFile(const std::string& path, PointsScan* scan);

// One process's file, from its bytes; a damaged record ends the reading
// with the events before it kept, unless the header itself is damaged.
[[nodiscard]] StatusOr<PointsRun> DecodePointsRun(std::string_view bytes);
[[nodiscard]] StatusOr<PointsRun> ReadPointsRun(const std::string& path);

// Only a run file's stacks and modules (every frame, fieldprof's own
// included), and whether it ended and carries names ('N'): what naming
// its stacks needs, without its events.
struct PointsStacks {
  std::map<uint32_t, std::vector<uint64_t>> stacks;
  std::vector<PointsModule> modules;
  bool complete = false, named = false;
};
[[nodiscard]] StatusOr<PointsStacks> StacksOfPointsRun(std::string_view bytes);

// The *.fppoints files under each of `paths` (a directory, searched one
// level deep, or a file), by name. A path that is neither is an error.
[[nodiscard]] StatusOr<std::vector<std::string>> PointsFiles(const std::vector<std::string>& paths);

// Every *.fppoints file under each of `paths` (as PointsFiles), ordered by
// when each process began. An unreadable file is an error naming it.
[[nodiscard]] StatusOr<std::vector<PointsRun>> ReadPointsRuns(
    const std::vector<std::string>& paths);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_POINTS_POINTS_FILE_H_
