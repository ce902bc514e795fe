#include "common/snapshot/snapshot_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/base/durable_file.h"
#include "common/snapshot/snapshot.h"

namespace fieldprof {

namespace fs = std::filesystem;

namespace {

// "<index>-<16 hex>.frag" -> index, version.
bool ParseFragmentName(const std::string& name, uint32_t* index, uint64_t* version) {
  unsigned idx = 0;
  uint64_t ver = 0;
  int end = 0;
  if (std::sscanf(name.c_str(), "%u-%16" SCNx64 ".frag%n", &idx, &ver, &end) != 2) return false;
  if (static_cast<size_t>(end) != name.size()) return false;
  *index = idx;
  *version = ver;
  return true;
}

std::string FragmentName(uint32_t index, uint64_t version) {
  char name[48];
  std::snprintf(name, sizeof name, "%u-%016" PRIx64 ".frag", index, version);
  return name;
}

}  // namespace

std::string DefaultSnapshotCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg) return std::string(xdg) + "/fieldprof/snapshot";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home) return std::string(home) + "/.cache/fieldprof/snapshot";
  return "";
}

std::string DefaultSnapshotKeyPath() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg) return std::string(xdg) + "/fieldprof/snapshot-signing.pub";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home)
    return std::string(home) + "/.config/fieldprof/snapshot-signing.pub";
  return "";
}

StatusOr<std::string> SnapshotCache::SignedManifest() const {
  StatusOr<std::string> bytes = ReadWholeFile(dir_ + "/manifest.signed");
  if (!bytes.ok()) return NotFound("no snapshot in " + dir_ + " yet");
  return bytes;
}

StatusOr<wire::Manifest> SnapshotCache::Manifest() const {
  FP_ASSIGN_OR_RETURN(std::string bytes, SignedManifest());
  wire::SignedManifest s;
  wire::Manifest m;
  if (!s.ParseFromString(bytes) || !m.ParseFromString(s.manifest())) {
    return DataLoss(dir_ + "/manifest.signed does not parse");
  }
  return m;
}

std::string SnapshotCache::ManifestEtag() const {
  StatusOr<std::string> etag = ReadWholeFile(dir_ + "/manifest.etag");
  return etag.ok() ? *etag : "";
}

std::vector<CachedFragment> SnapshotCache::Fragments() const {
  std::map<uint32_t, CachedFragment> by_index;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(FragmentDir(), ec)) {
    CachedFragment f;
    if (!ParseFragmentName(e.path().filename().string(), &f.index, &f.version)) continue;
    struct stat st;
    if (::stat(e.path().c_str(), &st) != 0) continue;
    f.fetched_unix_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
    f.bytes = static_cast<uint64_t>(st.st_size);
    f.path = e.path().string();
    auto [it, inserted] = by_index.try_emplace(f.index, f);
    if (!inserted && f.fetched_unix_ms > it->second.fetched_unix_ms) it->second = f;
  }
  std::vector<CachedFragment> out;
  out.reserve(by_index.size());
  for (auto& [_, f] : by_index) out.push_back(std::move(f));
  return out;
}

StatusOr<wire::Fragment> SnapshotCache::ReadFragment(const CachedFragment& f) const {
  FP_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(f.path));
  wire::Fragment out;
  if (!out.ParseFromString(bytes) || out.index() != f.index) {
    return DataLoss(f.path + " is damaged (run fieldprof pull --all to fetch it again)");
  }
  return out;
}

Status SnapshotCache::ForEachRecord(const std::function<bool(const wire::Record&)>& fn) const {
  for (const CachedFragment& f : Fragments()) {
    FP_ASSIGN_OR_RETURN(wire::Fragment frag, ReadFragment(f));
    for (const wire::Record& r : frag.records()) {
      if (!fn(r)) return Status::Ok();
    }
  }
  return Status::Ok();
}

Status SnapshotCache::StoreManifest(const std::string& signed_bytes, const wire::Manifest& m,
                                    const std::string& etag) {
  FP_RETURN_IF_ERROR(MakeDirs(FragmentDir()));
  StatusOr<wire::Manifest> old = Manifest();
  if (old.ok() && old->fragment_count() != m.fragment_count()) {
    // Another split: no fragment held belongs to the new one.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(FragmentDir(), ec)) fs::remove(e.path(), ec);
  }
  FP_RETURN_IF_ERROR(WriteFileDurably(dir_ + "/manifest.signed", signed_bytes));
  return WriteFileDurably(dir_ + "/manifest.etag", etag);
}

Status SnapshotCache::StoreFragment(uint32_t index, uint64_t version, const std::string& bytes) {
  FP_RETURN_IF_ERROR(MakeDirs(FragmentDir()));
  const std::string name = FragmentName(index, version);
  FP_RETURN_IF_ERROR(WriteFileDurably(FragmentDir() + "/" + name, bytes));
  // The new copy is in place: drop the older ones of this index.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(FragmentDir(), ec)) {
    uint32_t i = 0;
    uint64_t v = 0;
    const std::string n = e.path().filename().string();
    if (ParseFragmentName(n, &i, &v) && i == index && n != name) fs::remove(e.path(), ec);
  }
  return Status::Ok();
}

