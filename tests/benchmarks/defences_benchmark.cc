// What the field's defences cost per batch and per record:
// the upload token check (one VOPRF evaluation a batch), issuing a request
// of 64 tokens, the per-source bucket, and the distinct-machine sketch.
// Beside them, the anchor: SHA-256 of a 128 KiB batch body, a cost every
// batch already pays on its way in (TLS, the pending log).
//   build/tests/benchmarks/defences_benchmark
#include <benchmark/benchmark.h>
#include <openssl/sha.h>

#include <boost/asio/ip/address.hpp>

#include "aggregator/ingest/source_limits.h"
#include "aggregator/store/machine_sketch.h"
#include "common/crypto/upload_tokens.h"

namespace fieldprof {
namespace {

void BM_Sha256Of128KiB(benchmark::State& state) {
  const std::string body(128 << 10, 'x');
  unsigned char out[SHA256_DIGEST_LENGTH];
  for (auto _ : state) {
    SHA256(reinterpret_cast<const unsigned char*>(body.data()), body.size(), out);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_Sha256Of128KiB);

void BM_TokenCheck(benchmark::State& state) {
  TokenIssuer issuer(std::string(32, 's'), {});
  StatusOr<TokenRequestState> req = MakeTokenRequest(1);
  StatusOr<wire::TokenResponse> resp = issuer.Issue(req->request, 0);
  StatusOr<voprf::KeyPair> key = issuer.KeyFor(0);
  StatusOr<std::vector<UploadToken>> tokens = FinishTokenRequest(*req, *resp, key->pub);
  const UploadToken& t = (*tokens)[0];
  for (auto _ : state) {
    Status s = issuer.Check(t.input, t.output, t.epoch, 0);
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_TokenCheck);

void BM_TokenIssue64(benchmark::State& state) {
  TokenIssuer issuer(std::string(32, 's'), {});
  StatusOr<TokenRequestState> req = MakeTokenRequest(64);
  for (auto _ : state) {
    StatusOr<wire::TokenResponse> r = issuer.Issue(req->request, 0);
    benchmark::DoNotOptimize(r);
  }
  // Tokens issued a second by one core.
  state.counters["tokens_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations() * 64), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TokenIssue64)->Unit(benchmark::kMillisecond);

void BM_AgentFetches64(benchmark::State& state) {
  TokenIssuer issuer(std::string(32, 's'), {});
  StatusOr<voprf::KeyPair> key = issuer.KeyFor(0);
  for (auto _ : state) {
    StatusOr<TokenRequestState> req = MakeTokenRequest(64);
    StatusOr<wire::TokenResponse> r = issuer.Issue(req->request, 0);
    StatusOr<std::vector<UploadToken>> t = FinishTokenRequest(*req, *r, key->pub);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_AgentFetches64)->Unit(benchmark::kMillisecond);

void BM_SourceLimiterTake(benchmark::State& state) {
  aggregator::SourceLimiter l("batches", {.per_minute = 1e9, .burst = 1e9});
  const auto a = boost::asio::ip::make_address("198.51.100.7");
  const auto now = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(l.Take(a, now));
}
BENCHMARK(BM_SourceLimiterTake);

// A record's sketch gets its batch's machine: the sparse insert per record.
void BM_SketchAddSparse(benchmark::State& state) {
  uint64_t i = 0;
  for (auto _ : state) {
    aggregator::MachineSketch s;
    for (int k = 0; k < 100; ++k) s.Add(aggregator::MachineHash(std::to_string(i++)));
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations() * 100);
}
BENCHMARK(BM_SketchAddSparse);

void BM_SketchMergeDense(benchmark::State& state) {
  aggregator::MachineSketch a, b;
  for (int k = 0; k < 5000; ++k) a.Add(aggregator::MachineHash("a" + std::to_string(k)));
  for (int k = 0; k < 5000; ++k) b.Add(aggregator::MachineHash("b" + std::to_string(k)));
  for (auto _ : state) {
    aggregator::MachineSketch c = a;
    c.Merge(b);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_SketchMergeDense);

// What a series' sketch takes in the store, encoded, by its machines (the
// "bytes" counter); the time is the encoding's.
void BM_SketchBytes(benchmark::State& state) {
  aggregator::MachineSketch s;
  for (int64_t k = 0; k < state.range(0); ++k) {
    s.Add(aggregator::MachineHash("m" + std::to_string(k)));
  }
  std::string out;
  for (auto _ : state) {
    out.clear();
    s.Encode(&out);
    benchmark::DoNotOptimize(out);
  }
  state.counters["bytes"] = static_cast<double>(out.size());
  state.counters["estimate"] = static_cast<double>(s.Estimate());
}
BENCHMARK(BM_SketchBytes)->Arg(1)->Arg(10)->Arg(100)->Arg(1000)->Arg(100000);

}  // namespace
}  // namespace fieldprof

BENCHMARK_MAIN();
