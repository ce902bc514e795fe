#include "aggregator/http/server.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace fieldprof::aggregator {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

// Each connection runs on its own strand, named by its concrete type: the
// default type-erased executor cost each step of a body's read a few
// allocations and indirect calls (~4% of the CPU of ingest, perf).
using SessionExecutor = net::strand<net::io_context::executor_type>;
using SessionSocket = tcp::socket::rebind_executor<SessionExecutor>::other;

// The socket under a session's TLS, straight (each step's time limit is one
// timer per session, Session::Deadline: beast::basic_stream armed and
// cancelled a timer around every socket read, three more trips through the
// scheduler for each 16 KiB TLS record of a body). Its synchronous reads
// (Session::ReadAsItArrives) stop at a budget of bytes a turn: one read
// goes on while the socket holds bytes that give the parser nothing (OpenSSL
// answers a refused renegotiation itself and reads on), and meanwhile it
// holds its I/O thread and the strand, where the deadline's handler waits.
class SessionStream : public SessionSocket {
 public:
  explicit SessionStream(SessionSocket&& socket) : SessionSocket(std::move(socket)) {}

  void SetReadBudget(size_t bytes) { budget_ = bytes; }
  // Bytes its synchronous reads returned, all turns together.
  uint64_t bytes_read() const { return bytes_read_; }

  template <typename MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
    if (budget_ == 0) {
      ec = net::error::would_block;
      return 0;
    }
    const size_t n = SessionSocket::read_some(buffers, ec);
    budget_ -= std::min(budget_, n);
    bytes_read_ += n;
    return n;
  }

 private:
  size_t budget_ = std::numeric_limits<size_t>::max();
  uint64_t bytes_read_ = 0;
};

class Session;

class Server::Impl {
 public:
  Impl(ServerOptions options, Router* router, Metrics* metrics)
      : options_(std::move(options)),
        router_(router),
        metrics_(metrics),
        ioc_(options_.io_threads),
        tls_(ssl::context::tls_server),
        acceptor_(net::make_strand(ioc_)),
        workers_(static_cast<size_t>(options_.worker_threads)),
        drain_timer_(ioc_),
        work_guard_(net::make_work_guard(ioc_)) {}

  Status Start();
  void Shutdown();
  void Wait();
  uint16_t port() const { return port_; }

  const ServerOptions& options() const { return options_; }
  Router* router() { return router_; }
  Metrics* metrics() { return metrics_; }
  net::thread_pool& workers() { return workers_; }
  bool draining() const { return draining_.load(); }

  // Bounded queue of handler work; false when full.
  bool TryAcquireWork() {
    int n = queued_.fetch_add(1);
    if (n >= options_.max_queued_requests) {
      queued_.fetch_sub(1);
      return false;
    }
    return true;
  }
  void ReleaseWork() { queued_.fetch_sub(1); }

  void Register(const std::shared_ptr<Session>& s);
  void Unregister(Session* s);

 private:
  void DoAccept();
  void OnAccept(beast::error_code ec, SessionSocket socket);
  void CheckDrained(std::chrono::steady_clock::time_point deadline);
  void CloseIdleSessions();

  const ServerOptions options_;
  Router* const router_;
  Metrics* const metrics_;
  // Declared before ioc_: sessions destroyed with ioc_'s pending handlers unregister here.
  std::mutex sessions_mutex_;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;  // GUARDED_BY(sessions_mutex_)
  net::io_context ioc_;
  ssl::context tls_;
  tcp::acceptor acceptor_;
  net::thread_pool workers_;
  net::steady_timer drain_timer_;
  // Keeps ioc_.run() from returning when, during shutdown, no I/O is pending
  // while a handler still runs in the worker pool (its response is posted
  // back later). Only CheckDrained's ioc_.stop() ends the I/O threads.
  net::executor_work_guard<net::io_context::executor_type> work_guard_;
  std::vector<std::thread> io_threads_;
  std::atomic<int> queued_{0};
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopped_{false};
  uint16_t port_ = 0;
  std::once_flag shutdown_once_;
  std::once_flag wait_once_;
};

