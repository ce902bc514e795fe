// RocksDB's CRC32C on the CPU's own instruction.
//
// RocksDB checksums every WAL record with CRC32C (tables use XXH3, 7.8's
// default). Debian builds its RocksDB portable, so its CRC32C is a
// table-driven loop (rocksdb::crc32c::IsFastCrc32Supported() says "Not
// supported"): about 7% of the aggregator's CPU under ingest, a 128 KiB
// body a batch through the WAL. The link routes RocksDB's calls to crc32c::Extend here
// (`--wrap`, set by the fieldprof_rocks_crc32c target in
// aggregator/CMakeLists.txt): SSE 4.2's crc32 instruction when the CPU has
// it, RocksDB's own code otherwise. The checksums are the same either way
// (rocks_crc32c_test compares them), so files written by either read with
// the other. A RocksDB whose function has another name or signature fails
// the link (no __real_ symbol), never the checksums. RocksDB's own code
// runs on another 64-bit architecture, on a CPU without SSE 4.2, and when
// FIELDPROF_ROCKS_CRC32C=rocksdb is set (to compare, or to rule this out).
#ifndef FIELDPROF_AGGREGATOR_STORE_ROCKS_CRC32C_H_
#define FIELDPROF_AGGREGATOR_STORE_ROCKS_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fieldprof::aggregator {

// Which code computes RocksDB's CRC32C in this process: "sse4.2" or
// "rocksdb" (the library's own).
std::string_view RocksCrc32cCode();

// Calls RocksDB made to its CRC32C in this process, for tests to see that
// they arrive here.
uint64_t RocksCrc32cCalls();

// RocksDB's own CRC32C, whichever code it chose, for tests and benchmarks
// to compare with.
uint32_t RocksOwnCrc32c(uint32_t crc, const char* data, size_t n);

// What RocksDB's calls now reach.
uint32_t RocksCrc32c(uint32_t crc, const char* data, size_t n);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_ROCKS_CRC32C_H_
