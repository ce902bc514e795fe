#include "aggregator/metrics.h"

#include <algorithm>
#include <cstdio>

#include "common/statistics/histogram.h"

namespace fieldprof::aggregator {

void Metrics::BatchRejected(const std::string& reason) {
  std::lock_guard lock(rejected_mutex_);
  ++rejected_[reason];
}

uint64_t Metrics::rejected(const std::string& reason) const {
  std::lock_guard lock(rejected_mutex_);
  auto it = rejected_.find(reason);
  return it == rejected_.end() ? 0 : it->second;
}

void DurationHistogram::Add(std::chrono::nanoseconds d) {
  const uint64_t ns = d.count() <= 0 ? 1 : static_cast<uint64_t>(d.count());
  buckets_[BucketIndex(ns)].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

void DurationHistogram::AppendPrometheus(std::string* out, const std::string& name,
                                         const std::string& labels) const {
  const std::string before_le = labels.empty() ? "{" : "{" + labels + ",";
  const std::string braced = labels.empty() ? "" : "{" + labels + "}";
  // Requests go on while this is read: the buckets are held to the count
  // read first, so none passes +Inf (the count).
  const uint64_t count = count_.load(std::memory_order_relaxed);
  uint64_t cumulative = 0;
  for (int i = 0; i < 64; ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    if (i < 9 || i > 35) continue;  // le 2^10 ns (~1 us) .. 2^36 ns (~69 s)
    char le[32];
    std::snprintf(le, sizeof le, "%.9g", static_cast<double>(uint64_t{1} << (i + 1)) / 1e9);
    *out += name + "_bucket" + before_le + "le=\"" + le + "\"} " +
            std::to_string(std::min(cumulative, count)) + "\n";
  }
  *out += name + "_bucket" + before_le + "le=\"+Inf\"} " + std::to_string(count) + "\n";
  char sum[32];
  std::snprintf(sum, sizeof sum, "%.9g",
                static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9);
  *out += name + "_sum" + braced + " " + sum + "\n";
  *out += name + "_count" + braced + " " + std::to_string(count) + "\n";
}

namespace {

// A histogram family by stage: its HELP and TYPE, then one histogram for
// each of `stages` (its label values, as many as histograms: checked by
// the compiler).
template <size_t N>
void AppendStages(std::string* out, const char* name, const char* help,
                  const char* const (&stages)[N],
                  const std::array<DurationHistogram, N>& histograms) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
  for (size_t i = 0; i < N; ++i) {
    histograms[i].AppendPrometheus(out, name, std::string("stage=\"") + stages[i] + "\"");
  }
}

}  // namespace

void AppendPrometheusSample(std::string* out, const char* name, const char* type, const char* help,
                            const std::string& value) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
          name + " " + value + "\n";
}