// One connection. Each step is a do_X / on_X pair; the object lives as long
// as a handler holds shared_from_this().
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(SessionSocket&& socket, ssl::context& tls, Server::Impl* server)
      : stream_(SessionStream(std::move(socket)), tls),
        server_(server),
        deadline_(stream_.get_executor()) {
    beast::error_code ec;
    source_ = beast::get_lowest_layer(stream_).remote_endpoint(ec).address();
    // For ReadAsItArrives: a synchronous read returns would_block instead
    // of blocking. Asynchronous operations are not affected. A socket that
    // cannot be made so is closed: its handshake then fails.
    beast::get_lowest_layer(stream_).non_blocking(true, ec);
    if (ec) beast::get_lowest_layer(stream_).close(ec);
    server_->metrics()->ConnectionOpened();
  }
  ~Session() {
    server_->metrics()->ConnectionClosed();
    server_->Unregister(this);
  }

  void Run() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::DoHandshake, shared_from_this()));
  }

  // Called on shutdown: a connection waiting for a new request is closed.
  void CloseIfIdle() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_ && self->buffer_.size() == 0) {
        beast::error_code ignored;
        beast::get_lowest_layer(self->stream_).shutdown(tcp::socket::shutdown_both, ignored);
        beast::get_lowest_layer(self->stream_).cancel();
      }
    });
  }

 private:
  const ServerOptions& opts() const { return server_->options(); }

  // The step about to start (a handshake, a header, a body, a write, a
  // close) must end within `limit`, or the socket is closed under it: its
  // operation then ends in an error, and Fail counts a timeout (a drain's
  // or a close's end is not counted). The handler runs on the strand, so
  // between two of the session's turns, never inside a read (see
  // SessionStream). It holds the session weakly, so an armed deadline
  // keeps no finished connection alive.
  void Deadline(std::chrono::steady_clock::duration limit) {
    deadline_.expires_after(limit);
    deadline_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      if (ec) return;  // re-armed or cancelled
      auto self = weak.lock();
      // A wait that ended as the deadline was moved on is not this step's.
      if (!self || self->deadline_.expiry() > std::chrono::steady_clock::now()) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      beast::get_lowest_layer(self->stream_).close(ignored);
    });
  }

  void DoHandshake() {
    Deadline(opts().handshake_timeout);
    stream_.async_handshake(ssl::stream_base::server,
                            beast::bind_front_handler(&Session::OnHandshake, shared_from_this()));
  }

  void OnHandshake(beast::error_code ec) {
    if (ec) return Fail(ec);
    DoReadHeader();
  }

  void DoReadHeader() {
    if (server_->draining()) return DoClose();
    // A keep-alive connection waiting for its next request holds no body
    // room (DoReadBody): freed, unless a pipelined request's bytes are
    // already in it (then it stays as it is).
    if (buffer_.size() == 0 && buffer_.capacity() > kHeaderReadBytes) buffer_.shrink_to_fit();
    parser_.emplace();
    parser_->header_limit(opts().max_header_bytes);
    parser_->body_limit(opts().max_body_bytes);
    idle_ = true;
    Deadline(opts().header_timeout);
    ReadAsItArrives(Until::kHeader);
  }

  void OnReadHeader(beast::error_code ec, size_t) {
    idle_ = false;
    if (ec == http::error::end_of_stream) return DoClose();
    if (ec == http::error::header_limit) {
      return Reply(ErrorResponse(TooLarge("request header is over " +
                                          std::to_string(opts().max_header_bytes) + " bytes")),
                   431, /*close=*/true);
    }
    if (ec == http::error::body_limit) {
      // The declared Content-Length is over the limit (checked by the parser
      // with the header): answer now, without reading the body.
      server_->metrics()->BatchRejected("batch_size");
      return Reply(ErrorResponse(TooLarge("batch_size: declared body is over " +
                                          std::to_string(opts().max_body_bytes) + " bytes")),
                   0, /*close=*/true, /*drain=*/true);
    }
    if (ec) return Fail(ec);
    started_ = std::chrono::steady_clock::now();
    const auto& req = parser_->get();
    if (req.method() == http::verb::post && req.target() == "/v1/tokens" &&
        opts().token_limits != nullptr) {
      const SourceLimiter::Decision d = opts().token_limits->Take(source_, started_);
      if (!d.allowed) {
        return Reply(opts().token_limits->Refusal(d), 0, /*close=*/!parser_->is_done(),
                     /*drain=*/!parser_->is_done());
      }
    }
    if (req.method() == http::verb::post && req.target() == "/v1/batches") {
      // Refuse before reading the body: over the source's rate, wrong type
      // or declared too large.
      if (SourceLimiter* limits = opts().batch_limits; limits != nullptr) {
        const SourceLimiter::Decision d = limits->Take(source_, started_);
        if (!d.allowed) {
          server_->metrics()->BatchRejected("source_rate");
          return Reply(limits->Refusal(d), 0, /*close=*/!parser_->is_done(),
                       /*drain=*/!parser_->is_done());
        }
      }
      const auto ct = req[http::field::content_type];
      if (Status s = CheckBatchContentType(std::string_view(ct.data(), ct.size())); !s.ok()) {
        server_->metrics()->BatchRejected("content_type");
        return Reply(ErrorResponse(s), 0, /*close=*/!parser_->is_done());
      }
      if (parser_->content_length() && *parser_->content_length() > opts().max_body_bytes) {
        server_->metrics()->BatchRejected("batch_size");
        return Reply(ErrorResponse(TooLarge(
                         "batch_size: body is " + std::to_string(*parser_->content_length()) +
                         " bytes, the limit is " + std::to_string(opts().max_body_bytes))),
                     0, /*close=*/true, /*drain=*/true);
      }
    }
    if (parser_->is_done()) return OnReadBody({}, 0);
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                     req.version());
      Deadline(opts().write_timeout);
      http::async_write(stream_, *cont,
                        [self = shared_from_this(), cont](beast::error_code ec, size_t) {
                          if (ec) return self->Fail(ec);
                          self->DoReadBody();
                        });
      return;
    }
    DoReadBody();
  }

  void DoReadBody() {
    Deadline(opts().body_timeout);
    // Room for whole TLS records: Beast reads as much as the buffer has
    // room for (at least 512 bytes), and the buffer only grows to what one
    // read needed. Left at the ~1 KiB the header grew it to, a 128 KiB body
    // took 115 SSL_read calls, each clearing OpenSSL's error queue and
    // passing through the parser: about 4% of ingest's CPU (perf, 4
    // connections). Freed when the connection goes idle (DoReadHeader).
    buffer_.reserve(kBodyReadBytes);
    ReadAsItArrives(Until::kBody);
  }

  // Reads and parses what the socket holds now, TLS record after record,
  // up to the end of the header or of the body, and waits for the socket
  // to hold more only when it is empty; then OnReadHeader or OnReadBody.
  // An asynchronous read (http::async_read) cost each 16 KiB record of a
  // 128 KiB body two or three trips through the scheduler, each with a poll
  // of epoll: 13% of the CPU of ingest, against 3% for TLS itself (perf).
  // A synchronous read of the socket in non-blocking mode costs the recv
  // alone. A turn reads at most kReadBudget bytes off the socket, then
  // waits (at once ready) so that other work and the deadline get the
  // strand. The answers are written asynchronously: a synchronous write cut
  // short by a full socket buffer would lose TLS output. (A read can write
  // too, an alert or a KeyUpdate OpenSSL answers; only a client that does
  // not read its answers can fill the buffer, and only its own connection
  // breaks.)
  static constexpr size_t kReadBudget = 512 * 1024;
  // The buffer's room while a body is read: two TLS records' plaintext
  // (16 KiB each), so one read takes a whole record wherever it starts.
  static constexpr size_t kBodyReadBytes = 32 * 1024;
  // Between requests a larger buffer is freed (a header's grows it less).
  static constexpr size_t kHeaderReadBytes = 4 * 1024;
  enum class Until { kHeader, kBody };
  void ReadAsItArrives(Until until) {
    SessionStream& socket = beast::get_lowest_layer(stream_);
    socket.SetReadBudget(kReadBudget);
    beast::error_code ec;
    while (until == Until::kHeader ? !parser_->is_header_done() : !parser_->is_done()) {
      const uint64_t read_before = socket.bytes_read();
      http::read_some(stream_, buffer_, *parser_, ec);
      if (!ec) continue;
      // The socket gave bytes before it ran dry: if they completed a record
      // that came back with the error (OpenSSL's own output cut short in
      // the same read), Beast kept it unparsed. One more read parses what
      // it holds before the session waits.
      if (ec == net::error::would_block && socket.bytes_read() > read_before) {
        ec = {};
        continue;
      }
      break;
    }
    if (ec == net::error::would_block || ec == net::error::try_again) {
      beast::get_lowest_layer(stream_).async_wait(
          tcp::socket::wait_read, [self = shared_from_this(), until](beast::error_code ec) {
            if (!ec) return self->ReadAsItArrives(until);
            if (until == Until::kHeader) return self->OnReadHeader(ec, 0);
            self->OnReadBody(ec, 0);
          });
      return;
    }
    if (until == Until::kHeader) return OnReadHeader(ec, 0);
    OnReadBody(ec, 0);
  }

  void OnReadBody(beast::error_code ec, size_t) {
    if (ec == http::error::body_limit) {
      server_->metrics()->BatchRejected("batch_size");
      return Reply(ErrorResponse(TooLarge("batch_size: body is over " +
                                          std::to_string(opts().max_body_bytes) + " bytes")),
                   0, /*close=*/true, /*drain=*/true);
    }
    if (ec) return Fail(ec);
    if (!server_->TryAcquireWork()) {
      server_->metrics()->Overloaded();
      return Reply(ErrorResponse(ResourceExhausted("server is busy, retry later")), 0,
                   /*close=*/false);
    }
    request_ = parser_->release();
    NoDeadline();  // the handler's time is not the client's
    using Stage = Metrics::RequestStage;
    const auto posted = std::chrono::steady_clock::now();
    server_->metrics()->RequestStageTime(Stage::kBody, posted - started_);
    // Handlers may block (fsync): run them off the I/O threads.
    net::post(server_->workers(), [self = shared_from_this(), posted] {
      Metrics* metrics = self->server_->metrics();
      const auto handler_start = std::chrono::steady_clock::now();
      metrics->RequestStageTime(Stage::kQueue, handler_start - posted);
      const auto& req = self->request_;
      auto view = [](beast::string_view v) { return std::string_view(v.data(), v.size()); };
      // The handler may keep the body past its answer (HttpRequest); the
      // session's request is cleared when the answer is sent.
      std::string body = std::move(self->request_.body());
      HttpResponse r = self->server_->router()->Handle(HttpRequest{
          view(req.method_string()), view(req.target()), view(req[http::field::content_type]), body,
          view(req[http::field::if_none_match]), view(req[http::field::authorization]),
          view(req[http::field::accept_encoding]), &body});
      self->server_->ReleaseWork();
      const auto handler_end = std::chrono::steady_clock::now();
      metrics->RequestStageTime(Stage::kHandler, handler_end - handler_start);
      std::shared_ptr<AfterAnswer> after = std::move(r.after);
      net::post(self->stream_.get_executor(), [self, r = std::move(r), handler_end]() mutable {
        self->server_->metrics()->RequestStageTime(Stage::kAnswer,
                                                   std::chrono::steady_clock::now() - handler_end);
        self->Reply(std::move(r), 0, /*close=*/false);
      });
      // What the handler left runs here, while the answer goes out.
      if (after) after->Run();
    });
  }

  // Sends `r` (status overridden by `status` when non-zero). `close` ends the
  // connection after the write (the request body was not read, or draining).
  void Reply(HttpResponse r, int status, bool close, bool drain = false) {
    const unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
    const bool keep_alive =
        !close && !server_->draining() &&
        (request_.method() == http::verb::unknown
             ? (parser_ && parser_->is_header_done() && parser_->get().keep_alive())
             : request_.keep_alive());
    response_ = {};
    response_.version(version);
    response_.result(static_cast<http::status>(status != 0 ? status : r.status));
    response_.set(http::field::server, "fieldprof-aggregator");
    response_.set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) {
      if (beast::iequals(k, "Retry-After") && r.status == 503) {
        response_.set(k, std::to_string(opts().retry_after_seconds));
      } else {
        response_.set(k, v);
      }
    }
    response_.body() = std::move(r.body);
    response_.keep_alive(keep_alive);
    response_.prepare_payload();
    server_->metrics()->RequestLatency(std::chrono::steady_clock::now() - started_);
    request_ = {};
    Deadline(opts().write_timeout);
    http::async_write(
        stream_, response_,
        beast::bind_front_handler(&Session::OnWrite, shared_from_this(), !keep_alive, drain));
  }

  void OnWrite(bool close, bool drain, beast::error_code ec, size_t) {
    if (ec) return Fail(ec);
    if (drain) {
      // Lingering close: a client still sending the refused body would see a
      // reset instead of our answer if we closed at once. Discard a bounded
      // amount for a bounded time, then close.
      drained_ = 0;
      Deadline(std::chrono::seconds(2));
      return DoDrain();
    }
    if (close) return DoClose();
    DoReadHeader();
  }

  void DoDrain() {
    drain_buffer_.resize(16384);
    stream_.async_read_some(net::buffer(drain_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > 2 * self->opts().max_body_bytes) {
                                return self->DoClose();
                              }
                              self->DoDrain();
                            });
  }

  void DoClose() {
    Deadline(std::chrono::seconds(5));
    stream_.async_shutdown([self = shared_from_this()](beast::error_code) {
      // The peer may not answer close_notify; the socket closes with us either way.
    });
  }

  // No step under way (the handler runs, the connection ends): no limit.
  void NoDeadline() { deadline_.expires_at(std::chrono::steady_clock::time_point::max()); }

  void Fail(beast::error_code ec) {
    NoDeadline();
    if (timed_out_) {
      server_->metrics()->Timeout();
    } else if (ec.category() == net::error::get_ssl_category() ||
               ec == net::ssl::error::stream_truncated) {
      // stream_truncated: the peer closed without close_notify; common and harmless.
      if (ec != net::ssl::error::stream_truncated) server_->metrics()->TlsError();
    }
    // The connection is dropped; the socket closes when the session is destroyed.
  }

  beast::ssl_stream<SessionStream> stream_;
  Server::Impl* server_;  // outlives every session (Wait() joins them)
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  std::chrono::steady_clock::time_point started_;
  net::ip::address source_;  // the peer's address, for per-source limits
  bool idle_ = false;        // waiting for the first byte of a new request
  net::basic_waitable_timer<std::chrono::steady_clock, net::wait_traits<std::chrono::steady_clock>,
                            SessionExecutor>
      deadline_;            // the current step's time limit (Deadline)
  bool timed_out_ = false;  // the deadline closed the socket
  std::vector<char> drain_buffer_;
  size_t drained_ = 0;
};

