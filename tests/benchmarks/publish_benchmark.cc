// The snapshot publisher at scale (deploy/bench-publish.sh):
//   publish_benchmark KEYS [FRAGMENTS PER_CYCLE PER_DAY INGEST_SECONDS]
// fills a real RocksDB store in a temp dir with KEYS series (two metrics
// per API, histograms of 1..2000 log-normal calls), then prints:
//   1. the first cycle (every fragment) and a rotation cycle: time, series
//      scanned, bytes; fragment sizes (min, mean, max) and the manifest;
//   2. a client's bytes per day at PER_DAY fragments a day, and for a full
//      download;
//   3. ingest alone, then ingest while cycles run back to back: batches/s
//      and the ratio.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/publish/publisher.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/wire/batch_view.h"
#include "common/wire/wire.h"

using namespace fieldprof;
using namespace fieldprof::aggregator;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string Mib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f MiB", bytes / 1048576);
  return b;
}

// Batches of ~128 KiB covering series [first, last).
std::vector<std::string> MakeBatches(uint64_t first, uint64_t last, uint64_t seed,
                                     uint64_t* id_counter) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  wire::Batch b;
  auto start = [&] {
    b.Clear();
    b.set_schema_version(kSchemaVersion);
    std::string id(16, '\0');
    const uint64_t n = ++*id_counter;
    for (int i = 0; i < 8; ++i) id[i] = static_cast<char>(n >> (8 * i));
    id[8] = static_cast<char>(seed);
    b.set_batch_id(id);
    b.set_created_unix_ms(1795000000000);
    b.mutable_client_platform()->set_os(wire::OS_LINUX);
    b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
    b.mutable_client_platform()->set_cpu_vendor(wire::CPU_VENDOR_INTEL);
    b.mutable_client_platform()->set_cpu_family(6);
  };
  start();
  std::uniform_real_distribution<double> log_calls(0, std::log(2000.0));
  for (uint64_t s = first; s < last; ++s) {
    const uint64_t api = s / 2;
    wire::Record* r = b.add_records();
    r->mutable_key()->set_module("libbench" + std::to_string(api % 997) + ".so." +
                                 std::to_string(api % 3));
    r->mutable_key()->set_module_version("1." + std::to_string(api % 5));
    r->mutable_key()->set_symbol("bench_api_" + std::to_string(api));
    r->mutable_key()->set_metric(s % 2 == 0 ? wire::METRIC_WALL_TIME_NS
                                            : wire::METRIC_ALLOC_BYTES_INCLUSIVE);
    std::lognormal_distribution<double> cost(4.0 + static_cast<double>(api % 11), 1.0);
    Histogram h;
    const int calls = static_cast<int>(std::exp(log_calls(rng)));
    for (int c = 0; c < calls; ++c) h.Record(static_cast<uint64_t>(cost(rng)));
    HistogramToWire(h, r->mutable_histogram());
    r->set_runs(1 + calls / 50);
    if (b.ByteSizeLong() >= 128 * 1024 - 512) {
      out.push_back(b.SerializeAsString());
      start();
    }
  }
  if (b.records_size() > 0) out.push_back(b.SerializeAsString());
  return out;
}