void Metrics::AppendPrometheus(std::string* out) const {
  auto counter = [out](const char* name, const char* help, uint64_t v) {
    AppendPrometheusSample(out, name, "counter", help, std::to_string(v));
  };
  counter("fieldprof_batches_accepted_total",
          "Batches accepted (durable; applied to the sums shortly after).",
          batches_accepted_.load());
  counter("fieldprof_batches_duplicate_total", "Batches whose id was already applied.",
          batches_duplicate_.load());
  counter("fieldprof_records_merged_total", "Records merged into the store.",
          records_merged_.load());
  counter("fieldprof_batch_bytes_accepted_total", "Body bytes of accepted batches.",
          bytes_accepted_.load());
  counter("fieldprof_store_errors_total", "Batches that failed in the store (answered 5xx).",
          store_errors_.load());
  counter("fieldprof_overloaded_total", "Requests answered 503 because the work queue was full.",
          overloaded_.load());
  counter("fieldprof_suspect_answers_total",
          "GET /v1/api answers that flagged the API as suspect: its latest day moved far from its "
          "history, its runs from few machines.",
          suspect_answers_.load());
  counter("fieldprof_connections_refused_total", "Connections closed at the connection cap.",
          connections_refused_.load());
  counter("fieldprof_timeouts_total", "Connections cut because an operation timed out.",
          timeouts_.load());
  counter("fieldprof_tls_errors_total", "TLS handshakes or reads that failed.", tls_errors_.load());
  counter("fieldprof_publish_cycles_total", "Snapshot publish cycles completed.",
          publish_cycles_.load());
  counter("fieldprof_publish_failures_total", "Snapshot publish cycles that failed.",
          publish_failures_.load());
  counter("fieldprof_publish_bytes_total", "Bytes of fragments rebuilt by publish cycles.",
          publish_bytes_.load());
  counter("fieldprof_snapshot_bytes_served_total", "Manifest and fragment bytes sent to clients.",
          snapshot_bytes_served_.load());
  counter("fieldprof_answers_kept_total",
          "GET /v1/stacks answers served as kept, their sums unchanged since.",
          answers_kept_.load());
  counter("fieldprof_answers_stale_total",
          "GET /v1/stacks answers served as kept while batches applied since were summed into "
          "a new one (at most --answer_max_stale_s behind).",
          answers_stale_.load());
  counter("fieldprof_answers_built_total",
          "GET /v1/stacks answers built in the request (none kept, or kept too long).",
          answers_built_.load());
  counter("fieldprof_answers_refreshed_total",
          "Kept answers rebuilt in the background after batches were applied.",
          answers_refreshed_.load());
  counter("fieldprof_answers_warmed_total",
          "GET /v1/stacks answers built before anyone asked them: the big modules' usual "
          "questions, kept ready.",
          answers_warmed_.load());
  counter("fieldprof_answers_joined_total",
          "GET /v1/stacks requests that waited for another request's build of the same answer "
          "instead of building it too.",
          answers_joined_.load());
  auto gauge = [out](const char* name, const char* help, const std::string& v) {
    AppendPrometheusSample(out, name, "gauge", help, v);
  };
  gauge("fieldprof_publish_last_seconds", "Duration of the last publish cycle.",
        std::to_string(static_cast<double>(publish_last_ns_.load()) / 1e9));
  gauge("fieldprof_suspect_series",
        "Series the published snapshot marks suspect: their latest day moved far from their "
        "history, its runs from few machines.",
        std::to_string(suspect_series_.load()));
  gauge("fieldprof_snapshot_version", "Version of the snapshot being served.",
        std::to_string(snapshot_version_.load()));
  *out +=
      "# HELP fieldprof_batches_rejected_total Batches refused, by reason.\n"
      "# TYPE fieldprof_batches_rejected_total counter\n";
  {
    std::lock_guard lock(rejected_mutex_);
    for (const auto& [reason, n] : rejected_) {
      *out +=
          "fieldprof_batches_rejected_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
    }
  }
  gauge("fieldprof_connections", "Open client connections.", std::to_string(connections_.load()));
  *out +=
      "# HELP fieldprof_request_duration_seconds Request handling time.\n"
      "# TYPE fieldprof_request_duration_seconds histogram\n";
  latency_.AppendPrometheus(out, "fieldprof_request_duration_seconds", "");
  AppendStages(out, "fieldprof_request_stage_seconds",
               "Where a request handed to a worker spent its time: body (from the end of its "
               "header until handed to the workers), queue (waiting for a worker), handler, "
               "answer (the hop back to the connection).",
               {"body", "queue", "handler", "answer"}, request_stages_);
  AppendStages(out, "fieldprof_ingest_stage_seconds",
               "Where a batch's handling spent its time: decode (decoding and the checks, of "
               "batches that pass them), write (an accepted batch's id lookup and synced write), "
               "fold (into the open sums, after the answer).",
               {"decode", "write", "fold"}, ingest_stages_);
}

}  // namespace fieldprof::aggregator
