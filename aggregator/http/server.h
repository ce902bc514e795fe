// The aggregator's HTTPS front end: Boost.Beast over OpenSSL.
//
// One io_context runs on `io_threads` threads; each connection is a Session
// object on its own strand, kept alive by its pending handlers. Request
// handling (parse, validate, store) may block on fsync, so it runs on a
// separate worker pool behind a bounded queue: when `max_queued_requests` are
// already waiting the server answers 503 with Retry-After at once.
//
// Limits: TLS 1.2+ only; a header size limit; bodies over `max_body_bytes`
// get 413 without being read (the Content-Length is checked first); every
// read, write and handshake has a deadline, so a slow client is cut off; at
// most `max_connections` connections, further ones are closed on accept;
// with `batch_limits`, a source over its rate gets 429 with Retry-After
// before its batch is read.
//
//   Server server(options, &router, &metrics);
//   Status s = server.Start();         // binds and starts the threads
//   ... server.Shutdown();             // from any thread, e.g. on SIGTERM
//   server.Wait();                     // returns when everything stopped
//
// Shutdown: stop accepting, close idle keep-alive connections, let requests
// in flight finish (their responses say Connection: close), then stop. After
// Wait() returns no request is being handled: the store can be closed.
#ifndef FIELDPROF_AGGREGATOR_HTTP_SERVER_H_
#define FIELDPROF_AGGREGATOR_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "aggregator/http/router.h"
#include "aggregator/ingest/source_limits.h"
#include "aggregator/metrics.h"
#include "common/base/status.h"

namespace fieldprof::aggregator {

struct ServerOptions {
  // Address to listen on ("127.0.0.1", "::1", "0.0.0.0"). Default: loopback.
  std::string listen_address = "127.0.0.1";
  // TCP port; 0 picks a free one (see Server::port()). Default: 8443.
  uint16_t port = 8443;
  // PEM certificate chain and private key (RSA or ECDSA). Required.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Threads running TLS and HTTP I/O. Default: 2.
  int io_threads = 2;
  // Threads running request handlers (parse, validate, synced store writes).
  // More than cores, so concurrent fsyncs can be grouped. Default: 16.
  int worker_threads = 16;
  // Requests queued or running in the worker pool before 503. Default: 64.
  int max_queued_requests = 64;
  // Open connections before new ones are closed on accept. Default: 1024.
  int max_connections = 1024;
  // Request body limit; larger bodies get 413. Default: 1 MiB.
  size_t max_body_bytes = 1 << 20;
  // Request header limit. Default: 16 KiB.
  uint32_t max_header_bytes = 16 << 10;
  // Deadline for the TLS handshake. Default: 10 s.
  std::chrono::milliseconds handshake_timeout{10000};
  // Deadline for a whole request header, also the keep-alive idle time. Default: 15 s.
  std::chrono::milliseconds header_timeout{15000};
  // Deadline for a whole request body. Default: 30 s.
  std::chrono::milliseconds body_timeout{30000};
  // Deadline for writing a response. Default: 30 s.
  std::chrono::milliseconds write_timeout{30000};
  // How long Shutdown() waits for requests in flight. Default: 15 s.
  std::chrono::milliseconds shutdown_grace{15000};
  // Retry-After seconds sent with 503. Default: 2.
  int retry_after_seconds = 2;
  // Per-source limit on POST /v1/batches, asked before the body is read
  // (source_limits.h); not owned, must outlive the server. Null: none.
  SourceLimiter* batch_limits = nullptr;
  // The same for POST /v1/tokens (token requests). Null: none.
  SourceLimiter* token_limits = nullptr;
};

class Server {
 public:
  // `router` and `metrics` must outlive the server.
  Server(ServerOptions options, Router* router, Metrics* metrics);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads the certificate, binds, listens and starts all threads.
  [[nodiscard]] Status Start();
  // The bound port (useful with port 0). Valid after Start().
  uint16_t port() const;
  // Begins a graceful shutdown; returns at once. Thread-safe, idempotent.
  void Shutdown();
  // Blocks until the server has stopped and all handlers have finished.
  void Wait();

  class Impl;  // defined in server.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_HTTP_SERVER_H_
