#include "common/net/https_client.h"

#include <openssl/ssl.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>
#include <vector>

#include "common/net/endpoint.h"

namespace fieldprof {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  const net::ip::address a = net::ip::make_address(host, ec);
  return !ec && a.is_loopback();
}
using tcp = boost::asio::ip::tcp;

class HttpsClient::Impl {
 public:
  explicit Impl(HttpsClientOptions o)
      : options_(std::move(o)),
        host_header_(options_.host.find(':') != std::string::npos ? "[" + options_.host + "]"
                                                                  : options_.host) {
    // Plain HTTP: no TLS context, no certificates to load (the system store
    // takes ~20 ms, which a client made per ClickHouse query would pay).
    if (!options_.tls) return;
    ssl::context& tls = tls_.emplace(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(tls.native_handle(), TLS1_2_VERSION);
    SSL_CTX_set_session_cache_mode(tls.native_handle(), SSL_SESS_CACHE_CLIENT);
    if (options_.insecure) {
      tls.set_verify_mode(ssl::verify_none);
    } else {
      tls.set_verify_mode(ssl::verify_peer);
      boost::system::error_code ec;
      if (options_.ca_file.empty()) {
        tls.set_default_verify_paths(ec);
        if (!ec && !options_.loopback_ca_file.empty() && IsLoopbackHost(options_.host) &&
            ::access(options_.loopback_ca_file.c_str(), R_OK) == 0) {
          tls.load_verify_file(options_.loopback_ca_file, ec);
          if (ec) {
            setup_error_ = "loading the local aggregator's certificate '" +
                           options_.loopback_ca_file + "': " + ec.message();
          }
        }
      } else {
        tls.load_verify_file(options_.ca_file, ec);
      }
      if (ec && setup_error_.empty()) {
        setup_error_ = "loading CA '" + options_.ca_file + "': " + ec.message();
      }
    }
  }
  ~Impl() {
    Close();
    if (session_ != nullptr) SSL_SESSION_free(session_);
  }

  Status Connect() {
    if (options_.tls && !setup_error_.empty()) return InvalidArgument(setup_error_);
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(options_.host, std::to_string(options_.port), ec);
    if (ec) return Unavailable("resolving " + options_.host + ": " + ec.message());
    const std::string where = FormatHostPort(options_.host, options_.port);
    // From a given local address: the socket is bound, then connected to
    // the first address (a range would reopen the socket per try).
    auto connect = [&](beast::tcp_stream& s) {
      if (options_.local_address.empty()) {
        s.async_connect(results, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
        return;
      }
      const tcp::endpoint to = *results.begin();
      const auto from = boost::asio::ip::make_address(options_.local_address, ec);
      if (!ec) s.socket().open(to.protocol(), ec);
      if (!ec) s.socket().bind(tcp::endpoint(from, 0), ec);
      if (ec) return;
      s.async_connect(to, [&ec](beast::error_code e) { ec = e; });
    };
    if (!options_.tls) {
      plain_.emplace(ioc_);
      plain_->expires_after(options_.timeout);
      connect(*plain_);
      Run();
      if (ec) {
        plain_.reset();
        return Unavailable("connecting to " + where + ": " + ec.message());
      }
      // A request's header and body go out as two writes: without this
      // the body waits for the server's delayed ACK (40 ms a request).
      plain_->socket().set_option(tcp::no_delay(true), ec);
      ++connections_;
      return Status::Ok();
    }
    stream_.emplace(ioc_, *tls_);
    beast::get_lowest_layer(*stream_).expires_after(options_.timeout);
    connect(beast::get_lowest_layer(*stream_));
    Run();
    if (ec) {
      return Unavailable("connecting to " + where + ": " + ec.message());
    }
    beast::get_lowest_layer(*stream_).socket().set_option(tcp::no_delay(true), ec);
    SSL* ssl = stream_->native_handle();
    // SNI carries names only (RFC 6066 3); an address is checked against
    // the certificate's IP entries below.
    if (!IsAddressLiteral(options_.host)) SSL_set_tlsext_host_name(ssl, options_.host.c_str());
    if (!options_.insecure) {
      stream_->set_verify_callback(ssl::host_name_verification(options_.host));
    }
    if (session_ != nullptr) SSL_set_session(ssl, session_);
    beast::get_lowest_layer(*stream_).expires_after(options_.timeout);
    stream_->async_handshake(ssl::stream_base::client, [&ec](beast::error_code e) { ec = e; });
    Run();
    if (ec) {
      std::string m = "TLS handshake with " + where + ": " + ec.message();
      stream_.reset();
      return Unavailable(m);
    }
    reused_ = SSL_session_reused(ssl) == 1;
    ++connections_;
    return Status::Ok();
  }

  // `on_data` null: the body is kept in the reply; otherwise streamed to it.
  StatusOr<HttpReply> Request(const std::string& method, const std::string& target,
                              const std::string& content_type, const std::string& body,
                              const HttpHeaders& headers,
                              const std::function<bool(std::string_view)>* on_data) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool fresh = !stream_.has_value() && !plain_.has_value();
      if (fresh) FP_RETURN_IF_ERROR(Connect());
      bool delivered = false;
      StatusOr<HttpReply> r =
          RequestOnce(method, target, content_type, body, headers, on_data, &delivered);
      // A kept-alive connection the server closed in the meantime is reopened
      // once, unless part of the answer was already handed on.
      if (r.ok() || fresh || delivered) return r;
      Close();
    }
    return Unavailable("request failed twice");
  }

