// One HTTP request as the handlers see it, and their answer. The server
// (server.h) makes these from Beast's messages; nothing else here knows a
// socket, so every endpoint is a plain function call in tests.
#ifndef FIELDPROF_AGGREGATOR_HTTP_HTTP_TYPES_H_
#define FIELDPROF_AGGREGATOR_HTTP_HTTP_TYPES_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/wire/wire.h"

namespace fieldprof::aggregator {

inline constexpr std::string_view kProtobufContentType = kBatchContentType;

// A complete request. The views point into the server's message and live
// as long as the call that gets them.
struct HttpRequest {
  std::string_view method, target, content_type, body;
  std::string_view if_none_match;    // the If-None-Match header, if any
  std::string_view authorization;    // the Authorization header, if any
  std::string_view accept_encoding;  // the Accept-Encoding header, if any
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

// 200, application/json, `json` and a newline.
inline HttpResponse JsonResponse(std::string json) {
  json += '\n';
  return HttpResponse{200, "application/json", std::move(json), {}};
}

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_HTTP_HTTP_TYPES_H_
