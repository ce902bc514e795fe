#include "aggregator/publisher.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "common/durable_file.h"
#include "common/wire.h"

namespace fieldprof::aggregator {

namespace fs = std::filesystem;

Publisher::Publisher(Store* store, const Ed25519Signer* signer, PublisherOptions options)
    : store_(store), signer_(signer), options_(std::move(options)) {}

std::string Publisher::FragmentPath(uint32_t index, uint64_t version) const {
  char name[64];
  std::snprintf(name, sizeof name, "/fragments/%u-%016" PRIx64 ".frag", index, version);
  return options_.dir + name;
}

Status Publisher::Init() {
  if (options_.fragment_count == 0 || options_.per_cycle == 0) {
    return InvalidArgument("publisher: fragment_count and per_cycle must be at least 1");
  }
  FP_RETURN_IF_ERROR(MakeDirs(options_.dir + "/fragments"));
  StatusOr<std::string> signed_bytes = ReadWholeFile(options_.dir + "/manifest.signed");
  if (!signed_bytes.ok()) return Status::Ok();  // nothing published yet
  wire::SignedManifest s;
  wire::Manifest m;
  if (!s.ParseFromString(*signed_bytes) || !m.ParseFromString(s.manifest())) {
    return DataLoss("publisher: " + options_.dir + "/manifest.signed does not parse");
  }
  if (m.fragment_count() != options_.fragment_count) {
    // Another fragment count: every client's cache is moot; start over.
    return Status::Ok();
  }
  std::lock_guard lock(mu_);
  manifest_ = std::move(m);
  signed_ = std::move(*signed_bytes);
  return Status::Ok();
}

StatusOr<CycleResult> Publisher::Cycle(int64_t now_unix_ms, bool all) {
  std::lock_guard cycle(cycle_mu_);
  const uint32_t count = options_.fragment_count;
  wire::Manifest next;
  {
    std::lock_guard lock(mu_);
    next = manifest_;
  }
  const bool first = next.fragments_size() != static_cast<int>(count);
  // Which fragments this cycle rebuilds: all the first time (or when asked),
  // else the next per_cycle in rotation after the previous cycle's.
  std::vector<bool> rebuild(count, first || all);
  const uint64_t version = next.snapshot_version() + 1;
  if (!first) {
    const uint64_t start = (next.snapshot_version() * options_.per_cycle) % count;
    for (uint32_t i = 0; i < std::min(options_.per_cycle, count); ++i) {
      rebuild[(start + i) % count] = true;
    }
  }
  // One pass over one consistent snapshot.
  // Each series is encoded as it is scanned: a few hundred bytes kept per
  // series rather than a message with a heap object per bucket.
  std::vector<std::vector<EncodedRecord>> records(count);
  wire::Record r;
  CycleResult result;
  Status scan = store_->ForEachApi(ApiFilter(), [&](ApiAggregate&& a) {
    ++result.series;
    const uint32_t f = FragmentOf(a.key, count);
    if (!rebuild[f]) return true;
    r.Clear();
    ApiKeyToWire(a.key, r.mutable_key());
    HistogramToWire(a.histogram, r.mutable_histogram());
    r.set_runs(a.runs);
    if (a.truncated) r.set_truncated(true);
    if (a.resolution_ns != 0) r.set_resolution_ns(a.resolution_ns);
    records[f].push_back(EncodeRecord(r));
    return true;
  });
  if (!scan.ok()) return scan;
  if (first) {
    next.Clear();
    next.set_schema_version(kManifestSchemaVersion);
    next.set_fragment_schema_version(kFragmentSchemaVersion);
    next.set_fragment_count(count);
    for (uint32_t i = 0; i < count; ++i) next.add_fragments()->set_index(i);
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (!rebuild[i]) continue;
    const std::string bytes = EncodeFragmentFromEncoded(i, count, std::move(records[i]));
    const wire::FragmentInfo info = DescribeFragment(i, bytes);
    ++result.rebuilt;
    result.bytes += bytes.size();
    if (info.sha256() == next.fragments(static_cast<int>(i)).sha256()) continue;  // unchanged
    ++result.changed;
    const std::string path = FragmentPath(i, info.version());
    if (!fs::exists(path)) FP_RETURN_IF_ERROR(WriteFileDurably(path, bytes));
    // The version it replaces is kept for keep_old from now (its mtime is
    // when it was written, which may be long ago).
    if (const uint64_t old = next.fragments(static_cast<int>(i)).version(); old != 0) {
      const timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
      ::utimensat(AT_FDCWD, FragmentPath(i, old).c_str(), times, 0);
    }
    *next.mutable_fragments(static_cast<int>(i)) = info;
  }
  next.set_snapshot_version(version);
  next.set_created_unix_ms(now_unix_ms);
  StatusOr<std::string> signed_bytes = SignManifest(next, *signer_);
  if (!signed_bytes.ok()) return signed_bytes.status();
  FP_RETURN_IF_ERROR(WriteFileDurably(options_.dir + "/manifest.signed", *signed_bytes));
  {
    std::lock_guard lock(mu_);
    manifest_ = next;
    signed_ = std::move(*signed_bytes);
  }
  RemoveOldFragments(now_unix_ms);
  result.snapshot_version = version;
  return result;
}

void Publisher::RemoveOldFragments(int64_t now_unix_ms) {
  std::set<std::string> current;
  {
    std::lock_guard lock(mu_);
    for (const wire::FragmentInfo& f : manifest_.fragments()) {
      current.insert(FragmentPath(f.index(), f.version()));
    }
  }
  std::error_code ec;
  const auto keep = std::chrono::duration_cast<std::chrono::milliseconds>(options_.keep_old);
  for (const auto& e : fs::directory_iterator(options_.dir + "/fragments", ec)) {
    const std::string path = e.path().string();
    if (current.count(path) != 0) continue;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) continue;
    const int64_t mtime_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (now_unix_ms - mtime_ms > keep.count()) fs::remove(path, ec);
  }
}

