// CPU cost of the aggregator's ingest path without network or fsync: the
// router's POST /v1/batches handler (decode + validate a ~128 KiB batch,
// dedupe lookup, pending-log write, fold) and, amortized, the applier
// writing the folds into RocksDB.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include "aggregator/http/router.h"
#include "aggregator/metrics.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/wire/wire.h"
#include "tools/loadgen/batch_gen.h"

namespace fieldprof::aggregator {
namespace {

void BM_IngestHandlerNoSync(benchmark::State& state) {
  const std::string dir = std::filesystem::temp_directory_path() / "fieldprof-store-bench";
  std::filesystem::remove_all(dir);
  auto store = OpenRocksDbStore({.path = dir, .sync = false});
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    return;
  }
  Metrics metrics;
  RouterParts parts;
  parts.store = store->get();
  parts.metrics = &metrics;
  Router router(std::move(parts));
  tools::BatchGenerator gen({.seed = 8});
  struct Body {
    std::string bytes;
    size_t id_offset;
  };
  std::vector<Body> bodies;
  int64_t records_per_pass = 0;
  for (int i = 0; i < 16; ++i) {
    wire::Batch b = gen.Next();
    records_per_pass += b.records_size();
    std::string bytes = b.SerializeAsString();
    bodies.push_back({bytes, bytes.find(b.batch_id())});
  }
  size_t i = 0;
  for (auto _ : state) {
    Body& body = bodies[i++ % bodies.size()];
    const std::string id = gen.NewBatchId();  // fresh id patched in place
    body.bytes.replace(body.id_offset, id.size(), id);
    HttpResponse r = router.Handle("POST", "/v1/batches", kProtobufContentType, body.bytes);
    if (r.status == 503) IgnoreError((*store)->WaitApplied(std::chrono::seconds(60)));
  }
  IgnoreError((*store)->WaitApplied(std::chrono::seconds(60)));
  state.SetItemsProcessed(state.iterations());
  state.counters["records/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * records_per_pass / bodies.size(),
                         benchmark::Counter::kIsRate);
  IgnoreError((*store)->Close());
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_IngestHandlerNoSync)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace fieldprof::aggregator

BENCHMARK_MAIN();