  StatusOr<HttpReply> RequestOnce(const std::string& method, const std::string& target,
                                  const std::string& content_type, const std::string& body,
                                  const HttpHeaders& headers,
                                  const std::function<bool(std::string_view)>* on_data,
                                  bool* delivered) {
    // The body is sent from the caller's string, not a copy: an upload is
    // up to 128 KiB, and a fresh copy each request cost the load generator
    // page faults and a memmove a batch (perf).
    http::request<http::span_body<const char>> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, host_header_);
    req.set(http::field::user_agent, "fieldprof-tools");
    if (!content_type.empty()) req.set(http::field::content_type, content_type);
    for (const auto& [name, value] : headers) req.set(name, value);
    req.body() = http::span_body<const char>::value_type(body.data(), body.size());
    req.keep_alive(true);
    req.prepare_payload();
    beast::error_code ec =
        RunOnStream([&](auto& stream, auto done) { http::async_write(stream, req, done); });
    if (ec) {
      Close();
      return Unavailable("sending request: " + ec.message());
    }
    HttpReply reply;
    if (on_data == nullptr) {
      http::response_parser<http::string_body> parser;
      parser.body_limit(64 << 20);
      ec = RunOnStream(
          [&](auto& stream, auto done) { http::async_read(stream, buffer_, parser, done); });
      if (ec) {
        Close();
        return Unavailable("reading response: " + ec.message());
      }
      FillReply(parser.get(), &reply);
      reply.body = std::move(parser.get().body());
    } else {
      http::response_parser<http::buffer_body> parser;
      parser.body_limit(boost::none);
      ec = RunOnStream(
          [&](auto& stream, auto done) { http::async_read_header(stream, buffer_, parser, done); });
      if (ec) {
        Close();
        return Unavailable("reading response: " + ec.message());
      }
      FillReply(parser.get(), &reply);
      std::vector<char> piece(64 * 1024);
      bool stopped = false;
      while (!parser.is_done()) {
        parser.get().body().data = piece.data();
        parser.get().body().size = piece.size();
        ec = RunOnStream(
            [&](auto& stream, auto done) { http::async_read_some(stream, buffer_, parser, done); });
        if (ec == http::error::need_buffer) ec = {};
        if (ec) {
          Close();
          return Unavailable("reading response: " + ec.message());
        }
        const size_t n = piece.size() - parser.get().body().size;
        if (n > 0 && (reply.status < 200 || reply.status > 299)) {
          if (reply.body.size() < piece.size()) reply.body.append(piece.data(), n);
        } else if (n > 0) {
          *delivered = true;
          if (!(*on_data)(std::string_view(piece.data(), n))) {
            stopped = true;
            break;
          }
        }
      }
      if (stopped) reply.keep_alive = false;
    }
    if (!reply.keep_alive) Close();
    return reply;
  }

  template <class Response>
  static void FillReply(const Response& res, HttpReply* reply) {
    reply->status = static_cast<int>(res.result_int());
    reply->content_type = std::string(res[http::field::content_type]);
    reply->keep_alive = res.keep_alive();
    reply->etag = std::string(res[http::field::etag]);
    if (auto it = res.find(http::field::retry_after); it != res.end()) {
      try {
        reply->retry_after_seconds = std::stoi(std::string(it->value()));
      } catch (...) {
        reply->retry_after_seconds = -1;
      }
    }
  }

  // Runs the one pending asynchronous operation to completion. Async
  // operations are used, one at a time, because only they honour the
  // stream's deadline (a stalled server would block a synchronous read forever).
  void Run() {
    ioc_.restart();
    ioc_.run();
  }

  // Starts `op(stream, done)` on the open stream (plain or TLS) under the
  // deadline, runs it to completion and gives its error.
  template <class Op>
  beast::error_code RunOnStream(const Op& op) {
    beast::error_code ec;
    auto done = [&ec](beast::error_code e, size_t) { ec = e; };
    auto start = [&](auto& stream) {
      beast::get_lowest_layer(stream).expires_after(options_.timeout);
      op(stream, done);
    };
    if (plain_) {
      start(*plain_);
    } else {
      start(*stream_);
    }
    Run();
    return ec;
  }

  void Close() {
    if (plain_) {
      beast::error_code ec;
      plain_->socket().shutdown(tcp::socket::shutdown_both, ec);
      plain_->close();
      plain_.reset();
      buffer_.clear();
      return;
    }
    if (!stream_) return;
    SSL_SESSION* s = SSL_get1_session(stream_->native_handle());
    if (s != nullptr) {
      if (session_ != nullptr) SSL_SESSION_free(session_);
      session_ = s;
    }
    // Send close_notify (without waiting for the peer's): OpenSSL marks the
    // session of a connection closed without it as not resumable.
    SSL_shutdown(stream_->native_handle());
    beast::error_code ec;
    beast::get_lowest_layer(*stream_).socket().shutdown(tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(*stream_).close();
    stream_.reset();
    buffer_.clear();
  }

  std::string TlsVersion() {
    if (!stream_) return "";
    return SSL_get_version(stream_->native_handle());
  }

  bool reused_ = false;
  int connections_ = 0;

 private:
  HttpsClientOptions options_;
  std::string host_header_;  // an IPv6 address in brackets (RFC 7230 5.4)
  std::string setup_error_;
  net::io_context ioc_;
  std::optional<ssl::context> tls_;  // only for TLS
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream_;
  std::optional<beast::tcp_stream> plain_;  // options_.tls == false
  beast::flat_buffer buffer_;
  SSL_SESSION* session_ = nullptr;  // owned; for resumption
};

HttpsClient::HttpsClient(HttpsClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpsClient::~HttpsClient() = default;

StatusOr<HttpReply> HttpsClient::Request(const std::string& method, const std::string& target,
                                         const std::string& content_type, const std::string& body,
                                         const HttpHeaders& headers) {
  return impl_->Request(method, target, content_type, body, headers, nullptr);
}
StatusOr<HttpReply> HttpsClient::RequestStreaming(
    const std::string& method, const std::string& target, const std::string& content_type,
    const std::string& body, const std::function<bool(std::string_view)>& on_data,
    const HttpHeaders& headers) {
  return impl_->Request(method, target, content_type, body, headers, &on_data);
}
void HttpsClient::Close() { impl_->Close(); }
bool HttpsClient::session_reused() const { return impl_->reused_; }
int HttpsClient::connections_opened() const { return impl_->connections_; }
std::string HttpsClient::tls_version() const { return impl_->TlsVersion(); }

std::string UrlEncode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace fieldprof
