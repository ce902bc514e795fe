#include "common/net/gzip.h"

#include <zlib.h>

#include <cctype>
#include <cstdlib>

namespace fieldprof {

StatusOr<std::string> Gzip(std::string_view in) {
  z_stream z{};
  // 15 + 16: a window of 2^15 with a gzip header and trailer.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Internal("gzip: deflateInit2 failed");
  }
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Internal("gzip: deflate did not finish");
  return out;
}

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool AcceptsGzip(std::string_view accept_encoding) {
  // "gzip, deflate, br", "gzip;q=0.5", "*;q=1", "gzip;q=0" (refused).
  bool any = false, gzip = false, gzip_named = false;
  while (!accept_encoding.empty()) {
    const size_t comma = accept_encoding.find(',');
    std::string_view item = accept_encoding.substr(0, comma);
    accept_encoding = comma == std::string_view::npos ? "" : accept_encoding.substr(comma + 1);
    std::string_view coding = item, params;
    if (const size_t semi = item.find(';'); semi != std::string_view::npos) {
      coding = item.substr(0, semi);
      params = item.substr(semi + 1);
    }
    coding = Trim(coding);
    bool refused = false;
    params = Trim(params);
    if (params.size() >= 2 && (params[0] == 'q' || params[0] == 'Q') && params[1] == '=') {
      refused = std::strtod(std::string(params.substr(2)).c_str(), nullptr) <= 0;
    }
    if (IEquals(coding, "gzip") || IEquals(coding, "x-gzip")) {
      gzip_named = true;
      gzip = !refused;
    } else if (coding == "*") {
      any = !refused;
    }
  }
  return gzip_named ? gzip : any;
}

}  // namespace fieldprof