// Applies `bodies` under fresh ids until `stop`; returns batches applied.
uint64_t IngestUntil(Store* store, const std::vector<std::string>& bodies, std::atomic<bool>* stop,
                     uint64_t* id_counter) {
  uint64_t n = 0;
  for (size_t i = 0; !stop->load(); i = (i + 1) % bodies.size()) {
    wire::Batch b;
    b.ParseFromString(bodies[i]);
    std::string id(16, '\0');
    const uint64_t c = ++*id_counter;
    for (int k = 0; k < 8; ++k) id[k] = static_cast<char>(c >> (8 * k));
    id[15] = 'I';
    b.set_batch_id(id);
    const std::string body = b.SerializeAsString();
    BatchView view;
    if (!DecodeBatchView(body, &view).ok()) std::abort();
    if (!store->ApplyBatch(view, body, 20000).ok()) std::abort();
    ++n;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: publish_benchmark KEYS [FRAGMENTS PER_CYCLE PER_DAY INGEST_SECONDS]\n");
    return 2;
  }
  const uint64_t keys = std::strtoull(argv[1], nullptr, 10);
  const uint32_t fragments = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 64;
  const uint32_t per_cycle = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 8;
  const int per_day = argc > 4 ? std::atoi(argv[4]) : 4;
  const int ingest_s = argc > 5 ? std::atoi(argv[5]) : 10;
  char tmpl[] = "/tmp/fieldprof-publish-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;

  auto store = OpenRocksDbStore({.path = dir + "/db"});
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  uint64_t ids = 0;
  std::printf("filling %llu series...\n", static_cast<unsigned long long>(keys));
  std::fflush(stdout);
  const auto f0 = Clock::now();
  uint64_t filled = 0;
  constexpr uint64_t kChunk = 50000;
  for (uint64_t first = 0; first < keys; first += kChunk) {
    for (const std::string& body :
         MakeBatches(first, std::min(keys, first + kChunk), first, &ids)) {
      BatchView view;
      if (!DecodeBatchView(body, &view).ok()) return 1;
      if (!(*store)->ApplyBatch(view, body, 20000).ok()) return 1;
    }
    filled = std::min(keys, first + kChunk);
    std::fprintf(stderr, "\r  %llu / %llu", static_cast<unsigned long long>(filled),
                 static_cast<unsigned long long>(keys));
  }
  if (!(*store)->WaitApplied(std::chrono::minutes(30)).ok()) return 1;
  std::fprintf(stderr, "\r");
  std::printf("filled in %.1f s\n\n", Seconds(Clock::now() - f0));

  auto signer = Ed25519Signer::Generate();
  PublisherOptions po;
  po.dir = dir + "/snapshot";
  po.fragment_count = fragments;
  po.per_cycle = per_cycle;
  Publisher publisher(store->get(), &*signer, po);
  if (!publisher.Init().ok()) return 1;
  int64_t now_ms = 1795000000000;
  auto c0 = Clock::now();
  auto first = publisher.Cycle(now_ms);
  const double first_s = Seconds(Clock::now() - c0);
  if (!first.ok()) {
    std::fprintf(stderr, "%s\n", first.status().ToString().c_str());
    return 1;
  }
  c0 = Clock::now();
  auto rot = publisher.Cycle(now_ms += 3600000);
  const double rot_s = Seconds(Clock::now() - c0);
  if (!rot.ok()) return 1;
  const wire::Manifest m = *publisher.CurrentManifest();
  uint64_t min_b = ~uint64_t{0}, max_b = 0, total = 0;
  for (const wire::FragmentInfo& f : m.fragments()) {
    min_b = std::min<uint64_t>(min_b, f.size());
    max_b = std::max<uint64_t>(max_b, f.size());
    total += f.size();
  }
  const double mean_b = static_cast<double>(total) / fragments;
  const size_t manifest_bytes = publisher.SignedManifestBytes()->size();
  std::printf("1. publish cycles (%llu series, %u fragments)\n",
              static_cast<unsigned long long>(first->series), fragments);
  std::printf("   first cycle, all %u fragments: %.2f s, %s written\n", first->rebuilt, first_s,
              Mib(static_cast<double>(first->bytes)).c_str());
  std::printf("   rotation cycle, %u fragments:  %.2f s (the scan reads all series: %llu)\n",
              rot->rebuilt, rot_s, static_cast<unsigned long long>(rot->series));
  std::printf("   fragment size: min %s, mean %s, max %s; manifest %zu bytes\n",
              Mib(static_cast<double>(min_b)).c_str(), Mib(mean_b).c_str(),
              Mib(static_cast<double>(max_b)).c_str(), manifest_bytes);
  std::printf("   bytes per series: %.0f\n\n", static_cast<double>(total) / first->series);

  // A client fetches the manifest on each refresh (daily) and PER_DAY fragments.
  const double per_day_bytes = per_day * mean_b + manifest_bytes;
  std::printf("2. client download\n");
  std::printf(
      "   %d fragments a day: %s/day (%.1f%% of the snapshot); every fragment once in %.0f days\n",
      per_day, Mib(per_day_bytes).c_str(), 100.0 * per_day_bytes / total,
      std::ceil(static_cast<double>(fragments) / per_day));
  std::printf("   full download (fieldprof pull --all): %s\n\n",
              Mib(static_cast<double>(total + manifest_bytes)).c_str());

  // Ingest alone, then with cycles back to back.
  const std::vector<std::string> bodies = MakeBatches(0, std::min<uint64_t>(keys, 20000), 99, &ids);
  std::atomic<bool> stop{false};
  auto timed_ingest = [&](bool publishing, int* cycles) {
    stop = false;
    std::atomic<int> done_cycles{0};
    std::thread pub;
    if (publishing) {
      pub = std::thread([&] {
        while (!stop.load()) {
          if (!publisher.Cycle(now_ms += 1000).ok()) std::abort();
          if (!stop.load()) done_cycles.fetch_add(1);
        }
      });
    }
    std::thread timer([&] {
      std::this_thread::sleep_for(std::chrono::seconds(ingest_s));
      stop = true;
    });
    const auto t0 = Clock::now();
    const uint64_t n = IngestUntil(store->get(), bodies, &stop, &ids);
    const double s = Seconds(Clock::now() - t0);
    timer.join();
    if (pub.joinable()) pub.join();
    *cycles = done_cycles.load();
    return static_cast<double>(n) / s;
  };
  int cycles = 0;
  const double alone = timed_ingest(false, &cycles);
  const double with = timed_ingest(true, &cycles);
  std::printf("3. ingest (synced ApplyBatch of ~128 KiB batches, %d s each)\n", ingest_s);
  std::printf("   alone:                %.1f batches/s\n", alone);
  std::printf("   while publishing:     %.1f batches/s (%d rotation cycles back to back)\n", with,
              cycles);
  std::printf("   ratio:                %.3f\n", with / alone);
  (void)(*store)->Close();
  std::filesystem::remove_all(dir);
  return 0;
}
