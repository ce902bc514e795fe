// The one mapping from Status to an HTTP answer, and the few answers that
// are not a Status's (405, 401). Every handler answers errors through here,
// so a code means the same on every endpoint:
//   InvalidArgument 400, NotFound 404, TooLarge 413, Unsupported 415,
//   ResourceExhausted / Unavailable / IOError 503 (Retry-After: 2),
//   NoSpace 507 (Retry-After: 10), DataLoss / Internal 500.
// The body is JSON: {"error":"InvalidArgument","rule":"...","message":"..."}
// ("rule": the validation rule broken, for batches; common/wire/validate.h).
#ifndef FIELDPROF_AGGREGATOR_HTTP_HTTP_STATUS_H_
#define FIELDPROF_AGGREGATOR_HTTP_HTTP_STATUS_H_

#include <string>
#include <string_view>

#include "aggregator/http/http_types.h"
#include "common/base/status.h"

namespace fieldprof::aggregator {

int HttpStatusFor(const Status& s);
HttpResponse ErrorResponse(const Status& s);

// 405 with Allow: `allow` ("POST", "GET, POST").
HttpResponse MethodNotAllowed(std::string_view method, std::string_view path,
                              std::string_view allow);
// 401 with WWW-Authenticate: Bearer, saying `why`.
HttpResponse BearerRequired(std::string why);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_HTTP_HTTP_STATUS_H_
