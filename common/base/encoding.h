// The small encodings the stored formats share: varints (7 bits a byte,
// low first) and length-prefixed strings, as in the local toolkit's files
// (recordings, time trees, call trees) and the aggregator's machine
// sketches; and big-endian integers, which the aggregator's RocksDB keys
// use so that keys sort as the numbers in them do. (The wire's protobuf
// varints are read by the batch decoder and protobuf itself, under the
// protobuf rules.)
#ifndef FIELDPROF_COMMON_BASE_ENCODING_H_
#define FIELDPROF_COMMON_BASE_ENCODING_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace fieldprof {

inline void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// False when `in` ends inside the varint or it runs past 64 bits.
inline bool GetVarint(std::string_view* in, uint64_t* v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const auto b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = r;
      return true;
    }
  }
  return false;
}

inline void PutString(std::string* out, std::string_view s) {
  PutVarint(out, s.size());
  out->append(s);
}

inline bool GetString(std::string_view* in, std::string* s) {
  uint64_t n = 0;
  if (!GetVarint(in, &n) || n > in->size()) return false;
  s->assign(in->data(), n);
  in->remove_prefix(n);
  return true;
}

// Unsigned, most significant byte first.
inline void PutBigEndian64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

inline uint64_t GetBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Signed, with the sign bit flipped, so that the bytes compare as the
// numbers do (negative before positive).
inline void PutOrdered32(std::string* out, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(v) ^ 0x80000000u;
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(u >> shift));
}

inline int32_t GetOrdered32(const char* p) {
  uint32_t u = 0;
  for (int i = 0; i < 4; ++i) u = (u << 8) | static_cast<unsigned char>(p[i]);
  return static_cast<int32_t>(u ^ 0x80000000u);
}

inline void PutOrdered64(std::string* out, int64_t v) {
  PutBigEndian64(out, static_cast<uint64_t>(v) ^ (uint64_t{1} << 63));
}

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_BASE_ENCODING_H_
