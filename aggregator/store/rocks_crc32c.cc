#include "aggregator/store/rocks_crc32c.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

// RocksDB's function and the name the link gives each side of it: with
// `--wrap=S`, every reference to S outside its own object file reaches
// __wrap_S, and __real_S is the library's S.
#define FP_ROCKS_EXTEND "_ZN7rocksdb6crc32c6ExtendEjPKcm"  // rocksdb::crc32c::Extend
uint32_t RealRocksExtend(uint32_t crc, const char* data, size_t n) asm("__real_" FP_ROCKS_EXTEND);
uint32_t WrapRocksExtend(uint32_t crc, const char* data, size_t n) asm("__wrap_" FP_ROCKS_EXTEND);

namespace fieldprof::aggregator {
namespace {

#if defined(__x86_64__)
// CRC32C (Castagnoli), conditioned as RocksDB's Extend is: the running
// value is inverted on the way in and out, so Extend(Extend(0, a), b) is
// the CRC of a then b.
__attribute__((target("sse4.2"))) uint32_t Sse42Extend(uint32_t crc, const char* data, size_t n) {
  uint64_t c = ~crc;
  while (n > 0 && reinterpret_cast<uintptr_t>(data) % 8 != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), static_cast<uint8_t>(*data++));
    --n;
  }
  for (; n >= 8; n -= 8, data += 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    c = _mm_crc32_u64(c, word);
  }
  for (; n > 0; --n) c = _mm_crc32_u8(static_cast<uint32_t>(c), static_cast<uint8_t>(*data++));
  return ~static_cast<uint32_t>(c);
}

#endif

using ExtendFn = uint32_t (*)(uint32_t, const char*, size_t);

ExtendFn Choose() {
  const char* asked = std::getenv("FIELDPROF_ROCKS_CRC32C");
  if (asked != nullptr && std::string_view(asked) == "rocksdb") return RealRocksExtend;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("sse4.2")) return Sse42Extend;
#endif
  return RealRocksExtend;
}

ExtendFn Chosen() {
  static const ExtendFn chosen = Choose();
  return chosen;
}

std::atomic<uint64_t> g_calls{0};

}  // namespace

std::string_view RocksCrc32cCode() { return Chosen() == RealRocksExtend ? "rocksdb" : "sse4.2"; }

uint64_t RocksCrc32cCalls() { return g_calls.load(std::memory_order_relaxed); }

uint32_t RocksOwnCrc32c(uint32_t crc, const char* data, size_t n) {
  return RealRocksExtend(crc, data, n);
}

uint32_t RocksCrc32c(uint32_t crc, const char* data, size_t n) { return Chosen()(crc, data, n); }

}  // namespace fieldprof::aggregator

uint32_t WrapRocksExtend(uint32_t crc, const char* data, size_t n) {
  fieldprof::aggregator::g_calls.fetch_add(1, std::memory_order_relaxed);
  return fieldprof::aggregator::RocksCrc32c(crc, data, n);
}
