// ClickHouse's RowBinary format, both ways: fixed-width integers little
// endian, strings as a VarUInt length and the bytes, FixedString(16) zero
// padded. The store's rows (rows.h) and the lab and snapshot storages
// write and read their rows with these.
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_ROW_BINARY_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_ROW_BINARY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace fieldprof::aggregator::rowbinary {

// UInt8/16/32/64 (this machine is little-endian, as RowBinary is).
template <typename T>
void PutFixed(std::string* out, T v) {
  static_assert(std::is_integral_v<T>);
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}
void PutVarUInt(std::string* out, uint64_t n);
void PutString(std::string* out, std::string_view s);
// A FixedString(16) of `id`: cut or zero-padded to 16 bytes.
void PutId16(std::string* out, std::string_view id);

// Bounds-checked reading of one row from `data`: each read is false when
// the bytes do not read; `more` turns true when the row goes past the
// bytes at hand (a row cut between two pieces of a streamed answer).
class Reader {
 public:
  explicit Reader(std::string_view data) : d_(data) {}
  bool more = false;
  size_t pos() const { return p_; }

  bool U8(uint8_t* v);
  bool VarUInt(uint64_t* v);
  // A String of at most `max` bytes, pointing into the data.
  bool Str(std::string_view* s, size_t max);

 private:
  bool Need(uint64_t n);
  std::string_view d_;
  size_t p_ = 0;
};

// A String read from `data` at *at into *out, *at moved past it; false when
// it does not read whole.
[[nodiscard]] bool ReadString(std::string_view data, size_t* at, std::string* out);

}  // namespace fieldprof::aggregator::rowbinary

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_ROW_BINARY_H_
