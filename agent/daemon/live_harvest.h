// The agent's side of the live files (agent/preload/runtime/records/live_layout.h): turns
// the counts measured runs keep there into spool records, so that a run
// killed by a signal still reaches the field, and a run that goes on for
// days is heard every interval.
//
// Each pass, for every live file of this user:
//   - its image ended (the alive lock is free: exit, a signal, exec) and
//     the runtime wrote its record (kLiveRetired): the file goes;
//   - its image ended otherwise (killed; or ended after parts were
//     reported, kLiveEnded): what it counted since its last part, if any,
//     becomes its last part, and the file goes;
//   - it goes on, and its last part (or its start) is `interval_s` old:
//     what it counted since becomes its next part.
// A part is a spool record (RunRecord.part n, runs 1 in the first part each
// API appears in, 0 after), named run-<start ms>-<pid>-<id>-p<n>.fpr, so
// that a part written again after a crash replaces itself. What was
// reported is kept in the agent's state (live/<file>.base) until the run's
// last part is written. The part is announced in the file (`parts`) before
// it is written, so the runtime, seeing it at exit, leaves the rest to the
// agent instead of writing the whole run.
//
// Bounds: calls still in flight when a process dies are lost; a histogram
// bucket read in the middle of an update (its count and sums disagree) is
// left for the next look, or, at the last look of a killed run, dropped
// and counted. Point series (docs/points.md) are not in live files: a
// killed run loses them, and a run reported in parts reports none. A run
// whose image ended without writing its stacks (killed) has them folded
// here into its last part (live_stacks.h).
#ifndef FIELDPROF_AGENT_DAEMON_LIVE_HARVEST_H_
#define FIELDPROF_AGENT_DAEMON_LIVE_HARVEST_H_

#include <cstdint>
#include <string>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"

namespace fieldprof::agent {

struct LiveHarvestConfig {
  std::string live_dir;      // the runtime's (common/spool/spool.h DefaultLiveDir)
  std::string spool_dir;     // where parts go
  std::string state_dir;     // what was reported: <state_dir>/live/
  int64_t interval_s = 300;  // a live run's parts at most this often
  // The machine's TSC rate (common/settings/tsc_rate.h), for a run killed before it
  // calibrated its clock; 0: such a run's short calls are dropped.
  int64_t tsc_hz = 0;
  Platform platform;
};

struct LiveHarvestResult {
  int files = 0;               // live files looked at
  int parts_written = 0;       // spool records written
  int runs_ended = 0;          // files whose run was finished here and removed
  int retired_removed = 0;     // files the runtime had reported itself
  int unreadable = 0;          // not this layout, not ours: left alone
  uint64_t calls_dropped = 0;  // read in the middle of an update at a last look
  int stacks_folded = 0;       // stack series of killed runs (live_stacks.h)
};

// Whether `live_dir` holds a live file (a run going on, or one to report).
bool AnyLiveFile(const std::string& live_dir);

// One look at every live file (see above). `now_unix_ms`: the pass's time.
[[nodiscard]] StatusOr<LiveHarvestResult> HarvestLive(const LiveHarvestConfig& config,
                                                      int64_t now_unix_ms);

// The part of `now` (a cumulative reading of one histogram) not yet in
// `reported` (what earlier parts held, a valid wire histogram or empty),
// bucket by bucket, into `part` (valid by the wire rules, possibly empty);
// `reported` advances by it. A bucket whose reading disagrees with itself
// or with `reported` (read mid-update) is left for a later reading; with
// `last`, its calls are dropped and added to *dropped. The part's min and
// max lie in its lowest and highest buckets (now's own where they do).
void HistogramPart(const Histogram& now, wire::Histogram* reported, bool last,
                   wire::Histogram* part, uint64_t* dropped);

}  // namespace fieldprof::agent

#endif  // FIELDPROF_AGENT_DAEMON_LIVE_HARVEST_H_
