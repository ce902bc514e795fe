// gzip (RFC 1952) of a buffer in memory with zlib: a pprof profile file,
// an aggregator answer sent with Content-Encoding: gzip. In its own
// library (fieldprof_gzip): the runtime never links zlib, whose APIs it
// measures.
//
//   StatusOr<std::string> z = Gzip(body);
#ifndef FIELDPROF_COMMON_NET_GZIP_H_
#define FIELDPROF_COMMON_NET_GZIP_H_

#include <string>
#include <string_view>

#include "common/base/status.h"

namespace fieldprof {

// `in` compressed at zlib's default level, as one gzip member.
StatusOr<std::string> Gzip(std::string_view in);

// Whether an Accept-Encoding header value takes gzip (a q of zero
// refuses it; "*" takes it too).
bool AcceptsGzip(std::string_view accept_encoding);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_NET_GZIP_H_
