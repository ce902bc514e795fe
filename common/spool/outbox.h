// The outbox: sealed batches waiting for upload, kept durably so that every
// spool record reaches the aggregator exactly once through crashes.
//
// Sealing a batch, in this order, each step durable (fsync of the file and
// of its directory) before the next:
//   1. <name>.consumed  the spool files the batch was built from;
//   2. <name>.batch     the encoded batch: from here on the batch exists;
//   3. the consumed spool files are deleted, then <name>.consumed.
// A seal may also move records held back across batches (HeldChange: the
// agent holds stack records for a day's batch, common/spool/spool_sealer.h): the
// held files it takes are listed in step 1 and deleted in step 3, and the
// held file it makes is listed in step 1 and written before step 2.
// Recover() finishes or undoes an interrupted seal: a .consumed with its
// .batch means step 3 was cut short (the spool files and the held files
// taken are deleted now, they are in the batch or the new held file);
// without its .batch the seal never happened (the held file it made goes,
// then the .consumed; the spool files and held files stay and will be
// batched again). A batch keeps its
// id until the aggregator acknowledges it, and the aggregator applies an id
// once, so a batch uploaded twice (crash after the 200) counts once.
//
// Names: <created ms, 13 digits>-<batch id hex>, so that names sort oldest first.
#ifndef FIELDPROF_COMMON_SPOOL_OUTBOX_H_
#define FIELDPROF_COMMON_SPOOL_OUTBOX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/durable_file.h"
#include "common/base/status.h"

namespace fieldprof {

struct OutboxEntry {
  std::string name;  // without extension
  std::string path;  // of the .batch file
  uint64_t bytes = 0;
};

// What a seal does to the held records (files in the outbox's held_dir):
// the files it takes, and the one it makes (none when made_name is empty).
struct HeldChange {
  std::vector<std::string> taken;
  std::string made_name;
  std::string made_bytes;
};

class Outbox {
 public:
  // `dir` holds the batches, `quarantine_dir` the ones the aggregator
  // refused for good, `held_dir` records held back across batches (empty:
  // none); all are created (mode 0700) when missing.
  Outbox(std::string dir, std::string quarantine_dir, std::string held_dir = "");

  [[nodiscard]] Status Init();
  // Finishes or undoes interrupted seals (see above); spool file names in a
  // .consumed are relative to `spool_dir`.
  [[nodiscard]] Status Recover(const std::string& spool_dir);

  // Steps 1-3 above. `consumed` are spool file names in `spool_dir`.
  [[nodiscard]] Status Seal(const std::string& name, const std::string& batch_bytes,
                            const std::string& spool_dir, const std::vector<std::string>& consumed,
                            const HeldChange& held = {});

  // Sealed batches, oldest first.
  [[nodiscard]] StatusOr<std::vector<OutboxEntry>> List() const;
  [[nodiscard]] StatusOr<std::string> Read(const OutboxEntry& e) const;
  // After the aggregator's 2xx.
  [[nodiscard]] Status Remove(const OutboxEntry& e);
  // After a 400/413/415: moved aside with the reason next to it, never retried.
  [[nodiscard]] Status Quarantine(const OutboxEntry& e, const std::string& reason);
  // Replaces a batch's bytes and then its name (`new_name`, without
  // extension), each step atomic and durable: after a crash the batch is
  // there once, under either name, with either content, never twice. For a
  // batch that was never applied taking a new id (the agent's Restamp).
  [[nodiscard]] StatusOr<OutboxEntry> Rewrite(const OutboxEntry& e, const std::string& new_name,
                                              const std::string& batch_bytes);

  const std::string& dir() const { return dir_; }
  const std::string& quarantine_dir() const { return quarantine_dir_; }
  const std::string& held_dir() const { return held_dir_; }

 private:
  std::string dir_;
  std::string quarantine_dir_;
  std::string held_dir_;
};

// The outbox name of a batch sealed at `created_unix_ms` with `batch_id` (raw bytes).
std::string OutboxName(int64_t created_unix_ms, const std::string& batch_id);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SPOOL_OUTBOX_H_