namespace {

// "asio.ssl error" says nothing; OpenSSL's reason does ("no such file", "PEM lib", ...).
std::string SslErrorText(const boost::system::error_code& ec) {
  if (ec.category() == net::error::get_ssl_category()) {
    const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    if (reason != nullptr) return reason;
  }
  return ec.message();
}

}  // namespace

Status Server::Impl::Start() {
  SSL_CTX* ctx = tls_.native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  tls_.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::no_compression);
  // Session resumption: a server-side session cache (TLS 1.2 ids) and tickets (1.2/1.3).
  static const unsigned char kSidContext[] = "fieldprof-aggregator";
  SSL_CTX_set_session_id_context(ctx, kSidContext, sizeof(kSidContext) - 1);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  for (const std::string& f : {options_.tls_cert_file, options_.tls_key_file}) {
    std::ifstream probe(f);
    if (!probe) return InvalidArgument("cannot read '" + f + "': " + std::strerror(errno));
  }
  boost::system::error_code ec;
  tls_.use_certificate_chain_file(options_.tls_cert_file, ec);
  if (ec) {
    return InvalidArgument("TLS certificate '" + options_.tls_cert_file + "': " + SslErrorText(ec));
  }
  tls_.use_private_key_file(options_.tls_key_file, ssl::context::pem, ec);
  if (ec) return InvalidArgument("TLS key '" + options_.tls_key_file + "': " + SslErrorText(ec));
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return InvalidArgument("TLS key does not match the certificate");
  }

  net::ip::address addr = net::ip::make_address(options_.listen_address, ec);
  if (ec)
    return InvalidArgument("listen address '" + options_.listen_address + "': " + ec.message());
  tcp::endpoint ep(addr, options_.port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot listen on " + options_.listen_address + ":" +
                       std::to_string(options_.port) + ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint().port();
  DoAccept();
  io_threads_.reserve(options_.io_threads);
  for (int i = 0; i < options_.io_threads; ++i) {
    io_threads_.emplace_back([this] { ioc_.run(); });
  }
  return Status::Ok();
}

