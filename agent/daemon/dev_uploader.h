// Developer mode in the agent: the runs `fieldprof points
// record` leaves in the developer spool (-o DIR, or FIELDPROF_POINTS_DIR)
// go to the aggregator with the developer's token (POST /v1/dev/runs),
// exactly once, when a time or a size threshold is met:
//   - the oldest waiting run has waited max_age_ms since it was written, or
//   - the waiting runs come to max_bytes;
// then they go in uploads of at most max_bytes each (a run larger than
// that goes in parts). A run is waiting once its process finished writing
// it (its file says so), or 10 s after its last write (a killed process).
// A run still being written goes in parts as its bytes meet a threshold.
// Uploads are sealed in an outbox of their own first (common/spool/outbox.h),
// with the run files they consumed, so a crash loses nothing and sends
// nothing twice (the aggregator keeps a run once by its content hash).
// 2xx removes an upload; 400/403 sets it aside for good; 401 and anything
// else leaves it for the next pass. Developer mode is the developer's own
// consent: it does not wait for the field's.
#ifndef FIELDPROF_AGENT_DAEMON_DEV_UPLOADER_H_
#define FIELDPROF_AGENT_DAEMON_DEV_UPLOADER_H_

#include <cstdint>
#include <map>
#include <string>

#include "common/base/status.h"
#include "common/net/https_client.h"
#include "common/points/points_file.h"
#include "common/spool/outbox.h"

namespace fieldprof::agent {

struct DevConfig {
  std::string spool_dir;   // empty: developer mode off
  std::string token_file;  // its first line is the developer's token
  int64_t max_age_ms = 60000;
  int64_t max_bytes = 1000 * 1000;
  std::string outbox_dir, quarantine_dir;
};

struct DevPassResult {
  int runs_sealed = 0, uploads_sealed = 0, uploads_sent = 0, uploads_quarantined = 0;
  int uploads_waiting = 0;
  Status upload_status;  // why uploading stopped early, if it did
};

// When the oldest run waiting in `spool_dir` reaches `max_age_ms` (ms since
// the epoch; 0: nothing waits): the daemon wakes for it.
int64_t DevSealDeadline(const std::string& spool_dir, int64_t max_age_ms);

class DevUploader {
 public:
  explicit DevUploader(DevConfig config);

  [[nodiscard]] Status Init();
  // Seals what the thresholds (or `flush`) say is due, then, if `upload`,
  // sends the outbox oldest first.
  [[nodiscard]] StatusOr<DevPassResult> Pass(bool flush, bool upload, HttpsClient& client);

 private:
  Status Send(HttpsClient& client, DevPassResult* r);
  // A run still being written (`name` in the spool): seals its whole
  // records not yet sent as parts when a threshold (or `flush`) says so;
  // `last`: the run has ended, its rest goes as the last part.
  Status SealParts(const std::string& name, int64_t now, bool flush, bool last, DevPassResult* r);

  DevConfig config_;
  Outbox outbox_;
  // How far each run file in the spool has been read (by name), so that a
  // run still being written is read once, not again at every pass.
  std::map<std::string, fieldprof::PointsScan> scans_;
};

}  // namespace fieldprof::agent

#endif  // FIELDPROF_AGENT_DAEMON_DEV_UPLOADER_H_
