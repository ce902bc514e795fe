#include "aggregator/publish/publisher.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "aggregator/store/calendar_tree.h"
#include "aggregator/store/k_anonymous_store.h"
#include "aggregator/store/suspect.h"
#include "common/base/durable_file.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator {

Publisher::Publisher(Store* store, const Ed25519Signer* signer, PublisherOptions options,
                     SnapshotStorage* storage)
    : store_(store), signer_(signer), options_(std::move(options)), storage_(storage) {}

Status Publisher::Init() {
  if (options_.fragment_count == 0 || options_.per_cycle == 0) {
    return InvalidArgument("publisher: fragment_count and per_cycle must be at least 1");
  }
  if (storage_ == nullptr) {
    FP_ASSIGN_OR_RETURN(std::unique_ptr<SnapshotStorage> local,
                        OpenLocalSnapshotStorage(options_.dir));
    own_storage_ = std::move(local);
    storage_ = own_storage_.get();
  }
  return Refresh();
}

Status Publisher::Refresh() {
  StatusOr<std::string> signed_bytes = storage_->ReadManifest();
  if (!signed_bytes.ok()) {
    if (signed_bytes.status().code() == StatusCode::kNotFound) return Status::Ok();  // none yet
    return signed_bytes.status();
  }
  wire::SignedManifest s;
  wire::Manifest m;
  if (!s.ParseFromString(*signed_bytes) || !m.ParseFromString(s.manifest())) {
    return DataLoss("publisher: the manifest in " + storage_->Describe() + " does not parse");
  }
  if (m.fragment_count() != options_.fragment_count) {
    // Another fragment count: every client's cache is moot; start over.
    return Status::Ok();
  }
  std::lock_guard lock(mu_);
  if (!signed_.empty() && m.snapshot_version() <= manifest_.snapshot_version()) {
    return Status::Ok();
  }
  manifest_ = std::move(m);
  signed_ = std::move(*signed_bytes);
  return Status::Ok();
}

