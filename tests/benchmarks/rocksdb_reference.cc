// The physical reference for aggregator ingest: write the same request bodies
// into a fresh RocksDB with synced WAL writes, from N threads, with no TLS,
// parsing, validation or merging. Prints batches/s, MiB/s and the CPU the
// writes took (every thread of the process, RocksDB's own background work
// included) while they ran. RocksDB's CRC32C is the aggregator's
// (aggregator/store/rocks_crc32c.h) unless FIELDPROF_ROCKS_CRC32C=rocksdb
// keeps Debian's build as it is; the JSON says which.
//
//   rocksdb_reference DB_DIR BODY_DIR THREADS SECONDS
#include <rocksdb/db.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/store/rocks_crc32c.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DB_DIR BODY_DIR THREADS SECONDS\n", argv[0]);
    return 2;
  }
  std::vector<std::string> bodies;
  for (const auto& e : std::filesystem::directory_iterator(argv[2])) {
    std::ifstream f(e.path(), std::ios::binary);
    bodies.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (bodies.empty()) return 2;
  rocksdb::Options o;
  o.create_if_missing = true;
  o.IncreaseParallelism(2);
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, argv[1], &db);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const int threads = std::atoi(argv[3]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[4]));
  std::atomic<long> n{0}, bytes{0};
  const std::clock_t cpu_start = std::clock();  // the process's CPU, every thread
  std::vector<std::thread> ts;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      rocksdb::WriteOptions wo;
      wo.sync = true;
      for (long i = t; std::chrono::steady_clock::now() < deadline; i += threads) {
        const std::string& body = bodies[i % bodies.size()];
        std::string key = std::to_string(t) + ":" + std::to_string(i);
        if (!db->Put(wo, key, body).ok()) return;
        ++n;
        bytes += static_cast<long>(body.size());
      }
    });
  }
  for (auto& t : ts) t.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  std::printf(
      "{\"batches_per_second\":%.1f,\"mib_per_second\":%.2f,\"batches\":%ld,"
      "\"threads\":%d,\"cpu_seconds\":%.3f,\"crc32c\":\"%s\"}\n",
      n / secs, bytes / secs / 1048576.0, n.load(), threads, cpu,
      std::string(fieldprof::aggregator::RocksCrc32cCode()).c_str());
  delete db;
  return 0;
}
