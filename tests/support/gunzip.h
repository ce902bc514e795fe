// What zlib's own reader (gunzip's) makes of a gzip member: for tests of
// what is sent gzipped. Link ZLIB::ZLIB.
#ifndef FIELDPROF_TESTS_SUPPORT_GUNZIP_H_
#define FIELDPROF_TESTS_SUPPORT_GUNZIP_H_

#include <zlib.h>

#include <string>

namespace fieldprof::testing {

// `z` read back as one gzip member of at most `max` bytes, or "(bad)".
inline std::string Gunzip(const std::string& z, size_t max) {
  z_stream s{};
  if (inflateInit2(&s, 15 + 16) != Z_OK) return "(bad)";
  std::string out(max + 1, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data()));
  s.avail_in = static_cast<uInt>(z.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&s, Z_FINISH);
  out.resize(s.total_out);
  inflateEnd(&s);
  return rc == Z_STREAM_END ? out : "(bad)";
}

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_GUNZIP_H_