namespace {

// Which fragments a cycle rebuilds: all the first time (or when asked), else
// the next per_cycle in rotation after the previous cycle's.
std::vector<bool> FragmentsToRebuild(const wire::Manifest& current, const PublisherOptions& o,
                                     bool first, bool all) {
  const uint32_t count = o.fragment_count;
  std::vector<bool> rebuild(count, first || all);
  if (!first) {
    const uint64_t start = (current.snapshot_version() * o.per_cycle) % count;
    for (uint32_t i = 0; i < std::min(o.per_cycle, count); ++i) rebuild[(start + i) % count] = true;
  }
  return rebuild;
}

// A series with runs and machines enough to be judged (suspect.h), and
// where its record is.
struct Candidate {
  uint32_t fragment;
  size_t index;
  ApiKey key;
  DayFigures all;
};

// One pass over one consistent snapshot: the series of the fragments to
// rebuild, each encoded as it is scanned (a few hundred bytes kept per
// series rather than a message with a heap object per bucket). Then the
// series that could be suspect are judged, on `today`, and marked.
Status ScanSeries(Store* store, const std::vector<bool>& rebuild, int32_t today,
                  std::vector<std::vector<EncodedRecord>>* records,
                  std::vector<uint64_t>* suspect_by_fragment, CycleResult* result) {
  const uint32_t count = static_cast<uint32_t>(rebuild.size());
  records->assign(count, {});
  std::vector<Candidate> candidates;
  wire::Record r;
  FP_RETURN_IF_ERROR(store->ForEachApi(ApiFilter(), [&](ApiAggregate&& a) {
    ++result->series;
    const uint32_t f = FragmentOf(a.key, count);
    if (!rebuild[f]) return true;
    r.Clear();
    ApiKeyToWire(a.key, r.mutable_key());
    HistogramToWire(a.histogram, r.mutable_histogram());
    r.set_runs(a.runs);
    if (a.truncated) r.set_truncated(true);
    if (a.resolution_ns != 0) r.set_resolution_ns(a.resolution_ns);
    const uint64_t machines = a.machines.Estimate();
    if (machines != 0) r.set_machine_count(machines);
    // Judged on machine-days, as the judge counts a day's machines.
    const uint64_t machine_days = a.day_machines.Estimate();
    if (a.runs >= kSuspectMinHistoryRuns + kSuspectMinDayRuns &&
        machine_days >= kSuspectMinHistoryMachines) {
      candidates.push_back(
          {f, (*records)[f].size(), a.key, {a.histogram.Mean(), a.runs, machine_days}});
    }
    (*records)[f].push_back(EncodeRecord(r));
    return true;
  }));
  // Outside the walk: a store may not take a query while it streams one.
  for (uint32_t f = 0; f < count; ++f) {
    if (rebuild[f]) (*suspect_by_fragment)[f] = 0;
  }
  for (const Candidate& c : candidates) {
    FP_ASSIGN_OR_RETURN(Suspicion s, JudgeSeries(store, c.key, c.all, today));
    if (!s.suspect) continue;
    EncodedRecord& e = (*records)[c.fragment][c.index];
    if (!r.ParseFromString(e.bytes)) return Internal("a record just encoded does not parse");
    r.set_suspect(s.reason);
    e = EncodeRecord(r);
    ++(*suspect_by_fragment)[c.fragment];
  }
  for (uint64_t n : *suspect_by_fragment) result->suspect += n;
  return Status::Ok();
}

// A manifest of `count` fragments, none published yet.
wire::Manifest EmptyManifest(uint32_t count) {
  wire::Manifest m;
  m.set_schema_version(kManifestSchemaVersion);
  m.set_fragment_schema_version(kFragmentSchemaVersion);
  m.set_fragment_count(count);
  for (uint32_t i = 0; i < count; ++i) m.add_fragments()->set_index(i);
  return m;
}

// The rebuilt fragments that changed, written to `storage` and entered in
// `next`; the versions they replace in *replaced.
Status WriteFragments(SnapshotStorage* storage, const std::vector<bool>& rebuild,
                      std::vector<std::vector<EncodedRecord>>* records, wire::Manifest* next,
                      std::set<std::pair<uint32_t, uint64_t>>* replaced, CycleResult* result) {
  const uint32_t count = static_cast<uint32_t>(rebuild.size());
  for (uint32_t i = 0; i < count; ++i) {
    if (!rebuild[i]) continue;
    const std::string bytes = EncodeFragmentFromEncoded(i, count, std::move((*records)[i]));
    const wire::FragmentInfo info = DescribeFragment(i, bytes);
    ++result->rebuilt;
    result->bytes += bytes.size();
    if (info.sha256() == next->fragments(static_cast<int>(i)).sha256()) continue;  // unchanged
    ++result->changed;
    FP_RETURN_IF_ERROR(storage->WriteFragment(i, info.version(), bytes));
    // The version it replaces is kept for keep_old from now.
    if (const uint64_t old = next->fragments(static_cast<int>(i)).version(); old != 0) {
      replaced->insert({i, old});
    }
    *next->mutable_fragments(static_cast<int>(i)) = info;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<CycleResult> Publisher::Cycle(int64_t now_unix_ms, bool all) {
  std::lock_guard cycle(cycle_mu_);
  // Carry on from the newest manifest stored (another aggregator may have
  // published since this one last did).
  FP_RETURN_IF_ERROR(Refresh());
  const uint32_t count = options_.fragment_count;
  wire::Manifest next;
  {
    std::lock_guard lock(mu_);
    next = manifest_;
  }
  const bool first = next.fragments_size() != static_cast<int>(count);
  const std::vector<bool> rebuild = FragmentsToRebuild(next, options_, first, all);
  const uint64_t version = next.snapshot_version() + 1;
  std::vector<std::vector<EncodedRecord>> records;
  CycleResult result;
  if (suspect_by_fragment_.size() != count) suspect_by_fragment_.assign(count, 0);
  const int32_t today = DayFromUnixSeconds(now_unix_ms / 1000);
  FP_RETURN_IF_ERROR(ScanSeries(store_, rebuild, today, &records, &suspect_by_fragment_, &result));
  if (first) next = EmptyManifest(count);
  std::set<std::pair<uint32_t, uint64_t>> replaced;
  FP_RETURN_IF_ERROR(WriteFragments(storage_, rebuild, &records, &next, &replaced, &result));
  next.set_snapshot_version(version);
  next.set_created_unix_ms(now_unix_ms);
  next.set_series_published(result.series);
  // The scan walked every series, so the totals are of this cycle.
  if (auto* k = dynamic_cast<KAnonymousStore*>(store_); k != nullptr) {
    FP_ASSIGN_OR_RETURN(WithheldTotals held, k->Totals(std::chrono::seconds(60)));
    next.set_k_anonymity(static_cast<uint32_t>(k->k()));
    next.set_series_withheld(static_cast<uint64_t>(std::max<int64_t>(held.series, 0)));
    next.set_modules_withheld(static_cast<uint64_t>(std::max<int64_t>(held.modules, 0)));
    next.set_machines_withheld(static_cast<uint64_t>(std::max<int64_t>(held.machines, 0)));
  }
  next.clear_token_keys();
  if (options_.token_keys) {
    for (wire::TokenKey& k : options_.token_keys(now_unix_ms))
      *next.add_token_keys() = std::move(k);
  }
  FP_ASSIGN_OR_RETURN(std::string signed_bytes, SignManifest(next, *signer_));
  if (options_.may_write && !options_.may_write()) {
    return Unavailable("the publishing lease was lost during the cycle; nothing published");
  }
  FP_RETURN_IF_ERROR(storage_->WriteManifest(version, signed_bytes, replaced));
  std::set<std::pair<uint32_t, uint64_t>> current;
  {
    std::lock_guard lock(mu_);
    manifest_ = next;
    signed_ = std::move(signed_bytes);
    for (const wire::FragmentInfo& f : manifest_.fragments()) {
      current.insert({f.index(), f.version()});
    }
  }
  storage_->RemoveOld(current,
                      std::chrono::duration_cast<std::chrono::milliseconds>(options_.keep_old));
  result.snapshot_version = version;
  return result;
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
  {
    std::lock_guard lock(mu_);
    if (version == 0) {
      if (index >= static_cast<uint32_t>(manifest_.fragments_size())) {
        return NotFound("no fragment " + std::to_string(index));
      }
      version = manifest_.fragments(static_cast<int>(index)).version();
    }
    if (auto it = cache_.find({index, version}); it != cache_.end()) return it->second;
  }
  StatusOr<std::string> bytes = storage_->ReadFragment(index, version);
  if (!bytes.ok()) return bytes;
  std::lock_guard lock(mu_);
  if (cache_.emplace(std::pair{index, version}, *bytes).second) {
    cache_order_.push_back({index, version});
    cache_bytes_ += bytes->size();
    while (cache_bytes_ > kFragmentCacheBytes && !cache_order_.empty()) {
      auto it = cache_.find(cache_order_.front());
      cache_bytes_ -= it->second.size();
      cache_.erase(it);
      cache_order_.pop_front();
    }
  }
  return bytes;
}

PublishLoop::PublishLoop(Publisher* publisher, std::chrono::seconds interval, Metrics* metrics,
                         Lease* lease)
    : publisher_(publisher), interval_(interval), metrics_(metrics), lease_(lease) {}

PublishLoop::~PublishLoop() { Stop(); }

StatusOr<CycleResult> PublishLoop::RunNow(bool all) {
  if (lease_ != nullptr && !lease_->Held()) {
    return Unavailable(
        "publishing runs on the aggregator that holds the lease; this one does "
        "not (" +
        lease_->Describe() + ")");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  StatusOr<CycleResult> r = publisher_->Cycle(now_ms, all);
  if (metrics_ != nullptr) {
    if (r.ok()) {
      metrics_->PublishCycle(std::chrono::steady_clock::now() - t0, r->snapshot_version, r->bytes);
      metrics_->SuspectSeries(r->suspect);
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
      // Without the lease: serve what the holder publishes, checked every
      // few seconds; with it, cycle when due.
      const bool held = lease_ == nullptr || lease_->Held();
      const auto wake =
          held ? due : std::min(due, std::chrono::steady_clock::now() + std::chrono::seconds(5));
      if (cv_.wait_until(lock, wake, [this] { return stop_; })) break;
      lock.unlock();
      if (lease_ != nullptr && !lease_->Held()) {
        if (Status s = publisher_->Refresh(); !s.ok()) {
          std::fprintf(stderr, "fieldprof-aggregator: reading the published snapshot: %s\n",
                       s.ToString().c_str());
        }
        lock.lock();
        continue;
      }
      if (std::chrono::steady_clock::now() < due) {
        lock.lock();
        continue;
      }
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
