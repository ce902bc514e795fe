// The snapshot publisher (issue #5): the all-time sums split into
// fragment_count fragments by FragmentOf, rebuilt a few at a time in
// rotation, each cycle from one consistent store snapshot, and listed in a
// manifest signed with Ed25519 (common/snapshot.h has the formats and the
// client's checks).
//
// On disk, under `dir`:
//   fragments/<index>-<version hex>.frag   encoded Fragment messages; a
//       version is a digest of the bytes, so an unchanged fragment is the
//       same file, and old versions stay for `keep_old` so that a client in
//       the middle of a rotation never gets a 404;
//   manifest.signed                        the current SignedManifest.
#ifndef FIELDPROF_AGGREGATOR_PUBLISHER_H_
#define FIELDPROF_AGGREGATOR_PUBLISHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "aggregator/metrics.h"
#include "aggregator/store.h"
#include "common/signing.h"
#include "common/snapshot.h"
#include "common/status.h"

namespace fieldprof::aggregator {

struct PublisherOptions {
  std::string dir;
  uint32_t fragment_count = kDefaultFragmentCount;
  uint32_t per_cycle = 8;  // fragments rebuilt per cycle (the first cycle builds all)
  std::chrono::hours keep_old{48};
};

struct CycleResult {
  uint64_t snapshot_version = 0;
  uint32_t rebuilt = 0;  // fragments built this cycle
  uint32_t changed = 0;  // of those, how many got new bytes
  uint64_t series = 0;   // series scanned
  uint64_t bytes = 0;    // of the fragments rebuilt
};

class Publisher {
 public:
  // `store` and `signer` must outlive the publisher.
  Publisher(Store* store, const Ed25519Signer* signer, PublisherOptions options);

  // Reads the current manifest from `dir`, if any (a new directory starts empty).
  [[nodiscard]] Status Init();
  // One cycle: rebuilds the next `per_cycle` fragments in rotation (all of
  // them the first time), writes them, then the new signed manifest.
  // `all`: every fragment this time (an operator's "publish everything now").
  [[nodiscard]] StatusOr<CycleResult> Cycle(int64_t now_unix_ms, bool all = false);

  // What the HTTP endpoints serve. NotFound before the first cycle.
  [[nodiscard]] StatusOr<std::string> SignedManifestBytes() const;
  // Fragment `index` at `version` (0: the current one).
  [[nodiscard]] StatusOr<std::string> FragmentBytes(uint32_t index, uint64_t version = 0) const;
  // The current manifest (parsed), for ETags and listings.
  [[nodiscard]] StatusOr<wire::Manifest> CurrentManifest() const;

 private:
  std::string FragmentPath(uint32_t index, uint64_t version) const;
  void RemoveOldFragments(int64_t now_unix_ms);

  Store* store_;
  const Ed25519Signer* signer_;
  PublisherOptions options_;
  mutable std::mutex mu_;  // manifest_ and signed_
  wire::Manifest manifest_;
  std::string signed_;
  std::mutex cycle_mu_;  // one cycle at a time
};

// Runs publish cycles on a timer (first at once, unless the published
// manifest is younger than `interval`) and on demand (the admin call).
class PublishLoop {
 public:
  // `publisher` and `metrics` (may be null) must outlive the loop.
  PublishLoop(Publisher* publisher, std::chrono::seconds interval, Metrics* metrics);
  ~PublishLoop();
  PublishLoop(const PublishLoop&) = delete;
  PublishLoop& operator=(const PublishLoop&) = delete;

  void Start();
  void Stop();
  // One cycle now (serialized with the timer's), counted in the metrics.
  [[nodiscard]] StatusOr<CycleResult> RunNow(bool all = false);
  Publisher* publisher() const { return publisher_; }

 private:
  Publisher* publisher_;
  std::chrono::seconds interval_;
  Metrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_PUBLISHER_H_
