// The snapshot publisher: the all-time sums split into
// fragment_count fragments by FragmentOf, rebuilt a few at a time in
// rotation, each cycle from one consistent store snapshot, and listed in a
// manifest signed with Ed25519 (common/snapshot/snapshot.h has the formats and the
// client's checks).
//
// Fragments and manifest are kept in a SnapshotStorage (snapshot_storage.h):
// a directory for one aggregator, ClickHouse for several. A fragment's
// version is a digest of its bytes, so an unchanged fragment is the same
// one, and old versions stay for `keep_old` so that a client in the middle
// of a rotation never gets a 404.
//
// Several aggregators: the one holding the lease (lease.h) cycles; every
// one serves what the storage holds (Refresh), and a new holder carries on
// from the newest manifest there.
#ifndef FIELDPROF_AGGREGATOR_PUBLISH_PUBLISHER_H_
#define FIELDPROF_AGGREGATOR_PUBLISH_PUBLISHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "aggregator/metrics.h"
#include "aggregator/publish/lease.h"
#include "aggregator/publish/snapshot_storage.h"
#include "aggregator/store/store.h"
#include "common/base/status.h"
#include "common/crypto/signing.h"
#include "common/snapshot/snapshot.h"

namespace fieldprof::aggregator {

struct PublisherOptions {
  // Where fragments and manifest are kept when no SnapshotStorage is given.
  std::string dir;
  uint32_t fragment_count = kDefaultFragmentCount;
  uint32_t per_cycle = 8;  // fragments rebuilt per cycle (the first cycle builds all)
  std::chrono::hours keep_old{48};
  // Asked just before a cycle writes its manifest: false (the lease was
  // lost during the cycle) and the cycle ends without writing it. Null:
  // always true.
  std::function<bool()> may_write;
  // The upload token keys to sign into each manifest (Manifest.token_keys),
  // for a cycle at `now_unix_ms`. Null: none (no tokens).
  std::function<std::vector<wire::TokenKey>(int64_t now_unix_ms)> token_keys;
};

struct CycleResult {
  uint64_t snapshot_version = 0;
  uint32_t rebuilt = 0;  // fragments built this cycle
  uint32_t changed = 0;  // of those, how many got new bytes
  uint64_t series = 0;   // series scanned
  uint64_t bytes = 0;    // of the fragments rebuilt
  // Series the published snapshot marks suspect (aggregator/store/suspect.h),
  // as of this cycle's rebuilt fragments and the earlier ones'.
  uint64_t suspect = 0;
};

class Publisher {
 public:
  // `store`, `signer` and `storage` must outlive the publisher. A null
  // `storage`: a directory, options.dir.
  Publisher(Store* store, const Ed25519Signer* signer, PublisherOptions options,
            SnapshotStorage* storage = nullptr);

  // Opens the storage and reads its current manifest, if any (a new
  // storage starts empty).
  [[nodiscard]] Status Init();
  // Takes the storage's manifest when it is newer than the one served (a
  // manifest another aggregator published).
  [[nodiscard]] Status Refresh();
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
  Store* store_;
  const Ed25519Signer* signer_;
  PublisherOptions options_;
  std::unique_ptr<SnapshotStorage> own_storage_;  // when none was given
  SnapshotStorage* storage_;
  mutable std::mutex mu_;  // guards manifest_, signed_ and the fragment cache
  wire::Manifest manifest_;
  std::string signed_;
  // Fragments served lately, by (index, version): immutable, so kept until
  // kFragmentCacheBytes is reached (oldest out first).
  mutable std::map<std::pair<uint32_t, uint64_t>, std::string> cache_;
  mutable std::deque<std::pair<uint32_t, uint64_t>> cache_order_;
  mutable size_t cache_bytes_ = 0;
  static constexpr size_t kFragmentCacheBytes = 64 << 20;
  std::mutex cycle_mu_;                        // one cycle at a time
  std::vector<uint64_t> suspect_by_fragment_;  // GUARDED_BY(cycle_mu_)
};

// Runs publish cycles on a timer (first at once, unless the published
// manifest is younger than `interval`) and on demand (the admin call), while
// `lease` is held; without it, it refreshes what it serves from the storage
// every few seconds.
class PublishLoop {
 public:
  // `publisher`, `metrics` (may be null) and `lease` (null: always held)
  // must outlive the loop.
  PublishLoop(Publisher* publisher, std::chrono::seconds interval, Metrics* metrics,
              Lease* lease = nullptr);
  ~PublishLoop();
  PublishLoop(const PublishLoop&) = delete;
  PublishLoop& operator=(const PublishLoop&) = delete;

  void Start();
  void Stop();
  // One cycle now (serialized with the timer's), counted in the metrics.
  // Unavailable when another aggregator holds the lease.
  [[nodiscard]] StatusOr<CycleResult> RunNow(bool all = false);
  Publisher* publisher() const { return publisher_; }

 private:
  Publisher* publisher_;
  std::chrono::seconds interval_;
  Metrics* metrics_;
  Lease* lease_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_PUBLISH_PUBLISHER_H_
