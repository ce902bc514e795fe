// Varints (7 bits a byte, low first) and length-prefixed strings: the
// local toolkit's file formats (the time tree, recordings).
#ifndef FIELDPROF_TOOLS_LOCAL_VARINT_H_
#define FIELDPROF_TOOLS_LOCAL_VARINT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace fieldprof::local {

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

}  // namespace fieldprof::local

#endif  // FIELDPROF_TOOLS_LOCAL_VARINT_H_
