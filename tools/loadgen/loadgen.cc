#include "tools/loadgen/loadgen.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "common/json_writer.h"
#include "common/wire.h"
#include "tools/loadgen/api_query.h"

namespace fieldprof::tools {
namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
  return v[i];
}

// Keys of all pool batches, with the platform resolved.
std::vector<ApiKey> PoolKeys(const std::vector<wire::Batch>& pool) {
  std::map<std::string, ApiKey> keys;
  for (const wire::Batch& b : pool) {
    for (const wire::Record& r : b.records()) {
      ApiKey k = ApiKeyFromWire(r.key(), b.client_platform());
      keys.emplace(EncodeApiKey(k), k);
    }
  }
  std::vector<ApiKey> out;
  for (auto& [_, k] : keys) out.push_back(std::move(k));
  return out;
}

// Fetches every key's series with up to 8 connections: a module's series
// in one request (GET /v1/module), or one request per series when the
// module is token-protected.
StatusOr<std::vector<RemoteSeries>> FetchAll(const LoadOptions& o,
                                             const std::vector<ApiKey>& keys) {
  std::map<std::string, std::vector<size_t>> by_module;
  for (size_t i = 0; i < keys.size(); ++i) by_module[keys[i].module].push_back(i);
  std::vector<const std::pair<const std::string, std::vector<size_t>>*> modules;
  for (const auto& m : by_module) modules.push_back(&m);
  std::vector<RemoteSeries> out(keys.size());
  std::atomic<size_t> next{0};
  std::mutex err_mutex;
  Status err;
  std::vector<std::thread> threads;
  const int n = std::max(1, std::min(o.connections, 8));
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&] {
      HttpsClient client(o.client);
      auto fail = [&](const Status& s) {
        std::lock_guard lock(err_mutex);
        if (err.ok()) err = s;
      };
      for (size_t m = next++; m < modules.size(); m = next++) {
        const auto& [module, indexes] = *modules[m];
        StatusOr<std::map<std::string, RemoteSeries>> all = FetchModuleSeries(client, module);
        if (all.ok()) {
          for (size_t i : indexes) {
            auto it = all->find(EncodeApiKey(keys[i]));
            if (it != all->end()) out[i] = it->second;
          }
          continue;
        }
        if (all.status().code() != StatusCode::kNotFound) return fail(all.status());
        for (size_t i : indexes) {
          StatusOr<RemoteSeries> s = FetchSeries(client, keys[i]);
          if (!s.ok()) return fail(s.status());
          out[i] = std::move(*s);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!err.ok()) return err;
  return out;
}

}  // namespace

std::string LoadReport::ToText() const {
  std::ostringstream o;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "batches: %lld ok, %lld duplicate, %lld retried, %lld failed in %.2f s\n"
                "rate:    %.1f batches/s, %.0f records/s, %.1f MiB/s\n"
                "latency: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                (long long)batches_ok, (long long)batches_duplicate, (long long)batches_retried,
                (long long)batches_failed, seconds, batches_per_second(), records_per_second(),
                seconds > 0 ? bytes_ok / seconds / 1048576.0 : 0.0, latency_p50_ms, latency_p90_ms,
                latency_p99_ms, latency_max_ms);
  o << buf;
  if (batches_recovered > 0 || duplicates_missed > 0) {
    o << "retries: " << batches_recovered
      << " batches answered duplicate after a failed attempt had stored them, " << duplicates_missed
      << " resends answered as new\n";
  }
  if (keys_verified > 0 || keys_mismatched > 0) {
    o << "verify:  " << keys_verified << " series match the acknowledged sums, " << keys_mismatched
      << " differ" << (first_mismatch.empty() ? "" : " (first: " + first_mismatch + ")") << "\n";
  }
  if (!first_error.empty()) o << "first error: " << first_error << "\n";
  return o.str();
}

