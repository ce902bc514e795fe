#include "aggregator/http/http_status.h"

#include "common/base/json_writer.h"
#include "common/wire/validate.h"

namespace fieldprof::aggregator {

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kTooLarge:
      return 413;
    case StatusCode::kUnsupported:
      return 415;
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
    case StatusCode::kIOError:
      return 503;  // retry later, nothing applied
    case StatusCode::kNoSpace:
      return 507;  // Insufficient Storage: retry later, nothing applied
    case StatusCode::kDataLoss:
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

HttpResponse ErrorResponse(const Status& s) {
  HttpResponse r;
  r.status = HttpStatusFor(s);
  JsonWriter j;
  j.BeginObject();
  j.Key("error").String(StatusCodeName(s.code()));
  std::string_view rule = ValidationRule(s);
  if (!rule.empty()) j.Key("rule").String(rule);
  j.Key("message").String(s.message());
  j.EndObject();
  r.body = j.Take();
  r.body += '\n';
  if (r.status == 503) r.headers.emplace_back("Retry-After", "2");
  if (r.status == 507) r.headers.emplace_back("Retry-After", "10");
  return r;
}

HttpResponse MethodNotAllowed(std::string_view method, std::string_view path,
                              std::string_view allow) {
  HttpResponse r = ErrorResponse(InvalidArgument(
      std::string(path) + " takes " + std::string(allow) + ", not " + std::string(method)));
  r.status = 405;
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

HttpResponse BearerRequired(std::string why) {
  HttpResponse r = ErrorResponse(InvalidArgument(std::move(why)));
  r.status = 401;
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

}  // namespace fieldprof::aggregator
