// One HTTP request as the handlers see it, and their answer. The server
// (server.h) makes these from Beast's messages; nothing else here knows a
// socket, so every endpoint is a plain function call in tests.
#ifndef FIELDPROF_AGGREGATOR_HTTP_HTTP_TYPES_H_
#define FIELDPROF_AGGREGATOR_HTTP_HTTP_TYPES_H_

#include <cassert>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
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
  // The string `body` views, where the caller (the server) lets a handler
  // take it (move from it) and leave work for after its answer
  // (HttpResponse::after); null: a handler does all its work before it
  // returns.
  std::string* body_storage = nullptr;
};

// Work a handler leaves for after its answer (an accepted batch's fold
// into the sums in memory): the server runs it once the answer is on its
// way, so the client does not wait for it. It runs once, when Run() is
// called or else when the last response holding it goes, and on the thread
// that made it (it may hold a lock of the store's): take it out of the
// response before the response goes to another thread. Only for requests
// whose caller offered it (HttpRequest::body_storage).
class AfterAnswer {
 public:
  explicit AfterAnswer(std::function<void()> work) : work_(std::move(work)) {}
  AfterAnswer(const AfterAnswer&) = delete;
  AfterAnswer& operator=(const AfterAnswer&) = delete;
  ~AfterAnswer() { Run(); }

  void Run() {
    assert(std::this_thread::get_id() == maker_);
    if (work_) std::exchange(work_, nullptr)();
  }

 private:
  std::function<void()> work_;
  [[maybe_unused]] const std::thread::id maker_ = std::this_thread::get_id();
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::shared_ptr<AfterAnswer> after = nullptr;              // null: nothing left
};

// 200, application/json, `json` and a newline.
inline HttpResponse JsonResponse(std::string json) {
  json += '\n';
  return HttpResponse{200, "application/json", std::move(json), {}};
}

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_HTTP_HTTP_TYPES_H_