StatusOr<std::string> Publisher::SignedManifestBytes() const {
  std::lock_guard lock(mu_);
  if (signed_.empty()) return NotFound("no snapshot published yet");
  return signed_;
}

StatusOr<wire::Manifest> Publisher::CurrentManifest() const {
  std::lock_guard lock(mu_);
  if (signed_.empty()) return NotFound("no snapshot published yet");
  return manifest_;
}

StatusOr<std::string> Publisher::FragmentBytes(uint32_t index, uint64_t version) const {
  if (version == 0) {
    std::lock_guard lock(mu_);
    if (index >= static_cast<uint32_t>(manifest_.fragments_size())) {
      return NotFound("no fragment " + std::to_string(index));
    }
    version = manifest_.fragments(static_cast<int>(index)).version();
  }
  return ReadWholeFile(FragmentPath(index, version));
}

PublishLoop::PublishLoop(Publisher* publisher, std::chrono::seconds interval, Metrics* metrics)
    : publisher_(publisher), interval_(interval), metrics_(metrics) {}

PublishLoop::~PublishLoop() { Stop(); }

StatusOr<CycleResult> PublishLoop::RunNow(bool all) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  StatusOr<CycleResult> r = publisher_->Cycle(now_ms, all);
  if (metrics_ != nullptr) {
    if (r.ok()) {
      metrics_->PublishCycle(std::chrono::steady_clock::now() - t0, r->snapshot_version, r->bytes);
    } else {
      metrics_->PublishFailed();
    }
  }
  return r;
}

void PublishLoop::Start() {
  thread_ = std::thread([this] {
    // Publish at once when nothing is published yet or the last cycle is
    // older than one interval (a restart does not delay the rotation).
    auto due = std::chrono::steady_clock::now();
    if (StatusOr<wire::Manifest> m = publisher_->CurrentManifest(); m.ok()) {
      const int64_t age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count() -
                             m->created_unix_ms();
      const auto left = std::chrono::milliseconds(
          std::max<int64_t>(0, std::chrono::milliseconds(interval_).count() - age_ms));
      due += left;
    }
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (cv_.wait_until(lock, due, [this] { return stop_; })) break;
      lock.unlock();
      StatusOr<CycleResult> r = RunNow();
      if (!r.ok()) {
        std::fprintf(stderr, "fieldprof-aggregator: publish cycle failed: %s\n",
                     r.status().ToString().c_str());
      }
      lock.lock();
      due = std::chrono::steady_clock::now() + interval_;
    }
  });
}

void PublishLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace fieldprof::aggregator