std::string LoadReport::ToJson() const {
  JsonWriter j;
  j.BeginObject();
  j.Key("batches_ok").Int(batches_ok).Key("batches_duplicate").Int(batches_duplicate);
  j.Key("batches_retried").Int(batches_retried).Key("batches_failed").Int(batches_failed);
  j.Key("batches_recovered").Int(batches_recovered);
  j.Key("duplicates_missed").Int(duplicates_missed);
  j.Key("records_ok").Int(records_ok).Key("bytes_ok").Int(bytes_ok).Key("seconds").Double(seconds);
  j.Key("batches_per_second").Double(batches_per_second());
  j.Key("records_per_second").Double(records_per_second());
  j.Key("latency_p50_ms").Double(latency_p50_ms).Key("latency_p90_ms").Double(latency_p90_ms);
  j.Key("latency_p99_ms").Double(latency_p99_ms).Key("latency_max_ms").Double(latency_max_ms);
  j.Key("keys_verified").Int(keys_verified).Key("keys_mismatched").Int(keys_mismatched);
  j.EndObject();
  return j.Take();
}

StatusOr<LoadReport> RunLoad(const LoadOptions& o, std::ostream* progress) {
  BatchGenerator gen(o.gen);
  std::vector<wire::Batch> pool;
  pool.reserve(o.pool);
  for (int i = 0; i < std::max(1, o.pool); ++i) pool.push_back(gen.Next());
  if (progress) {
    size_t bytes = 0, records = 0;
    for (auto& b : pool) {
      bytes += b.ByteSizeLong();
      records += b.records_size();
    }
    *progress << "loadgen: " << pool.size() << " distinct batches, mean "
              << bytes / pool.size() / 1024 << " KiB and " << records / pool.size()
              << " records each\n";
  }
  if (!o.dump_dir.empty()) {
    for (size_t i = 0; i < pool.size(); ++i) {
      pool[i].set_batch_id(gen.NewBatchId());
      std::ofstream f(o.dump_dir + "/batch-" + std::to_string(i) + ".pb", std::ios::binary);
      f << pool[i].SerializeAsString();
      if (!f) return IOError("writing into " + o.dump_dir);
    }
    return LoadReport{};
  }

  std::vector<ApiKey> keys;
  std::vector<RemoteSeries> before;
  if (o.verify) {
    keys = PoolKeys(pool);
    if (progress) *progress << "loadgen: reading " << keys.size() << " series before sending\n";
    StatusOr<std::vector<RemoteSeries>> b = FetchAll(o, keys);
    if (!b.ok()) return b.status().WithContext("verify (before)");
    before = std::move(*b);
  }

  std::vector<std::string> pool_bodies;
  std::vector<size_t> pool_id_offsets;
  for (const wire::Batch& b : pool) {
    pool_bodies.push_back(b.SerializeAsString());
    // batch_id is field 2, written right after schema_version: find its bytes.
    pool_id_offsets.push_back(pool_bodies.back().find(b.batch_id()));
  }

  LoadReport report;
  std::atomic<int64_t> next{0};
  std::vector<std::atomic<int64_t>> acked(pool.size());
  std::mutex mu;
  std::vector<double> latencies_ms;
  const auto start = Clock::now();
  const auto deadline =
      o.duration_s > 0 ? start + std::chrono::seconds(o.duration_s) : Clock::time_point::max();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0};
  std::thread reporter;
  if (progress) {
    reporter = std::thread([&] {
      while (!stop) {
        for (int i = 0; i < 20 && !stop; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (stop) break;
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        *progress << "loadgen: " << done.load() << " batches in " << static_cast<int>(s) << " s ("
                  << static_cast<int>(done.load() / s) << "/s)\n";
      }
    });
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < o.connections; ++t) {
    threads.emplace_back([&, t] {
      HttpsClient client(o.client);
      // Ids fresh in every run (the contents repeat with the seed): a run
      // must not resend another run's batches.
      BatchGenerator ids(
          {.seed = (uint64_t{std::random_device{}()} << 32 | std::random_device{}()) +
                   static_cast<uint64_t>(t)});
      std::vector<double> my_lat;
      LoadReport mine;
      while (Clock::now() < deadline) {
        const int64_t n = next++;
        if (o.batches > 0 && n >= o.batches) break;
        const size_t idx = static_cast<size_t>(n) % pool.size();
        const wire::Batch& b = pool[idx];
        // Patch a fresh id into the pre-encoded body: copying and
        // re-encoding the batch per send would take CPU from the server
        // being measured on the same machine.
        std::string body = pool_bodies[idx];
        const std::string id = ids.NewBatchId();
        body.replace(pool_id_offsets[idx], id.size(), id);
        // A batch counts once, when the first 200 for its id arrives:
        // an earlier attempt that failed in flight may have been stored,
        // so that 200 may say duplicate.
        bool stored = false;
        for (int send = 0; send < (o.resend_duplicates ? 2 : 1); ++send) {
          int backoff_ms = 50;
          for (int attempt = 1;; ++attempt) {
            const auto t0 = Clock::now();
            StatusOr<HttpReply> r = client.Post("/v1/batches", "application/x-protobuf", body);
            const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            if (r.ok() && r->status == 200) {
              my_lat.push_back(ms);
              const bool dup = r->body.find("\"duplicate\":true") != std::string::npos;
              if (!stored) {
                stored = true;
                ++mine.batches_ok;
                if (dup) ++mine.batches_recovered;
                mine.records_ok += b.records_size();
                mine.bytes_ok += static_cast<int64_t>(body.size());
                ++acked[idx];
                ++done;
              } else if (dup) {
                ++mine.batches_duplicate;
              } else {
                ++mine.duplicates_missed;
              }
              break;
            }
            const bool retryable =
                !r.ok() || r->status == 429 || r->status == 503 || r->status >= 500;
            if (!retryable || attempt >= o.max_attempts) {
              ++mine.batches_failed;
              if (mine.first_error.empty()) {
                mine.first_error = r.ok() ? "HTTP " + std::to_string(r->status) + ": " + r->body
                                          : r.status().ToString();
              }
              break;
            }
            ++mine.batches_retried;
            int wait = backoff_ms;
            if (r.ok() && r->retry_after_seconds > 0) wait = r->retry_after_seconds * 1000;
            wait = wait / 2 + static_cast<int>(ids.NewBatchId()[0] & 0x7f) * wait / 256;
            std::this_thread::sleep_for(std::chrono::milliseconds(wait));
            backoff_ms = std::min(backoff_ms * 2, 5000);
          }
        }
      }
      std::lock_guard lock(mu);
      report.batches_ok += mine.batches_ok;
      report.batches_duplicate += mine.batches_duplicate;
      report.batches_recovered += mine.batches_recovered;
      report.duplicates_missed += mine.duplicates_missed;
      report.batches_retried += mine.batches_retried;
      report.batches_failed += mine.batches_failed;
      report.records_ok += mine.records_ok;
      report.bytes_ok += mine.bytes_ok;
      if (report.first_error.empty()) report.first_error = mine.first_error;
      latencies_ms.insert(latencies_ms.end(), my_lat.begin(), my_lat.end());
    });
  }
  for (auto& t : threads) t.join();
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  if (reporter.joinable()) reporter.join();
  report.latency_p50_ms = Percentile(latencies_ms, 0.5);
  report.latency_p90_ms = Percentile(latencies_ms, 0.9);
  report.latency_p99_ms = Percentile(latencies_ms, 0.99);
  report.latency_max_ms = Percentile(latencies_ms, 1.0);

  if (o.verify) {
    // Ground truth: every acknowledged copy of every pool batch.
    std::map<std::string, Histogram> truth;
    for (size_t i = 0; i < pool.size(); ++i) {
      GroundTruth g;
      g.Add(pool[i]);
      for (int64_t k = 0; k < acked[i].load(); ++k) {
        for (const auto& [key, h] : g.by_key()) truth[key].Merge(h);
      }
    }
    // Accepted batches become visible once the aggregator has folded them.
    {
      HttpsClient client(o.client);
      for (int i = 0; i < 600; ++i) {
        StatusOr<HttpReply> m = client.Get("/metrics");
        if (m.ok() && m->body.find("\nfieldprof_pending_batches 0\n") != std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    if (progress) *progress << "loadgen: reading " << keys.size() << " series after sending\n";
    StatusOr<std::vector<RemoteSeries>> after = FetchAll(o, keys);
    if (!after.ok()) return after.status().WithContext("verify (after)");
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = truth.find(EncodeApiKey(keys[i]));
      const Histogram sent = it == truth.end() ? Histogram() : it->second;
      std::string d = CompareDelta(before[i], (*after)[i], sent);
      if (d.empty()) {
        ++report.keys_verified;
      } else {
        ++report.keys_mismatched;
        if (report.first_mismatch.empty()) {
          report.first_mismatch = keys[i].module + " " + keys[i].symbol + ": " + d;
        }
      }
    }
  }
  return report;
}

}  // namespace fieldprof::tools
