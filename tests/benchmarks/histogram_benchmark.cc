// Histogram record cost (target: <= 5 ns per record on the 2-core machine)
// and the cost of merging stored aggregates (what the RocksDB merge operator
// and the applier do).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "aggregator/store/aggregate_value.h"
#include "aggregator/store/rocks_crc32c.h"
#include "common/statistics/histogram.h"
#include "common/wire/batch_view.h"
#include "common/wire/wire.h"
#include "tools/loadgen/batch_gen.h"

namespace fieldprof {
namespace {

std::vector<uint64_t> Values(size_t n) {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> d(8, 2);
  std::vector<uint64_t> v(n);
  for (auto& x : v) x = static_cast<uint64_t>(d(rng));
  return v;
}

void BM_HistogramRecord(benchmark::State& state) {
  const std::vector<uint64_t> values = Values(4096);
  Histogram h;
  size_t i = 0;
  for (auto _ : state) {
    h.Record(values[i++ & 4095]);
  }
  benchmark::DoNotOptimize(h);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HistogramRecord);

// The runtime's batches: 128 values at once (RecordMany) against the same
// values one by one (Record), taken in turn from 64 Ki values so branches
// cannot learn them. Arg 0: steady values in one bucket, with a zero now
// and then (an API's usual durations); arg 1: spread over many buckets.
constexpr size_t kPool = size_t{1} << 16, kBatch = 128;
std::vector<uint64_t> Pool(bool spread) {
  std::vector<uint64_t> v = Values(kPool);
  std::mt19937_64 rng(2);
  if (!spread) {
    for (auto& x : v) x = rng() % 16 == 0 ? 0 : 40 + rng() % 24;
  }
  return v;
}

void BM_HistogramRecordMany(benchmark::State& state) {
  const std::vector<uint64_t> v = Pool(state.range(0) != 0);
  Histogram h;
  size_t at = 0;
  for (auto _ : state) {
    h.RecordMany(v.data() + at, kBatch);
    at = (at + kBatch) & (kPool - 1);
    benchmark::DoNotOptimize(h);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kBatch));
}
BENCHMARK(BM_HistogramRecordMany)->Arg(0)->Arg(1);

void BM_HistogramRecordBatchOneByOne(benchmark::State& state) {
  const std::vector<uint64_t> v = Pool(state.range(0) != 0);
  Histogram h;
  size_t at = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBatch; ++i) h.Record(v[at + i]);
    at = (at + kBatch) & (kPool - 1);
    benchmark::DoNotOptimize(h);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kBatch));
}
BENCHMARK(BM_HistogramRecordBatchOneByOne)->Arg(0)->Arg(1);

// The same loop writing only a counter: the floor the record cost is compared to.
void BM_BaselineCounterIncrement(benchmark::State& state) {
  const std::vector<uint64_t> values = Values(4096);
  uint64_t sum = 0;
  size_t i = 0;
  for (auto _ : state) {
    sum += values[i++ & 4095];
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BaselineCounterIncrement);

void BM_HistogramMerge(benchmark::State& state) {
  Histogram a, b;
  for (uint64_t v : Values(1000)) a.Record(v);
  for (auto _ : state) {
    b.Merge(a);
    benchmark::DoNotOptimize(b);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HistogramMerge);

// One merge-operator operand: decode a stored value, add it, (amortized) encode.
void BM_MergeOperatorOperands(benchmark::State& state) {
  tools::BatchGenerator gen({.seed = 4, .target_bytes = 64 * 1024});
  wire::Batch b = gen.Next();
  std::vector<std::string> ops;
  for (const auto& r : b.records()) {
    aggregator::SparseAggregate one;
    one.AddRecord(r);
    one.Encode(&ops.emplace_back());
  }
  const size_t per_merge = static_cast<size_t>(state.range(0));
  std::string out;
  size_t k = 0;
  for (auto _ : state) {
    aggregator::SparseAggregate acc;
    for (size_t i = 0; i < per_merge; ++i) {
      bool ok = acc.AddEncoded(ops[k++ % ops.size()]);
      benchmark::DoNotOptimize(ok);
    }
    acc.Encode(&out);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * per_merge);
  state.counters["merges/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MergeOperatorOperands)->Arg(2)->Arg(16);

void BM_DecodeAndValidateBatch(benchmark::State& state) {
  tools::BatchGenerator gen({.seed = 5});
  const std::string body = gen.Next().SerializeAsString();
  for (auto _ : state) {
    auto b = DecodeBatch(body);
    benchmark::DoNotOptimize(b);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
}
BENCHMARK(BM_DecodeAndValidateBatch);

// What the aggregator did before the fast decoder: protobuf into an arena.
void BM_DecodeAndValidateBatchArena(benchmark::State& state) {
  tools::BatchGenerator gen({.seed = 5});
  const std::string body = gen.Next().SerializeAsString();
  for (auto _ : state) {
    google::protobuf::ArenaOptions o;
    o.start_block_size = 4 * body.size() + 4096;
    google::protobuf::Arena arena(o);
    auto b = DecodeBatch(body, &arena);
    benchmark::DoNotOptimize(b);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
}
BENCHMARK(BM_DecodeAndValidateBatchArena);

// The aggregator's decoder: one pass over the wire bytes into views.
void BM_DecodeBatchView(benchmark::State& state) {
  tools::BatchGenerator gen({.seed = 5});
  const std::string body = gen.Next().SerializeAsString();
  BatchView view;
  for (auto _ : state) {
    Status s = DecodeBatchView(body, &view);
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
  state.counters["fallbacks"] = static_cast<double>(BatchViewFallbacks());
}
BENCHMARK(BM_DecodeBatchView);

// RocksDB's CRC32C of one WAL record (a 128 KiB body): Arg 0 what RocksDB's
// calls reach in the aggregator (aggregator/store/rocks_crc32c.h), Arg 1
// the code Debian's RocksDB has (its peer).
void BM_RocksCrc32c(benchmark::State& state) {
  std::string body(128 * 1024, '\0');
  std::mt19937_64 rng(3);
  for (char& c : body) c = static_cast<char>(rng());
  const auto crc = state.range(0) == 0 ? aggregator::RocksCrc32c : aggregator::RocksOwnCrc32c;
  for (auto _ : state) {
    uint32_t c = crc(0, body.data(), body.size());
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
  state.SetLabel(state.range(0) == 0 ? std::string(aggregator::RocksCrc32cCode()) : "rocksdb");
}
BENCHMARK(BM_RocksCrc32c)->Arg(0)->Arg(1);

}  // namespace
}  // namespace fieldprof

BENCHMARK_MAIN();
