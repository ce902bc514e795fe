#include "common/spool/batcher.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "common/wire/wire.h"

namespace fieldprof {

namespace {

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// The most the batch's own fields (all but the records) can take: an id,
// the largest time and counters, a platform.
size_t HeaderReserve(const Platform& platform) {
  wire::Batch b;
  b.set_schema_version(kSchemaVersion);
  b.set_batch_id(std::string(kBatchIdBytes, '\xff'));
  b.set_created_unix_ms(std::numeric_limits<int64_t>::min());  // 10-byte varint
  b.set_machine_key(std::string(kMachineKeyBytes, '\xff'));
  b.set_token(std::string(64, '\xff'));  // an upload token, when asked for
  b.set_token_epoch(std::numeric_limits<int64_t>::max());
  b.set_window_start_unix_ms(std::numeric_limits<int64_t>::min());
  PlatformToWire(platform, b.mutable_client_platform());
  wire::AgentCounters* c = b.mutable_counters();
  const uint64_t big = std::numeric_limits<uint64_t>::max();
  c->set_records_dropped(big);
  c->set_runs_refused_load_cap(big);
  c->set_runs_instrumented(big);
  c->set_records_quarantined(big);
  c->set_runs_refused_rate_cap(big);
  c->set_runs_measured_nothing(big);
  return b.ByteSizeLong();
}

}  // namespace

void CountRunInBatch(const wire::RunRecord& run, wire::AgentCounters* runs) {
  // A later part of a run reported in parts is no new run.
  if (run.part() > 1) return;
  if (run.counters().refused() != 0) {
    runs->set_runs_refused_load_cap(runs->runs_refused_load_cap() + 1);
  } else {
    runs->set_runs_instrumented(runs->runs_instrumented() + 1);
  }
}

wire::AgentCounters BatchCounters(const wire::AgentCounters& runs, const AgentState& held) {
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  wire::AgentCounters c = runs;
  c.set_records_dropped(c.records_dropped() + u(held.records_dropped));
  c.set_records_quarantined(c.records_quarantined() + u(held.records_quarantined));
  c.set_runs_refused_load_cap(c.runs_refused_load_cap() + u(held.runs_refused_no_slot) +
                              u(held.runs_refused_load));
  c.set_runs_refused_rate_cap(c.runs_refused_rate_cap() + u(held.runs_refused_rate_cap));
  c.set_runs_measured_nothing(c.runs_measured_nothing() + u(held.runs_measured_nothing));
  return c;
}

BatchBuilder::BatchBuilder(size_t max_bytes, const Platform& platform)
    : max_bytes_(max_bytes), platform_(platform) {}

void BatchBuilder::Encode(const Series& s, wire::Record* out) const {
  ApiKeyToWire(s.key, out->mutable_key());
  if (s.key.platform == platform_) out->mutable_key()->clear_platform();
  HistogramToWire(s.histogram, out->mutable_histogram());
  out->set_runs(s.runs);
  if (s.truncated) out->set_truncated(true);
  if (s.resolution_ns != 0) out->set_resolution_ns(s.resolution_ns);
}

size_t BatchBuilder::EncodedSize(const Series& s) const {
  wire::Record r;
  Encode(s, &r);
  const size_t n = r.ByteSizeLong();
  return 1 + VarintSize(n) + n;  // field 5 tag, length, message
}

size_t BatchBuilder::encoded_bytes() const { return HeaderReserve(platform_) + records_bytes_; }

std::map<std::string, BatchBuilder::Series> BatchBuilder::Merged(
    const google::protobuf::RepeatedPtrField<wire::Record>& records, const wire::Platform& platform,
    int64_t* delta) const {
  // Merge into copies of the series these records touch.
  std::map<std::string, Series> touched;
  for (const wire::Record& rec : records) {
    ApiKey key = ApiKeyFromWire(rec.key(), platform);
    std::string enc = EncodeApiKey(key);
    auto it = touched.find(enc);
    if (it == touched.end()) {
      auto existing = series_.find(enc);
      Series base =
          existing != series_.end() ? existing->second : Series{std::move(key), {}, 0, false, 0, 0};
      it = touched.emplace(std::move(enc), std::move(base)).first;
    }
    Series& s = it->second;
    s.histogram.Merge(HistogramFromWire(rec.histogram()));
    // 0 in a later part of a run reported in parts (its run counted in the
    // first part its series appeared in).
    s.runs += rec.runs();
    s.truncated = s.truncated || rec.truncated();
    s.resolution_ns = std::max(s.resolution_ns, rec.resolution_ns());
  }
  *delta = 0;
  for (auto& [enc, s] : touched) {
    const size_t old = s.encoded;  // 0 for a new series
    s.encoded = EncodedSize(s);
    *delta += static_cast<int64_t>(s.encoded) - static_cast<int64_t>(old);
  }
  return touched;
}

bool BatchBuilder::Takes(int64_t delta) const {
  const size_t total = HeaderReserve(platform_) + records_bytes_ + static_cast<size_t>(delta);
  return empty() || total <= max_bytes_;
}

void BatchBuilder::Commit(std::map<std::string, Series> touched, int64_t delta, int64_t ended,
                          int64_t started) {
  for (auto& [enc, s] : touched) series_[enc] = std::move(s);
  records_bytes_ = static_cast<size_t>(static_cast<int64_t>(records_bytes_) + delta);
  ++adds_;
  if (oldest_ms_ == 0 || (ended > 0 && ended < oldest_ms_)) oldest_ms_ = ended;
  if (started > 0 && (window_start_ms_ == 0 || started < window_start_ms_)) {
    window_start_ms_ = started;
  }
}

namespace {
// When a run started, from its end and run time; 0 when it did not say.
int64_t StartedMs(const wire::RunRecord& run) {
  const int64_t ended = run.ended_unix_ms();
  return ended > 0 ? ended - static_cast<int64_t>(run.counters().run_ns() / 1000000) - 1 : 0;
}
}  // namespace

bool BatchBuilder::Fits(const wire::RunRecord& run) const {
  int64_t delta = 0;
  Merged(run.records(), run.platform(), &delta);
  return Takes(delta);
}

bool BatchBuilder::TryAdd(const wire::RunRecord& run) {
  int64_t delta = 0;
  std::map<std::string, Series> touched = Merged(run.records(), run.platform(), &delta);
  if (!Takes(delta)) return false;
  Commit(std::move(touched), delta, run.ended_unix_ms(), StartedMs(run));
  ++runs_;
  return true;
}

bool BatchBuilder::TryAddHeld(const wire::Batch& held) {
  int64_t delta = 0;
  std::map<std::string, Series> touched = Merged(held.records(), held.client_platform(), &delta);
  if (!Takes(delta)) return false;
  Commit(std::move(touched), delta, held.created_unix_ms(), held.window_start_unix_ms());
  return true;
}

void BatchBuilder::Fill(wire::Batch* b) const {
  b->set_schema_version(kSchemaVersion);
  PlatformToWire(platform_, b->mutable_client_platform());
  for (const auto& [enc, s] : series_) Encode(s, b->add_records());
}

wire::Batch BatchBuilder::Held() const {
  wire::Batch b;
  Fill(&b);
  b.set_created_unix_ms(oldest_ms_);
  if (window_start_ms_ > 0) b.set_window_start_unix_ms(window_start_ms_);
  return b;
}

wire::Batch BatchBuilder::Seal(const std::string& batch_id, int64_t created_unix_ms,
                               const wire::AgentCounters& counters, std::string_view machine_key) {
  wire::Batch b;
  b.set_batch_id(batch_id);
  b.set_created_unix_ms(created_unix_ms);
  if (!machine_key.empty()) b.set_machine_key(std::string(machine_key));
  // A clock stepped back between a run and the seal must not put the
  // window's start after it (the aggregator refuses that: window_order).
  if (window_start_ms_ > 0) {
    b.set_window_start_unix_ms(created_unix_ms > 0 ? std::min(window_start_ms_, created_unix_ms)
                                                   : window_start_ms_);
  }
  Fill(&b);
  *b.mutable_counters() = counters;
  series_.clear();
  records_bytes_ = 0;
  runs_ = 0;
  adds_ = 0;
  oldest_ms_ = 0;
  window_start_ms_ = 0;
  return b;
}

}  // namespace fieldprof