namespace {

std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// The manifest to work from: the server's, or the cached one on 304.
StatusOr<wire::Manifest> FetchManifest(HttpsClient& client, SnapshotCache& cache,
                                       const SnapshotRefreshOptions& options,
                                       SnapshotRefreshResult* result) {
  HttpHeaders headers;
  // Only ask for "not modified" when the copy held still passes the checks
  // (the key may have changed since).
  StatusOr<std::string> held = cache.SignedManifest();
  const std::string etag = cache.ManifestEtag();
  if (held.ok() && !etag.empty() && OpenSignedManifest(*held, options.public_key_pem).ok()) {
    headers.emplace_back("If-None-Match", etag);
  }
  FP_ASSIGN_OR_RETURN(HttpReply r, client.Get("/v1/snapshot/manifest", headers));
  if (r.status == 304 && !headers.empty()) {
    result->manifest_not_modified = true;
    return OpenSignedManifest(*held, options.public_key_pem);
  }
  if (r.status == 404) {
    return NotFound("the aggregator has no snapshot: " + r.body.substr(0, 200));
  }
  if (r.status != 200) {
    return Unavailable("manifest: HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 200));
  }
  result->bytes_downloaded += r.body.size();
  StatusOr<wire::Manifest> m = OpenSignedManifest(r.body, options.public_key_pem);
  if (!m.ok()) return DataLoss("manifest rejected, cache kept: " + m.status().message());
  StatusOr<wire::Manifest> old = cache.Manifest();
  if (old.ok() && old->fragment_count() == m->fragment_count() &&
      old->snapshot_version() > m->snapshot_version()) {
    // A replayed older manifest: signed, but going back in time.
    return DataLoss("manifest rejected, cache kept: snapshot version " +
                    std::to_string(m->snapshot_version()) + " is older than the " +
                    std::to_string(old->snapshot_version()) + " held");
  }
  FP_RETURN_IF_ERROR(cache.StoreManifest(r.body, *m, r.etag));
  return m;
}

}  // namespace

StatusOr<SnapshotRefreshResult> RefreshSnapshot(HttpsClient& client, SnapshotCache& cache,
                                                const SnapshotRefreshOptions& options) {
  SnapshotRefreshResult result;
  FP_ASSIGN_OR_RETURN(wire::Manifest m, FetchManifest(client, cache, options, &result));
  result.snapshot_version = m.snapshot_version();
  result.fragment_count = m.fragment_count();

  // What is held, and what is wanted: first the fragments never held (in
  // index order), then the out-of-date ones, fetched longest ago first.
  std::vector<const CachedFragment*> held(m.fragment_count(), nullptr);
  const std::vector<CachedFragment> fragments = cache.Fragments();
  for (const CachedFragment& f : fragments) {
    if (f.index < held.size()) held[f.index] = &f;
  }
  std::vector<uint32_t> missing, stale;
  for (uint32_t i = 0; i < m.fragment_count(); ++i) {
    const uint64_t want = m.fragments(static_cast<int>(i)).version();
    if (held[i] == nullptr) {
      missing.push_back(i);
    } else if (held[i]->version != want) {
      stale.push_back(i);
    }
  }
  std::stable_sort(stale.begin(), stale.end(), [&](uint32_t a, uint32_t b) {
    return held[a]->fetched_unix_ms < held[b]->fetched_unix_ms;
  });
  std::vector<uint32_t> order = missing;
  order.insert(order.end(), stale.begin(), stale.end());
  if (options.max_fragments >= 0 && order.size() > static_cast<size_t>(options.max_fragments)) {
    order.resize(static_cast<size_t>(options.max_fragments));
  }

  Status stopped;
  int done = 0;
  for (uint32_t i : order) {
    if (options.progress)
      options.progress(done, static_cast<int>(order.size()), result.bytes_downloaded);
    ++done;
    const uint64_t version = m.fragments(static_cast<int>(i)).version();
    StatusOr<HttpReply> r =
        client.Get("/v1/snapshot/fragments/" + std::to_string(i) + "?version=" + Hex16(version));
    if (!r.ok()) {
      stopped = r.status();
      break;
    }
    if (r->status != 200) {
      // 404: replaced and no longer kept; the next refresh starts from a
      // newer manifest.
      stopped = Unavailable("fragment " + std::to_string(i) + ": HTTP " +
                            std::to_string(r->status) + " " + r->body.substr(0, 200));
      break;
    }
    result.bytes_downloaded += r->body.size();
    if (Status ok = CheckFragment(m, i, r->body); !ok.ok()) {
      ++result.rejected;
      result.problems.push_back(ok.message() + " (old copy kept)");
      continue;
    }
    FP_RETURN_IF_ERROR(cache.StoreFragment(i, version, r->body));
    ++result.fetched;
  }
  if (options.progress && stopped.ok()) {
    options.progress(done, static_cast<int>(order.size()), result.bytes_downloaded);
  }
  result.missing = static_cast<int>(m.fragment_count());
  for (const CachedFragment& f : cache.Fragments()) {
    if (f.index >= m.fragment_count()) continue;
    --result.missing;
    if (f.version == m.fragments(static_cast<int>(f.index)).version()) ++result.current;
  }
  if (!stopped.ok()) {
    result.problems.push_back(stopped.message());
  }
  return result;
}

}  // namespace fieldprof
