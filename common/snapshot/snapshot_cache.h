// The client's copy of the published snapshot: the one reader
// every tool uses offline, and the refresh the agent and `fieldprof pull`
// run against an aggregator.
//
// On disk, under `dir` (default $XDG_CACHE_HOME/fieldprof/snapshot):
//   manifest.signed                 the last manifest that passed the checks
//   manifest.etag                   its ETag, for conditional requests
//   fragments/<i>-<version>.frag    one verified fragment per index; fragments
//                                   may come from older manifests (a client
//                                   refreshes a few at a time)
// Everything is replaced atomically (temp + rename), and only after the
// manifest's signature and the fragment's size and SHA-256 were checked: a
// bad download never touches what is there.
//
//   SnapshotCache cache(DefaultSnapshotCacheDir());
//   cache.ForEachRecord([](const wire::Record& r) { ...; return true; });
//
//   HttpsClient c(options);
//   StatusOr<SnapshotRefreshResult> r =
//       RefreshSnapshot(c, cache, {.max_fragments = 4, .public_key_pem = pem}, now_ms);
#ifndef FIELDPROF_COMMON_SNAPSHOT_SNAPSHOT_CACHE_H_
#define FIELDPROF_COMMON_SNAPSHOT_SNAPSHOT_CACHE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/net/https_client.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof {

// $XDG_CACHE_HOME/fieldprof/snapshot, else ~/.cache/fieldprof/snapshot.
std::string DefaultSnapshotCacheDir();
// The publisher's public key ships with the configuration:
// $XDG_CONFIG_HOME/fieldprof/snapshot-signing.pub (else ~/.config/...).
std::string DefaultSnapshotKeyPath();

struct CachedFragment {
  uint32_t index = 0;
  uint64_t version = 0;
  int64_t fetched_unix_ms = 0;  // when it was stored
  uint64_t bytes = 0;
  std::string path;
};

class SnapshotCache {
 public:
  explicit SnapshotCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // The manifest last stored (it passed the signature check then);
  // NotFound when there is none.
  [[nodiscard]] StatusOr<wire::Manifest> Manifest() const;
  [[nodiscard]] StatusOr<std::string> SignedManifest() const;
  std::string ManifestEtag() const;
  // The fragments held, by index (one per index: the newest, should an
  // interrupted replace have left two).
  std::vector<CachedFragment> Fragments() const;
  [[nodiscard]] StatusOr<wire::Fragment> ReadFragment(const CachedFragment& f) const;
  // Every record of every fragment held, one fragment in memory at a time.
  // `fn` returns false to stop. A fragment that does not parse is an error.
  [[nodiscard]] Status ForEachRecord(const std::function<bool(const wire::Record&)>& fn) const;

  // Writers; the caller has run the checks of common/snapshot/snapshot.h. A manifest
  // with another fragment count drops every fragment held.
  [[nodiscard]] Status StoreManifest(const std::string& signed_bytes, const wire::Manifest& m,
                                     const std::string& etag);
  [[nodiscard]] Status StoreFragment(uint32_t index, uint64_t version, const std::string& bytes);

 private:
  std::string FragmentDir() const { return dir_ + "/fragments"; }
  std::string dir_;
};

struct SnapshotRefreshOptions {
  // Fragments downloaded at most in this refresh: first those never held,
  // then the out-of-date ones fetched longest ago. Negative: all of them.
  int max_fragments = 4;
  std::string public_key_pem;  // the publisher's Ed25519 key
  // Called after each fragment: (done, to do, bytes downloaded so far).
  std::function<void(int, int, uint64_t)> progress;
};

struct SnapshotRefreshResult {
  uint64_t snapshot_version = 0;
  uint32_t fragment_count = 0;
  bool manifest_not_modified = false;  // answered 304
  int fetched = 0;                     // fragments downloaded and stored
  int rejected = 0;                    // fragments that failed their check (old copy kept)
  int current = 0;                     // held at the manifest's version after the refresh
  int missing = 0;                     // never held, after the refresh
  uint64_t bytes_downloaded = 0;       // manifest and fragment bodies
  std::vector<std::string> problems;   // one line per rejected fragment
};

// One refresh. Errors (nothing changed in the cache): the aggregator is
// unreachable or does not publish (Unavailable/NotFound), or the manifest
// fails its checks (DataLoss: bad signature, another key, damaged). A
// fragment that fails its check is counted, listed in `problems` and not
// stored; the refresh goes on with the others.
[[nodiscard]] StatusOr<SnapshotRefreshResult> RefreshSnapshot(
    HttpsClient& client, SnapshotCache& cache, const SnapshotRefreshOptions& options);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SNAPSHOT_SNAPSHOT_CACHE_H_
