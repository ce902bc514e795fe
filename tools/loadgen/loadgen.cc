#include "tools/loadgen/loadgen.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "common/base/json_writer.h"
#include "common/crypto/upload_tokens.h"
#include "common/wire/wire.h"
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
  o << "connections: " << connections_opened << " opened\n";
  if (batches_recovered > 0 || duplicates_missed > 0) {
    o << "retries: " << batches_recovered
      << " batches answered duplicate after a failed attempt had stored them, " << duplicates_missed
      << " resends answered as new\n";
  }
  if (keys_verified > 0 || keys_mismatched > 0) {
    o << "verify:  " << keys_verified << " series match the acknowledged sums ("
      << stack_keys_verified << " of them field stacks), " << keys_mismatched << " differ"
      << (first_mismatch.empty() ? "" : " (first: " + first_mismatch + ")") << "\n";
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
  j.Key("connections_opened").Int(connections_opened);
  j.Key("duplicates_missed").Int(duplicates_missed);
  j.Key("records_ok").Int(records_ok).Key("bytes_ok").Int(bytes_ok).Key("seconds").Double(seconds);
  j.Key("cpu_seconds").Double(cpu_seconds);
  j.Key("batches_per_second").Double(batches_per_second());
  j.Key("records_per_second").Double(records_per_second());
  j.Key("latency_p50_ms").Double(latency_p50_ms).Key("latency_p90_ms").Double(latency_p90_ms);
  j.Key("latency_p99_ms").Double(latency_p99_ms).Key("latency_max_ms").Double(latency_max_ms);
  j.Key("keys_verified").Int(keys_verified).Key("keys_mismatched").Int(keys_mismatched);
  j.Key("stack_keys_verified").Int(stack_keys_verified);
  j.EndObject();
  return j.Take();
}

