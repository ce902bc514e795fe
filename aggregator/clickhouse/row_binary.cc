#include "aggregator/clickhouse/row_binary.h"

#include <algorithm>
#include <cstring>

namespace fieldprof::aggregator::rowbinary {

void PutVarUInt(std::string* out, uint64_t n) {
  while (n >= 0x80) {
    out->push_back(static_cast<char>(n | 0x80));
    n >>= 7;
  }
  out->push_back(static_cast<char>(n));
}

void PutString(std::string* out, std::string_view s) {
  PutVarUInt(out, s.size());
  out->append(s.data(), s.size());
}

void PutId16(std::string* out, std::string_view id) {
  char b[16] = {};
  std::memcpy(b, id.data(), std::min<size_t>(16, id.size()));
  out->append(b, 16);
}

bool Reader::U8(uint8_t* v) {
  if (!Need(1)) return false;
  *v = static_cast<uint8_t>(d_[p_++]);
  return true;
}

bool Reader::VarUInt(uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t b;
    if (!U8(&b)) return false;
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

bool Reader::Str(std::string_view* s, size_t max) {
  uint64_t n;
  if (!VarUInt(&n) || n > max || !Need(n)) return false;
  *s = d_.substr(p_, n);
  p_ += n;
  return true;
}

bool Reader::Need(uint64_t n) {
  if (d_.size() - p_ < n) {
    more = true;
    return false;
  }
  return true;
}

bool ReadString(std::string_view data, size_t* at, std::string* out) {
  if (*at > data.size()) return false;
  Reader c(data.substr(*at));
  std::string_view s;
  if (!c.Str(&s, data.size())) return false;
  out->assign(s.data(), s.size());
  *at += c.pos();
  return true;
}

}  // namespace fieldprof::aggregator::rowbinary
