// Counters and latency of the aggregator, exported in Prometheus text format
// on GET /metrics. All methods are thread-safe and lock-free on the counting
// side (the reject-reason map takes a mutex, rejects are rare).
#ifndef FIELDPROF_AGGREGATOR_METRICS_H_
#define FIELDPROF_AGGREGATOR_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace fieldprof::aggregator {

// One Prometheus sample with its HELP and TYPE lines ("counter", "gauge").
void AppendPrometheusSample(std::string* out, const char* name, const char* type, const char* help,
                            const std::string& value);

// Durations counted in powers of two (bucket i: floor(log2 ns) == i),
// exported as a Prometheus histogram with buckets from 2^10 ns (~1 us)
// to 2^36 ns (~69 s).
class DurationHistogram {
 public:
  void Add(std::chrono::nanoseconds d);
  // The histogram's _bucket, _sum and _count lines (no HELP or TYPE), each
  // with `labels` ("stage=\"decode\"", or empty) before its own.
  void AppendPrometheus(std::string* out, const std::string& name, const std::string& labels) const;

 private:
  std::array<std::atomic<uint64_t>, 64> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

class Metrics {
 public:
  void BatchAccepted(uint64_t records, uint64_t bytes) {
    batches_accepted_.fetch_add(1, std::memory_order_relaxed);
    records_merged_.fetch_add(records, std::memory_order_relaxed);
    bytes_accepted_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void BatchDuplicate() { batches_duplicate_.fetch_add(1, std::memory_order_relaxed); }
  // `reason` is a validation rule or an HTTP-level reason ("too_large", ...).
  void BatchRejected(const std::string& reason);
  void StoreError() { store_errors_.fetch_add(1, std::memory_order_relaxed); }
  void Overloaded() { overloaded_.fetch_add(1, std::memory_order_relaxed); }
  // GET /v1/api answered an API as suspect (query_handler.cc).
  void SuspectAnswered() { suspect_answers_.fetch_add(1, std::memory_order_relaxed); }
  // Series the snapshot marks suspect, as of the last publish cycle.
  void SuspectSeries(uint64_t n) { suspect_series_.store(n, std::memory_order_relaxed); }
  void ConnectionOpened() { connections_.fetch_add(1, std::memory_order_relaxed); }
  void ConnectionClosed() { connections_.fetch_sub(1, std::memory_order_relaxed); }
  void ConnectionRefused() { connections_refused_.fetch_add(1, std::memory_order_relaxed); }
  void Timeout() { timeouts_.fetch_add(1, std::memory_order_relaxed); }
  void TlsError() { tls_errors_.fetch_add(1, std::memory_order_relaxed); }
  // Time from a request's complete header to its response being handed to
  // TLS (body read, queueing and handling included).
  void RequestLatency(std::chrono::nanoseconds d) { latency_.Add(d); }
  // Where that time went, for a request handed to a worker thread
  // (http/server.cc): from the end of its header (with any 100 Continue
  // exchange) until it is handed to the worker pool, the wait for a
  // worker, the handler, and the hop back to the connection's thread with
  // the answer (its TLS write not included).
  enum class RequestStage { kBody, kQueue, kHandler, kAnswer, kCount };
  void RequestStageTime(RequestStage stage, std::chrono::nanoseconds d) {
    request_stages_[static_cast<size_t>(stage)].Add(d);
  }
  // A batch's handling (ingest/ingest_handler.cc): decoding and the checks
  // of a batch that passed them; the store's write of an accepted batch
  // (the id's lookup and the synced write, with the waits for its id's
  // lock and the write group before it); and, after the answer, its fold
  // into the open sums (RocksDB; the ClickHouse store has none, its write
  // is all of it).
  enum class IngestStage { kDecode, kWrite, kFold, kCount };
  void IngestStageTime(IngestStage stage, std::chrono::nanoseconds d) {
    ingest_stages_[static_cast<size_t>(stage)].Add(d);
  }
  // One snapshot publish cycle (aggregator/publish/publisher.h).
  void PublishCycle(std::chrono::nanoseconds d, uint64_t snapshot_version, uint64_t bytes) {
    publish_cycles_.fetch_add(1, std::memory_order_relaxed);
    publish_last_ns_.store(static_cast<uint64_t>(d.count()), std::memory_order_relaxed);
    snapshot_version_.store(snapshot_version, std::memory_order_relaxed);
    publish_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void PublishFailed() { publish_failures_.fetch_add(1, std::memory_order_relaxed); }
  // A walk's answer (answer_cache.h) served as kept (fresh, or `stale`
  // while its refresh runs), built in the request, or rebuilt by the
  // refresher.
  void AnswerKept(bool stale) {
    (stale ? answers_stale_ : answers_kept_).fetch_add(1, std::memory_order_relaxed);
  }
  void AnswerBuilt() { answers_built_.fetch_add(1, std::memory_order_relaxed); }
  void AnswerRefreshed() { answers_refreshed_.fetch_add(1, std::memory_order_relaxed); }
  // An answer built before anyone asked it (AnswerCache::Warm).
  void AnswerWarmed() { answers_warmed_.fetch_add(1, std::memory_order_relaxed); }
  // A request that waited for another's build of the same answer.
  void AnswerJoined() { answers_joined_.fetch_add(1, std::memory_order_relaxed); }
  void SnapshotServed(uint64_t bytes) {
    snapshot_bytes_served_.fetch_add(bytes, std::memory_order_relaxed);
  }

  int64_t connections() const { return connections_.load(std::memory_order_relaxed); }
  uint64_t batches_accepted() const { return batches_accepted_.load(); }
  uint64_t batches_duplicate() const { return batches_duplicate_.load(); }
  uint64_t rejected(const std::string& reason) const;

  // Appends the exposition text (without the store's own lines).
  void AppendPrometheus(std::string* out) const;

 private:
  std::atomic<uint64_t> batches_accepted_{0};
  std::atomic<uint64_t> batches_duplicate_{0};
  std::atomic<uint64_t> records_merged_{0};
  std::atomic<uint64_t> bytes_accepted_{0};
  std::atomic<uint64_t> store_errors_{0};
  std::atomic<uint64_t> overloaded_{0};
  std::atomic<uint64_t> suspect_answers_{0};
  std::atomic<uint64_t> suspect_series_{0};
  std::atomic<int64_t> connections_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> timeouts_{0};
  std::atomic<uint64_t> tls_errors_{0};
  std::atomic<uint64_t> publish_cycles_{0};
  std::atomic<uint64_t> publish_failures_{0};
  std::atomic<uint64_t> publish_last_ns_{0};
  std::atomic<uint64_t> publish_bytes_{0};
  std::atomic<uint64_t> snapshot_version_{0};
  std::atomic<uint64_t> snapshot_bytes_served_{0};
  std::atomic<uint64_t> answers_kept_{0}, answers_stale_{0}, answers_built_{0},
      answers_refreshed_{0}, answers_warmed_{0}, answers_joined_{0};
  DurationHistogram latency_;
  std::array<DurationHistogram, static_cast<size_t>(RequestStage::kCount)> request_stages_;
  std::array<DurationHistogram, static_cast<size_t>(IngestStage::kCount)> ingest_stages_;
  mutable std::mutex rejected_mutex_;
  std::map<std::string, uint64_t> rejected_;  // GUARDED_BY(rejected_mutex_)
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_METRICS_H_
