// A real HTTPS server on loopback (Boost.Beast + OpenSSL, one thread) that
// answers with whatever the test says: for the faults a real aggregator
// does not produce on demand (503 with Retry-After, a damaged /v1/config,
// a server that accepts and then stalls). Certificate and key from
// testing::MakeCert.
//
//   TlsStubServer s(dir.File("cert.pem"), dir.File("key.pem"),
//                   [](const std::string& method, const std::string& target) {
//                     return StubReply{503, "busy", {{"Retry-After", "7"}}};
//                   });
//   ... s.port() ... s.requests() ...
#ifndef FIELDPROF_TESTS_SUPPORT_TLS_STUB_SERVER_H_
#define FIELDPROF_TESTS_SUPPORT_TLS_STUB_SERVER_H_

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fieldprof::testing {

struct StubReply {
  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Instead of answering, hold the connection open this long (a stalled server).
  std::chrono::milliseconds stall{0};
};

class TlsStubServer {
 public:
  using Handler = std::function<StubReply(const std::string& method, const std::string& target)>;

  TlsStubServer(const std::string& cert, const std::string& key, Handler handler)
      : tls_(boost::asio::ssl::context::tls_server),
        acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}),
        handler_(std::move(handler)) {
    tls_.use_certificate_chain_file(cert);
    tls_.use_private_key_file(key, boost::asio::ssl::context::pem);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TlsStubServer() {
    stop_ = true;
    boost::system::error_code ec;
    // Wake the blocking accept with a connection of our own.
    boost::asio::io_context wake;
    boost::asio::ip::tcp::socket s(wake);
    s.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int requests() const { return requests_; }

 private:
  void Serve() {
    namespace http = boost::beast::http;
    while (!stop_) {
      boost::asio::ip::tcp::socket sock(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(sock, ec);
      if (ec || stop_) continue;
      boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream(std::move(sock), tls_);
      stream.handshake(boost::asio::ssl::stream_base::server, ec);
      if (ec) continue;
      boost::beast::flat_buffer buf;
      for (;;) {  // keep-alive: requests until the client closes
        http::request<http::string_body> req;
        http::read(stream, buf, req, ec);
        if (ec) break;
        ++requests_;
        const StubReply r = handler_(std::string(req.method_string()), std::string(req.target()));
        if (r.stall.count() > 0) {
          std::this_thread::sleep_for(r.stall);
          break;
        }
        http::response<http::string_body> res{static_cast<http::status>(r.status), req.version()};
        res.set(http::field::content_type, "application/json");
        for (const auto& [k, v] : r.headers) res.set(k, v);
        res.body() = r.body;
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        http::write(stream, res, ec);
        if (ec || !req.keep_alive()) break;
      }
      stream.shutdown(ec);
    }
  }

  boost::asio::io_context ioc_;
  boost::asio::ssl::context tls_;
  boost::asio::ip::tcp::acceptor acceptor_;
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_TLS_STUB_SERVER_H_