namespace {

// The pool of distinct batches sent round robin, and their encodings with
// where each one's batch id sits (patched per send).
struct Pool {
  std::vector<wire::Batch> batches;
  std::vector<std::string> bodies;
  std::vector<size_t> id_offsets;
  std::vector<size_t> token_offsets;  // with tokens: where each body's token output sits
  std::vector<UploadToken> tokens;    // one per batch to send, in order
};

// The byte a pool body's token output is filled with before each send
// writes the spent token's output over it (found by its offset).
constexpr char kTokenFillByte = '\x5a';

// `n` tokens from the aggregator, `per_request` at a time.
StatusOr<std::vector<UploadToken>> TakeTokens(const HttpsClientOptions& client, int64_t n,
                                              std::ostream* progress) {
  HttpsClient c(client);
  FP_ASSIGN_OR_RETURN(HttpReply info, c.Get("/v1/tokens"));
  if (info.status != 200) {
    return Unavailable("GET /v1/tokens answered " + std::to_string(info.status) +
                       " (an aggregator without --token_secret_file?): " + info.body);
  }
  const nlohmann::json j = nlohmann::json::parse(info.body, nullptr, false);
  const int per_request =
      j.is_object() && j.value("max_per_request", 0) > 0 ? j.value("max_per_request", 0) : 64;
  std::vector<UploadToken> out;
  while (static_cast<int64_t>(out.size()) < n) {
    const int want = static_cast<int>(std::min<int64_t>(per_request, n - out.size()));
    FP_ASSIGN_OR_RETURN(TokenRequestState req, MakeTokenRequest(want));
    FP_ASSIGN_OR_RETURN(HttpReply r, c.Post("/v1/tokens", "application/x-protobuf",
                                            req.request.SerializeAsString()));
    if (r.status != 200) {
      return Unavailable("POST /v1/tokens answered " + std::to_string(r.status) + ": " + r.body);
    }
    wire::TokenResponse resp;
    if (!resp.ParseFromString(r.body)) return DataLoss("POST /v1/tokens: not a TokenResponse");
    FP_ASSIGN_OR_RETURN(std::vector<UploadToken> got,
                        FinishTokenRequest(req, resp, resp.public_key()));
    out.insert(out.end(), got.begin(), got.end());
  }
  if (progress) *progress << "loadgen: took " << out.size() << " upload tokens\n";
  return out;
}

Pool MakePool(const LoadOptions& o, BatchGenerator& gen, std::vector<UploadToken> tokens,
              std::ostream* progress) {
  Pool p;
  p.tokens = std::move(tokens);
  for (int i = 0; i < std::max(1, o.pool); ++i) p.batches.push_back(gen.Next());
  for (size_t i = 0; i < p.batches.size(); ++i) {
    if (o.machines > 0) {
      std::string key(kMachineKeyBytes, 'M');
      const uint64_t m = i % static_cast<size_t>(o.machines) + o.gen.seed * 1000003;
      std::memcpy(key.data(), &m, sizeof m);
      p.batches[i].set_machine_key(key);
      // As agents mark them (common/spool/counted_series.h): with one key per
      // machine for the whole load, every record may say so; its entry is
      // the same however often the machine sends the series.
      for (wire::Record& r : *p.batches[i].mutable_records()) r.set_first_from_machine(true);
    }
    if (o.tokens) {
      p.batches[i].set_token(std::string(voprf::kOutputBytes, kTokenFillByte));
      // Every token of one run is of one epoch (taken just before).
      p.batches[i].set_token_epoch(p.tokens.empty() ? 0 : p.tokens[0].epoch);
    }
  }
  if (progress) {
    size_t bytes = 0, records = 0;
    for (auto& b : p.batches) {
      bytes += b.ByteSizeLong();
      records += b.records_size();
    }
    *progress << "loadgen: " << p.batches.size() << " distinct batches, mean "
              << bytes / p.batches.size() / 1024 << " KiB and " << records / p.batches.size()
              << " records each\n";
  }
  for (const wire::Batch& b : p.batches) {
    p.bodies.push_back(b.SerializeAsString());
    // batch_id is field 2, written right after schema_version: find its bytes.
    p.id_offsets.push_back(p.bodies.back().find(b.batch_id()));
    if (o.tokens) p.token_offsets.push_back(p.bodies.back().find(b.token()));
  }
  return p;
}

// What the senders share: the pool, the next batch to send, the copies of
// each pool batch acknowledged, progress.
struct SendState {
  const LoadOptions& o;
  const Pool& pool;
  std::atomic<int64_t> next{0};
  std::vector<std::atomic<int64_t>> acked;
  std::atomic<int64_t> done{0};
  Clock::time_point deadline;
  SendState(const LoadOptions& options, const Pool& p)
      : o(options), pool(p), acked(p.batches.size()) {}
};

// One sender's tally.
struct SenderTally {
  LoadReport report;
  std::vector<double> latencies_ms;
};

// Sends one batch (and, with resend_duplicates, once more), retrying
// 5xx/429/503 and network errors with jittered backoff. A batch counts
// once, when the first 200 for its id arrives: an earlier attempt that
// failed in flight may have been stored, so that 200 may say duplicate.
void SendBatch(HttpsClient& client, BatchGenerator& ids, size_t idx, const std::string& body,
               SendState& st, SenderTally* mine) {
  LoadReport& r = mine->report;
  bool stored = false;
  for (int send = 0; send < (st.o.resend_duplicates ? 2 : 1); ++send) {
    int backoff_ms = 50;
    for (int attempt = 1;; ++attempt) {
      const auto t0 = Clock::now();
      StatusOr<HttpReply> reply = client.Post("/v1/batches", "application/x-protobuf", body);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (reply.ok() && reply->status == 200) {
        mine->latencies_ms.push_back(ms);
        const bool dup = reply->body.find("\"duplicate\":true") != std::string::npos;
        if (!stored) {
          stored = true;
          ++r.batches_ok;
          if (dup) ++r.batches_recovered;
          r.records_ok += st.pool.batches[idx].records_size();
          r.bytes_ok += static_cast<int64_t>(body.size());
          ++st.acked[idx];
          ++st.done;
        } else {
          ++(dup ? r.batches_duplicate : r.duplicates_missed);
        }
        break;
      }
      const bool retryable =
          !reply.ok() || reply->status == 429 || reply->status == 503 || reply->status >= 500;
      if (!retryable || attempt >= st.o.max_attempts) {
        ++r.batches_failed;
        if (r.first_error.empty()) {
          r.first_error = reply.ok() ? "HTTP " + std::to_string(reply->status) + ": " + reply->body
                                     : reply.status().ToString();
        }
        break;
      }
      ++r.batches_retried;
      int wait = backoff_ms;
      if (reply.ok() && reply->retry_after_seconds > 0) wait = reply->retry_after_seconds * 1000;
      wait = wait / 2 + static_cast<int>(ids.NewBatchId()[0] & 0x7f) * wait / 256;
      std::this_thread::sleep_for(std::chrono::milliseconds(wait));
      backoff_ms = std::min(backoff_ms * 2, 5000);
    }
  }
}

// One connection's loop: the next pool batch, with a fresh id, until the
// count or the time is reached or the caller says stop.
SenderTally SendLoop(SendState& st, int t) {
  HttpsClient client(st.o.client);
  // Ids fresh in every run (the contents repeat with the seed): a run must
  // not resend another run's batches.
  BatchGenerator ids({.seed = (uint64_t{std::random_device{}()} << 32 | std::random_device{}()) +
                              static_cast<uint64_t>(t)});
  SenderTally mine;
  std::string body;  // each batch is copied into the same room
  while (Clock::now() < st.deadline && (st.o.stop == nullptr || !st.o.stop->load())) {
    const int64_t n = st.next++;
    if (st.o.batches > 0 && n >= st.o.batches) break;
    const size_t idx = static_cast<size_t>(n) % st.pool.batches.size();
    // Patch a fresh id into the pre-encoded body: copying and re-encoding
    // the batch per send would take CPU from the server being measured on
    // the same machine.
    body.assign(st.pool.bodies[idx]);
    if (st.o.tokens) {
      // The token's input is the batch id.
      const UploadToken& token = st.pool.tokens[static_cast<size_t>(n)];
      body.replace(st.pool.id_offsets[idx], token.input.size(), token.input);
      body.replace(st.pool.token_offsets[idx], token.output.size(), token.output);
      SendBatch(client, ids, idx, body, st, &mine);
      continue;
    }
    const std::string id = ids.NewBatchId();
    body.replace(st.pool.id_offsets[idx], id.size(), id);
    SendBatch(client, ids, idx, body, st, &mine);
  }
  mine.report.connections_opened = client.connections_opened();
  return mine;
}

void AddTally(const SenderTally& t, LoadReport* report, std::vector<double>* latencies_ms) {
  const LoadReport& m = t.report;
  report->batches_ok += m.batches_ok;
  report->batches_duplicate += m.batches_duplicate;
  report->batches_recovered += m.batches_recovered;
  report->duplicates_missed += m.duplicates_missed;
  report->batches_retried += m.batches_retried;
  report->batches_failed += m.batches_failed;
  report->connections_opened += m.connections_opened;
  report->records_ok += m.records_ok;
  report->bytes_ok += m.bytes_ok;
  if (report->first_error.empty()) report->first_error = m.first_error;
  latencies_ms->insert(latencies_ms->end(), t.latencies_ms.begin(), t.latencies_ms.end());
}

// Every series moved by exactly what was acknowledged: the ground truth of
// every acknowledged copy of every pool batch against the series read
// before and after (once the aggregator has folded what it accepted).
Status Verify(const LoadOptions& o, const SendState& st, const std::vector<ApiKey>& keys,
              const std::vector<RemoteSeries>& before, std::ostream* progress, LoadReport* report) {
  std::map<std::string, Histogram> truth;
  for (size_t i = 0; i < st.pool.batches.size(); ++i) {
    GroundTruth g;
    g.Add(st.pool.batches[i]);
    for (int64_t k = 0; k < st.acked[i].load(); ++k) {
      for (const auto& [key, h] : g.by_key()) truth[key].Merge(h);
    }
  }
  {
    HttpsClient client(o.client);
    for (int i = 0; i < 600; ++i) {  // up to a minute
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
    const std::string d = CompareDelta(before[i], (*after)[i], sent);
    if (d.empty()) {
      ++report->keys_verified;
      if (keys[i].metric == wire::METRIC_STACK_CPU_NS) ++report->stack_keys_verified;
      continue;
    }
    ++report->keys_mismatched;
    if (report->first_mismatch.empty()) {
      report->first_mismatch = keys[i].module + " " + keys[i].symbol + ": " + d;
    }
  }
  return Status::Ok();
}

// Every 2 s, how many batches went, until *stop.
std::thread ProgressReporter(std::ostream* progress, const SendState& st, Clock::time_point start,
                             const std::atomic<bool>* stop) {
  return std::thread([progress, &st, start, stop] {
    while (!*stop) {
      for (int i = 0; i < 20 && !*stop; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (*stop) break;
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      *progress << "loadgen: " << st.done.load() << " batches in " << static_cast<int>(s) << " s ("
                << static_cast<int>(static_cast<double>(st.done.load()) / s) << "/s)\n";
    }
  });
}

}  // namespace

StatusOr<LoadReport> RunLoad(const LoadOptions& o, std::ostream* progress) {
  BatchGenerator gen(o.gen);
  std::vector<UploadToken> tokens;
  if (o.tokens) {
    if (o.batches <= 0) return InvalidArgument("--tokens needs --batches (the tokens to take)");
    FP_ASSIGN_OR_RETURN(tokens, TakeTokens(o.client, o.batches, progress));
  }
  Pool pool = MakePool(o, gen, std::move(tokens), progress);
  if (!o.dump_dir.empty()) {
    for (size_t i = 0; i < pool.batches.size(); ++i) {
      pool.batches[i].set_batch_id(gen.NewBatchId());
      std::ofstream f(o.dump_dir + "/batch-" + std::to_string(i) + ".pb", std::ios::binary);
      f << pool.batches[i].SerializeAsString();
      if (!f) return IOError("writing into " + o.dump_dir);
    }
    return LoadReport{};
  }
  std::vector<ApiKey> keys;
  std::vector<RemoteSeries> before;
  if (o.verify) {
    keys = PoolKeys(pool.batches);
    if (progress) *progress << "loadgen: reading " << keys.size() << " series before sending\n";
    StatusOr<std::vector<RemoteSeries>> b = FetchAll(o, keys);
    if (!b.ok()) return b.status().WithContext("verify (before)");
    before = std::move(*b);
  }
  SendState st(o, pool);
  const std::clock_t cpu_start = std::clock();  // the process's CPU, every thread
  const auto start = Clock::now();
  st.deadline =
      o.duration_s > 0 ? start + std::chrono::seconds(o.duration_s) : Clock::time_point::max();
  std::atomic<bool> stop{false};
  std::thread reporter;
  if (progress) reporter = ProgressReporter(progress, st, start, &stop);
  std::vector<SenderTally> tallies(static_cast<size_t>(std::max(o.connections, 0)));
  std::vector<std::thread> threads;
  for (int t = 0; t < o.connections; ++t) {
    threads.emplace_back([&st, &tallies, t] { tallies[static_cast<size_t>(t)] = SendLoop(st, t); });
  }
  for (auto& t : threads) t.join();
  LoadReport report;
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  stop = true;
  if (reporter.joinable()) reporter.join();
  std::vector<double> latencies_ms;
  for (const SenderTally& t : tallies) AddTally(t, &report, &latencies_ms);
  report.latency_p50_ms = Percentile(latencies_ms, 0.5);
  report.latency_p90_ms = Percentile(latencies_ms, 0.9);
  report.latency_p99_ms = Percentile(latencies_ms, 0.99);
  report.latency_max_ms = Percentile(latencies_ms, 1.0);
  if (o.verify) FP_RETURN_IF_ERROR(Verify(o, st, keys, before, progress, &report));
  return report;
}

}  // namespace fieldprof::tools