void Server::Impl::DoAccept() {
  acceptor_.async_accept(SessionExecutor(ioc_.get_executor()),
                         beast::bind_front_handler(&Impl::OnAccept, this));
}

void Server::Impl::OnAccept(beast::error_code ec, SessionSocket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (!ec) {
    if (metrics_->connections() >= options_.max_connections || draining_) {
      metrics_->ConnectionRefused();
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      socket.set_option(tcp::no_delay(true), ec);
      auto s = std::make_shared<Session>(std::move(socket), tls_, this);
      Register(s);
      s->Run();
    }
  }
  DoAccept();
}

void Server::Impl::Register(const std::shared_ptr<Session>& s) {
  std::lock_guard lock(sessions_mutex_);
  sessions_[s.get()] = s;
}

void Server::Impl::Unregister(Session* s) {
  std::lock_guard lock(sessions_mutex_);
  sessions_.erase(s);
}

void Server::Impl::CloseIdleSessions() {
  // Take references under the lock, use and drop them outside it: dropping
  // the last reference runs ~Session, which unregisters under the same lock.
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(sessions_mutex_);
    for (auto& [ptr, weak] : sessions_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->CloseIfIdle();
}

void Server::Impl::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    draining_ = true;
    net::post(acceptor_.get_executor(), [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
    });
    CloseIdleSessions();
    const auto deadline = std::chrono::steady_clock::now() + options_.shutdown_grace;
    net::post(ioc_, [this, deadline] { CheckDrained(deadline); });
  });
}

void Server::Impl::CheckDrained(std::chrono::steady_clock::time_point deadline) {
  if ((metrics_->connections() == 0 && queued_ == 0) ||
      std::chrono::steady_clock::now() >= deadline) {
    ioc_.stop();
    return;
  }
  // Sessions that became idle after their last response close now.
  CloseIdleSessions();
  drain_timer_.expires_after(std::chrono::milliseconds(20));
  drain_timer_.async_wait([this, deadline](beast::error_code) { CheckDrained(deadline); });
}

void Server::Impl::Wait() {
  std::call_once(wait_once_, [this] {
    for (std::thread& t : io_threads_) t.join();
    // Handlers still queued finish before the store may be closed.
    workers_.join();
    stopped_ = true;
  });
}

Server::Server(ServerOptions options, Router* router, Metrics* metrics)
    : impl_(std::make_unique<Impl>(std::move(options), router, metrics)) {}

Server::~Server() {
  Shutdown();
  Wait();
}

Status Server::Start() { return impl_->Start(); }
uint16_t Server::port() const { return impl_->port(); }
void Server::Shutdown() { impl_->Shutdown(); }
void Server::Wait() { impl_->Wait(); }

}  // namespace fieldprof::aggregator
